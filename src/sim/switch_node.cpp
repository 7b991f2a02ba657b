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
  (void)lossless_priorities;
  (void)strict;
  (void)dwrr_weights;
  const std::string err = fabric::validate(c);
  if (!err.empty()) throw std::runtime_error("switch: " + err);
  q_ = std::make_unique<fabric::SwitchQueues>(c);
}

uint32_t SwitchNode::priorities() {
  return 1;
}

SwitchArrival SwitchNode::enqueue(uint32_t egress, uint32_t ingress, uint32_t bytes,
                                  uint8_t priority, bool ect, uint64_t cookie, TimePoint now) {
  (void)priority;
  fabric::Packet p;
  p.bytes = bytes;
  p.ingress = ingress;
  p.cookie = cookie;
  p.ect = ect;
  const fabric::EnqueueResult r = q_->enqueue(egress, p, now);
  SwitchArrival a;
  a.dropped = r.verdict != fabric::EnqueueVerdict::kQueued;
  a.headroom = r.verdict == fabric::EnqueueVerdict::kDroppedHeadroom;
  a.marked = r.marked;
  a.pause = r.pause;
  if (r.pause) ++ports_[ingress].pause_frames[0];
  return a;
}

TimePoint SwitchNode::next_tx(uint32_t egress) const {
  const Port& port = ports_[egress];
  if ((port.paused_mask & 1u) != 0) return kNever;
  const TimePoint t = q_->next_dequeue(egress);
  if (t == kNever) return kNever;
  return std::max(t, port.link_free);
}

std::optional<SwitchTx> SwitchNode::transmit(uint32_t egress, TimePoint now) {
  const TimePoint t = next_tx(egress);
  if (t == kNever || t > now) return std::nullopt;
  std::optional<fabric::Departure> d = q_->dequeue(egress, now);
  if (!d) return std::nullopt;
  Port& port = ports_[egress];
  // The model's link clock runs at the fastest port's rate and does not know the egress was
  // held by a downstream pause: a transmission never starts before this link is free or
  // before now, and lasts the packet's bytes at this port's own rate.
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
  tx.priority = 0;
  return tx;
}

void SwitchNode::set_downstream_paused(uint32_t egress, uint8_t priority, bool paused,
                                       TimePoint now) {
  (void)priority;  // one traffic class: any pause holds the egress
  Port& port = ports_[egress];
  const bool was = (port.paused_mask & 1u) != 0;
  if (paused == was) return;
  if (paused) {
    port.paused_mask |= 1u;
    port.paused_since[0] = now;
  } else {
    port.paused_mask &= static_cast<uint8_t>(~1u);
    port.paused_ns[0] += static_cast<uint64_t>((now - port.paused_since[0]).count());
  }
}

EgressStats SwitchNode::stats(uint32_t egress, uint8_t priority, TimePoint now) const {
  (void)priority;
  const fabric::PortCounters& c = q_->port(egress);
  const Port& port = ports_[egress];
  EgressStats s;
  s.enqueued = c.enqueued;
  s.dequeued_bytes = c.dequeued_bytes;
  s.dropped_tail = c.dropped_tail;
  s.dropped_headroom = c.dropped_headroom;
  s.ecn_marked = c.ecn_marked;
  s.max_depth_bytes = c.max_depth_bytes;
  s.depth_bytes = c.depth_bytes;
  s.paused_ns = port.paused_ns[0];
  if ((port.paused_mask & 1u) != 0) {
    s.paused_ns += static_cast<uint64_t>((now - port.paused_since[0]).count());
  }
  s.pause_frames_sent = port.pause_frames[0];
  return s;
}

uint64_t SwitchNode::depth_bytes(uint32_t egress, uint8_t priority) const {
  (void)priority;
  return q_->port(egress).depth_bytes;
}

uint64_t SwitchNode::queued_packets() const {
  uint64_t n = 0;
  for (uint32_t e = 0; e < ports_.size(); ++e) n += q_->port(e).depth_packets;
  return n;
}

}  // namespace uroce::sim
