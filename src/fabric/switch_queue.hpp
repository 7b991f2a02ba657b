// The switch queue model: the egress ports of one switch sharing a buffer, with the
// behaviour RoCE deployments configure on real switches — a line rate per egress port
// (serialization time per packet), up to 8 priority queues per egress port (802.1p traffic
// classes) served by strict priority and DWRR, a per-port buffer limit and a shared pool
// (static or dynamic "alpha" thresholds), RED/ECN marking of ECN-capable packets (Kmin, Kmax,
// Pmax as in mlx5/DCQCN switch configurations), tail drop on lossy priorities, and lossless
// priorities with per-(ingress, priority) XOFF/XON thresholds and headroom (802.1Qbb PFC).
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
//     r.pause: a lossless priority, (packet.ingress, packet.priority) must stop sending now.
//   t = q.next_dequeue(egress);                   // when the next packet may start
//                                                 // transmission (kNever: nothing eligible)
//   d = q.dequeue(egress, now);                   // that packet, if next_dequeue(egress) <= now
//     d->tx_start, d->tx_end: the packet's time on the link (tx_end - tx_start = bytes at the
//     line rate, exact to the nanosecond with the remainder carried to the next packet);
//     d->marked: CE (set at enqueue or now, at dequeue); d->resume: a lossless priority,
//     (d->packet.ingress, d->packet.priority) may send again.
//   q.set_egress_paused(egress, prio, true/false, now);  // PFC received from the next hop
//
// A packet leaves the buffer when its transmission starts. The link is busy until tx_end;
// the next packet starts at T = max(tx_end of the previous one, the earliest time a head of a
// queue not held paused became ready: its arrival, or the end of the queue's last downstream
// pause if later), so a caller that calls dequeue late (a real-time loop
// that woke up late) gets packets whose tx_start lies in the past and sends them back to
// back: the average rate stays exact. The scheduler chooses among the queues whose head had
// arrived by T, so the choice does not depend on how late the caller is.
//
// Priorities. `priorities` = P queues per egress port (1..8); a packet goes to queue
// c = min(packet.priority, P - 1) (the traffic class; c = packet.priority whenever the
// priority is below P, which callers should ensure). Everything per priority below (PFC
// state, counters, pause/resume, downstream pause) is per class c. Priority c is lossless
// when mode == kLossless (every priority) or prio[c].lossless; otherwise lossy.
//
// Scheduling, at each dequeue, among the eligible queues of the egress (non-empty, not held
// paused by set_egress_paused, head ready by T; the pause state is the one of the call):
//   1. strict queues (prio[c].strict) first, the highest c first; a strict queue starves
//      every lower strict queue and every DWRR queue while it is eligible;
//   2. otherwise deficit round robin over the non-strict queues (Shreedhar & Varghese), in
//      byte units: quantum_c = prio[c].dwrr_weight * 1500 B. A pointer visits the queues in
//      ascending c, cyclically, starting at 0. When the pointer reaches an eligible queue its
//      turn starts: deficit_c += quantum_c; the queue then sends its head packets one per
//      dequeue while head bytes <= deficit_c (deficit_c -= bytes each). The turn ends when the
//      head does not fit (the deficit carries over to its next turn) or the queue becomes
//      empty (deficit_c = 0, as DRR resets an idle queue); the pointer then moves on. A queue
//      that is not eligible when the pointer passes (empty, paused, head not arrived) is
//      skipped and gains nothing; a paused queue keeps its deficit. A strict packet sent in
//      the middle of a DWRR turn does not end that turn. With equal-size packets of B bytes
//      and all queues backlogged, queue c sends exactly floor((k * quantum_c) / B) packets in
//      its first k turns (less what is left over), so bytes follow the weight ratio.
//
// Buffer admission, for a packet of B bytes of class c to egress port e from ingress i,
// with Q_{e,c} bytes queued in that queue, L_e bytes queued in e's lossy queues and S bytes
// used in the shared pool (all queues of all ports, lossy and lossless):
//   - lossy c: the port limit applies to the port's lossy bytes together:
//     static: L_e + B <= port_buffer_bytes (0 = no per-port limit);
//     dynamic (Choudhury & Hahne, per queue as switch ASICs apply it):
//       Q_{e,c} + B <= alpha * (shared_buffer_bytes - S);
//     and, both modes, S + B <= shared_buffer_bytes when there is a pool (> 0). A packet that
//     fails is a tail drop (dropped_tail). ECN-capable or not, a packet that does not fit is
//     dropped: marking never replaces a drop for lack of room.
//   - lossless c: no port limit and no pool check (PFC bounds it, as real switches disable
//     the egress limit of a lossless queue); only headroom (below) drops. Its bytes count in
//     S, so a congested lossless class takes room from the lossy ones.
//   - Either: a full descriptor ring of the queue (queue_packets per priority queue) is a
//     tail drop, so size queue_packets for the smallest packet.
//
// RED/ECN (every priority, lossy or lossless, the same RedParams), with q = Q_{e,c}, the
// bytes queued in the packet's own priority queue not counting this packet (at enqueue:
// before it joins; at dequeue: what stays behind it in that queue):
//   p = 0 for q <= Kmin, Pmax * (q - Kmin) / (Kmax - Kmin) for Kmin < q <= Kmax, 1 above
//   Kmax. An ECN-capable packet is marked with probability p (one 53-bit draw from the RNG
//   only when 0 < p < 1). Non-ECT packets are never marked and never dropped by RED (no
//   WRED): they see only tail drop.
//
// PFC (lossless priorities), per (ingress i, class c) as 802.1Qbb pauses per priority: an
// occupancy O_{i,c} = bytes of class c from i queued at any egress port.
//   - XOFF: after a packet of (i, c) is queued, O_{i,c} > xoff pauses (i, c) (r.pause; counted
//     in pause_events), where xoff = pfc.xoff_bytes (static) or
//     min(pfc.xoff_bytes, alpha * (shared_buffer_bytes - S)) (dynamic, S after this packet).
//   - XON: after a packet of a paused (i, c) leaves, O_{i,c} <= pfc.xon_bytes resumes it
//     (d->resume; the time from the pause to this departure's tx_start is added to paused_ns).
//   - Headroom: while paused, packets of (i, c) that were already on the wire keep arriving;
//     one is queued if O_{i,c} + B <= xoff + pfc.headroom_bytes (xoff as above, S before the
//     packet), else dropped and counted as dropped_headroom: a lossless switch drops only
//     when its headroom was too small for the sender's reaction time.
//   Pausing (i, c) leaves every other priority of i flowing. The thresholds are the same for
//   every lossless priority.
//
// Downstream pause: set_egress_paused(e, c, true, now) holds queue c of egress e (a packet
// already started finishes; none of c starts) until set_egress_paused(e, c, false, now'),
// after which c's packets start at now' at the earliest.
// The held time now' - now is counted per (e, c) (egress_paused_ns; pause_received counts
// not-paused -> paused transitions); setting the state it already has changes nothing.
//
// Counters: port(e) totals over e's queues (max_depth_bytes: the port's total depth);
// port(e, c) one queue. ingress(i, now) sums over i's classes (paused: any class paused;
// paused_ns: the sum of the classes' paused times); ingress(i, c, now) one class.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fabric/packet_ring.hpp"
#include "uroce/vocab/time.hpp"

