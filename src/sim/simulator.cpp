// The event loop, the links and the periodic samples.
#include "sim/simulator.hpp"

#include "fault/corrupt.hpp"

namespace uroce::sim {

const transport::Counters& Simulator::host_counters(uint32_t h) const {
  return hosts_[h].engine->counters();
}

const transport::Counters* Simulator::qp_counters(uint32_t host, uint32_t qpn) const {
  return hosts_[host].engine->qp_counters(qpn);
}

bool Simulator::finished() const {
  return finite_flows_ == flows_.size() && finished_flows_ == finite_flows_;
}

void Simulator::link_send(uint32_t node, uint32_t port, uint32_t pkt, TimePoint tx_end) {
  const PortLink& l = topo_.node(node).ports[port];
  ChannelStats& ch = channels_[l.channel];
  ++ch.sent;
  ++hops_;
  SimPacket& p = pool_[pkt];
  if (fault::ImpairModel* m = impair_[l.channel].get()) {
    const fault::Verdict v = m->decide(now_, p.meta.tos & 3u);
    if (v.drop) {
      ++ch.lost;
      pool_.release(pkt);
      return;
    }
    if (v.corrupt &&
        fault::corrupt_packet(p.meta.ip, std::span<uint8_t>(p.data, p.len), v.corrupt_bit)) {
      ++ch.corrupted;
      p.corrupted = true;
    }
    if (v.ce) p.meta.tos |= 3u;
  }
  p.channel = l.channel;
  ++on_links_;
  q_.push(tx_end + Nanos(static_cast<int64_t>(l.delay_ns)), kArrive, l.peer,
          pkt | (uint64_t{l.peer_port} << 32));
}

void Simulator::dispatch(const Event& e) {
  switch (e.kind) {
    case kArrive: {
      const auto pkt = static_cast<uint32_t>(e.b);
      --on_links_;
      ++channels_[pool_[pkt].channel].delivered;
      if (topo_.node(e.a).host) {
        host_arrive(e.a, pkt);
      } else {
        switch_arrive(static_cast<uint32_t>(switch_of_node_[e.a]), static_cast<uint32_t>(e.b >> 32),
                      pkt);
      }
      break;
    }
    case kHostTxDone:
      hosts_[e.a].tx_busy = false;
      host_serviced(e.a);
      break;
    case kHostTimer:
      host_timer(e.a, e.at);
      break;
    case kSwitchTx:
      switch_tx(e.a, static_cast<uint32_t>(e.b));
      break;
    case kPfc:
      pfc_frame_arrived(e.a, static_cast<uint32_t>(e.b & 0xFFFFFFFFu),
                        static_cast<uint8_t>((e.b >> 32) & 0xFF),
                        static_cast<uint32_t>((e.b >> 40) & 0xFFFF));
      break;
    case kPfcRefresh:
      pfc_refresh(e.a, static_cast<uint32_t>(e.b & 0xFFFFFFFFu),
                  static_cast<uint8_t>((e.b >> 32) & 0xFF), e.at);
      break;
    case kPfcExpire:
      pfc_expired(e.a, static_cast<uint32_t>(e.b & 0xFFFFFFFFu),
                  static_cast<uint8_t>((e.b >> 32) & 0xFF), e.at);
      break;
    case kSample:
      sample();
      if (now_ + Nanos(static_cast<int64_t>(sc_.sample_ns)) <=
          Nanos(static_cast<int64_t>(sc_.duration_ns))) {
        q_.push(now_ + Nanos(static_cast<int64_t>(sc_.sample_ns)), kSample);
      }
      break;
    case kFlowStart:
      flow_start(e.a);
      break;
    case kStorm:
      storm(e.a, e.b != 0);
      break;
    default:
      break;
  }
}

void Simulator::storm(uint32_t i, bool start) {
  const StormSpec& s = sc_.storms[i];
  const auto h = static_cast<uint32_t>(topo_.host_by_name(s.host));
  if (start) {
    pfc_pause(h, 0, s.priority, s.refresh);
  } else {
    pfc_resume(h, 0, s.priority);
  }
}

void Simulator::sample() {
  const auto t = static_cast<uint64_t>(now_.count());
  for (uint32_t s = 0; s < switches_.size(); ++s) {
    const SwitchNode& m = *switches_[s].model;
    for (uint32_t p = 0; p < m.ports(); ++p) {
      for (uint32_t pr = 0; pr < m.priorities(); ++pr) {
        queue_samples_.push_back(
            {t, s, p, static_cast<uint8_t>(pr), m.depth_bytes(p, static_cast<uint8_t>(pr))});
      }
    }
  }
  const double interval = static_cast<double>(sc_.sample_ns);
  const uint64_t prev = t >= sc_.sample_ns ? t - sc_.sample_ns : 0;
  for (FlowState& f : flows_) {
    if (!f.started || (f.completed && static_cast<uint64_t>(f.end.count()) <= prev)) continue;
    if (sc_.transport.cc == transport::CcAlgorithm::kDcqcn && !f.completed && !f.failed) {
      transport::QpAttr attr;
      transport::QpInitAttr init;
      if (hosts_[f.req_host].engine->query_qp(f.req_qpn, attr, init).is_ok()) {
        rate_samples_.push_back({t, f.spec.id, static_cast<double>(attr.cc.rate_bps) / 1e9});
      }
    }
    const bool read = f.spec.op == FlowOp::kRead;
    const transport::Counters* c =
        read ? qp_counters(f.req_host, f.req_qpn) : qp_counters(f.resp_host, f.resp_qpn);
    const uint64_t bytes = c != nullptr ? c->get(transport::Counter::kBytesRcvd) : 0;
    goodput_samples_.push_back(
        {t, f.spec.id, static_cast<double>(bytes - f.goodput_mark) * 8.0 / interval});
    f.goodput_mark = bytes;
  }
}

void Simulator::run() {
  for (const FlowState& f : flows_) {
    q_.push(Nanos(static_cast<int64_t>(f.spec.start_ns)), kFlowStart, f.spec.id);
  }
  for (uint32_t i = 0; i < sc_.storms.size(); ++i) {
    q_.push(Nanos(static_cast<int64_t>(sc_.storms[i].start_ns)), kStorm, i, 1);
    if (sc_.storms[i].end_ns > sc_.storms[i].start_ns) {
      q_.push(Nanos(static_cast<int64_t>(sc_.storms[i].end_ns)), kStorm, i, 0);
    }
  }
  q_.push(Nanos(static_cast<int64_t>(sc_.sample_ns)), kSample);
  const TimePoint limit = Nanos(static_cast<int64_t>(sc_.duration_ns));
  while (!q_.empty() && !stop_) {
    if (q_.top().at > limit) {
      now_ = limit;
      break;
    }
    const Event e = q_.pop();
    now_ = e.at;
    dispatch(e);
    ++events_;
    if (progress_ != nullptr && (events_ & 0xFFFF) == 0) progress_(progress_ctx_, now_, events_);
  }
  // A host still paused at the end: its pause so far counts (as the switches' counters do).
  for (Host& h : hosts_) {
    if (h.paused_mask != 0) {
      h.stats.paused_ns += static_cast<uint64_t>((now_ - h.paused_since[0]).count());
      h.paused_since[0] = now_;
    }
  }
}

}  // namespace uroce::sim
