// The completer (IBA 9.7.5.2 "requester: response processing", rxe_comp.c): consumes ACK,
// NAK, READ response and atomic ACK packets for the send queue. Decision list per packet:
//   1. only in RTS/SQD; a PSN beyond the highest PSN sent is unexpected (a ghost),
//      one before the oldest unacknowledged PSN is a duplicate: both are dropped (IBA 9.7.5.2.1);
//   2. every SEND/WRITE WQE that ends before the PSN is acknowledged by it (ACKs are
//      cumulative, 9.7.5.2.2); a READ/atomic that ends before it lost its response: implied
//      NAK, retry (9.7.5.2.5);
//   3. READ responses must arrive in PSN order; they are placed into the WQE's local SGEs
//      at (PSN - first PSN) x PMTU; a gap starts a retry from the first missing one;
//   4. an atomic ACK writes the original value into the WQE's SGE;
//   5. ACK: progress; RNR NAK: wait the RNR timer then go back (9.7.5.2.8, rnr_retry, 7 =
//      forever); PSN sequence NAK: go back to the NAK's PSN (9.7.5.2.4, retry_cnt, 7 =
//      forever like rxe; no second NAK-started retry before progress); other NAKs complete the
//      WQE with REM_INV_REQ_ERR / REM_ACCESS_ERR / REM_OP_ERR and move the QP to ERR.
// Retry counters return to their configured values on every positive response (rxe).
//
// Timers (docs/congestion.md "Loss recovery"): with adaptive retransmission (the default) the
// retransmit timer fires at the RTO (RttEstimator::rto: from the RTT sampled on every ACK of
// an AckReq packet sent once, doubled per consecutive expiry) after the later of the last
// progress and the send of the oldest AckReq packet awaited, when that is sooner than the
// configured 4.096 us x 2^timeout: such an early go-back-N counts roce_adp_retrans and does
// not use up retry_cnt. Only the configured timeout, measured from the last progress (or the
// last counted retry) exactly as before, counts local_ack_timeout_err and a retry, so
// RETRY_EXC_ERR comes after the same number of retries and the same time without progress.
//
// Selective repeat (Qp::sr(), both ends agreed): a PSN sequence NAK whose AETH MSN field is
// not its own PSN reports that PSN as placed out of order (a SACK); the requester resends only
// the holes below the highest SACK. A NAK whose MSN field equals its PSN is a plain
// go-back-N NAK (the responder could not place the packet, e.g. an out-of-order SEND).
#include <algorithm>
#include <cstring>

#include "transport/engine_impl.hpp"
#include "transport/wr_kind.hpp"

