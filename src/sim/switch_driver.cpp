// The switches of the simulation around their queue model (switch_node.hpp): a packet that
// arrives is routed (ECMP over the equal-cost next hops), queued or dropped, CE-marked by
// RED, and may pause its ingress (PFC frame upstream after the link's delay); an egress
// transmits whenever its link is free, it holds a packet and the next hop has not paused it.
// PFC frames as 802.1Qbb has them: a PAUSE carries a pause time in quanta (512 bit times at
// the link's rate), is sent again every pause_refresh_quanta while the ingress stays above
// XON, and an XON is a PAUSE with time 0; the upstream holds the class until the time runs
// out or an XON arrives. Hosts' storms send the same frames.
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
    pfc_pause(sw.node, in_port, static_cast<uint8_t>(sw.model->traffic_class(p.priority)));
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
    if (tx->resume) pfc_resume(sw.node, tx->ingress, tx->priority);
    link_send(sw.node, port, pkt, tx->end);
  }
  switch_kick(s, port);
}

Nanos Simulator::quanta_time(uint32_t node, uint32_t port, uint32_t quanta) const {
  const uint64_t bps = topo_.node(node).ports[port].bps;
  // Rounded up, so a pause never ends before its bit times have passed.
  return Nanos(static_cast<int64_t>((uint64_t{quanta} * 512 * 1'000'000'000ull + bps - 1) / bps));
}

void Simulator::pfc_pause(uint32_t node, uint32_t port, uint8_t cls, bool refresh) {
  PfcTx& t = pfc_tx_[pfc_index(node, port, cls)];
  ++t.stats.pause_events;
  if (t.pausing) return;  // a second storm on the same port and class
  t.pausing = true;
  send_pfc_frame(node, port, cls, sc_.sw.pause_quanta);
  if (!refresh) return;
  t.refresh_at = now_ + quanta_time(node, port, sc_.sw.pause_refresh_quanta);
  q_.push(t.refresh_at, kPfcRefresh, node, uint64_t{port} | (uint64_t{cls} << 32));
}

void Simulator::pfc_resume(uint32_t node, uint32_t port, uint8_t cls) {
  PfcTx& t = pfc_tx_[pfc_index(node, port, cls)];
  if (!t.pausing) return;
  t.pausing = false;
  t.refresh_at = kNever;  // the pending refresh event finds this and does nothing
  send_pfc_frame(node, port, cls, 0);
}

void Simulator::pfc_refresh(uint32_t node, uint32_t port, uint8_t cls, TimePoint at) {
  PfcTx& t = pfc_tx_[pfc_index(node, port, cls)];
  if (!t.pausing || t.refresh_at != at) return;  // resumed (and maybe paused again) since
  send_pfc_frame(node, port, cls, sc_.sw.pause_quanta);
  t.refresh_at = now_ + quanta_time(node, port, sc_.sw.pause_refresh_quanta);
  q_.push(t.refresh_at, kPfcRefresh, node, uint64_t{port} | (uint64_t{cls} << 32));
}

void Simulator::send_pfc_frame(uint32_t node, uint32_t port, uint8_t cls, uint32_t quanta) {
  PfcTxStats& st = pfc_tx_[pfc_index(node, port, cls)].stats;
  ++(quanta != 0 ? st.pause_frames : st.xon_frames);
  // The 64-byte frame's own serialisation is not modelled: it arrives one delay later.
  const PortLink& l = topo_.node(node).ports[port];
  const uint64_t arg =
      uint64_t{l.peer_port} | (uint64_t{cls} << 32) | (uint64_t{quanta & 0xFFFFu} << 40);
  q_.push(now_ + Nanos(static_cast<int64_t>(l.delay_ns)), kPfc, l.peer, arg);
}

void Simulator::pfc_frame_arrived(uint32_t node, uint32_t port, uint8_t cls, uint32_t quanta) {
  PfcRx& r = pfc_rx_[pfc_index(node, port, cls)];
  if (topo_.node(node).host && quanta != 0) ++hosts_[node].stats.pause_frames_received;
  const bool paused = r.expires != kNever;
  if (quanta == 0) {  // XON
    r.expires = kNever;
    if (paused) set_paused(node, port, cls, false);
    return;
  }
  // A PAUSE, first or refresh: held for its time from now; an earlier expiry event is stale.
  r.expires = now_ + quanta_time(node, port, quanta);
  q_.push(r.expires, kPfcExpire, node, uint64_t{port} | (uint64_t{cls} << 32));
  if (!paused) set_paused(node, port, cls, true);
}

void Simulator::pfc_expired(uint32_t node, uint32_t port, uint8_t cls, TimePoint at) {
  PfcRx& r = pfc_rx_[pfc_index(node, port, cls)];
  if (r.expires != at) return;  // refreshed, resumed, or paused again since
  r.expires = kNever;
  set_paused(node, port, cls, false);
}

void Simulator::set_paused(uint32_t node, uint32_t port, uint8_t cls, bool pause) {
  if (topo_.node(node).host) {
    host_pfc(node, cls, pause);
    return;
  }
  const auto s = static_cast<uint32_t>(switch_of_node_[node]);
  switches_[s].model->set_downstream_paused(port, cls, pause, now_);
  if (!pause) switch_kick(s, port);
}

}  // namespace uroce::sim
