// The switch queue model: the egress ports of one switch sharing a buffer, with the
// behaviour RoCE deployments configure on real switches — a line rate per egress port
// (serialization time per packet), a per-port buffer limit and a shared pool (static or
// dynamic "alpha" thresholds), RED/ECN marking of ECN-capable packets (Kmin, Kmax, Pmax as
// in mlx5/DCQCN switch configurations), tail drop when lossy, and a lossless mode with
// per-ingress XOFF/XON thresholds (PFC-like pause/resume) and headroom.
//
// Sans-IO: no clock, no sockets, no threads. Every call takes `now` (nanoseconds since the
// caller's epoch: CLOCK_MONOTONIC in `uroce switch`, a virtual clock in a simulator); the
// only randomness is a SplitMix64 seeded from the config, so a run replays exactly. All
// storage is allocated in the constructor; enqueue and dequeue never allocate.
//
// Driving it (a discrete-event simulator does exactly this; the real-time forwarder does it
// from its poll loop):
//
//   SwitchQueues q(config);                       // validate(config) first: empty = valid
//   r = q.enqueue(egress, packet, now);           // packet arrived at `now`, headed to `egress`
//     r.verdict: kQueued or dropped (tail / headroom); r.marked: CE now (mark at enqueue);
//     r.pause: lossless mode, packet.ingress must stop sending now ("pause ingress i").
//   t = q.next_dequeue(egress);                   // when the head may start transmission
//                                                 // (kNever when the queue is empty)
//   d = q.dequeue(egress, now);                   // the head, if next_dequeue(egress) <= now
//     d->tx_start, d->tx_end: the packet's time on the link (tx_end - tx_start = bytes at the
//     line rate, exact to the nanosecond with the remainder carried to the next packet);
//     d->marked: CE (set at enqueue or now, at dequeue); d->resume: lossless mode,
//     d->packet.ingress may send again ("resume ingress i").
//
// A packet leaves the buffer when its transmission starts. The link is busy until tx_end;
// the next packet starts at max(tx_end of the previous one, its own arrival), so a caller
// that calls dequeue late (a real-time loop that woke up late) gets packets whose tx_start
// lies in the past and sends them back to back: the average rate stays exact.
//
// Buffer admission (lossy mode), for a packet of B bytes to egress port e with Q_e bytes
// queued and S bytes used in the shared pool:
//   - port limit L_e = port_buffer_bytes (static), or alpha * (shared_buffer_bytes - S)
//     (dynamic thresholds, Choudhury & Hahne); with port_buffer_bytes = 0 and static
//     thresholds there is no per-port limit;
//   - queued if Q_e + B <= L_e and (shared_buffer_bytes = 0 or S + B <= shared_buffer_bytes)
//     and the port's descriptor ring has room; otherwise a tail drop. ECN-capable or not,
//     a packet that does not fit is dropped: marking never replaces a drop for lack of room.
//
// RED/ECN (both modes), with q = bytes queued at egress e not counting this packet (at
// enqueue: before it joins; at dequeue: what stays behind it):
//   p = 0 for q <= Kmin, Pmax * (q - Kmin) / (Kmax - Kmin) for Kmin < q <= Kmax, 1 above
//   Kmax. An ECN-capable packet is marked with probability p (one 53-bit draw from the RNG
//   only when 0 < p < 1). Non-ECT packets are never marked and never dropped by RED (no
//   WRED): they see only tail drop.
//
// Lossless mode (one traffic class; no per-priority queues yet): each ingress i has an
// occupancy O_i = bytes from i queued at any egress port.
//   - XOFF: after a packet from i is queued, O_i > xoff_i pauses i (r.pause; counted in
//     pause_events), where xoff_i = pfc.xoff_bytes (static) or
//     min(pfc.xoff_bytes, alpha * (shared_buffer_bytes - S)) (dynamic).
//   - XON: after a packet from a paused i leaves, O_i <= pfc.xon_bytes resumes i (d->resume;
//     the time paused is added to paused_ns).
//   - Headroom: while paused, packets from i that were already on the wire keep arriving;
//     they are queued as long as O_i + B <= xoff_i + pfc.headroom_bytes. Beyond that they are
//     dropped and counted as dropped_headroom: a lossless switch drops only when its headroom
//     was too small for the sender's reaction time. Per-port limits and the shared pool do
//     not drop in lossless mode; only a full descriptor ring does (dropped_tail), so size
//     queue_packets for the smallest packet.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/time.hpp"
#include "fabric/packet_ring.hpp"

