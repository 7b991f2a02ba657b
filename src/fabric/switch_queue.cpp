// The switch queue model (switch_queue.hpp has the contract).
#include "fabric/switch_queue.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace uroce::fabric {
namespace {

constexpr uint64_t kNsPerSec = 1'000'000'000;

// SplitMix64 (the same generator as the engine's src/transport/rng.hpp, kept here so the
// fabric depends on nothing above src/common).
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::string validate(const SwitchQueueConfig& c) {
  if (c.egress_ports == 0) return "egress_ports must be at least 1";
  if (c.ingress_ports == 0) return "ingress_ports must be at least 1";
  if (c.line_rate_bytes_per_sec == 0) return "the line rate must be above 0 bytes/s";
  if (c.queue_packets == 0) return "queue_packets must be at least 1";
  if (c.priorities == 0 || c.priorities > kMaxPriorities) {
    return fmt::format("priorities ({}) must be in 1..8", c.priorities);
  }
  if (c.threshold == ThresholdMode::kDynamic) {
    if (c.shared_buffer_bytes == 0) return "dynamic thresholds need a shared buffer above 0";
    if (!(c.alpha > 0) || c.alpha > 1024) return "alpha must be in (0, 1024]";
  }
  if (c.red.enabled) {
    if (c.red.kmax_bytes <= c.red.kmin_bytes) {
      return fmt::format("ECN kmax ({} B) must be above kmin ({} B)", c.red.kmax_bytes,
                         c.red.kmin_bytes);
    }
    if (!(c.red.pmax > 0) || c.red.pmax > 1) return "ECN pmax must be in (0, 1]";
  }
  bool any_lossless = c.mode == BufferMode::kLossless;
  for (uint32_t p = 0; p < c.priorities; ++p) {
    if (!c.prio[p].strict && c.prio[p].dwrr_weight == 0) {
      return fmt::format("the DWRR weight of priority {} must be at least 1", p);
    }
    any_lossless = any_lossless || c.prio[p].lossless;
  }
  if (any_lossless) {
    if (c.pfc.xoff_bytes == 0) return "lossless mode needs an XOFF threshold above 0";
    if (c.pfc.xon_bytes > c.pfc.xoff_bytes) {
      return fmt::format("XON ({} B) must not be above XOFF ({} B)", c.pfc.xon_bytes,
                         c.pfc.xoff_bytes);
    }
  }
  return {};
}

SwitchQueues::SwitchQueues(const SwitchQueueConfig& config)
    : config_(config), ingress_(config.ingress_ports), rng_(config.seed) {
  ports_.resize(config.egress_ports);
  for (Port& p : ports_) {
    p.queues.reserve(config.priorities);
    for (uint32_t c = 0; c < config.priorities; ++c) p.queues.emplace_back(config.queue_packets);
  }
}

uint64_t SwitchQueues::free_shared() const {
  return shared_used_ >= config_.shared_buffer_bytes ? 0
                                                     : config_.shared_buffer_bytes - shared_used_;
}

uint64_t SwitchQueues::dynamic_limit() const {
  return static_cast<uint64_t>(config_.alpha * static_cast<double>(free_shared()));
}

uint64_t SwitchQueues::xoff() const {
  if (config_.threshold == ThresholdMode::kDynamic) {
    return std::min(config_.pfc.xoff_bytes, dynamic_limit());
  }
  return config_.pfc.xoff_bytes;
}

double SwitchQueues::mark_probability(uint64_t q) const {
  const RedParams& r = config_.red;
  if (!r.enabled || q <= r.kmin_bytes) return 0;
  if (q > r.kmax_bytes) return 1;
  return r.pmax * static_cast<double>(q - r.kmin_bytes) /
         static_cast<double>(r.kmax_bytes - r.kmin_bytes);
}

bool SwitchQueues::red_mark(uint64_t q, bool ect) {
  if (!ect) return false;
  const double p = mark_probability(q);
  if (p <= 0) return false;
  if (p >= 1) return true;
  // 53 random bits as a double in [0, 1).
  const double u = static_cast<double>(next_random(rng_) >> 11) * 0x1.0p-53;
  return u < p;
}

EnqueueResult SwitchQueues::enqueue(uint32_t egress, const Packet& packet, TimePoint now) {
  Port& port = ports_[egress];
  const uint32_t cls = traffic_class(packet.priority);
  Queue& queue = port.queues[cls];
  PortCounters& qc = queue.counters;
  PortCounters& pc = port.counters;
  EnqueueResult r;
  const uint64_t b = packet.bytes;
  const bool lossless_class = lossless(packet.priority);
  const auto drop = [&](EnqueueVerdict v) {
    if (v == EnqueueVerdict::kDroppedHeadroom) {
      ++qc.dropped_headroom;
      ++pc.dropped_headroom;
    } else {
      ++qc.dropped_tail;
      ++pc.dropped_tail;
    }
    r.verdict = v;
    return r;
  };
  if (lossless_class) {
    const IngressClass& in = ingress_[packet.ingress].cls[cls];
    if (in.occupancy + b > xoff() + config_.pfc.headroom_bytes) {
      return drop(EnqueueVerdict::kDroppedHeadroom);
    }
  } else {
    const bool port_ok =
        config_.threshold == ThresholdMode::kDynamic
            ? qc.depth_bytes + b <= dynamic_limit()
            : config_.port_buffer_bytes == 0 || port.lossy_bytes + b <= config_.port_buffer_bytes;
    const bool shared_ok =
        config_.shared_buffer_bytes == 0 || shared_used_ + b <= config_.shared_buffer_bytes;
    if (!port_ok || !shared_ok) return drop(EnqueueVerdict::kDroppedTail);
  }
  if (queue.ring.size() == queue.ring.capacity()) return drop(EnqueueVerdict::kDroppedTail);
  const bool mark_now =
      config_.red.at == MarkPoint::kEnqueue && red_mark(qc.depth_bytes, packet.ect);
  (void)queue.ring.push(QueuedPacket{.packet = packet, .enqueued_at = now, .marked = mark_now});
  for (PortCounters* c : {&qc, &pc}) {
    if (mark_now) ++c->ecn_marked;
    ++c->enqueued;
    c->enqueued_bytes += b;
    c->depth_bytes += b;
    ++c->depth_packets;
    c->max_depth_bytes = std::max(c->max_depth_bytes, c->depth_bytes);
  }
  r.marked = mark_now;
  shared_used_ += b;
  if (!lossless_class) port.lossy_bytes += b;
  if (lossless_class) {
    // Evaluated after shared_used_ grew: a dynamic XOFF shrinks as the pool fills.
    Ingress& ing = ingress_[packet.ingress];
    IngressClass& in = ing.cls[cls];
    in.occupancy += b;
    if (!in.paused && in.occupancy > xoff()) {
      in.paused = true;
      in.paused_since = now;
      ++in.pause_events;
      ++ing.paused_classes;
      r.pause = true;
    }
  }
  return r;
}

TimePoint SwitchQueues::ready_at(const Queue& q) {
  return std::max(q.ring.front().enqueued_at, q.released_at);
}

bool SwitchQueues::eligible(const Queue& q, TimePoint t) const {
  return !q.paused && !q.ring.empty() && ready_at(q) <= t;
}

TimePoint SwitchQueues::start_time(const Port& port) const {
  TimePoint first = kNever;
  for (const Queue& q : port.queues) {
    if (!q.paused && !q.ring.empty()) first = std::min(first, ready_at(q));
  }
  return first == kNever ? kNever : std::max(port.link_free_at, first);
}

TimePoint SwitchQueues::next_dequeue(uint32_t egress) const {
  return start_time(ports_[egress]);
}

uint32_t SwitchQueues::schedule(Port& port, TimePoint start) {
  const uint32_t n = config_.priorities;
  for (uint32_t c = n; c-- > 0;) {
    if (config_.prio[c].strict && eligible(port.queues[c], start)) return c;
  }
  // start_time() found an eligible queue and none is strict: DWRR has one. Each pass of the
  // loop either sends or moves the pointer; a full cycle adds at least 1500 B to every
  // eligible queue's deficit, so it ends after at most head bytes / 1500 cycles.
  for (;;) {
    const uint32_t c = port.rr;
    Queue& q = port.queues[c];
    if (!config_.prio[c].strict && eligible(q, start)) {
      if (!port.in_turn) {
        q.deficit += uint64_t{config_.prio[c].dwrr_weight} * kDwrrQuantumUnitBytes;
        port.in_turn = true;
      }
      const uint64_t head = q.ring.front().packet.bytes;
      if (head <= q.deficit) {
        q.deficit -= head;
        return c;
      }
    }
    port.in_turn = false;
    port.rr = c + 1 == n ? 0 : c + 1;
  }
}

std::optional<Departure> SwitchQueues::dequeue(uint32_t egress, TimePoint now) {
  Port& port = ports_[egress];
  const TimePoint start = start_time(port);
  if (start == kNever || start > now) return std::nullopt;
  const uint32_t cls = schedule(port, start);
  Queue& queue = port.queues[cls];
  const QueuedPacket qp = queue.ring.pop();
  if (queue.ring.empty() && !config_.prio[cls].strict) {
    // DRR: a queue that empties loses its deficit and ends its turn.
    queue.deficit = 0;
    if (port.rr == cls) {
      port.in_turn = false;
      port.rr = cls + 1 == config_.priorities ? 0 : cls + 1;
    }
  }
  PortCounters& qc = queue.counters;
  PortCounters& pc = port.counters;
  const uint64_t b = qp.packet.bytes;
  for (PortCounters* c : {&qc, &pc}) {
    c->depth_bytes -= b;
    --c->depth_packets;
    ++c->dequeued;
    c->dequeued_bytes += b;
  }
  shared_used_ -= b;
  const bool lossless_class = lossless(cls);
  if (!lossless_class) port.lossy_bytes -= b;

  Departure d;
  d.packet = qp.packet;
  d.marked = qp.marked;
  if (!d.marked && config_.red.at == MarkPoint::kDequeue &&
      red_mark(qc.depth_bytes, qp.packet.ect)) {
    d.marked = true;
    ++qc.ecn_marked;
    ++pc.ecn_marked;
  }
  // A link that went idle starts afresh; back to back, the sub-ns remainder carries over.
  if (start > port.link_free_at) port.residual = 0;
  const uint64_t total = b * kNsPerSec + port.residual;
  const uint64_t ns = total / config_.line_rate_bytes_per_sec;
  port.residual = total % config_.line_rate_bytes_per_sec;
  d.tx_start = start;
  d.tx_end = start + Nanos(static_cast<int64_t>(ns));
  port.link_free_at = d.tx_end;

  if (lossless_class) {
    Ingress& ing = ingress_[qp.packet.ingress];
    IngressClass& in = ing.cls[cls];
    in.occupancy -= b;
    if (in.paused && in.occupancy <= config_.pfc.xon_bytes) {
      in.paused = false;
      --ing.paused_classes;
      // The buffer space was freed when this transmission started.
      const TimePoint end = std::max(start, in.paused_since);
      in.paused_ns += static_cast<uint64_t>((end - in.paused_since).count());
      d.resume = true;
    }
  }
  return d;
}

void SwitchQueues::set_egress_paused(uint32_t egress, uint32_t priority, bool paused,
                                     TimePoint now) {
  Port& port = ports_[egress];
  Queue& q = port.queues[traffic_class(priority)];
  if (q.paused == paused) return;
  q.paused = paused;
  if (paused) {
    q.paused_since = now;
    ++q.counters.pause_received;
    ++port.counters.pause_received;
  } else {
    q.released_at = now;  // its packets may not start before the pause ended
    if (now > q.paused_since) q.paused_ns += static_cast<uint64_t>((now - q.paused_since).count());
  }
}

bool SwitchQueues::egress_paused(uint32_t egress, uint32_t priority) const {
  return ports_[egress].queues[traffic_class(priority)].paused;
}

uint64_t SwitchQueues::egress_paused_ns(uint32_t egress, uint32_t priority, TimePoint now) const {
  const Queue& q = ports_[egress].queues[traffic_class(priority)];
  uint64_t ns = q.paused_ns;
  if (q.paused && now > q.paused_since) {
    ns += static_cast<uint64_t>((now - q.paused_since).count());
  }
  return ns;
}

uint64_t SwitchQueues::egress_paused_ns(uint32_t egress, TimePoint now) const {
  uint64_t ns = 0;
  for (uint32_t c = 0; c < config_.priorities; ++c) {
    ns += egress_paused_ns(egress, c, now);
  }
  return ns;
}

IngressCounters SwitchQueues::ingress(uint32_t i, uint32_t priority, TimePoint now) const {
  const IngressClass& in = ingress_[i].cls[traffic_class(priority)];
  IngressCounters c;
  c.occupancy_bytes = in.occupancy;
  c.pause_events = in.pause_events;
  c.paused = in.paused;
  c.paused_ns = in.paused_ns;
  if (in.paused && now > in.paused_since) {
    c.paused_ns += static_cast<uint64_t>((now - in.paused_since).count());
  }
  return c;
}

IngressCounters SwitchQueues::ingress(uint32_t i, TimePoint now) const {
  IngressCounters total;
  for (uint32_t p = 0; p < config_.priorities; ++p) {
    const IngressCounters c = ingress(i, p, now);
    total.occupancy_bytes += c.occupancy_bytes;
    total.pause_events += c.pause_events;
    total.paused_ns += c.paused_ns;
    total.paused = total.paused || c.paused;
  }
  return total;
}

}  // namespace uroce::fabric
