// PacketIo: the one burst I/O interface between a Device and whatever moves its packets
// (UDP sockets in src/net, an in-memory pair in tests, later io_uring / AF_XDP).
//
//   rx_burst(out)   fills out[0..n) without blocking, returns n
//   tx_burst(pkts)  sends pkts in order, returns how many were consumed; fewer than
//                   pkts.size() is backpressure: wait(..., want_write) and retry the rest
//   maintain()      housekeeping that touches the same state as rx_burst (e.g. repairing a
//                   shared UDP port's group); the device calls it with the I/O lock held,
//                   just before wait(), so it never races an application-driven rx_burst
//   wait(timeout)   sleeps until readable (or writable if asked), wake(), or timeout; it
//                   runs WITHOUT the I/O lock and must touch only what wake() may touch;
//                   false when a signal ended it (EINTR), so a blocked verb can return
//   wake()          interrupts wait() from any thread; a wake with nobody waiting makes the
//                   next wait() return at once (it is sticky, like an eventfd)
//   cm_capable(on)  QP1 (CM) steering between processes sharing an address (docs/cm.md):
//   cm_listen(id,on)  this device runs a CM agent / listens on a CM Service ID, so the
//                   driver steers QP1 datagrams here; called like maintain(), with the I/O
//                   lock held. A driver that does not share its addresses ignores them.
//
// Packets are RoCE v2 UDP payloads (BTH .. ICRC) with a transport::PacketMeta saying where
// they come from / go to. rx_burst/tx_burst/maintain run under the device's I/O lock, from
// the progress thread or (ProgressOptions::app_calls_drive) an application thread; wait()
// runs outside that lock on the progress thread or on the one application thread blocked in
// get_cq_event that drives the device meanwhile (event_wait.cpp), never on both at once (the
// waiter sleeps only once the thread has left wait()); wake() and can_send_from() are called
// from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/engine.hpp"
#include "uroce/vocab/time.hpp"

