// The requester (IBA 9.7.x "requester side", rxe_req.c): turns send WQEs into request
// packets. Decision list for each packet, in order:
//   1. the QP sends only in RTS, or in SQD for WQEs already started; nothing during an RNR wait;
//   2. a new WQE starts only if the READ/atomic depth (max_rd_atomic) and a fence allow it,
//      after its local checks (SGE L_Keys through the memory checker, UD length);
//   3. RC keeps at most kMaxUnackedPsns PSNs unacknowledged (rxe RXE_MAX_UNACKED_PSNS);
//   4. the packet is the next segment at the path MTU with the opcode for its position
//      (First/Middle/Last/Only, IBA 9.4), a READ request asks for the rest of the message
//      and consumes one PSN per response packet (9.4.3), AckReq goes on the last packet and
//      on every 66th packet (rxe), SE on the last packet of a solicited SEND/WRITE-imm;
//   5. UC and UD WQEs complete when their last packet is sent; RC arms the retransmit timer.
// Selective repeat (Qp::sr(), only after both ends agreed; docs/congestion.md): every packet of
// a plain RDMA WRITE goes out as a WRITE Only with its own RETH (address, R_Key and length of
// that segment), so the responder can place it whatever arrived before; holes the responder's
// SACKs reveal are resent first, one PSN each, and a go-back-N rewind skips SACKed PSNs. Other
// operations keep their RoCE v2 format and are accepted in order only.
#include <algorithm>
#include <cstring>

#include "transport/engine_impl.hpp"
#include "transport/packet_out.hpp"
#include "transport/wr_kind.hpp"

