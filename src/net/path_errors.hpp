// PathErrorLog: what the network reported about the datagrams a UDP device sent, per peer
// address. Every UdpPort of a device enables IP_RECVERR / IPV6_RECVERR, so ICMP port
// unreachable, host unreachable / administratively prohibited, fragmentation needed / packet
// too big (with the MTU), and the local EMSGSIZE (with the route's MTU) arrive on the
// socket's error queue; the port drains that queue (drain_error_queue) and records here.
//
// Written only on error paths (never per packet that went well), read when a stalled QP is
// explained and when counters are published, from any thread: one mutex, a small fixed table.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

#include "device/packet_io.hpp"
#include "net/ip_addr.hpp"

namespace uroce::net {

class PathErrorLog {
 public:
  enum class Kind : uint8_t { kPortUnreachable, kUnreachable, kTooBigIcmp, kTooBigLocal };

  void record(Kind kind, const IpAddr& dst, uint32_t mtu);
  // From a send's errno alone (ECONNREFUSED: port unreachable; the others: unreachable).
  void record_errno(int err, const IpAddr& dst);
  void count_tx_too_big();
  void count_tx_error();

  [[nodiscard]] device::PathReport report(const IpAddr& dst, uint16_t udp_port) const;
  [[nodiscard]] device::IoCounters totals() const;

 private:
  static constexpr size_t kPeers = 32;  // beyond that the oldest peer's record is reused
  struct Entry {
    IpAddr dst;
    device::PathReport report;
    bool used = false;
  };
  mutable std::mutex mu_;
  std::array<Entry, kPeers> entries_{};
  size_t next_ = 0;
  device::IoCounters totals_;
};

// Reads every pending error of `fd`'s error queue (MSG_ERRQUEUE, non-blocking) into `log`.
// Returns how many were read. No-op when log is null (the queue is still emptied, so poll()
// stops reporting POLLERR).
size_t drain_error_queue(int fd, PathErrorLog* log);

// errno values a send or receive returns for an ICMP error reported earlier (IP_RECVERR
// makes the socket's pending error visible to the next call): the datagram at hand did
// nothing wrong and may be sent again once the queue is read.
[[nodiscard]] bool is_reported_icmp_error(int err);

}  // namespace uroce::net