namespace uroce::device {

using Gid = std::array<uint8_t, 16>;

struct RxPacket {
  std::span<uint8_t> buf;  // in: room for one packet (>= kPacketBufferSize)
  size_t len = 0;          // out: bytes received
  transport::PacketMeta meta;
  // out: where the bytes are when not in `buf`: memory of the PacketIo, valid until its next
  // rx_burst (a UDP GRO message is handed out in place, not copied). rx_burst sets it on
  // every packet it returns; nullptr: the bytes are in `buf`.
  const uint8_t* data = nullptr;
  [[nodiscard]] std::span<const uint8_t> bytes() const {
    return {data != nullptr ? data : buf.data(), len};
  }
};

// Room for any packet the engine builds or accepts: a 4096-byte payload plus headers.
inline constexpr size_t kPacketBufferSize = 4096 + 128;

// What the network said about the packets sent to one peer address since the device opened
// (ICMP errors the UDP socket reports through IP_RECVERR, EMSGSIZE from the local stack):
// the evidence that tells a firewall from a closed port or a too-small path MTU when a QP
// stalls (telemetry/explain.hpp).
struct PathReport {
  uint64_t port_unreachable = 0;  // ICMP port unreachable: nothing listens on the UDP port
  uint64_t unreachable = 0;       // ICMP host/net unreachable, administratively prohibited
  uint64_t too_big = 0;           // ICMP fragmentation needed / packet too big, local EMSGSIZE
  uint32_t mtu = 0;               // the path MTU the last too_big named (0: not said)
  uint16_t udp_port = 4791;       // the UDP port this device sends RoCE to
};

// Device-wide I/O drop and ICMP counters, exported next to the engine's (`uroce stat`,
// /metrics): names in telemetry's published_counter_names().
struct IoCounters {
  uint64_t tx_drop_too_big = 0;  // EMSGSIZE: larger than the path MTU with DF set
  uint64_t tx_drop_error = 0;    // other send errors that retrying cannot fix
  uint64_t icmp_port_unreachable = 0;
  uint64_t icmp_unreachable = 0;
  uint64_t icmp_too_big = 0;
  // Datagrams the kernel dropped at the device's sockets before uroce read them (socket
  // receive buffer full: SO_RXQ_OVFL); ethtool's rx_discards (docs/congestion.md "Counters").
  uint64_t rx_discards = 0;
  // A shared UDP port (several uroce processes on one port, docs/networking.md): datagrams the
  // kernel's steering handed to this process for a QP another member owns (misdelivered: the
  // steering was stale; the sender's retransmission recovers them) or that no live member owns
  // (a peer still sending to a QP of a process that is gone).
  uint64_t rx_misdelivered = 0;
  uint64_t rx_no_owner = 0;
  // UROCE_RX_RING (src/net/rx_ring.hpp): datagrams received through the packet socket's ring,
  // and markers of large messages passed without their message (the socket dropped it).
  uint64_t rx_ring_datagrams = 0;
  uint64_t rx_ring_marker_timeouts = 0;
  // 1 once the ring overflowed and handed the data back to the sockets (UdpPacketIo).
  uint64_t rx_ring_given_back = 0;
  // What UROCE_IMPAIR did (src/net/impaired_packet_io.hpp); 0 without impairment.
  uint64_t impair_dropped = 0;
  uint64_t impair_duplicated = 0;
  uint64_t impair_corrupted = 0;
  uint64_t impair_ce_marked = 0;
  uint64_t impair_delayed = 0;
  uint64_t impair_reordered = 0;
  uint64_t impair_overflow = 0;
  uint64_t impair_queue_dropped = 0;    // rate=: tail drops of the bottleneck queue
  uint64_t impair_queue_marked = 0;     // rate=: RED/ECN CE marks
  uint64_t impair_queue_max_bytes = 0;  // rate=: deepest queue seen (a gauge, not a count)
};

class PacketIo {
 public:
  virtual ~PacketIo() = default;

  // Fills out[0, n) and returns n; sets each returned packet's `data` (RxPacket).
  virtual size_t rx_burst(std::span<RxPacket> out) = 0;
  virtual size_t tx_burst(std::span<const transport::TxSlot> pkts) = 0;
  // True when tx_burst sends a slot's payload from where transport::TxSlot::payload points
  // (and only during the call): the device then lets the engine leave payloads there.
  [[nodiscard]] virtual bool takes_payload_by_reference() const { return false; }
  virtual void maintain() {}
  // Negative timeout: no limit. False: a signal interrupted it.
  virtual bool wait(Nanos timeout, bool want_write) = 0;
  virtual void wake() = 0;

  // QP1 steering (see above). cm_capable(true): QP1 datagrams nobody else claims (a REQ for a
  // service nobody listens on, another management class) may come here; returns 0 or an
  // errno. cm_listen(id, true): REQs and SIDR_REQs for Service ID `id` come here; returns 0,
  // or EADDRINUSE when another process sharing an address listens on `id` (idempotent for
  // this device); cm_listen(id, false) stops listening and returns 0. The defaults (a driver
  // with its addresses to itself) accept everything.
  virtual int cm_capable(bool /*on*/) { return 0; }
  virtual int cm_listen(uint64_t /*service_id*/, bool /*on*/) { return 0; }

  // True when a packet with this source GID (an IP address) can be sent. The GID index of
  // an address vector chooses the source address, so the device refuses an AV whose
  // source this driver cannot send from. Thread-safe.
  [[nodiscard]] virtual bool can_send_from(const Gid& source) const = 0;

  // Thread-safe; read when explaining a stall and when publishing counters, never per packet.
  [[nodiscard]] virtual PathReport path_report(const Gid& /*peer*/) const { return {}; }
  [[nodiscard]] virtual IoCounters io_counters() const { return {}; }
};

}  // namespace uroce::device