namespace uroce::transport {

using wire::Op;

void Requester::reset(Psn psn, uint64_t seq) {
  psn_ = psn;
  high_psn_ = psn;
  sent_any_ = false;
  seq_ = seq;
  noack_pkts_ = 0;
  rd_atomic_ = 0;
  rnr_wait_ = false;
  probe_ = false;
  sack_.clear();
  sr_pending_ = false;
  sr_episode_ = false;
  sr_resent_ = false;
}

void Requester::sr_sack(const Qp& qp, Psn sacked) {
  // Only PSNs sent and not yet cumulatively acknowledged mean anything.
  if (sacked.before(qp.comp.psn()) || !sacked.before(high_psn_)) return;
  sack_.set(sacked);
  const Psn cum = qp.comp.psn();
  // An episode lasts until the cumulative ACK passes every hole it knew of.
  if (sr_episode_ && !cum.before(sr_limit_)) sr_episode_ = false;
  if (!sr_episode_) {
    sr_episode_ = true;
    sr_resent_ = false;
    sr_next_ = cum;
    sr_limit_ = sacked + 1;
  } else {
    if (!sacked.before(sr_limit_)) sr_limit_ = sacked + 1;
    // IRN's loss detection for resends: a PSN first sent after our last hole resend arrived,
    // yet the oldest PSN, already resent, is still missing: that resend was lost. Scan again.
    if (sr_resent_ && !sacked.before(sr_pass_high_) && sr_next_.after(cum) && !sack_.test(cum)) {
      sr_next_ = cum;
      sr_resent_ = false;
    }
  }
  sr_pending_ = true;
}

FillResult Requester::fill_hole(EngineImpl& e, Qp& qp, TimePoint now, TxSlot& slot) {
  Psn p = sr_next_.before(qp.comp.psn()) ? qp.comp.psn() : sr_next_;
  for (; p.before(sr_limit_); ++p) {
    if (sack_.test(p)) continue;
    // The WQE the hole belongs to (started WQEs keep their PSNs).
    uint64_t s = qp.sq.head();
    for (; s != qp.sq.tail(); ++s) {
      const SendWqe& w = qp.sq.at(s);
      if (w.state != WqeState::kStarted || !p.after(w.last_psn)) break;
    }
    if (s == qp.sq.tail() || qp.sq.at(s).state != WqeState::kStarted ||
        p.before(qp.sq.at(s).first_psn)) {
      break;
    }
    SendWqe& w = qp.sq.at(s);
    if (w.opcode != WrOpcode::kRdmaWrite) {
      // Not placeable out of order: go back N from the oldest unacknowledged PSN (a rewind
      // starts inside the head WQE; SACKed PSNs are still skipped).
      sr_pending_ = false;
      rewind(qp, qp.comp.psn());
      return FillResult::kNothing;
    }
    const uint64_t seq = seq_;
    const Psn psn = psn_;
    const uint32_t sent = w.pkts_sent;
    seq_ = s;
    psn_ = p;
    w.pkts_sent = static_cast<uint32_t>(Psn::distance(p, w.first_psn));
    const FillResult r = emit(e, qp, now, slot, true);
    // emit may have moved the QP to ERR (the MR went away): nothing to restore then.
    if (qp.state == QpState::kErr) return r;
    seq_ = seq;
    psn_ = psn;
    w.pkts_sent = sent;
    if (r != FillResult::kProduced) {
      sr_next_ = p;
      return r;
    }
    sr_next_ = p + 1;
    sr_resent_ = true;
    sr_pass_high_ = high_psn_;  // PSNs from here on were first sent after this resend
    e.count(qp, Counter::kSrRetransmittedPkts);
    return r;
  }
  sr_next_ = p;
  sr_pending_ = false;
  return FillResult::kNothing;
}

bool Requester::ready(const Qp& qp) const {
  if ((qp.state != QpState::kRts && qp.state != QpState::kSqd) || rnr_wait_) return false;
  if (held_by_probe()) return false;
  if (sr_pending_ && qp.sr()) return true;  // holes to resend
  if (seq_ == qp.sq.tail()) return false;
  if (qp.is_rc() && Psn::distance(psn_, qp.comp.psn()) > kMaxUnackedPsns) return false;
  return true;
}

bool Requester::start_wqe(EngineImpl& e, Qp& qp, bool* completed) {
  SendWqe& w = qp.sq.at(seq_);
  // IBA 10.3.1 SQD: WQEs already started finish, no new one starts.
  if (qp.state == QpState::kSqd) return false;
  if (is_local_op(w.opcode)) return run_local_op(e, qp, completed);
  const bool rd_atomic = is_rd_atomic_op(w.opcode);
  if (rd_atomic && rd_atomic_ >= qp.attr.max_rd_atomic) return false;
  // IBA 10.8.3.3: a fenced WR waits for every earlier READ and atomic to complete.
  if ((w.send_flags & kSendFence) != 0 && rd_atomic_ > 0) return false;

  WcStatus error = WcStatus::kSuccess;
  if (qp.is_ud() && w.length > qp.mtu) {
    error = WcStatus::kLocLenErr;
  } else if (is_atomic_op(w.opcode) && w.length < 8) {
    error = WcStatus::kLocLenErr;
  } else if (!w.is_inline) {
    const uint32_t access = rd_atomic ? uint32_t{kAccessLocalWrite} : 0u;
    if (e.memory().check_sges(qp.pd, qp.sq.sges(seq_), access) != AccessError::kOk) {
      error = WcStatus::kLocProtErr;
    }
  }
  if (error != WcStatus::kSuccess) {
    e.count(qp, Counter::kSendErr);
    *completed = true;
    if (qp.is_ud()) {
      // A UD datagram fails alone: it completes in error and the QP carries on (rxe would
      // drop an oversized datagram and report success, C10-93.1.1; we tell the truth).
      ++seq_;
      e.complete_send_head(qp, error);
      return false;
    }
    w.error = error;
    e.enter_error(qp);
    return false;
  }

  w.state = WqeState::kStarted;
  w.first_psn = psn_;
  if (is_atomic_op(w.opcode) || is_flush_or_atomic_write(w.opcode) || qp.is_ud()) {
    w.npkts = 1;  // a FLUSH's length is the range it names, not a payload
  } else {
    w.npkts = std::max<uint32_t>(1, (w.length + qp.mtu - 1) / qp.mtu);
  }
  w.last_psn = psn_ + (w.npkts - 1);
  w.pkts_sent = 0;
  if (rd_atomic) ++rd_atomic_;
  return true;
}

bool Requester::run_local_op(EngineImpl& e, Qp& qp, bool* completed) {
  // A LOCAL_INV or BIND_MW waits until every WR before it has completed, then takes effect
  // and completes at once, before any later WR starts. That is the strictest order IBA
  // 10.8.3 allows (as if always fenced): a window never changes under a READ or WRITE posted
  // before it, and a SEND posted after a bind carries a key that already works.
  if (seq_ != qp.sq.head()) return false;
  SendWqe& w = qp.sq.at(seq_);
  WcStatus status = WcStatus::kSuccess;
  if (w.opcode == WrOpcode::kBindMw) {
    status = e.memory().bind_mw(qp.pd, qp.qpn, w.bind);
  } else if (!e.memory().invalidate_local(qp.pd, w.invalidate_rkey)) {
    status = WcStatus::kLocQpOpErr;  // rxe: a failed LOCAL_INV is a local QP operation error
  }
  *completed = true;
  if (status != WcStatus::kSuccess) {
    // IBA 10.6.7.2.4 / rxe: the failed WR completes in error and the QP goes to ERR.
    e.count(qp, Counter::kSendErr);
    w.error = status;
    e.enter_error(qp);
    return false;
  }
  ++seq_;
  e.complete_send_head(qp, WcStatus::kSuccess);
  e.check_drained(qp);
  return false;
}

void Requester::rewind(Qp& qp, Psn psn) {
  // Every started WQE keeps its PSNs (go-back-N resends the same PSNs in the same order)
  // and its READ/atomic slot; only what was sent is forgotten.
  const uint64_t head = qp.sq.head();
  for (uint64_t s = head; s != qp.sq.tail(); ++s) {
    SendWqe& w = qp.sq.at(s);
    if (w.state != WqeState::kStarted) break;
    if (s == head && !psn.before(w.first_psn) && !psn.after(w.last_psn)) {
      // Resume inside the oldest WQE: SEND/WRITE from the packet at `psn`, a READ with a
      // new request for the rest (IBA 9.7.5.1.3: a READ may be resumed at any response).
      w.pkts_sent = static_cast<uint32_t>(Psn::distance(psn, w.first_psn));
      continue;
    }
    w.pkts_sent = 0;
  }
  seq_ = head;
  psn_ = psn;
  probe_ = false;
  sr_pending_ = false;  // the rewind resends every hole anyway
  sr_episode_ = false;
}

void Requester::fast_forward(Qp& qp, Psn psn) {
  uint64_t s = qp.sq.head();
  for (; s != qp.sq.tail(); ++s) {
    SendWqe& w = qp.sq.at(s);
    if (w.state != WqeState::kStarted) break;
    if (!psn.after(w.last_psn)) {
      const auto k = static_cast<uint32_t>(std::max(0, Psn::distance(psn, w.first_psn)));
      w.pkts_sent = std::max(w.pkts_sent, k);
      break;
    }
    w.pkts_sent = w.npkts;
  }
  seq_ = std::max(seq_, s);
  psn_ = psn;
}

FillResult Requester::fill(EngineImpl& e, Qp& qp, TimePoint now, TxSlot& slot) {
  if ((qp.state != QpState::kRts && qp.state != QpState::kSqd) || rnr_wait_) {
    return FillResult::kNothing;
  }
  if (held_by_probe()) return FillResult::kNothing;
  if (sr_pending_ && qp.sr()) {
    const FillResult r = fill_hole(e, qp, now, slot);
    if (r != FillResult::kNothing || qp.state == QpState::kErr) return r;
  }
  for (;;) {
    if (seq_ == qp.sq.tail()) return FillResult::kNothing;
    SendWqe& w = qp.sq.at(seq_);
    if (w.state == WqeState::kPosted) {
      bool completed = false;
      if (!start_wqe(e, qp, &completed)) {
        if (completed && qp.state != QpState::kErr) continue;
        return FillResult::kNothing;
      }
    }
    if (w.pkts_sent < w.npkts) {
      // Selective repeat: a resend after a rewind skips what the responder already placed,
      // but never the oldest unacknowledged PSN: if that one is SACKed, the responder's ePSN
      // moved past it and its ACK was lost; skipping every PSN would then send nothing, and
      // only a resend (a duplicate, asking for an ACK) brings that cumulative ACK again.
      if (!(qp.sr() && w.opcode == WrOpcode::kRdmaWrite && psn_.before(high_psn_) &&
            psn_ != qp.comp.psn() && sack_.test(psn_))) {
        break;
      }
      ++w.pkts_sent;
      ++psn_;
      if (w.pkts_sent < w.npkts) continue;
    }
    ++seq_;
  }
  if (qp.is_rc() && Psn::distance(psn_, qp.comp.psn()) > kMaxUnackedPsns) {
    return FillResult::kNothing;
  }
  return emit(e, qp, now, slot, false);
}

namespace {

// Where a packet's payload may be sent from by reference (Engine::set_payload_by_reference):
// an RC WQE's (a UC or UD one completes before its slot is sent), at least
// kPayloadByReferenceMin bytes, all in one SGE that passes the source check; else nullptr.
const uint8_t* payload_source(EngineImpl& e, const Qp& qp, std::span<const Sge> sges,
                              uint64_t offset, uint32_t len) {
  if (!qp.is_rc() || !e.payload_by_reference(len)) return nullptr;
  return e.memory().source(qp.pd, sges, offset, len);
}

}  // namespace

FillResult Requester::emit(EngineImpl& e, Qp& qp, TimePoint now, TxSlot& slot,
                           bool retransmit_hole) {
  SendWqe& w = qp.sq.at(seq_);
  const uint32_t k = w.pkts_sent;
  const bool first = k == 0;
  const bool last = k + 1 == w.npkts;
  const uint64_t offset = uint64_t{k} * qp.mtu;
  const bool imm = has_imm(w.opcode);
  const bool inv = w.opcode == WrOpcode::kSendWithInv;

  wire::Headers h = wire::kNoHeaders;
  h.bth.pkey = wire::kDefaultPkey;
  h.bth.psn = psn_;
  h.bth.dqpn = qp.attr.dest_qp_num;
  wire::Transport transport = wire::Transport::kRc;
  if (qp.type == QpType::kUc) transport = wire::Transport::kUc;
  if (qp.is_ud()) transport = wire::Transport::kUd;

  Op op = Op::kSendOnly;
  uint32_t payload_len = 0;
  switch (w.opcode) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
    case WrOpcode::kSendWithInv:
      payload_len = static_cast<uint32_t>(std::min<uint64_t>(qp.mtu, w.length - offset));
      if (w.npkts == 1) {
        op = imm ? Op::kSendOnlyImm : inv ? Op::kSendOnlyInv : Op::kSendOnly;
      } else if (first) {
        op = Op::kSendFirst;
      } else if (last) {
        op = imm ? Op::kSendLastImm : inv ? Op::kSendLastInv : Op::kSendLast;
      } else {
        op = Op::kSendMiddle;
      }
      if (imm && last) h.immdt = w.imm_data;
      if (inv && last) h.ieth_rkey = w.invalidate_rkey;
      break;
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      payload_len = static_cast<uint32_t>(std::min<uint64_t>(qp.mtu, w.length - offset));
      if (w.npkts == 1) {
        op = imm ? Op::kWriteOnlyImm : Op::kWriteOnly;
      } else if (first) {
        op = Op::kWriteFirst;
      } else if (last) {
        op = imm ? Op::kWriteLastImm : Op::kWriteLast;
      } else {
        op = Op::kWriteMiddle;
      }
      if (first) h.reth = {w.remote_addr, w.rkey, w.length};
      if (imm && last) h.immdt = w.imm_data;
      if (qp.sr() && !imm && w.npkts > 1) {
        // Selective repeat: every segment is a WRITE Only naming its own target.
        op = Op::kWriteOnly;
        h.reth = {w.remote_addr + offset, w.rkey, payload_len};
      }
      break;
    case WrOpcode::kRdmaRead:
      op = Op::kReadRequest;
      h.reth = {w.remote_addr + offset, w.rkey, static_cast<uint32_t>(w.length - offset)};
      break;
    case WrOpcode::kAtomicCmpAndSwp:
      op = Op::kCompareSwap;
      h.atomic_eth = {w.remote_addr, w.rkey, w.swap, w.compare_add};
      break;
    case WrOpcode::kAtomicFetchAndAdd:
      op = Op::kFetchAdd;
      h.atomic_eth = {w.remote_addr, w.rkey, w.compare_add, 0};
      break;
    case WrOpcode::kFlush:
      // IBA 1.5 FETH: placement type in bits 0..3, selectivity level in bits 4..5.
      op = Op::kFlush;
      h.feth.bits = wire::Feth::make(w.flush_type, w.flush_level).bits;
      h.reth = {w.remote_addr, w.rkey, w.length};
      break;
    case WrOpcode::kAtomicWrite:
      op = Op::kAtomicWrite;
      h.reth = {w.remote_addr, w.rkey, 8};
      payload_len = 8;
      break;
    default:
      return FillResult::kNothing;
  }
  const bool message_end = last || w.opcode == WrOpcode::kRdmaRead;
  if (qp.is_ud()) {
    h.bth.dqpn = w.remote_qpn;
    // IBA 10.2.5: a WR Q_Key with the high bit set means "use the QP's Q_Key"; QP1 always
    // sends the GSI Q_Key (rxe init_req_packet).
    h.deth.qkey = qp.type == QpType::kGsi              ? wire::kGsiQkey
                  : (w.remote_qkey & 0x80000000u) != 0 ? qp.attr.qkey
                                                       : w.remote_qkey;
    h.deth.src_qp = qp.qpn;
  }
  h.bth.opcode = wire::make_opcode(transport, op);
  h.bth.se = (w.send_flags & kSendSolicited) != 0 && message_end &&
             (is_send_op(w.opcode) || w.opcode == WrOpcode::kRdmaWriteWithImm);
  // A PSN sent before (go-back-N resends it in the same order).
  const bool resent = sent_any_ && psn_.before(high_psn_);
  if (qp.is_rc()) {
    // rxe init_req_packet: AckReq on the message end, or once 65 packets went without it.
    // Every resend asks too. A duplicate without AckReq is answered by nothing (the
    // responder re-ACKs only duplicates that ask, docs/interop.md), nor is an in-order packet
    // without it; so a resend burst of which a small tail-drop buffer keeps only the first
    // packets, short of the message's last PSN, gets neither ACK nor NAK, and every timeout
    // resends the same head again: no progress at all (go-back-N through a 16 KB port). With
    // selective repeat a rewind skips what the responder placed, so its one resend may be
    // the packet that moves ePSN over them, and the ACK of that move is then the only one.
    if (message_end || retransmit_hole || resent || noack_pkts_++ > kMaxPktPerAck) {
      h.bth.ackreq = true;
      noack_pkts_ = 0;
    }
  } else if (qp.type == QpType::kGsi) {
    h.bth.ackreq = true;  // rxe sets AckReq on QP1's UD packets too
  }

