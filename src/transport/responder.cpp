// The responder (IBA 9.7.5.1 "responder side", rxe_resp.c) for RC and UC. Decision list
// for each request packet, in IBA order:
//   1. PSN check (9.7.5.1.1): ahead of ePSN -> one PSN sequence NAK carrying ePSN, then
//      silence until ePSN arrives; behind -> duplicate (9.7.5.1.3): SEND/WRITE re-ACKed with
//      ePSN-1 (C9-105) if it has AckReq, READ replayed from its saved resource, atomic
//      replayed from the result cache, never executed twice (C9-115); UC: a gap drops the
//      message.
//   2. Opcode sequence (9.7.5.1.2): Middle/Last only inside a message of the same kind.
//   3. The QP allows the operation (access flags, max_dest_rd_atomic > 0; FLUSH: the
//      placement type's FLUSH right, ATOMIC WRITE: REMOTE_WRITE, as rxe 6.2+).
//   4. A receive WQE for SEND and WRITE-with-immediate: none -> RNR NAK with min_rnr_timer
//      (9.7.5.1.4; UC drops).
//   5. Lengths and R_Keys through the memory checker: WRITE segments exactly PMTU but the
//      last (rxe check_rkey), message <= receive WQE (else LOC_LEN_ERR).
//   6. FLUSH and ATOMIC WRITE (IBA 1.5) execute once, answered by a zero-length READ
//      Response Only (their duplicates get the answer again).
//   7. Execute, complete receives (IBV_WC_GRH always, like rxe), advance ePSN/MSN, ACK
//      every packet with AckReq (rxe does, peers expect it).
// Selective repeat (Qp::sr(), both ends agreed; docs/congestion.md "Loss recovery"): a WRITE
// Only ahead of ePSN, inside the kSrWindow-PSN window, is checked like an in-order one and
// placed, its PSN recorded in a bitmap, and SACKed by a PSN sequence NAK whose MSN field holds
// its PSN (IRN's "cumulative ACK + the PSN that triggered the NACK"); when ePSN reaches placed
// PSNs it moves over them and ACKs. Anything else ahead of ePSN gets the go-back-N NAK (its MSN
// field then equals ePSN, so the requester goes back). A packet it cannot check is not placed:
// it comes again and meets the in-order checks and their errors.
// Class A/C errors (9.9.2) NAK and then move the QP to ERR. This file holds steps 1-4,
// duplicates and response building; the executors (steps 5-7) are responder_execute.cpp.
#include <algorithm>
#include <cstring>

#include "transport/engine_impl.hpp"
#include "transport/packet_out.hpp"
#include "transport/responder_rules.hpp"

