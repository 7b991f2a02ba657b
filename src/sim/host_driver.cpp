// The hosts of the simulation: what a NIC driver does around the sans-IO engine. Received
// packets go to on_packet; timers run at next_deadline(); the NIC pulls poll_tx only while
// its link is free, one packet at a time, and holds a packet whose priority the switch has
// paused (PFC) while packets of other priorities go on. Flows post WRs as earlier ones
// complete, keeping `window` WRs outstanding.
#include <algorithm>

#include "sim/simulator.hpp"

namespace uroce::sim {

namespace {
uint32_t host_of_gid(const std::array<uint8_t, 16>& a) {
  return ((uint32_t{a[13]} << 16) | (uint32_t{a[14]} << 8) | a[15]) - 1;
}

constexpr uint32_t kPsnMask = 0xFFFFFF;
// BTH opcodes (RC) and AETH syndromes the requester-side delivery count reads.
constexpr uint8_t kOpReadRespFirst = 0x0D, kOpReadRespOnly = 0x10, kOpAck = 0x11;
}  // namespace

// What the data receiver has taken in order, seen at the requester (flows.csv's goodput of a
// flow still running at the end): an ACK acknowledges every PSN up to its own (a NAK: up to
// the one before), a READ response counts when it is the next PSN (go-back-N discards the
// others; selective repeat's placed ones are counted once the hole fills). Read from the
// packet's BTH and AETH before the engine sees it; a corrupted packet is not counted (the
// engine drops it).
void Simulator::count_delivery(uint32_t h, const SimPacket& p) {
  if (p.corrupted || p.len < 16) return;
  const uint8_t op = p.data[0];
  if (op != kOpAck && (op < kOpReadRespFirst || op > kOpReadRespOnly)) return;
  const Host& H = hosts_[h];
  const uint32_t qpn = (uint32_t{p.data[5]} << 16) | (uint32_t{p.data[6]} << 8) | p.data[7];
  const uint32_t k = qpn - H.engine->config().qpn_base;
  if (k >= H.flow_of_qp.size() || H.flow_of_qp[k] == UINT32_MAX) return;
  FlowState& f = flows_[H.flow_of_qp[k]];
  if (f.req_host != h || f.req_qpn != qpn) return;
  const uint32_t psn = (uint32_t{p.data[9]} << 16) | (uint32_t{p.data[10]} << 8) | p.data[11];
  uint32_t through = psn;  // the last PSN received in order
  if (op == kOpAck) {
    if ((p.data[12] >> 5) != 0) through = (psn - 1) & kPsnMask;  // RNR NAK, NAK
  } else if (psn != f.next_psn) {
    return;
  }
  const uint32_t ahead = (through + 1 - f.next_psn) & kPsnMask;
  if (ahead == 0 || ahead >= (1u << 23)) return;  // old or duplicate
  f.acked_packets += ahead;
  f.next_psn = (through + 1) & kPsnMask;
}

uint64_t Simulator::delivered_bytes(const FlowState& f) const {
  if (f.completed) return f.spec.bytes;
  // Messages are message_bytes each (the last of a finite flow may be shorter), each in
  // ceil(message_bytes / MTU) packets.
  const uint64_t msg = f.spec.message_bytes;
  const uint64_t mtu = transport::mtu_bytes(sc_.transport.mtu);
  const uint64_t per_msg = (msg + mtu - 1) / mtu;
  const uint64_t whole = f.acked_packets / per_msg;
  uint64_t bytes = whole * msg + std::min(f.acked_packets % per_msg * mtu, msg);
  if (f.spec.bytes != 0) bytes = std::min(bytes, f.spec.bytes);
  return std::max(bytes, f.done);
}

void Simulator::host_arrive(uint32_t h, uint32_t pkt) {
  Host& H = hosts_[h];
  SimPacket& p = pool_[pkt];
  ++H.stats.rx_packets;
  H.stats.rx_bytes += p.wire_bytes;
  count_delivery(h, p);
  H.engine->on_packet(now_, p.meta, std::span<const uint8_t>(p.data, p.len));
  pool_.release(pkt);
  host_serviced(h);
}

void Simulator::host_serviced(uint32_t h) {
  poll_completions(h);
  host_try_tx(h);
  Host& H = hosts_[h];
  const TimePoint d = H.engine->next_deadline();
  if (d == kNever) return;
  const TimePoint t = std::max(d, now_);
  if (t < H.timer_at) {
    H.timer_at = t;
    q_.push(t, kHostTimer, h);
  }
}

void Simulator::host_timer(uint32_t h, TimePoint at) {
  Host& H = hosts_[h];
  if (at != H.timer_at) return;  // superseded by an earlier deadline
  H.timer_at = kNever;
  if (H.engine->next_deadline() <= now_) H.engine->on_timer(now_);
  host_serviced(h);
}

void Simulator::host_try_tx(uint32_t h) {
  Host& H = hosts_[h];
  if (H.tx_busy) return;
  if (H.held_count != 0) {
    for (int p = kPriorities - 1; p >= 0; --p) {
      auto& held = H.held[static_cast<size_t>(p)];
      if (((H.paused_mask >> p) & 1u) == 0 && !held.empty()) {
        const uint32_t pkt = held.pop();
        --H.held_count;
        H.stats.held = H.held_count;
        host_send(h, pkt);
        return;
      }
    }
  }
  // Poll only while some priority this host can send is not paused: when all are, a real
  // NIC schedules nothing (and the engine must not count packets as sent that wait here).
  while (H.held_count < kMaxHeld && (H.tx_prio_mask & ~H.paused_mask) != 0 && H.engine->has_tx()) {
    const uint32_t pkt = pool_.alloc();
    SimPacket& p = pool_[pkt];
    transport::TxSlot slot;
    slot.buf = pool_.buffer(pkt);
    if (H.engine->poll_tx(now_, std::span<transport::TxSlot>(&slot, 1)) == 0) {
      pool_.release(pkt);
      break;
    }
    p.len = static_cast<uint32_t>(slot.len);
    p.meta = slot.meta;
    p.wire_bytes = wire_bytes(p.len);
    p.src_host = h;
    p.dst_host = host_of_gid(p.meta.ip.dst);
    p.priority = static_cast<uint8_t>(p.meta.tos >> 5);
    p.corrupted = false;
    if (((H.paused_mask >> p.priority) & 1u) != 0) {
      H.held[p.priority].push(pkt);
      ++H.held_count;
      H.stats.held = H.held_count;
      continue;
    }
    host_send(h, pkt);
    return;
  }
}

void Simulator::host_send(uint32_t h, uint32_t pkt) {
  Host& H = hosts_[h];
  const SimPacket& p = pool_[pkt];
  const PortLink& l = topo_.node(h).ports[0];
  if (now_ > H.link_free) H.residual = 0;
  const uint64_t total = uint64_t{p.wire_bytes} * 8'000'000'000ull + H.residual;
  H.residual = total % l.bps;
  const TimePoint end = now_ + Nanos(static_cast<int64_t>(total / l.bps));
  H.link_free = end;
  H.tx_busy = true;
  ++H.stats.tx_packets;
  H.stats.tx_bytes += p.wire_bytes;
  q_.push(end, kHostTxDone, h);
  link_send(h, 0, pkt, end);
}

void Simulator::host_pfc(uint32_t h, uint8_t priority, bool pause) {
  Host& H = hosts_[h];
  // A pause names a traffic class; every priority mapped to it (min(p, classes - 1)) stops.
  const uint32_t classes = sc_.sw.queues.priorities;
  uint8_t bits = 0;
  for (uint32_t p = 0; p < kPriorities; ++p) {
    if (std::min(p, classes - 1) == priority) bits |= static_cast<uint8_t>(1u << p);
  }
  if (pause) {
    if ((H.paused_mask & bits) == bits) return;
    if (H.paused_mask == 0) H.paused_since[0] = now_;
    H.paused_mask |= bits;
    H.stats.paused_mask = H.paused_mask;
  } else {
    if ((H.paused_mask & bits) == 0) return;
    H.paused_mask &= static_cast<uint8_t>(~bits);
    H.stats.paused_mask = H.paused_mask;
    if (H.paused_mask == 0)
      H.stats.paused_ns += static_cast<uint64_t>((now_ - H.paused_since[0]).count());
    host_try_tx(h);
  }
}

void Simulator::flow_start(uint32_t id) {
  FlowState& f = flows_[id];
  f.started = true;
  f.start = now_;
  post_more(f);
  host_serviced(f.req_host);
}

void Simulator::post_more(FlowState& f) {
  using namespace transport;
  Host& req = hosts_[f.req_host];
  Host& resp = hosts_[f.resp_host];
  const uint64_t msg = f.spec.message_bytes;
  const uint64_t span = sc_.host_buffer_bytes - msg;
  while (!f.failed && f.outstanding < f.spec.window &&
         (f.spec.bytes == 0 || f.posted < f.spec.bytes)) {
    const auto len =
        static_cast<uint32_t>(f.spec.bytes == 0 ? msg : std::min(msg, f.spec.bytes - f.posted));
    // Offsets walk each host's one buffer; flows overlap in it (the bytes are not checked).
    const uint64_t off = (uint64_t{f.spec.id} * 4096 + f.posted) % (span + 1);
    const Sge local{req.mr.addr + off, len, req.mr.lkey};
    SendWr wr;
    wr.wr_id = f.messages;
    wr.send_flags = kSendSignaled;
    wr.sg_list = std::span<const Sge>(&local, 1);
    wr.rdma.remote_addr = resp.mr.addr + off;
    wr.rdma.rkey = resp.mr.rkey;
    switch (f.spec.op) {
      case FlowOp::kWrite:
        wr.opcode = WrOpcode::kRdmaWrite;
        break;
      case FlowOp::kRead:
        wr.opcode = WrOpcode::kRdmaRead;
        break;
      case FlowOp::kSend: {
        wr.opcode = WrOpcode::kSend;
        const Sge remote{resp.mr.addr + off, len, resp.mr.lkey};
        RecvWr rwr;
        rwr.wr_id = f.messages;
        rwr.sg_list = std::span<const Sge>(&remote, 1);
        if (!resp.engine->post_recv(f.resp_qpn, rwr).is_ok()) f.failed = true;
        break;
      }
    }
    if (f.failed || !req.engine->post_send(now_, f.req_qpn, wr).is_ok()) {
      flow_failed(f);
      break;
    }
    f.posted += len;
    ++f.outstanding;
    ++f.messages;
  }
}

// A WR failed (e.g. retries exhausted): the flow stops, never completes, and no longer keeps
// the run going.
void Simulator::flow_failed(FlowState& f) {
  f.failed = true;
  ++failed_flows_;
  if (f.spec.bytes != 0) ++finished_flows_;
  if (finished()) stop_ = true;
}

void Simulator::poll_completions(uint32_t h) {
  Host& H = hosts_[h];
  std::array<transport::Wc, 32> wcs;
  const uint32_t base = H.engine->config().qpn_base;
  int n = 0;
  while ((n = H.engine->poll_cq(H.scq, wcs)) > 0) {
    for (int i = 0; i < n; ++i) {
      const transport::Wc& wc = wcs[static_cast<size_t>(i)];
      FlowState& f = flows_[H.flow_of_qp[wc.qp_num - base]];
      if (f.failed) continue;
      --f.outstanding;
      if (wc.status != transport::WcStatus::kSuccess) {
        flow_failed(f);
        continue;
      }
      const uint64_t msg = f.spec.message_bytes;
      f.done += f.spec.bytes == 0 ? msg : std::min(msg, f.spec.bytes - f.done);
      if (f.spec.bytes != 0 && f.done == f.spec.bytes) {
        f.completed = true;
        f.end = now_;
        ++finished_flows_;
        if (finished()) stop_ = true;
      } else {
        post_more(f);
      }
    }
  }
  while (H.engine->poll_cq(H.rcq, wcs) > 0) {
  }
}

}  // namespace uroce::sim