namespace uroce::fabric {

inline constexpr uint32_t kMaxPriorities = 8;
inline constexpr uint64_t kDwrrQuantumUnitBytes = 1500;  // quantum = dwrr_weight * this

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
  uint64_t xoff_bytes = 0;      // pause an (ingress, priority) above this occupancy
  uint64_t xon_bytes = 0;       // resume it at or below this, xon <= xoff
  uint64_t headroom_bytes = 0;  // absorbed after the pause before dropping
};

struct PriorityConfig {
  bool lossless = false;     // PFC on this priority (mode = kLossless makes every one lossless)
  uint32_t dwrr_weight = 1;  // DWRR quantum = weight * 1500 B; >= 1 unless strict
  bool strict = false;       // served before every DWRR queue, higher priority first
};

struct SwitchQueueConfig {
  uint32_t egress_ports = 1;
  uint32_t ingress_ports = 1;
  uint64_t line_rate_bytes_per_sec = 125'000'000;  // per egress port; 1 Gbit/s
  uint32_t queue_packets = 4096;                   // descriptor ring per priority queue
  uint64_t port_buffer_bytes = 512 * 1024;         // static per-port limit; 0 = none
  uint64_t shared_buffer_bytes = 0;                // shared pool; 0 = none (dynamic needs one)
  ThresholdMode threshold = ThresholdMode::kStatic;
  double alpha = 1.0;                    // dynamic thresholds: limit = alpha * free shared bytes
  BufferMode mode = BufferMode::kLossy;  // kLossless: every priority lossless
  RedParams red;
  PfcParams pfc;
  uint64_t seed = 1;
  uint32_t priorities = 1;  // queues per egress port, 1..8
  std::array<PriorityConfig, kMaxPriorities> prio{};
};

// Empty when `c` is usable, else one line naming the bad field and what it must be.
[[nodiscard]] std::string validate(const SwitchQueueConfig& c);

enum class EnqueueVerdict : uint8_t { kQueued, kDroppedTail, kDroppedHeadroom };

struct EnqueueResult {
  EnqueueVerdict verdict = EnqueueVerdict::kQueued;
  bool marked = false;  // marked CE at enqueue (rewrite the packet's ECN bits)
  bool pause = false;   // lossless: pause (packet.ingress, packet.priority) from now on
};

struct Departure {
  Packet packet;
  bool marked = false;  // CE, at enqueue or at this dequeue
  bool resume = false;  // lossless: (packet.ingress, packet.priority) may send again
  TimePoint tx_start{};
  TimePoint tx_end{};
};

