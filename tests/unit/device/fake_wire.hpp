// An in-memory wire between Devices in one process: each FakeIo is a device::PacketIo whose
// tx_burst delivers copies into the peer's receive queue (by destination GID), so two real
// Devices with their progress threads talk without sockets. `drop_all` turns the wire into
// a black hole (a dead peer).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "device/device.hpp"
#include "device/packet_io.hpp"

namespace uroce::test {

class FakeWire;

class FakeIo final : public device::PacketIo {
 public:
  FakeIo(FakeWire& wire, const device::Gid& gid) : wire_(wire), gid_(gid) {}
  size_t rx_burst(std::span<device::RxPacket> out) override;
  size_t tx_burst(std::span<const transport::TxSlot> pkts) override;
  [[nodiscard]] bool takes_payload_by_reference() const override;
  bool wait(Nanos timeout, bool want_write) override;
  void wake() override;
  [[nodiscard]] bool can_send_from(const device::Gid& source) const override {
    return source == gid_;
  }
  [[nodiscard]] const device::Gid& gid() const { return gid_; }

 private:
  friend class FakeWire;
  struct Packet {
    std::vector<uint8_t> bytes;
    transport::PacketMeta meta;
  };
  FakeWire& wire_;
  device::Gid gid_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Packet> queue_;
  bool woken_ = false;
};

class FakeWire {
 public:
  void attach(FakeIo* io);
  void detach(FakeIo* io);
  // One tx_burst call's packets: they share a burst number in the log.
  void deliver(std::span<const transport::TxSlot> burst);
  std::atomic<bool> drop_all{false};
  std::atomic<uint64_t> delivered{0};
  // Set before the devices are made: the ios take payloads by reference (joined on delivery,
  // as a socket's iovecs join them), and at most take_per_burst packets per tx_burst (0: all;
  // the rest wait in the device, as behind a full socket buffer).
  bool by_reference = false;
  size_t take_per_burst = 0;
  std::atomic<uint64_t> delivered_by_reference{0};
  // Every packet delivered, in order: the last byte of the sender's GID, the BTH opcode and
  // the number of the tx_burst call that sent it (one system call of a real driver).
  struct Sent {
    uint8_t from = 0;
    uint8_t opcode = 0;
    uint64_t burst = 0;
  };
  [[nodiscard]] std::vector<Sent> sent_log() const;

 private:
  mutable std::mutex mu_;
  std::vector<FakeIo*> ios_;
  std::vector<Sent> log_;
  uint64_t bursts_ = 0;
};

// IPv4-mapped GID ::ffff:10.0.0.n.
device::Gid fake_gid(uint8_t n);

// A device on `wire` with GID table {index 0: fe80::n, index 1: ::ffff:10.0.0.n, index 2:
// empty} on port 1, QPNs from qpn_base.
// app_handoff: ProgressOptions::app_handoff (how long the progress thread stays parked after
// the application's busy polls); negative: the default. app_calls_drive: whether posts and
// polls move packets themselves (ProgressOptions::app_calls_drive). observer: telemetry's
// view of the device (DeviceConfig::observer). max_sleep: ProgressOptions::max_sleep (the
// longest one wait() may last; negative: the default), long in a test where a missed wake-up
// must show as a hang rather than as a late event.
std::shared_ptr<device::Device> make_fake_device(
    FakeWire& wire, uint8_t n, uint32_t qpn_base, bool progress_thread = true,
    Nanos app_handoff = Nanos(-1), bool app_calls_drive = true,
    std::shared_ptr<device::DeviceObserver> observer = nullptr, Nanos max_sleep = Nanos(-1));

}  // namespace uroce::test
