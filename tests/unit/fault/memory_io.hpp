// The in-memory driver under ImpairedPacketIo in the fault tests, and the virtual clock the
// decorator reads: what it sends is recorded with the time it left, what it receives is
// queued by the test, and a wait never blocks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "device/packet_io.hpp"
#include "transport/engine.hpp"
#include "uroce/vocab/time.hpp"

namespace uroce::net::test {

inline TimePoint g_now{0};
inline TimePoint virtual_now() {
  return g_now;
}

struct Packet {
  std::vector<uint8_t> bytes;
  transport::PacketMeta meta;
  TimePoint at{0};
};

class MemoryIo final : public device::PacketIo {
 public:
  size_t rx_burst(std::span<device::RxPacket> out) override {
    size_t n = 0;
    while (n < out.size() && !incoming.empty()) {
      const Packet& p = incoming.front();
      std::copy(p.bytes.begin(), p.bytes.end(), out[n].buf.begin());
      out[n].len = p.bytes.size();
      out[n].meta = p.meta;
      incoming.pop_front();
      ++n;
    }
    return n;
  }
  size_t tx_burst(std::span<const transport::TxSlot> pkts) override {
    size_t n = std::min(pkts.size(), accept_per_call);
    for (size_t i = 0; i < n; ++i) {
      sent.push_back(
          Packet{std::vector<uint8_t>(pkts[i].buf.begin(),
                                      pkts[i].buf.begin() + static_cast<long>(pkts[i].len)),
                 pkts[i].meta, g_now});
    }
    return n;
  }
  bool wait(Nanos timeout, bool want_write) override {
    last_timeout = timeout;
    last_want_write = want_write;
    return true;
  }
  void wake() override { ++wakes; }
  [[nodiscard]] bool can_send_from(const device::Gid&) const override { return true; }
  [[nodiscard]] device::IoCounters io_counters() const override { return counters; }

  std::deque<Packet> incoming;
  std::vector<Packet> sent;
  size_t accept_per_call = SIZE_MAX;  // fewer: a driver whose socket is full
  Nanos last_timeout{-2};
  bool last_want_write = false;
  int wakes = 0;
  device::IoCounters counters;  // the driver's own, which the decorator passes through
};

}  // namespace uroce::net::test