struct PortCounters {
  uint64_t enqueued = 0;  // packets queued
  uint64_t enqueued_bytes = 0;
  uint64_t dequeued = 0;
  uint64_t dequeued_bytes = 0;
  uint64_t dropped_tail = 0;      // no room (lossy), or descriptor ring full
  uint64_t dropped_headroom = 0;  // lossless: beyond xoff + headroom of the (ingress, priority)
  uint64_t ecn_marked = 0;
  uint64_t depth_bytes = 0;  // now
  uint64_t depth_packets = 0;
  uint64_t max_depth_bytes = 0;
  uint64_t pause_received = 0;  // downstream pauses (set_egress_paused false -> true)
};

struct IngressCounters {
  uint64_t occupancy_bytes = 0;  // bytes from this ingress queued anywhere (lossless priorities)
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

  // Downstream PFC: hold (or release) queue `priority` of `egress` from `now`.
  void set_egress_paused(uint32_t egress, uint32_t priority, bool paused, TimePoint now);
  [[nodiscard]] bool egress_paused(uint32_t egress, uint32_t priority) const;
  // Time queue `priority` of `egress` was held paused, including a pause in progress.
  [[nodiscard]] uint64_t egress_paused_ns(uint32_t egress, uint32_t priority, TimePoint now) const;
  // Summed over the port's priorities.
  [[nodiscard]] uint64_t egress_paused_ns(uint32_t egress, TimePoint now) const;

  // Any priority of `ingress` paused.
  [[nodiscard]] bool paused(uint32_t ingress) const { return ingress_[ingress].paused_classes > 0; }
  [[nodiscard]] bool paused(uint32_t ingress, uint32_t priority) const {
    return ingress_[ingress].cls[traffic_class(priority)].paused;
  }
  [[nodiscard]] const PortCounters& port(uint32_t egress) const { return ports_[egress].counters; }
  [[nodiscard]] const PortCounters& port(uint32_t egress, uint32_t priority) const {
    return ports_[egress].queues[traffic_class(priority)].counters;
  }
  [[nodiscard]] IngressCounters ingress(uint32_t ingress, TimePoint now) const;
  [[nodiscard]] IngressCounters ingress(uint32_t ingress, uint32_t priority, TimePoint now) const;
  [[nodiscard]] uint64_t shared_used_bytes() const { return shared_used_; }
  [[nodiscard]] const SwitchQueueConfig& config() const { return config_; }
  // The RED marking probability for q queued bytes (0 when RED is off).
  [[nodiscard]] double mark_probability(uint64_t queued_bytes) const;
  // The queue (traffic class) of a priority: min(priority, priorities - 1).
  [[nodiscard]] uint32_t traffic_class(uint32_t priority) const {
    return priority < config_.priorities ? priority : config_.priorities - 1;
  }
  [[nodiscard]] bool lossless(uint32_t priority) const {
    return config_.mode == BufferMode::kLossless || config_.prio[traffic_class(priority)].lossless;
  }

 private:
  struct Queue {
    explicit Queue(size_t ring) : ring(ring) {}
    PacketRing ring;
    PortCounters counters;
    uint64_t deficit = 0;    // DWRR bytes
    uint64_t paused_ns = 0;  // downstream pause, closed episodes
    TimePoint paused_since{};
    TimePoint released_at{};  // end of the last downstream pause
    bool paused = false;      // held by set_egress_paused
  };
  struct Port {
    std::vector<Queue> queues;
    PortCounters counters;     // totals
    TimePoint link_free_at{};  // end of the last transmission
    uint64_t residual = 0;     // sub-ns remainder of the serialization times, in 1/rate ns
    uint64_t lossy_bytes = 0;  // queued in the lossy queues
    uint32_t rr = 0;           // DWRR pointer
    bool in_turn = false;      // queue rr's turn has started (its quantum was added)
  };
  struct IngressClass {
    uint64_t occupancy = 0;
    uint64_t pause_events = 0;
    uint64_t paused_ns = 0;
    TimePoint paused_since{};
    bool paused = false;
  };
  struct Ingress {
    std::array<IngressClass, kMaxPriorities> cls{};
    uint32_t paused_classes = 0;
  };

  [[nodiscard]] bool red_mark(uint64_t queued_bytes, bool ect);
  [[nodiscard]] uint64_t free_shared() const;
  [[nodiscard]] uint64_t dynamic_limit() const;
  [[nodiscard]] uint64_t xoff() const;
  // When the head of (non-empty) `q` may start: its arrival, or the end of a downstream pause.
  [[nodiscard]] static TimePoint ready_at(const Queue& q);
  [[nodiscard]] bool eligible(const Queue& q, TimePoint t) const;
  // The start time of the next transmission of `port` (kNever: nothing eligible).
  [[nodiscard]] TimePoint start_time(const Port& port) const;
  // The class to send at `start` (one is eligible), advancing the DWRR state.
  [[nodiscard]] uint32_t schedule(Port& port, TimePoint start);

  SwitchQueueConfig config_;
  std::vector<Port> ports_;
  std::vector<Ingress> ingress_;
  uint64_t shared_used_ = 0;
  uint64_t rng_;
};

}  // namespace uroce::fabric
