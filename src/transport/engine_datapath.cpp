// Engine data path: posting work requests, receiving packets (parse, ICRC, keys, dispatch
// by destination QPN to responder / completer / UD receive; CNPs to the reaction point, CE
// marks to the notification point), firing timers by kind and filling TX slots round-robin
// over the QPs that have something to send, each requester held to its pacing time.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/engine_impl.hpp"
#include "transport/packet_out.hpp"
#include "transport/ud.hpp"
#include "transport/wr_kind.hpp"
#include "wire/icrc.hpp"

namespace uroce::transport {
namespace {

constexpr uint64_t kMaxMessage = 1ull << 31;  // IBA: 2^31 bytes
constexpr uint32_t kMulticastQpn = 0xFFFFFF;

bool opcode_allowed(QpType type, WrOpcode op) {
  switch (type) {
    case QpType::kRc:  // the only type with READ, atomics, FLUSH and ATOMIC WRITE (IBA 1.5)
      return is_send_op(op) || is_write_op(op) || is_rd_atomic_op(op) || is_local_op(op);
    case QpType::kUc:  // windows, like RDMA WRITE, serve RC and UC (rxe_opcode.c)
      return op == WrOpcode::kSend || op == WrOpcode::kSendWithImm || is_write_op(op) ||
             is_local_op(op);
    case QpType::kUd:
    case QpType::kGsi:
      return op == WrOpcode::kSend || op == WrOpcode::kSendWithImm;
  }
  return false;
}

Counter drop_counter(wire::ParseError e) {
  switch (e) {
    case wire::ParseError::kTruncated:
      return Counter::kDropTruncated;
    case wire::ParseError::kUnknownOpcode:
      return Counter::kDropUnknownOpcode;
    case wire::ParseError::kOpcodeNotForTransport:
      return Counter::kDropOpcodeNotForTransport;
    case wire::ParseError::kBadTver:
      return Counter::kDropBadTver;
    case wire::ParseError::kBadPadCnt:
      return Counter::kDropBadPadcnt;
    case wire::ParseError::kLengthMismatch:
      return Counter::kDropLengthMismatch;
    case wire::ParseError::kBadIcrc:
    case wire::ParseError::kOk:
      break;
  }
  return Counter::kIcrcErrors;
}

bool transport_matches(QpType type, wire::Transport t) {
  switch (type) {
    case QpType::kRc:
      return t == wire::Transport::kRc;
    case QpType::kUc:
      return t == wire::Transport::kUc;
    case QpType::kUd:
    case QpType::kGsi:
      return t == wire::Transport::kUd;
  }
  return false;
}

// What a slot is reset to before a post fills it. Assigned from here rather than from a
// temporary `SendWqe{}`, which GCC zeroes on the stack with `rep stos` and then reads back
// with wider loads, a store-forwarding stall on every post.
const SendWqe kFreshWqe{};

bool all_zero(const std::array<uint8_t, 16>& a) {
  return std::all_of(a.begin(), a.end(), [](uint8_t b) { return b == 0; });
}

}  // namespace

Status EngineImpl::post_send(TimePoint now, uint32_t qpn, const SendWr& wr) {
  const Status st = submit_send(qpn, wr, nullptr);
  // The single-threaded API takes the WQE at once: a WR posted in ERR has its flush
  // completion queued when the call returns.
  take_posts(now);
  return st;
}

Status EngineImpl::submit_send(uint32_t qpn, const SendWr& wr, bool* was_idle) {
  // What this reads of the QP besides its send queue (type, caps, sq_sig_all) is set at
  // creation and never changes; the QP's state reaches producers as SendQueue::accepting.
  Qp* qp = qp_by_qpn(qpn);
  if (qp == nullptr) return Status(EINVAL, "post_send: no such QP");
  if (!opcode_allowed(qp->type, wr.opcode)) {
    return Status(EINVAL, "post_send: opcode not supported on this QP type");
  }
  if (wr.sg_list.size() > qp->cap.max_send_sge)
    return Status(EINVAL, "post_send: more SGEs than max_send_sge");
  uint64_t length = 0;
  for (const Sge& s : wr.sg_list) length += s.length;
  const bool is_inline = (wr.send_flags & kSendInline) != 0;
  if (is_inline) {
    if (is_rd_atomic_op(wr.opcode))
      return Status(EINVAL, "post_send: READ and atomics cannot be inline");
    if (length > qp->cap.max_inline_data)
      return Status(EINVAL, "post_send: inline data above max_inline_data");
  }
  if (length > kMaxMessage) return Status(EINVAL, "post_send: message longer than 2^31 bytes");
  if (is_local_op(wr.opcode) && !wr.sg_list.empty()) {
    return Status(EINVAL, "post_send: LOCAL_INV and BIND_MW take no SGEs");
  }
  if (is_flush_or_atomic_write(wr.opcode)) {
    if (!wr.sg_list.empty()) {
      return Status(EINVAL,
                    "post_send: FLUSH and ATOMIC_WRITE take no SGEs (use flush / atomic_write)");
    }
    if (wr.opcode == WrOpcode::kFlush) {
      if (wr.flush.type == 0 || (wr.flush.type & ~(kFlushGlobal | kFlushPersistent)) != 0) {
        return Status(EINVAL, "post_send: flush.type must be kFlushGlobal and/or kFlushPersistent");
      }
      if (wr.flush.level != kFlushRange && wr.flush.level != kFlushMr) {
        return Status(EINVAL, "post_send: flush.level must be kFlushRange or kFlushMr");
      }
    }
  }
  auto lock = qp->sq.lock_posts();
  if (!qp->sq.accepting()) return Status(EINVAL, "post_send: QP is not in RTS (or SQD/SQE/ERR)");
  if (qp->sq.post_full()) return Status(ENOMEM, "post_send: send queue full");
  // A UD or UC WR completes as it leaves, so its QP is idle again right after each post: a
  // program streaming SENDs would ring a doorbell of its own for every one (a system call
  // per message). For these a WR counts as idle only if the program polled a CQ since the
  // QP's last post; WRs posted back to back without a poll between wait for the next one.
  bool polled_since_last_post = true;
  if (!qp->is_rc()) {
    const uint64_t polls = cq_polls_.load(std::memory_order_relaxed);
    polled_since_last_post = polls != qp->cq_polls_at_last_post;
    qp->cq_polls_at_last_post = polls;
  }
  if (was_idle != nullptr) *was_idle = qp->sq.post_empty() && polled_since_last_post;

  const uint64_t seq = qp->sq.post_seq();
  SendWqe& w = qp->sq.at(seq);
  w = kFreshWqe;
  w.wr_id = wr.wr_id;
  w.opcode = wr.opcode;
  w.send_flags = wr.send_flags;
  w.signaled = qp->sq_sig_all || (wr.send_flags & kSendSignaled) != 0;
  w.is_inline = is_inline;
  w.length = static_cast<uint32_t>(length);
  w.imm_data = wr.imm_data;
  w.invalidate_rkey = wr.invalidate_rkey;
  if (is_atomic_op(wr.opcode)) {
    w.remote_addr = wr.atomic.remote_addr;
    w.rkey = wr.atomic.rkey;
    w.compare_add = wr.atomic.compare_add;
    w.swap = wr.atomic.swap;
  } else if (wr.opcode == WrOpcode::kFlush) {
    w.remote_addr = wr.flush.remote_addr;
    w.rkey = wr.flush.rkey;
    w.length = wr.flush.level == kFlushMr ? 0 : wr.flush.length;
    w.flush_type = wr.flush.type;
    w.flush_level = wr.flush.level;
  } else if (wr.opcode == WrOpcode::kBindMw) {
    w.bind = wr.bind_mw;
  } else if (wr.opcode == WrOpcode::kAtomicWrite) {
    w.remote_addr = wr.rdma.remote_addr;
    w.rkey = wr.rdma.rkey;
    w.length = 8;
    std::memcpy(&w.compare_add, wr.atomic_write.data(), sizeof(w.compare_add));
  } else {
    w.remote_addr = wr.rdma.remote_addr;
    w.rkey = wr.rdma.rkey;
  }
  if (qp->is_ud()) {
    w.ah = wr.ud.ah;
    w.remote_qpn = wr.ud.remote_qpn & Psn::kMask;
    w.remote_qkey = wr.ud.remote_qkey;
  }
  if (is_inline) {
    // ibv_post_send(3): inline data is copied now; the buffers may be reused at once.
    std::span<uint8_t> dst = qp->sq.inline_storage(seq);
    size_t off = 0;
    for (const Sge& s : wr.sg_list) {
      if (s.length != 0)
        std::memcpy(dst.data() + off, reinterpret_cast<const void*>(s.addr), s.length);
      off += s.length;
    }
  } else {
    std::span<Sge> dst = qp->sq.sge_storage(seq);
    std::copy(wr.sg_list.begin(), wr.sg_list.end(), dst.begin());
    w.num_sge = static_cast<uint32_t>(wr.sg_list.size());
  }
  qp->sq.publish();
  lock.unlock();
  // Ring the engine's doorbell: link the QP into its list unless it is there already. The
  // flag is set by an exchange after the publish, and take_posts clears it by an exchange
  // before it reads what was published. Every write of the flag is such an exchange, so the
  // second of the two reads the first (or one after it): if the engine's comes second it
  // sees this WQE; if this one does, it finds the flag clear and links the QP in again. A
  // WQE is never left untaken.
  if (!qp->posts_queued.exchange(true, std::memory_order_acq_rel)) {
    Qp* head = posted_qps_.load(std::memory_order_relaxed);
    do {
      qp->posts_next = head;
    } while (!posted_qps_.compare_exchange_weak(head, qp, std::memory_order_seq_cst,
                                                std::memory_order_relaxed));
  }
  return Status::ok();
}

void EngineImpl::take_posts(TimePoint now) {
  // Read first: most calls find no new WQE, and an exchange is a locked instruction. A QP
  // linked in just after this read is taken by the next call; has_tx() shows it meanwhile.
  if (posted_qps_.load(std::memory_order_acquire) == nullptr) return;
  Qp* list = posted_qps_.exchange(nullptr, std::memory_order_seq_cst);
  if (list == nullptr) return;
  now_ = now;
  // Newest first: turn it round, so QPs are scheduled in the order they were first posted to.
  Qp* fifo = nullptr;
  while (list != nullptr) {
    Qp* next = list->posts_next;
    list->posts_next = fifo;
    fifo = list;
    list = next;
  }
  while (fifo != nullptr) {
    Qp& qp = *fifo;
    fifo = qp.posts_next;  // read before the flag clears: a producer may relink the QP then
    (void)qp.posts_queued.exchange(false, std::memory_order_acq_rel);
    for (uint64_t n = qp.sq.published(); n > 0; --n) {
      qp.sq.take();
      // IBA 10.3.1: WRs posted in the error state complete with a flush error. Those taken
      // before the QP entered ERR were flushed then, so this one is at the head.
      if (qp.state == QpState::kErr) complete_send_head(qp, WcStatus::kWrFlushErr);
    }
    // A paced QP is not ready before its next send time: has_tx() stays false until then.
    if (qp.state != QpState::kErr) schedule_tx(qp, now);
  }
}

Status EngineImpl::submit_recv(uint32_t qpn, const RecvWr& wr, bool* to_engine) {
  // What this reads of the QP besides its receive queue (its SRQ) is set at creation; the
  // QP's state reaches producers as the queue's mode.
  Qp* qp = qp_by_qpn(qpn);
  if (qp == nullptr) return Status(EINVAL, "post_recv: no such QP");
  if (qp->srq) return Status(EINVAL, "post_recv: the QP uses an SRQ; post to the SRQ");
  return qp->rq.push(wr, to_engine);
}

Status EngineImpl::post_recv(uint32_t qpn, const RecvWr& wr) {
  Qp* qp = qp_by_qpn(qpn);
  if (qp == nullptr) return Status(EINVAL, "post_recv: no such QP");
  if (qp->srq) return Status(EINVAL, "post_recv: the QP uses an SRQ; post to the SRQ");
  if (qp->state != QpState::kErr) return qp->rq.push(wr);
  // The queue of a QP in ERR is empty (entering ERR flushed it): the WR is flushed at once.
  if (wr.sg_list.size() > qp->rq.max_sge()) {
    return Status(EINVAL, "post_recv: more SGEs than max_recv_sge");
  }
  Wc wc;
  wc.wr_id = wr.wr_id;
  wc.status = WcStatus::kWrFlushErr;
  wc.opcode = WcOpcode::kRecv;
  wc.qp_num = qp->qpn;
  complete_recv(*qp, wc, false);
  return Status::ok();
}

void EngineImpl::on_packet(TimePoint now, const PacketMeta& meta, std::span<const uint8_t> roce) {
  now_ = now;
  // A copy of the zero headers, not `rep stos` zeroing (wire::kNoHeaders says why).
  wire::ParsedPacket pkt{.hdr = wire::kNoHeaders};
  const wire::ParseError pe = wire::parse_packet(roce, pkt);
  if (pe != wire::ParseError::kOk) {
    count(drop_counter(pe));
    return;
  }
  // IBA A17.3.3: the ICRC first; a corrupted packet tells us nothing else.
  if (meta.ip_id_known) {
    if (wire::icrc_mismatch(meta.ip, roce) != 0) {
      count(Counter::kIcrcErrors);
      return;
    }
  } else {
    const wire::IcrcResult r = wire::verify_icrc_udp(meta.ip, roce);
    if (r == wire::IcrcResult::kBad) {
      count(Counter::kIcrcErrors);
      return;
    }
    if (r == wire::IcrcResult::kOkModuloIpv4Id) count(Counter::kIcrcOkModuloIpId);
  }
  count(Counter::kRcvdPkts);
  count(Counter::kBytesRcvd, roce.size());
  if ((meta.tos & 3) == 3) count(Counter::kNpEcnMarkedRocePackets);

  const wire::Bth& bth = pkt.hdr.bth;
  Qp* qp = qp_by_qpn(bth.dqpn);
  if (bth.opcode == wire::kCnpOpcode) {
    // RoCE v2 A17.9.3: a CNP names the QP whose traffic congested the path. mlx5 counts
    // one a QP without congestion control cannot use as rp_cnp_ignored.
    if (qp == nullptr) {
      count(Counter::kRpCnpIgnored);
    } else if (qp->cc == nullptr) {
      count(*qp, Counter::kRpCnpIgnored);
    } else {
      count(*qp, Counter::kRpCnpHandled);
      qp->cc->on_cnp(now);
      sync_cc_timer(*qp);
    }
    return;
  }
  // QPN 0xFFFFFF names a multicast group (IBA 9.3.2, rxe_rcv_mcast_pkt); uroce joins none,
  // so such a packet is dropped under its own name rather than as an unknown QPN.
  if (bth.dqpn == kMulticastQpn) {
    count(Counter::kDropMulticastQpn);
    return;
  }
  // rxe check_keys: P_Key 0xFFFF (the membership bit aside) is the only partition.
  if ((bth.pkey & 0x7FFF) != 0x7FFF) {
    count(Counter::kDropBadPkey);
    return;
  }
  if (qp == nullptr) {
    count(Counter::kDropBadQpn);
    return;
  }
  if (!transport_matches(qp->type, wire::transport_of(bth.opcode))) {
    count(*qp, Counter::kDropBadQpType);
    return;
  }
  // The responder runs from RTR on, the completer in RTS/SQD; RESET, INIT and ERR drop.
  if (qp->state == QpState::kReset || qp->state == QpState::kInit || qp->state == QpState::kErr) {
    count(*qp, Counter::kDropBadQpState);
    return;
  }
  if (!qp->is_ud()) {
    // rxe check_addr: RC/UC packets must come from the peer of the address vector.
    const AhAttr& av = qp->attr.ah_attr;
    if (meta.ip.src != av.dgid || (!all_zero(meta.ip.dst) && meta.ip.dst != av.sgid)) {
      count(*qp, Counter::kDropBadAddress);
      return;
    }
  }
  qp->counters.add(Counter::kRcvdPkts);
  qp->counters.add(Counter::kBytesRcvd, roce.size());
  if ((meta.tos & 3) == 3) {
    qp->counters.add(Counter::kNpEcnMarkedRocePackets);
    if (qp->cc != nullptr && qp->cc->uses_ecn()) on_ce(*qp, now);
  }
  rx_meta = &meta;
  rx_len = roce.size();
  dispatch(now, *qp, pkt);
  rx_meta = nullptr;
  schedule_tx(*qp);
}

void EngineImpl::dispatch(TimePoint now, Qp& qp, const wire::ParsedPacket& pkt) {
  if (qp.is_ud()) {
    ud_receive(*this, qp, pkt);
  } else if ((pkt.info->flags & wire::kIsResponse) != 0) {
    if (qp.is_rc()) qp.comp.on_response(*this, qp, now, pkt);
  } else {
    qp.resp.on_request(*this, qp, pkt);
  }
}

void EngineImpl::on_timer(TimePoint now) {
  now_ = now;
  while (!timers_.empty() && timers_.top_deadline() <= now) {
    const uint32_t slot = timers_.top_slot();
    timers_.clear(slot);
    Qp* qp = qps_[slot / kTimerCount].get();
    if (qp == nullptr) continue;
    switch (static_cast<TimerKind>(slot % kTimerCount)) {
      case TimerKind::kRetransmit:
        qp->comp.on_retransmit_timeout(*this, *qp, now);
        break;
      case TimerKind::kRnr:
        qp->comp.on_rnr_timer(*this, *qp, now);
        break;
      case TimerKind::kPacing:
        break;  // the "not before" time passed: schedule_tx below makes the QP ready
      case TimerKind::kCc:
        if (qp->cc != nullptr) {
          qp->cc->on_timer(now);
          sync_cc_timer(*qp);
        }
        break;
      case TimerKind::kCnpGap:
        on_cnp_gap_end(*qp, now);
        break;
      case TimerKind::kCount:
        break;
    }
    schedule_tx(*qp);
  }
}

void EngineImpl::on_ce(Qp& qp, TimePoint now) {
  // DCQCN NP (paper §3; mlx5 min_time_between_cnps): a CNP at once when none went out in
  // the last interval, then at most one per interval, and only if a packet in it was marked.
  if (qp.is_ud()) return;  // a CNP needs the connected peer QP
  if (timer_armed(qp, TimerKind::kCnpGap)) {
    qp.ce_in_gap = true;
    return;
  }
  qp.cnp_due = true;
  const Nanos gap = std::chrono::microseconds(config_.cc.dcqcn.min_time_between_cnps);
  if (gap > Nanos(0)) arm_timer(qp, TimerKind::kCnpGap, now + gap);
}

void EngineImpl::on_cnp_gap_end(Qp& qp, TimePoint now) {
  if (!qp.ce_in_gap) return;
  qp.ce_in_gap = false;
  qp.cnp_due = true;
  arm_timer(qp, TimerKind::kCnpGap,
            now + std::chrono::microseconds(config_.cc.dcqcn.min_time_between_cnps));
}

FillResult EngineImpl::fill_cnp(Qp& qp, TxSlot& slot) {
  // RoCE v2 CNP (docs/wire-facts.md "CNP"): BTH opcode 0x81 with BECN set, P_Key 0xFFFF,
  // DestQP = the peer QP whose traffic was marked, PSN 0, 16 reserved zero bytes, ICRC.
  wire::Headers h = wire::kNoHeaders;
  h.bth.opcode = wire::kCnpOpcode;
  h.bth.becn = true;
  h.bth.pkey = wire::kDefaultPkey;
  h.bth.dqpn = qp.attr.dest_qp_num;
  size_t size = 0;
  (void)begin_packet(slot, h, 0, &size);
  if (size == 0) return FillResult::kNoRoom;
  finish_packet(slot, size, qp.attr.ah_attr, qp.sport);
  // The NP's own DSCP (mlx5 cnp_dscp) and ECT(0), so an ECN queue marks rather than drops
  // it; the ICRC masks the TOS byte, so this needs no new ICRC.
  slot.meta.tos = static_cast<uint8_t>((config_.cc.dcqcn.cnp_dscp & 0x3F) << 2 | 0x2);
  qp.cnp_due = false;
  count(qp, Counter::kNpCnpSent);
  count(qp, Counter::kSentPkts);
  count(qp, Counter::kBytesSent, size);
  return FillResult::kProduced;
}

FillResult EngineImpl::fill_one(TimePoint now, Qp& qp, TxSlot& slot) {
  // A CNP first (DCQCN sends them at high priority), then responses: they unblock the
  // peer's requester.
  if (qp.cnp_due) return fill_cnp(qp, slot);
  FillResult r = FillResult::kNothing;
  bool request = false;
  if (qp.resp.has_output()) r = qp.resp.fill(*this, qp, slot);
  if (r == FillResult::kNothing) {
    if (pacing_holds(qp, now)) return FillResult::kNothing;
    r = qp.req.fill(*this, qp, now, slot);
    request = true;
  }
  if (r != FillResult::kProduced || qp.cc == nullptr) return r;
  // ECN-capable transport (RFC 3168 §5): ECT(0) unless the traffic class chose ECN bits.
  if (qp.cc->uses_ecn() && (slot.meta.tos & 3) == 0) slot.meta.tos |= 0x2;
  if (request) {
    const uint32_t ip_header = slot.meta.ip.ipv6 ? 40 : 20;
    qp.cc->on_sent(now, static_cast<uint32_t>(slot.len) + ip_header + 8);
    sync_cc_timer(qp);
  }
  return r;
}

size_t EngineImpl::poll_tx(TimePoint now, std::span<TxSlot> slots) {
  take_posts(now);
  now_ = now;
  size_t n = 0;
  while (n < slots.size() && tx_count_ > 0) {
    const uint32_t idx = tx_ring_[tx_head_];
    tx_head_ = (tx_head_ + 1) % static_cast<uint32_t>(tx_ring_.size());
    --tx_count_;
    Qp* qp = qps_[idx].get();
    if (qp == nullptr) continue;
    qp->in_tx_list = false;
    // Round robin with a quantum: up to kTxTurnPackets packets per turn, so that a QP's
    // packets sit next to each other in the burst and the driver sends them with one system
    // call as UDP GSO messages (one packet per turn interleaved the QPs and left GSO nothing
    // to merge). A QP that produced nothing leaves the list; the event that unblocks it (an
    // ACK, a timer, a post, a state change) schedules it again.
    FillResult r = FillResult::kNothing;
    for (size_t k = 0; k < kTxTurnPackets && n < slots.size(); ++k) {
      r = fill_one(now, *qp, slots[n]);
      if (r != FillResult::kProduced) break;
      ++n;
    }
    if (r == FillResult::kNoRoom) {
      tx_list_push(*qp);
      break;
    }
    if (r == FillResult::kProduced) schedule_tx(*qp);
  }
  return n;
}

}  // namespace uroce::transport