namespace uroce::transport {

using wire::Aeth;
using wire::NakCode;
using wire::Op;

void Responder::init(uint32_t out_capacity, uint32_t max_resources, uint32_t max_sge) {
  out_.assign(out_capacity, RespItem{});
  // One resource until max_dest_rd_atomic is set (resize_resources): an idle QP does not
  // hold the device maximum's worth.
  max_resources_ = std::max(max_resources, 1u);
  resources_.assign(1, RdAtomicResource{});
  wqe_.sges.assign(std::max(max_sge, 1u), Sge{});
}

void Responder::reset(Psn epsn) {
  epsn_ = epsn;
  msn_ = 0;
  sent_nak_ = false;
  placed_.clear();
  drop_msg_ = false;
  in_msg_ = InMsg::kNone;
  have_wqe_ = false;
  recv_offset_ = 0;
  out_head_ = out_count_ = 0;
  std::fill(resources_.begin(), resources_.end(), RdAtomicResource{});
  res_next_ = 0;
}

void Responder::resize_resources(uint32_t n) {
  res_used_ = std::min(n, max_resources_);
  // modify_qp, not the data path: the ring is (re)allocated here only.
  resources_.assign(std::max(res_used_, 1u), RdAtomicResource{});
  res_next_ = 0;
}

RdAtomicResource& Responder::new_resource() {
  // rxe: the ring is recycled oldest first; a peer exceeding max_dest_rd_atomic is not NAKed.
  const uint32_t n = std::max(res_used_, 1u);
  RdAtomicResource& r = resources_[res_next_ % n];
  res_next_ = (res_next_ + 1) % n;
  return r;
}

bool Responder::queue(const RespItem& item) {
  if (out_count_ == out_.size()) return false;
  out_[(out_head_ + out_count_) % out_.size()] = item;
  ++out_count_;
  return true;
}

void Responder::pop_out() {
  out_head_ = (out_head_ + 1) % static_cast<uint32_t>(out_.size());
  --out_count_;
}

void Responder::drop_message() {
  drop_msg_ = true;
  in_msg_ = InMsg::kNone;
  recv_offset_ = 0;  // a held receive WQE is reused by the next message
}

bool Responder::take_wqe(EngineImpl& e, Qp& qp) {
  if (!e.take_recv_wqe(qp, wqe_)) return false;
  have_wqe_ = true;
  recv_offset_ = 0;
  return true;
}

void Responder::complete_recv(EngineImpl& e, Qp& qp, const Wc& wc, bool solicited) {
  have_wqe_ = false;
  recv_offset_ = 0;
  e.complete_recv(qp, wc, solicited);
}

void Responder::abort_wqe(EngineImpl& e, Qp& qp, WcStatus status) {
  in_msg_ = InMsg::kNone;
  if (!have_wqe_) return;
  Wc wc;
  wc.wr_id = wqe_.wr_id;
  wc.status = status;
  wc.opcode = WcOpcode::kRecv;
  wc.qp_num = qp.qpn;
  complete_recv(e, qp, wc, false);
}

void Responder::class_c_error(EngineImpl& e, Qp& qp, NakCode code, WcStatus recv_status, Psn psn) {
  RespItem nak;
  nak.kind = RespItem::Kind::kAck;
  nak.syndrome = Aeth::nak(code);
  nak.psn = psn;
  nak.msn = msn_;
  queue(nak);
  abort_wqe(e, qp, recv_status);
  e.enter_error(qp);
}

void Responder::on_request(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt) {
  if (qp.is_rc()) {
    // Every request may need one response item; without room the packet is not consumed
    // and the requester's retransmission brings it back.
    if (out_count_ == out_.size()) {
      e.count(qp, Counter::kDropResponseQueueFull);
      return;
    }
    on_rc(e, qp, pkt);
  } else {
    on_uc(e, qp, pkt);
  }
}

void Responder::on_rc(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt) {
  const Psn psn = pkt.hdr.bth.psn;
  const int32_t diff = Psn::distance(psn, epsn_);
  if (diff > 0) {
    e.count(qp, Counter::kOutOfSeqRequest);
    if (qp.sr() && place_out_of_order(e, qp, pkt, diff)) return;
    if (sent_nak_) {
      e.count(qp, Counter::kDropOutOfSequence);
      return;
    }
    sent_nak_ = true;
    RespItem nak;
    nak.syndrome = Aeth::nak(NakCode::kPsnSequenceError);
    nak.psn = epsn_;
    // Selective repeat reads the MSN field as a SACK: ePSN there means "go back".
    nak.msn = qp.sr() ? epsn_.value() : msn_;
    queue(nak);
    return;
  }
  if (diff < 0) {
    e.count(qp, Counter::kDuplicateRequest);
    duplicate(e, qp, pkt);
    return;
  }

  const uint16_t flags = pkt.info->flags;
  const bool first = (flags & wire::kFirst) != 0;
  bool seq_ok = true;
  switch (in_msg_) {
    case InMsg::kSend:
      seq_ok = (flags & wire::kIsSend) != 0 && !first;
      break;
    case InMsg::kWrite:
      seq_ok = (flags & wire::kIsWrite) != 0 && !first;
      break;
    case InMsg::kNone:
      seq_ok = first;
      break;
  }
  if (!seq_ok) {
    reject(e, qp, pkt, true, Counter::kRespRemoteInvalidRequest, NakCode::kInvalidRequest,
           WcStatus::kRemInvReqErr);
    return;
  }
  const uint32_t access = qp.attr.qp_access_flags;
  const auto op = static_cast<Op>(pkt.hdr.bth.opcode & 0x1F);
  const bool is_read = (flags & wire::kIsReadRequest) != 0;
  // ATOMIC WRITE needs REMOTE_WRITE and a responder resource (rxe check_qp_attr_access,
  // check_resource); it is an atomic only in name.
  const bool is_atomic_write = op == Op::kAtomicWrite;
  const bool is_atomic = (flags & wire::kIsAtomic) != 0;
  const bool allowed =
      ((flags & wire::kIsWrite) == 0 || (access & kAccessRemoteWrite) != 0) &&
      (!is_atomic_write || (access & kAccessRemoteWrite) != 0) &&
      (!is_read || (access & kAccessRemoteRead) != 0) &&
      (!is_atomic || (access & kAccessRemoteAtomic) != 0) &&
      (!(is_read || is_atomic || is_atomic_write) || qp.attr.max_dest_rd_atomic != 0) &&
      (op != Op::kFlush || flush_allowed(pkt.hdr.feth, access)) && (flags & wire::kIsRequest) != 0;
  if (!allowed) {
    reject(e, qp, pkt, true, Counter::kRespRemoteInvalidRequest, NakCode::kInvalidRequest,
           WcStatus::kRemInvReqErr);
    return;
  }
  if (execute(e, qp, pkt, true) && qp.sr()) advance_over_placed(qp);
}

bool Responder::place_out_of_order(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt,
                                   int32_t ahead) {
  const auto op = static_cast<Op>(pkt.hdr.bth.opcode & 0x1F);
  if (op != Op::kWriteOnly) return false;
  if (ahead >= static_cast<int32_t>(kSrWindow)) {
    // Beyond the bitmap: dropped, the requester resends it (it never sends that far ahead).
    e.count(qp, Counter::kSrOutOfWindowDrop);
    return true;
  }
  const Psn psn = pkt.hdr.bth.psn;
  if (!placed_.test(psn)) {
    const wire::Reth& r = pkt.hdr.reth;
    const std::span<const uint8_t> payload = pkt.payload;
    if ((qp.attr.qp_access_flags & kAccessRemoteWrite) == 0 || r.dma_len != payload.size() ||
        payload.size() > qp.mtu) {
      return false;
    }
    if (!payload.empty()) {
      uint8_t* p = nullptr;
      if (e.memory().check_remote(qp.pd, qp.qpn, r.rkey, r.va, payload.size(), kAccessRemoteWrite,
                                  &p) != AccessError::kOk) {
        return false;
      }
      std::memcpy(p, payload.data(), payload.size());
    }
    placed_.set(psn);
    e.count(qp, Counter::kRxWriteRequests);
    e.count(qp, Counter::kSrOutOfOrderPlaced);
  } else {
    e.count(qp, Counter::kDuplicateRequest);  // SACKed again: the first SACK may be lost
  }
  RespItem sack;
  sack.syndrome = Aeth::nak(NakCode::kPsnSequenceError);
  sack.psn = epsn_;
  sack.msn = psn.value();
  queue(sack);
  return true;
}

void Responder::advance_over_placed(Qp& /*qp*/) {
  bool moved = false;
  while (placed_.test(epsn_)) {
    placed_.reset(epsn_);
    ++epsn_;
    ++msn_;  // every placed packet was a whole WRITE Only message
    moved = true;
  }
  if (!moved) return;
  sent_nak_ = false;
  RespItem ack;
  ack.syndrome = Aeth::ack();
  ack.psn = epsn_ - 1;
  ack.msn = msn_;
  queue(ack);
}

void Responder::on_uc(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt) {
  const Psn psn = pkt.hdr.bth.psn;
  const uint16_t flags = pkt.info->flags;
  const bool first = (flags & wire::kFirst) != 0;
  // IBA 9.8.3 (UC): a PSN gap drops the message in progress; a First/Only packet
  // starts a new one at whatever PSN it carries.
  if (drop_msg_ || psn != epsn_) {
    if (!first) {
      if (!drop_msg_) e.count(qp, Counter::kOutOfSeqRequest);
      drop_message();
      e.count(qp, Counter::kDropUcMessage);
      return;
    }
    drop_msg_ = false;
  }
  if (first) {
    in_msg_ = InMsg::kNone;  // an unfinished message is abandoned; its WQE is reused
    recv_offset_ = 0;
  } else if (in_msg_ == InMsg::kNone ||
             (in_msg_ == InMsg::kSend) != ((flags & wire::kIsSend) != 0)) {
    e.count(qp, Counter::kDropBadOpcodeSequence);
    drop_message();
    return;
  }
  if ((flags & wire::kIsWrite) != 0 && (qp.attr.qp_access_flags & kAccessRemoteWrite) == 0) {
    e.count(qp, Counter::kDropUcMessage);
    drop_message();
    return;
  }
  execute(e, qp, pkt, false);
}

bool Responder::reject(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt, bool rc,
                       Counter counter, NakCode code, WcStatus recv_status, bool uc_completes) {
  e.count(qp, counter);
  if (rc) {
    class_c_error(e, qp, code, recv_status, pkt.hdr.bth.psn);
  } else {
    if (uc_completes) abort_wqe(e, qp, recv_status);
    drop_message();
  }
  return false;
}

void Responder::duplicate(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt) {
  const uint16_t flags = pkt.info->flags;
  const Psn psn = pkt.hdr.bth.psn;
  if ((flags & (wire::kIsSend | wire::kIsWrite)) != 0) {
    // C9-105: acknowledge again, with the PSN of the last packet executed, but only a
    // duplicate that asks for it (AckReq), as rdmavt does (rc_rcv_error). Re-ACKing every
    // duplicate (rxe duplicate_request) stalls rxe 6.1 as the requester: its go-back-N
    // resends a multi-packet message, and a second ACK with the message's last PSN, now
    // behind comp.psn, makes rxe_comp.c check_psn complete the WQE its requester is still
    // resending; the application reposts into that SQ slot and rxe's requester, whose
    // wqe_index then equals the producer, never sends again (docs/interop.md, finding 1).
    // The resent Last packet carries AckReq, so the retry still ends with an ACK.
    if (!pkt.hdr.bth.ackreq) return;
    RespItem ack;
    ack.syndrome = Aeth::ack();
    ack.psn = epsn_ - 1;
    ack.msn = msn_;
    queue(ack);
    return;
  }
  const auto op = static_cast<Op>(pkt.hdr.bth.opcode & 0x1F);
  const bool flush_or_atomic_write = op == Op::kFlush || op == Op::kAtomicWrite;
  const uint32_t n = std::max(res_used_, 1u);
  for (uint32_t i = 0; i < n; ++i) {
    const RdAtomicResource& res = resources_[i];
    if (flush_or_atomic_write && res.kind == RdAtomicResource::Kind::kFlushOrAtomicWrite &&
        res.first_psn == psn) {
      // oA19-14/15 (rxe duplicate_request -> replay): answer again, do not execute again.
      queue_empty_read_response(psn);
      return;
    }
    if ((flags & wire::kIsReadRequest) != 0 && res.kind == RdAtomicResource::Kind::kRead &&
        !psn.before(res.first_psn) && !psn.after(res.last_psn)) {
      // C9-114: re-execute the READ from the retried request's RETH (it may ask for the
      // tail of the original only), checking the R_Key again.
      const wire::Reth& r = pkt.hdr.reth;
      // rxe duplicate_request: the retry must ask for the original range or a tail of it,
      // with the same R_Key; anything else is dropped (class D).
      if (r.rkey != res.rkey || r.va < res.va || r.dma_len > res.length ||
          r.va + r.dma_len > res.va + res.length) {
        e.count(qp, Counter::kDropDuplicateNoResource);
        return;
      }
      uint8_t* p = nullptr;
      if (r.dma_len != 0 && e.memory().check_remote(qp.pd, qp.qpn, r.rkey, r.va, r.dma_len,
                                                    kAccessRemoteRead, &p) != AccessError::kOk) {
        e.count(qp, Counter::kDropDuplicateNoResource);
        return;
      }
      RespItem item;
      item.kind = RespItem::Kind::kRead;
      item.psn = psn;
      item.msn = msn_;
      item.va = r.va;
      item.rkey = r.rkey;
      item.length = r.dma_len;
      queue(item);
      return;
    }
    if ((flags & wire::kIsAtomic) != 0 && res.kind == RdAtomicResource::Kind::kAtomic &&
        res.first_psn == psn) {
      // C9-115: an atomic is never executed twice; replay the saved result.
      RespItem item;
      item.kind = RespItem::Kind::kAtomicAck;
      item.syndrome = Aeth::ack();
      item.psn = psn;
      item.msn = msn_;
      item.orig = res.orig;
      queue(item);
      return;
    }
  }
  e.count(qp, Counter::kDropDuplicateNoResource);
}

FillResult Responder::fill(EngineImpl& e, Qp& qp, TxSlot& slot) {
  if (out_count_ == 0) return FillResult::kNothing;
  // ACK coalescing: a positive ACK with a later positive ACK queued behind it says nothing
  // the later one does not (an ACK acknowledges every packet up to its PSN, and its MSN and
  // credits are newer), so only the last of a run goes out. A burst of requests on one QP
  // then costs the peer one ACK datagram, not one per AckReq packet. Go-back-N only: under
  // selective repeat each ACK tells the requester which resends arrived.
  const auto positive_ack = [](const RespItem& r) {
    return r.kind == RespItem::Kind::kAck && Aeth{r.syndrome, 0}.type() == wire::AethType::kAck;
  };
  while (!qp.sr() && out_count_ > 1 && positive_ack(out_[out_head_]) &&
         positive_ack(out_[(out_head_ + 1) % out_.size()])) {
    pop_out();
  }
  RespItem& it = out_[out_head_];
  wire::Headers h = wire::kNoHeaders;
  h.bth.pkey = wire::kDefaultPkey;
  h.bth.dqpn = qp.attr.dest_qp_num;
  h.bth.psn = it.psn;
  size_t size = 0;
  bool done = true;
  switch (it.kind) {
    case RespItem::Kind::kAck:
      h.bth.opcode = wire::make_opcode(wire::Transport::kRc, Op::kAcknowledge);
      h.aeth = {it.syndrome, it.msn};
      begin_packet(slot, h, 0, &size);
      break;
    case RespItem::Kind::kAtomicAck:
      h.bth.opcode = wire::make_opcode(wire::Transport::kRc, Op::kAtomicAcknowledge);
      h.aeth = {it.syndrome, it.msn};
      h.atomic_ack_eth.orig = it.orig;
      begin_packet(slot, h, 0, &size);
      break;
    case RespItem::Kind::kRead: {
      const uint32_t mtu = qp.mtu;
      const uint32_t n = read_packets(it.length, mtu);
      const uint32_t k = it.sent;
      const uint64_t off = uint64_t{k} * mtu;
      const auto len = static_cast<uint32_t>(std::min<uint64_t>(mtu, it.length - off));
      Op op = Op::kReadResponseMiddle;
      if (n == 1) {
        op = Op::kReadResponseOnly;
      } else if (k == 0) {
        op = Op::kReadResponseFirst;
      } else if (k + 1 == n) {
        op = Op::kReadResponseLast;
      }
      h.bth.opcode = wire::make_opcode(wire::Transport::kRc, op);
      h.bth.psn = it.psn + k;
      h.aeth = {Aeth::ack(), it.msn};
      uint8_t* src = nullptr;
      if (len != 0 && e.memory().check_remote(qp.pd, qp.qpn, it.rkey, it.va + off, len,
                                              kAccessRemoteRead, &src) != AccessError::kOk) {
        // The MR went away while the reply was streaming: NAK in its place (class C).
        e.count(qp, Counter::kRespRemoteAccessErrors);
        it.kind = RespItem::Kind::kAck;
        it.syndrome = Aeth::nak(NakCode::kRemoteAccessError);
        it.psn = it.psn + k;
        if (qp.state != QpState::kErr) e.enter_error(qp);
        return fill(e, qp, slot);
      }
      std::span<uint8_t> payload = begin_packet(slot, h, len, &size);
      if (size != 0 && e.payload_by_reference(len)) {
        // As a request's payload (requester.cpp): read once, by the ICRC, on its way to the
        // kernel's copy. The device sends the slot before it releases the engine, so the MR
        // cannot be deregistered in between.
        refer_payload(slot, payload, src);
      } else if (size != 0 && len != 0) {
        std::memcpy(payload.data(), src, len);
      }
      done = k + 1 == n;
      if (size != 0) ++it.sent;
      break;
    }
  }
  if (size == 0) return FillResult::kNoRoom;
  finish_packet(slot, size, qp.attr.ah_attr, qp.sport);
  e.count(qp, Counter::kSentPkts);
  e.count(qp, Counter::kBytesSent, size);
  if (done) {
    pop_out();
  }
  return FillResult::kProduced;
}

}  // namespace uroce::transport
