#include "sim/switch_node.hpp"

#include <algorithm>
#include <stdexcept>

namespace uroce::sim {

SwitchNode::SwitchNode(const fabric::SwitchQueueConfig& base, std::vector<uint64_t> port_bps,
                       uint8_t lossless_priorities, bool strict,
                       const std::vector<uint32_t>& dwrr_weights, uint64_t seed)
    : ports_(port_bps.size()) {
  fabric::SwitchQueueConfig c = base;
  const auto ports = static_cast<uint32_t>(port_bps.size());
  c.egress_ports = ports;
  c.ingress_ports = ports;
  uint64_t fastest = 8;
  for (uint32_t i = 0; i < ports; ++i) {
    ports_[i].bps = port_bps[i];
    fastest = std::max(fastest, port_bps[i]);
  }
  c.line_rate_bytes_per_sec = fastest / 8;
  c.seed = seed;
  if (c.mode == fabric::BufferMode::kLossless && lossless_priorities != 0xFF) {
    // Some classes lossless, the others lossy (tail drop).
    c.mode = fabric::BufferMode::kLossy;
    for (uint32_t p = 0; p < fabric::kMaxPriorities; ++p) {
      c.prio[p].lossless = ((lossless_priorities >> p) & 1u) != 0;
    }
  }
  for (uint32_t p = 0; p < fabric::kMaxPriorities; ++p) {
    c.prio[p].strict = strict;
    c.prio[p].dwrr_weight = p < dwrr_weights.size() ? dwrr_weights[p] : 1;
  }
  const std::string err = fabric::validate(c);
  if (!err.empty()) throw std::runtime_error("switch: " + err);
  q_ = std::make_unique<fabric::SwitchQueues>(c);
}

SwitchArrival SwitchNode::enqueue(uint32_t egress, uint32_t ingress, uint32_t bytes,
                                  uint8_t priority, bool ect, uint64_t cookie, TimePoint now) {
  fabric::Packet p;
  p.bytes = bytes;
  p.ingress = ingress;
  p.cookie = cookie;
  p.ect = ect;
  p.priority = static_cast<uint8_t>(q_->traffic_class(priority));
  const fabric::EnqueueResult r = q_->enqueue(egress, p, now);
  SwitchArrival a;
  a.dropped = r.verdict != fabric::EnqueueVerdict::kQueued;
  a.headroom = r.verdict == fabric::EnqueueVerdict::kDroppedHeadroom;
  a.marked = r.marked;
  a.pause = r.pause;
  return a;
}

TimePoint SwitchNode::next_tx(uint32_t egress) const {
  const TimePoint t = q_->next_dequeue(egress);
  if (t == kNever) return kNever;
  return std::max(t, ports_[egress].link_free);
}

std::optional<SwitchTx> SwitchNode::transmit(uint32_t egress, TimePoint now) {
  const TimePoint t = next_tx(egress);
  if (t == kNever || t > now) return std::nullopt;
  std::optional<fabric::Departure> d = q_->dequeue(egress, now);
  if (!d) return std::nullopt;
  Port& port = ports_[egress];
  // The model's link clock runs at the fastest port's rate: a transmission never starts
  // before this port's link is free or before now, and lasts the packet's bytes at this
  // port's own rate.
  SwitchTx tx;
  tx.start = std::max({d->tx_start, port.link_free, now});
  if (tx.start > port.link_free) port.residual = 0;
  const uint64_t total = uint64_t{d->packet.bytes} * 8'000'000'000ull + port.residual;
  port.residual = total % port.bps;
  tx.end = tx.start + Nanos(static_cast<int64_t>(total / port.bps));
  port.link_free = tx.end;
  tx.cookie = d->packet.cookie;
  tx.marked = d->marked;
  tx.resume = d->resume;
  tx.ingress = d->packet.ingress;
  tx.priority = d->packet.priority;
  return tx;
}

void SwitchNode::set_downstream_paused(uint32_t egress, uint8_t priority, bool paused,
                                       TimePoint now) {
  q_->set_egress_paused(egress, q_->traffic_class(priority), paused, now);
}

EgressStats SwitchNode::stats(uint32_t egress, uint8_t priority, TimePoint now) const {
  const fabric::PortCounters& c = q_->port(egress, priority);
  EgressStats s;
  s.enqueued = c.enqueued;
  s.dequeued = c.dequeued;
  s.dequeued_bytes = c.dequeued_bytes;
  s.dropped_tail = c.dropped_tail;
  s.dropped_headroom = c.dropped_headroom;
  s.ecn_marked = c.ecn_marked;
  s.max_depth_bytes = c.max_depth_bytes;
  s.depth_bytes = c.depth_bytes;
  s.paused_ns = q_->egress_paused_ns(egress, priority, now);
  s.pause_events = q_->ingress(egress, priority, now).pause_events;
  return s;
}

uint64_t SwitchNode::depth_bytes(uint32_t egress, uint8_t priority) const {
  return q_->port(egress, priority).depth_bytes;
}

uint64_t SwitchNode::queued_packets() const {
  uint64_t n = 0;
  for (uint32_t e = 0; e < ports_.size(); ++e) n += q_->port(e).depth_packets;
  return n;
}

}  // namespace uroce::sim