  size_t size = 0;
  std::span<uint8_t> payload = begin_packet(slot, h, payload_len, &size);
  if (size == 0) return FillResult::kNoRoom;
  if (w.opcode == WrOpcode::kAtomicWrite) {
    std::memcpy(payload.data(), &w.compare_add, sizeof(w.compare_add));
  } else if (payload_len != 0) {
    if (w.is_inline) {
      std::memcpy(payload.data(), qp.sq.inline_data(seq_).data() + offset, payload_len);
    } else if (const uint8_t* source =
                   payload_source(e, qp, qp.sq.sges(seq_), offset, payload_len)) {
      // Read once, by the ICRC, on its way to the kernel's copy: no copy into the slot. With
      // many QPs the sources are cold, and a copy of cold bytes costs far more than a CRC
      // over them (docs/performance.md, "Payloads by reference").
      refer_payload(slot, payload, source);
    } else if (e.memory().gather(qp.pd, qp.sq.sges(seq_), offset, payload) != AccessError::kOk) {
      // The source MR went away after the WQE started.
      e.count(qp, Counter::kSendErr);
      if (qp.is_ud()) {
        ++seq_;
        e.complete_send_head(qp, WcStatus::kLocProtErr);
      } else {
        w.error = WcStatus::kLocProtErr;
        e.enter_error(qp);
      }
      return FillResult::kNothing;
    }
  }
  finish_packet(slot, size, qp.is_ud() ? w.ah : qp.attr.ah_attr, qp.sport);

