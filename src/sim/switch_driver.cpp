// The switches of the simulation around their queue model (switch_node.hpp): a packet that
// arrives is routed (ECMP over the equal-cost next hops), queued or dropped, CE-marked by
// RED, and may pause its ingress (PFC frame upstream after the link's delay); an egress
// transmits whenever its link is free, it holds a packet and the next hop has not paused it.
#include "sim/rng.hpp"
#include "sim/simulator.hpp"

namespace uroce::sim {

uint32_t Simulator::ecmp(uint32_t s, const SimPacket& p) const {
  const auto hops = topo_.next_hops(switches_[s].node, p.dst_host);
  if (hops.size() == 1) return hops[0];
  const auto& a = p.meta.ip.src;
  const auto& b = p.meta.ip.dst;
  const uint64_t ips = (uint64_t{a[12]} << 56) | (uint64_t{a[13]} << 48) | (uint64_t{a[14]} << 40) |
                       (uint64_t{a[15]} << 32) | (uint64_t{b[12]} << 24) | (uint64_t{b[13]} << 16) |
                       (uint64_t{b[14]} << 8) | b[15];
  // Salted per switch, as real switches' hash seeds are, so tiers do not polarise.
  const uint64_t h = splitmix64(ips ^ splitmix64(uint64_t{p.meta.ip.sport} ^ (uint64_t{s} << 32)));
  return hops[h % hops.size()];
}

void Simulator::switch_arrive(uint32_t s, uint32_t in_port, uint32_t pkt) {
  Switch& sw = switches_[s];
  SimPacket& p = pool_[pkt];
  const uint32_t egress = ecmp(s, p);
  const bool ect = (p.meta.tos & 3u) != 0;
  const SwitchArrival r =
      sw.model->enqueue(egress, in_port, p.wire_bytes, p.priority, ect, pkt, now_);
  if (r.pause)
    send_pfc(sw.node, in_port, static_cast<uint8_t>(sw.model->traffic_class(p.priority)), true);
  if (r.dropped) {
    pool_.release(pkt);
    return;
  }
  if (r.marked) p.meta.tos |= 3u;
  switch_kick(s, egress);
}

void Simulator::switch_kick(uint32_t s, uint32_t port) {
  Switch& sw = switches_[s];
  if (sw.tx_scheduled[port] != 0) return;
  const TimePoint t = sw.model->next_tx(port);
  if (t == kNever) return;
  sw.tx_scheduled[port] = 1;
  q_.push(std::max(t, now_), kSwitchTx, s, port);
}

void Simulator::switch_tx(uint32_t s, uint32_t port) {
  Switch& sw = switches_[s];
  sw.tx_scheduled[port] = 0;
  const std::optional<SwitchTx> tx = sw.model->transmit(port, now_);
  if (tx) {
    const auto pkt = static_cast<uint32_t>(tx->cookie);
    if (tx->marked) pool_[pkt].meta.tos |= 3u;
    if (tx->resume) send_pfc(sw.node, tx->ingress, tx->priority, false);
    link_send(sw.node, port, pkt, tx->end);
  }
  switch_kick(s, port);
}

void Simulator::send_pfc(uint32_t node, uint32_t port, uint8_t priority, bool pause) {
  const PortLink& l = topo_.node(node).ports[port];
  const uint64_t arg = uint64_t{l.peer_port} | (uint64_t{priority} << 32) | (uint64_t{pause} << 40);
  q_.push(now_ + Nanos(static_cast<int64_t>(l.delay_ns)), kPfc, l.peer, arg);
}

}  // namespace uroce::sim
