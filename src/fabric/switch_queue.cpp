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
  if (c.mode == BufferMode::kLossless) {
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
  ports_.reserve(config.egress_ports);
  for (uint32_t i = 0; i < config.egress_ports; ++i) ports_.emplace_back(config.queue_packets);
}

uint64_t SwitchQueues::free_shared() const {
  return shared_used_ >= config_.shared_buffer_bytes ? 0
                                                     : config_.shared_buffer_bytes - shared_used_;
}

uint64_t SwitchQueues::port_limit() const {
  if (config_.threshold == ThresholdMode::kDynamic) {
    return static_cast<uint64_t>(config_.alpha * static_cast<double>(free_shared()));
  }
  return config_.port_buffer_bytes == 0 ? UINT64_MAX : config_.port_buffer_bytes;
}

uint64_t SwitchQueues::xoff() const {
  if (config_.threshold == ThresholdMode::kDynamic) {
    const auto dyn = static_cast<uint64_t>(config_.alpha * static_cast<double>(free_shared()));
    return std::min(config_.pfc.xoff_bytes, dyn);
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
  PortCounters& c = port.counters;
  EnqueueResult r;
  const uint64_t b = packet.bytes;
  if (config_.mode == BufferMode::kLossless) {
    Ingress& in = ingress_[packet.ingress];
    if (in.occupancy + b > xoff() + config_.pfc.headroom_bytes) {
      ++c.dropped_headroom;
      r.verdict = EnqueueVerdict::kDroppedHeadroom;
      return r;
    }
  } else {
    const bool port_ok = c.depth_bytes + b <= port_limit();
    const bool shared_ok =
        config_.shared_buffer_bytes == 0 || shared_used_ + b <= config_.shared_buffer_bytes;
    if (!port_ok || !shared_ok) {
      ++c.dropped_tail;
      r.verdict = EnqueueVerdict::kDroppedTail;
      return r;
    }
  }
  if (port.queue.size() == port.queue.capacity()) {
    ++c.dropped_tail;
    r.verdict = EnqueueVerdict::kDroppedTail;
    return r;
  }
  const bool mark_now =
      config_.red.at == MarkPoint::kEnqueue && red_mark(c.depth_bytes, packet.ect);
  (void)port.queue.push(QueuedPacket{.packet = packet, .enqueued_at = now, .marked = mark_now});
  if (mark_now) ++c.ecn_marked;
  r.marked = mark_now;
  ++c.enqueued;
  c.enqueued_bytes += b;
  c.depth_bytes += b;
  ++c.depth_packets;
  c.max_depth_bytes = std::max(c.max_depth_bytes, c.depth_bytes);
  shared_used_ += b;
  if (config_.mode == BufferMode::kLossless) {
    // Evaluated after shared_used_ grew: a dynamic XOFF shrinks as the pool fills.
    Ingress& in = ingress_[packet.ingress];
    in.occupancy += b;
    if (!in.paused && in.occupancy > xoff()) {
      in.paused = true;
      in.paused_since = now;
      ++in.pause_events;
      r.pause = true;
    }
  }
  return r;
}

TimePoint SwitchQueues::next_dequeue(uint32_t egress) const {
  const Port& port = ports_[egress];
  if (port.queue.empty()) return kNever;
  return std::max(port.link_free_at, port.queue.front().enqueued_at);
}

std::optional<Departure> SwitchQueues::dequeue(uint32_t egress, TimePoint now) {
  Port& port = ports_[egress];
  const TimePoint start = next_dequeue(egress);
  if (start == kNever || start > now) return std::nullopt;
  const QueuedPacket qp = port.queue.pop();
  PortCounters& c = port.counters;
  const uint64_t b = qp.packet.bytes;
  c.depth_bytes -= b;
  --c.depth_packets;
  ++c.dequeued;
  c.dequeued_bytes += b;
  shared_used_ -= b;

  Departure d;
  d.packet = qp.packet;
  d.marked = qp.marked;
  if (!d.marked && config_.red.at == MarkPoint::kDequeue &&
      red_mark(c.depth_bytes, qp.packet.ect)) {
    d.marked = true;
    ++c.ecn_marked;
  }
  // A link that went idle starts afresh; back to back, the sub-ns remainder carries over.
  if (start > port.link_free_at) port.residual = 0;
  const uint64_t total = b * kNsPerSec + port.residual;
  const uint64_t ns = total / config_.line_rate_bytes_per_sec;
  port.residual = total % config_.line_rate_bytes_per_sec;
  d.tx_start = start;
  d.tx_end = start + Nanos(static_cast<int64_t>(ns));
  port.link_free_at = d.tx_end;

  if (config_.mode == BufferMode::kLossless) {
    Ingress& in = ingress_[qp.packet.ingress];
    in.occupancy -= b;
    if (in.paused && in.occupancy <= config_.pfc.xon_bytes) {
      in.paused = false;
      // The buffer space was freed when this transmission started.
      const TimePoint end = std::max(start, in.paused_since);
      in.paused_ns += static_cast<uint64_t>((end - in.paused_since).count());
      d.resume = true;
    }
  }
  return d;
}

IngressCounters SwitchQueues::ingress(uint32_t i, TimePoint now) const {
  const Ingress& in = ingress_[i];
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

}  // namespace uroce::fabric
