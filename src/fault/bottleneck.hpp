// BottleneckQueue: UROCE_IMPAIR's rate-limited queue (rate=, queue=, kmin=, kmax=, pmax=) as one
// egress port of the switch queue model that `uroce switch` runs (fabric::SwitchQueues: line
// rate, buffer with tail drop, RED/ECN on ECT packets marked at dequeue), plus the bytes of
// the packets it holds, in `limit` preallocated slots (no allocation per packet).
//
//   BottleneckQueue<Meta> q(bottleneck_config(spec, limit, seed), max_len);
//   if (!q.full()) q.offer(now, bytes, meta, wire_bytes, ect);   // false: tail drop
//   while (q.due(now)) { auto d = q.depart(now); ...d.bytes, d.marked, d.tx_end...; q.done(); }
//
// A packet departs when its transmission starts (the model's dequeue); it has crossed the
// bottleneck at d.tx_end, when its last byte is on the far side: that is when the rest of
// the impairment (loss, delay, ...) takes it, like a wire after a switch. Calling depart late
// changes nothing: the model's times depend only on arrivals and the rate.
//
// Sans-IO: the caller passes `now`.
#pragma once

#include <cstdint>
#include <span>

#include "fabric/switch_queue.hpp"
#include "fault/delay_line.hpp"
#include "fault/impair_spec.hpp"
#include "uroce/vocab/time.hpp"

namespace uroce::fault {

// The one-port, lossy, static-threshold queue of `b`, `limit` packets deep, its RED drawing
// from `seed`. Valid (fabric::validate) for every spec parse_impair_spec accepts.
[[nodiscard]] fabric::SwitchQueueConfig bottleneck_config(const Bottleneck& b, uint32_t limit,
                                                          uint64_t seed);

// Bytes a RoCE v2 packet of `roce_len` bytes (BTH .. ICRC, what the UDP socket carries)
// occupies on an Ethernet link: + UDP 8 + IPv4 20 or IPv6 40 + Ethernet header 14 (the frame
// without FCS, as `uroce switch` counts the frames it queues).
[[nodiscard]] constexpr uint32_t wire_bytes(size_t roce_len, bool ipv6) {
  return static_cast<uint32_t>(roce_len + 8 + (ipv6 ? 40 : 20) + 14);
}

template <class Meta>
class BottleneckQueue {
 public:
  struct Departed {
    std::span<uint8_t> bytes;  // valid until done()
    Meta meta;
    bool marked = false;  // RED/ECN: set CE
    TimePoint tx_end{};   // the packet has crossed the bottleneck
  };

  BottleneckQueue(const fabric::SwitchQueueConfig& config, size_t max_len)
      : queue_(config), held_(config.queue_packets, max_len) {}

  // Every slot is taken (as many packets queued as `limit`).
  [[nodiscard]] bool full() const { return held_.full(); }

  // The packet arrives at `now`; false when the model drops it (tail drop) or it does not
  // fit a slot.
  bool offer(TimePoint now, std::span<const uint8_t> bytes, const Meta& meta, uint32_t wire,
             bool ect) {
    if (held_.full()) return false;
    const fabric::Packet p{.bytes = wire, .ingress = 0, .cookie = 0, .ect = ect};
    if (queue_.enqueue(0, p, now).verdict != fabric::EnqueueVerdict::kQueued) return false;
    // Release time 0 for all: the line then keeps arrival order, a FIFO like the model's.
    return held_.push(TimePoint{0}, bytes, meta);
  }

  // When the head starts transmission, kNever when empty.
  [[nodiscard]] TimePoint next_departure() const { return queue_.next_dequeue(0); }
  [[nodiscard]] bool due(TimePoint now) const { return next_departure() <= now; }

  // Precondition: due(now). Then done() once the bytes are no longer needed.
  Departed depart(TimePoint now) {
    const auto d = queue_.dequeue(0, now);
    const auto p = held_.front();
    return Departed{p.bytes, p.meta, d->marked, d->tx_end};
  }
  void done() { held_.pop(); }

  [[nodiscard]] const fabric::PortCounters& counters() const { return queue_.port(0); }

 private:
  fabric::SwitchQueues queue_;
  DelayLine<Meta> held_;
};

}  // namespace uroce::fault