namespace uroce::fabric {

enum class MarkPoint : uint8_t { kEnqueue, kDequeue };
enum class ThresholdMode : uint8_t { kStatic, kDynamic };
enum class BufferMode : uint8_t { kLossy, kLossless };

struct RedParams {
  bool enabled = false;
  uint64_t kmin_bytes = 0;
  uint64_t kmax_bytes = 0;
  double pmax = 0;  // marking probability at Kmax, 0 < pmax <= 1
  MarkPoint at = MarkPoint::kDequeue;
};

struct PfcParams {
  uint64_t xoff_bytes = 0;      // pause an ingress above this occupancy
  uint64_t xon_bytes = 0;       // resume it at or below this, xon <= xoff
  uint64_t headroom_bytes = 0;  // absorbed after the pause before dropping
};

struct SwitchQueueConfig {
  uint32_t egress_ports = 1;
  uint32_t ingress_ports = 1;
  uint64_t line_rate_bytes_per_sec = 125'000'000;  // per egress port; 1 Gbit/s
  uint32_t queue_packets = 4096;                   // descriptor ring per egress port
  uint64_t port_buffer_bytes = 512 * 1024;         // static per-port limit; 0 = none
  uint64_t shared_buffer_bytes = 0;                // shared pool; 0 = none (dynamic needs one)
  ThresholdMode threshold = ThresholdMode::kStatic;
  double alpha = 1.0;  // dynamic thresholds: limit = alpha * free shared bytes
  BufferMode mode = BufferMode::kLossy;
  RedParams red;
  PfcParams pfc;
  uint64_t seed = 1;
};

// Empty when `c` is usable, else one line naming the bad field and what it must be.
[[nodiscard]] std::string validate(const SwitchQueueConfig& c);

enum class EnqueueVerdict : uint8_t { kQueued, kDroppedTail, kDroppedHeadroom };

struct EnqueueResult {
  EnqueueVerdict verdict = EnqueueVerdict::kQueued;
  bool marked = false;  // marked CE at enqueue (rewrite the packet's ECN bits)
  bool pause = false;   // lossless: pause packet.ingress from now on
};

struct Departure {
  Packet packet;
  bool marked = false;  // CE, at enqueue or at this dequeue
  bool resume = false;  // lossless: packet.ingress may send again
  TimePoint tx_start{};
  TimePoint tx_end{};
};

struct PortCounters {
  uint64_t enqueued = 0;  // packets queued
  uint64_t enqueued_bytes = 0;
  uint64_t dequeued = 0;
  uint64_t dequeued_bytes = 0;
  uint64_t dropped_tail = 0;      // no room (lossy), or descriptor ring full
  uint64_t dropped_headroom = 0;  // lossless: beyond xoff + headroom of the ingress
  uint64_t ecn_marked = 0;
  uint64_t depth_bytes = 0;  // now
  uint64_t depth_packets = 0;
  uint64_t max_depth_bytes = 0;
};

struct IngressCounters {
  uint64_t occupancy_bytes = 0;  // bytes from this ingress queued anywhere (lossless)
  uint64_t pause_events = 0;
  uint64_t paused_ns = 0;  // total, including a pause still in progress
  bool paused = false;
};

class SwitchQueues {
 public:
  // Precondition: validate(config).empty().
  explicit SwitchQueues(const SwitchQueueConfig& config);

  [[nodiscard]] EnqueueResult enqueue(uint32_t egress, const Packet& packet, TimePoint now);
  [[nodiscard]] TimePoint next_dequeue(uint32_t egress) const;
  [[nodiscard]] std::optional<Departure> dequeue(uint32_t egress, TimePoint now);

  [[nodiscard]] bool paused(uint32_t ingress) const { return ingress_[ingress].paused; }
  [[nodiscard]] const PortCounters& port(uint32_t egress) const { return ports_[egress].counters; }
  [[nodiscard]] IngressCounters ingress(uint32_t ingress, TimePoint now) const;
  [[nodiscard]] uint64_t shared_used_bytes() const { return shared_used_; }
  [[nodiscard]] const SwitchQueueConfig& config() const { return config_; }
  // The RED marking probability for q queued bytes (0 when RED is off).
  [[nodiscard]] double mark_probability(uint64_t queued_bytes) const;

 private:
  struct Port {
    explicit Port(size_t ring) : queue(ring) {}
    PacketRing queue;
    PortCounters counters;
    TimePoint link_free_at{};  // end of the last transmission
    uint64_t residual = 0;     // sub-ns remainder of the serialization times, in 1/rate ns
  };
  struct Ingress {
    uint64_t occupancy = 0;
    uint64_t pause_events = 0;
    uint64_t paused_ns = 0;
    TimePoint paused_since{};
    bool paused = false;
  };

  [[nodiscard]] bool red_mark(uint64_t queued_bytes, bool ect);
  [[nodiscard]] uint64_t free_shared() const;
  [[nodiscard]] uint64_t port_limit() const;
  [[nodiscard]] uint64_t xoff() const;

  SwitchQueueConfig config_;
  std::vector<Port> ports_;
  std::vector<Ingress> ingress_;
  uint64_t shared_used_ = 0;
  uint64_t rng_;
};

}  // namespace uroce::fabric