  e.count(qp, Counter::kSentPkts);
  e.count(qp, Counter::kBytesSent, size);
  if (resent) {
    e.count(qp, Counter::kRetransmittedPkts);
    qp.comp.on_resend(psn_);
  } else if (qp.sr()) {
    // A PSN's first send: whatever its bit held is stale (a READ owns its whole range).
    const Psn end = w.opcode == WrOpcode::kRdmaRead ? w.last_psn + 1 : psn_ + 1;
    for (Psn p = psn_; p != end; ++p) sack_.reset(p);
  }
  // Every AckReq packet is awaited (the adaptive RTO runs from the oldest one's send); its ACK
  // is an RTT sample unless it is a resend after a timer go-back (Karn's rule,
  // Completer::timer_rewind): then the ACK may answer the original, and after a spurious early
  // resend that is a sample far too short, which shrinks the RTO and makes the next resend
  // spurious too. (on_resend drops samples a resend made ambiguous.)
  bool first_awaited = false;
  if (qp.is_rc() && h.bth.ackreq) {
    first_awaited = qp.comp.on_ackreq_sent(now, w.opcode == WrOpcode::kRdmaRead ? w.last_psn : psn_,
                                           !resent || !qp.comp.timer_rewind());
    e.peers().note_sent(qp.peer, qp.qpn, now);
  }

  if (w.opcode == WrOpcode::kRdmaRead) {
    w.pkts_sent = w.npkts;
    psn_ = w.last_psn + 1;
  } else {
    ++w.pkts_sent;
    ++psn_;
  }
  if (!sent_any_ || high_psn_.before(psn_)) high_psn_ = psn_;
  sent_any_ = true;

  if (w.pkts_sent == w.npkts) {
    ++seq_;
    // UC and UD have no acknowledgements: the WQE is done once its last packet is out.
    if (!qp.is_rc()) e.complete_send_head(qp, WcStatus::kSuccess);
  }
  if (qp.is_rc() && qp.attr.timeout != 0) {
    if (!e.timer_armed(qp, TimerKind::kRetransmit)) {
      qp.comp.arm_retransmit(e, qp, now, true);
    } else if (first_awaited) {
      qp.comp.arm_retransmit(e, qp, now, false);  // the adaptive RTO starts from this packet
    }
  }
  return FillResult::kProduced;
}

}  // namespace uroce::transport