namespace uroce::transport {

using wire::Op;

void Completer::reset(Psn psn, uint8_t retry_cnt, uint8_t rnr_retry) {
  psn_ = psn;
  reset_retry_counters(retry_cnt, rnr_retry);
  nak_retry_running_ = false;
  rtt_.reset_backoff();
  forget_awaited();
  adp_rewound_ = false;
  adp_gap_ready_ = false;
  timer_rewind_ = false;
  adp_probe_ = false;
}

bool Completer::can_probe(const Qp& qp) const {
  // Not for a READ or atomic at the head (its responses, not ACKs, answer it), nor with
  // selective repeat (it resends only the holes below the highest SACK).
  if (qp.state == QpState::kErr || qp.sr() || qp.sq.empty()) return false;
  const SendWqe& head = qp.sq.at(qp.sq.head());
  return head.state == WqeState::kStarted && !is_rd_atomic_op(head.opcode);
}

void Completer::start_probe(Qp& qp, TimePoint now, bool adaptive_go_back) {
  qp.req.start_probe(psn_);
  probe_at_ = now;
  adp_probe_ = adaptive_go_back;
}

void Completer::arm_retransmit(EngineImpl& e, Qp& qp, TimePoint now, bool new_period) {
  if (qp.attr.timeout == 0) {
    e.disarm_timer(qp, TimerKind::kRetransmit);
    return;
  }
  const Nanos configured = ack_timeout(qp.attr.timeout);
  if (new_period) {
    period_end_ = now + configured;
    adp_fired_ = false;
    progress_at_ = now;
  }
  TimePoint deadline = period_end_;
  const RecoveryConfig& rc = e.config().recovery;
  if (rc.adaptive) {
    if (const TimePoint from = adaptive_anchor(now); from != kNever) {
      deadline = std::min(deadline, std::max(now, from + rtt_.rto(rc.min_rto, configured)));
    }
  }
  e.arm_timer(qp, TimerKind::kRetransmit, deadline);
}

void Completer::resume_after_spurious_go_back(Qp& qp) {
  // The originals in flight past the resends were forgotten at the go-back.
  forget_awaited_for_rewind(qp.req.high_psn());
  qp.req.fast_forward(qp, qp.req.high_psn());
}

bool Completer::on_ackreq_sent(TimePoint now, Psn psn, bool timed) {
  if (awaited_count_ == kAwaitedAcks) {
    if (!untracked_ || untracked_until_.before(psn + 1)) untracked_until_ = psn + 1;
    untracked_ = true;
    return false;
  }
  awaited_[awaited_count_++] = AwaitedAck{psn, now, timed};
  return awaited_count_ == 1 && !untracked_;
}

void Completer::reset_retry_counters(uint8_t retry_cnt, uint8_t rnr_retry) {
  retry_left_ = retry_cnt;
  rnr_retry_left_ = rnr_retry;
}

void Completer::advance(EngineImpl& e, Qp& qp, TimePoint now, Psn psn) {
  if (!psn.after(psn_)) return;
  const auto acked = static_cast<uint64_t>(Psn::distance(psn, psn_));
  psn_ = psn;
  nak_retry_running_ = false;
  if (adp_rewound_) {
    adp_rewound_ = false;
    adp_gap_ready_ = true;
    adp_gap_ = now - progress_at_;
  }
  // Every AckReq packet now covered is answered; the newest of them sent once (Karn's rule)
  // gives the sample: its ACK is the one that came (older ones' ACKs were lost or merged).
  const AwaitedAck* sample = nullptr;
  uint8_t kept = 0;
  for (uint8_t i = 0; i < awaited_count_; ++i) {
    if (awaited_[i].psn.before(psn_)) {
      if (awaited_[i].timed) sample = &awaited_[i];
      e.peers().note_answered(qp.peer, awaited_[i].sent_at);
    } else {
      awaited_[kept++] = awaited_[i];
    }
  }
  if (sample != nullptr) rtt_.sample(now - sample->sent_at);
  awaited_count_ = kept;
  if (psn_ == qp.req.high_psn()) {
    forget_awaited();  // nothing in flight
  } else if (untracked_ && !psn_.before(untracked_until_)) {
    untracked_ = false;  // what the go-back forgot is acknowledged: awaited_ is complete again
  }
  rtt_.reset_backoff();
  if (psn_.after(qp.req.psn())) qp.req.fast_forward(qp, psn_);
  if (qp.cc != nullptr) qp.cc->on_ack(now, acked * qp.mtu);
  // rxe: the completer pushes the retransmit timer out while PSNs remain unacknowledged.
  if (psn_ == qp.req.psn() || qp.attr.timeout == 0) {
    e.disarm_timer(qp, TimerKind::kRetransmit);
  } else {
    arm_retransmit(e, qp, now, true);
  }
  e.schedule_tx(qp);
}

void Completer::complete_head(EngineImpl& e, Qp& qp, WcStatus status) {
  if (is_rd_atomic_op(qp.sq.at(qp.sq.head()).opcode)) qp.req.rd_atomic_done();
  e.complete_send_head(qp, status);
  e.check_drained(qp);
}

void Completer::fail_head(EngineImpl& e, Qp& qp, WcStatus status) {
  qp.sq.at(qp.sq.head()).error = status;
  e.enter_error(qp);
}

void Completer::start_retry(EngineImpl& e, Qp& qp, TimePoint /*now*/, bool from_nak) {
  if (retry_left_ == 0) {
    e.count(qp, Counter::kRetryExceededErr);
    fail_head(e, qp, WcStatus::kRetryExcErr);
    return;
  }
  if (retry_left_ != 7) --retry_left_;  // rxe: 7 means retry forever
  e.count(qp, Counter::kCompleterRetryErr);
  nak_retry_running_ = from_nak;
  forget_awaited_for_rewind(qp.req.high_psn());
  adp_rewound_ = false;  // a counted retry: duplicates after it say nothing of the RTO
  adp_gap_ready_ = false;
  // A NAK names what the peer lacks (the packets after it were dropped), so resends after it
  // are answered by their own ACKs and may be timed; a timeout's resends may not.
  timer_rewind_ = !from_nak;
  e.disarm_timer(qp, TimerKind::kRetransmit);
  qp.req.rewind(qp, psn_);
  e.schedule_tx(qp);
}

void Completer::on_retransmit_timeout(EngineImpl& e, Qp& qp, TimePoint now) {
  if (qp.state != QpState::kRts && qp.state != QpState::kSqd) return;
  if (qp.req.rnr_wait() || psn_ == qp.req.psn()) return;
  const bool adaptive = e.config().recovery.adaptive;
  if (adaptive && now < period_end_) {
    // The adaptive RTO ran out before the configured timeout: go back now, back off the
    // RTO, keep the configured period (and the retry count) running. Resend one packet
    // first, as the configured timeout does, when the peer has not got as far as the oldest
    // AckReq packet awaited (PeerClocks: another QP's later packet is unanswered too, a
    // stall or a backlog that every QP to it sees at once) or a probe is still unanswered;
    // else the whole window, at once, as for a tail loss.
    const bool probe =
        can_probe(qp) &&
        (qp.req.probing() || (awaited_count_ > 0 && !untracked_ &&
                              e.peers().not_reached(qp.peer, qp.qpn, awaited_[0].sent_at)));
    e.count(qp, Counter::kRoceAdpRetrans);
    adp_fired_ = true;
    adp_rewound_ = true;
    adp_rewound_at_ = now;
    adp_high_psn_ = qp.req.high_psn();
    adp_gap_ready_ = false;
    timer_rewind_ = true;
    forget_awaited_for_rewind(qp.req.high_psn());
    rtt_.backoff();
    arm_retransmit(e, qp, now, false);
    qp.req.rewind(qp, psn_);
    if (probe) start_probe(qp, now, true);
    e.schedule_tx(qp);
    return;
  }
  // The configured timeout: a counted retry, as without adaptive retransmission (and the
  // adaptive retransmissions of this period did not help: roce_adp_retrans_to).
  if (adp_fired_) e.count(qp, Counter::kRoceAdpRetransTo);
  e.count(qp, Counter::kLocalAckTimeoutErr);
  rtt_.backoff();
  start_retry(e, qp, now, false);
  // Go-back-N resends one packet first, the oldest unacknowledged (F-RTO, RFC 5682): the
  // timeout may only mean that the path's queue is longer than the timeout and the sender (or
  // its link, an impairment queue in this process) paused. Resending the whole window then
  // puts a window of duplicates in that queue; they hold back the next ACK progress for as
  // long as they take to drain, longer than the timeout, and the next timeout adds another
  // window: one 150 ms pause turned a 20 Mbit/s path's 2.35 MB/s into 0.29 MB/s for good.
  // The first response decides (on_response): originals still arriving, and the requester
  // resumes where it was; or the probe's own answer, and go-back-N resends the rest. Not
  // without adaptive retransmission (rxe's timer, kept for comparison, resends everything),
  // nor where can_probe says no.
  if (!adaptive || !can_probe(qp)) return;
  start_probe(qp, now, false);
}

void Completer::on_rnr_timer(EngineImpl& e, Qp& qp, TimePoint /*now*/) {
  if (!qp.req.rnr_wait()) return;
  qp.req.set_rnr_wait(false);
  if (qp.state != QpState::kRts && qp.state != QpState::kSqd) return;
  forget_awaited_for_rewind(qp.req.high_psn());
  qp.req.rewind(qp, psn_);
  e.schedule_tx(qp);
}

void Completer::on_response(EngineImpl& e, Qp& qp, TimePoint now, const wire::ParsedPacket& pkt) {
  if (qp.state != QpState::kRts && qp.state != QpState::kSqd) {
    e.count(qp, Counter::kDropBadQpState);
    return;
  }
  const Psn psn = pkt.hdr.bth.psn;
  // Responses up to the highest PSN ever sent count, also those for packets sent before a
  // go-back-N rewind: they spare resending what already arrived.
  if (!psn.before(qp.req.high_psn())) {
    e.count(qp, Counter::kDropUnexpectedResponse);
    return;
  }
  if (psn.before(psn_)) {
    e.count(qp, Counter::kDropDuplicateResponse);
    if (adp_gap_ready_ && !(psn + 1).before(adp_high_psn_)) {
      // The peer answered our early resend as a duplicate: nothing was lost, the peer (or
      // the path) stalled for adp_gap_. Eifel's response (RFC 4015): the estimate covers the
      // stall at once, so the RTO grows to cover stalls like it and shrinks again with later
      // samples.
      adp_gap_ready_ = false;
      e.count(qp, Counter::kAdpRetransSpurious);
      rtt_.raise_to(adp_gap_);
    }
    return;
  }
  // Go-back-N on an in-order path: a positive response for a PSN not resent since an
  // adaptive go-back shows everything before it had arrived (F-RTO's test, RFC 5682). It
  // proves the go-back spurious only if it answers an original: every resend asks for an ACK,
  // and the responder answers a resent duplicate with its cumulative PSN, beyond what was
  // resent, while the tail after it may be lost. So: it came sooner after the go-back than
  // any resend can be answered (the smallest RTT measured), or it covers everything sent
  // before the go-back. Not with selective repeat: there the responder places originals
  // behind a hole, and the cumulative ACK may wait for a resend.
  const bool positive =
      (pkt.info->headers & wire::kHasAeth) == 0 || pkt.hdr.aeth.type() == wire::AethType::kAck;
  const bool answers_originals =
      now - adp_rewound_at_ < rtt_.min_rtt() || !(psn + 1).before(adp_high_psn_);
  bool proven_spurious = false;
  if (adp_rewound_ && !qp.sr() && positive && !psn.before(qp.req.psn()) && answers_originals) {
    // Eifel's response (RFC 4015): the estimate covers the stall at once, and the requester
    // resumes where the go-back found it (its originals are in flight, not lost).
    proven_spurious = true;
    adp_rewound_ = false;
    adp_gap_ready_ = false;
    e.count(qp, Counter::kAdpRetransSpurious);
    rtt_.raise_to(now - progress_at_);
    resume_after_spurious_go_back(qp);
  }
  if (qp.req.probing() && positive) {
    // A configured timeout's probe (on_retransmit_timeout) met its first response. It shows
    // the originals arriving when it acknowledges a PSN after the probe (the responder had
    // packets sent after it), or comes sooner after the probe than half the smallest RTT
    // measured (it cannot answer the probe). Then the requester resumes after the highest
    // PSN sent: a hole there brings a sequence NAK when new packets arrive, a lost tail the
    // next timeout's probe. Else it answers the probe, and go-back-N resends the rest.
    const Psn probe = qp.req.probe_psn();
    const Nanos min_rtt = rtt_.min_rtt();
    const bool originals =
        psn.after(probe) || (min_rtt > Nanos(0) && now - probe_at_ < min_rtt / 2);
    qp.req.end_probe();
    if (originals) {
      // The probe was a duplicate. After an adaptive go-back's probe, Eifel's response as
      // for a whole go-back proved spurious: the RTO covers the time since the last
      // progress. Without it, the next expiries came back at the old RTO and, with the
      // awaited packets forgotten at the resume, went back whole windows: 64 QPs with the
      // server stopped 10 ms every 100 ms resent 11,000-13,000 packets per 3 s run, and
      // 1,100-34,000 over a veth pair without stalls (1,900-8,300 and 2-103 with it). The
      // price is a lost tail behind the probe's answer: the next expiry comes one raised
      // RTO later (engine_peer_stall_test: 0.84 ms instead of 0.21 ms).
      if (!proven_spurious) {
        e.count(qp, adp_probe_ ? Counter::kAdpRetransSpurious : Counter::kTimeoutSpurious);
        if (adp_probe_) rtt_.raise_to(now - progress_at_);
      }
      adp_rewound_ = false;
      adp_gap_ready_ = false;
      resume_after_spurious_go_back(qp);
    }
    adp_probe_ = false;
    e.schedule_tx(qp);
  }
  const uint16_t flags = pkt.info->flags;
  const auto op = static_cast<Op>(pkt.hdr.bth.opcode & 0x1F);

  // Step 2: cumulative acknowledgement of whole WQEs that end before `psn`.
  for (;;) {
    if (qp.sq.empty() || qp.sq.at(qp.sq.head()).state != WqeState::kStarted) {
      e.count(qp, Counter::kDropUnexpectedResponse);
      return;
    }
    const SendWqe& w = qp.sq.at(qp.sq.head());
    if (!psn.after(w.last_psn)) break;
    if (is_rd_atomic_op(w.opcode)) {
      e.count(qp, Counter::kImpliedNakSeqErr);
      if (!nak_retry_running_) start_retry(e, qp, now, true);
      return;
    }
    qp.comp.reset_retry_counters(qp.attr.retry_cnt, qp.attr.rnr_retry);
    advance(e, qp, now, w.last_psn + 1);
    complete_head(e, qp, WcStatus::kSuccess);
  }
  SendWqe& w = qp.sq.at(qp.sq.head());
  const uint64_t head = qp.sq.head();

  if ((flags & wire::kIsReadResponse) != 0 && is_flush_or_atomic_write(w.opcode)) {
    // IBA 1.5 (rxe acknowledge/send_read_response_ack): a FLUSH or ATOMIC WRITE is answered
    // by an RDMA READ Response Only with no payload, carrying an ACK AETH.
    if (op != Op::kReadResponseOnly || psn != w.first_psn || !pkt.payload.empty() ||
        pkt.hdr.aeth.type() != wire::AethType::kAck) {
      e.count(qp, Counter::kDropBadResponse);
      return;
    }
    reset_retry_counters(qp.attr.retry_cnt, qp.attr.rnr_retry);
    advance(e, qp, now, psn + 1);
    complete_head(e, qp, WcStatus::kSuccess);
    return;
  }
  if ((flags & wire::kIsReadResponse) != 0) {
    if (w.opcode != WrOpcode::kRdmaRead) {
      e.count(qp, Counter::kDropBadResponse);
      return;
    }
    if (psn != psn_) {
      // A READ response is missing: ask again from the first missing one.
      e.count(qp, Counter::kImpliedNakSeqErr);
      if (!nak_retry_running_) start_retry(e, qp, now, true);
      return;
    }
    const auto k = static_cast<uint32_t>(Psn::distance(psn, w.first_psn));
    const uint64_t offset = uint64_t{k} * qp.mtu;
    const uint64_t expected = std::min<uint64_t>(qp.mtu, w.length - offset);
    const bool final = k + 1 == w.npkts;
    const bool op_ok = final ? (op == Op::kReadResponseLast || op == Op::kReadResponseOnly)
                             : (op == Op::kReadResponseFirst || op == Op::kReadResponseMiddle);
    const bool aeth_ok =
        (pkt.info->headers & wire::kHasAeth) == 0 || pkt.hdr.aeth.type() == wire::AethType::kAck;
    if (!op_ok || !aeth_ok || pkt.payload.size() != expected) {
      e.count(qp, Counter::kDropBadResponse);
      return;
    }
    if (e.memory().scatter(qp.pd, qp.sq.sges(head), offset, pkt.payload) != AccessError::kOk) {
      fail_head(e, qp, WcStatus::kLocProtErr);
      return;
    }
    reset_retry_counters(qp.attr.retry_cnt, qp.attr.rnr_retry);
    advance(e, qp, now, psn + 1);
    if (final) complete_head(e, qp, WcStatus::kSuccess);
    return;
  }

  if (op == Op::kAtomicAcknowledge) {
    if (!is_atomic_op(w.opcode) || psn != w.first_psn ||
        pkt.hdr.aeth.type() != wire::AethType::kAck) {
      e.count(qp, Counter::kDropBadResponse);
      return;
    }
    // The original remote value lands in the local buffer in host order (ibv_post_send(3)).
    uint8_t orig[8];
    std::memcpy(orig, &pkt.hdr.atomic_ack_eth.orig, sizeof(orig));
    if (e.memory().scatter(qp.pd, qp.sq.sges(head), 0, orig) != AccessError::kOk) {
      fail_head(e, qp, WcStatus::kLocProtErr);
      return;
    }
    reset_retry_counters(qp.attr.retry_cnt, qp.attr.rnr_retry);
    advance(e, qp, now, psn + 1);
    complete_head(e, qp, WcStatus::kSuccess);
    return;
  }

  // Acknowledge: ACK or NAK by the AETH syndrome (IBA 9.7.5.2, Table 44).
  switch (pkt.hdr.aeth.type()) {
    case wire::AethType::kAck:
      if (is_rd_atomic_op(w.opcode)) {
        e.count(qp, Counter::kDropBadResponse);
        return;
      }
      reset_retry_counters(qp.attr.retry_cnt, qp.attr.rnr_retry);
      advance(e, qp, now, psn + 1);
      if (psn == w.last_psn) complete_head(e, qp, WcStatus::kSuccess);
      return;
    case wire::AethType::kRnrNak:
      e.count(qp, Counter::kRcvdRnrErr);
      advance(e, qp, now, psn);
      if (rnr_retry_left_ == 0) {
        e.count(qp, Counter::kRetryRnrExceededErr);
        fail_head(e, qp, WcStatus::kRnrRetryExcErr);
        return;
      }
      if (rnr_retry_left_ != 7) --rnr_retry_left_;
      qp.req.set_rnr_wait(true);
      e.disarm_timer(qp, TimerKind::kRetransmit);
      e.arm_timer(qp, TimerKind::kRnr, now + rnr_timeout(pkt.hdr.aeth.value()));
      return;
    case wire::AethType::kNak:
      break;
    case wire::AethType::kReserved:
      e.count(qp, Counter::kDropBadResponse);
      return;
  }
  switch (static_cast<wire::NakCode>(pkt.hdr.aeth.value())) {
    case wire::NakCode::kPsnSequenceError:
      e.count(qp, Counter::kRcvdSeqErr);
      e.count(qp, Counter::kPacketSeqErr);
      advance(e, qp, now, psn);
      if (qp.sr() && pkt.hdr.aeth.msn != psn.value()) {
        // Selective repeat: a SACK of the PSN in the MSN field; resend only the holes (the
        // peer lacks them, so their resends may be timed).
        timer_rewind_ = false;
        qp.req.sr_sack(qp, Psn(pkt.hdr.aeth.msn));
        e.schedule_tx(qp);
        return;
      }
      // rxe: while a NAK-started retry runs (or an RNR wait), a further NAK starts nothing.
      if (qp.req.rnr_wait() || nak_retry_running_) return;
      e.count(qp, Counter::kNakFastRetrans);
      start_retry(e, qp, now, true);
      return;
    case wire::NakCode::kInvalidRequest:
      e.count(qp, Counter::kReqRemoteInvalidRequest);
      fail_head(e, qp, WcStatus::kRemInvReqErr);
      return;
    case wire::NakCode::kRemoteAccessError:
      e.count(qp, Counter::kReqRemoteAccessErrors);
      fail_head(e, qp, WcStatus::kRemAccessErr);
      return;
    case wire::NakCode::kRemoteOperationalError:
    case wire::NakCode::kInvalidRdRequest:
    default:
      e.count(qp, Counter::kReqRemoteOperationalError);
      fail_head(e, qp, WcStatus::kRemOpErr);
      return;
  }
}

}  // namespace uroce::transport
