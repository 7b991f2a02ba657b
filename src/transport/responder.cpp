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
// Class A/C errors (9.9.2) NAK and then move the QP to ERR.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "transport/engine_impl.hpp"
#include "transport/packet_out.hpp"

namespace uroce::transport {

using wire::Aeth;
using wire::NakCode;
using wire::Op;

namespace {

uint32_t read_packets(uint32_t length, uint32_t mtu) {
  return std::max<uint32_t>(1, (length + mtu - 1) / mtu);
}

// The MR rights a FLUSH of this placement type needs (rxe check_rkey).
uint32_t flush_access(const wire::Feth& f) {
  uint32_t access = 0;
  if ((f.placement() & kFlushGlobal) != 0) access |= kAccessFlushGlobal;
  if ((f.placement() & kFlushPersistent) != 0) access |= kAccessFlushPersistent;
  return access;
}

// A FLUSH the QP may execute: a known placement type (rxe check_qp_attr_access: each type
// needs its right in qp_access_flags) and selectivity. rxe treats a FETH with no placement
// bit, reserved bits or selectivity 2..3 as a no-op or a range FLUSH; uroce, stricter, calls
// them the invalid requests they are (IBA 1.5 FETH: those values are reserved).
bool flush_allowed(const wire::Feth& f, uint32_t qp_access) {
  constexpr uint32_t kKnownPlacement = kFlushGlobal | kFlushPersistent;
  const uint32_t reserved = f.bits & ~(wire::Feth::kPlacementMask | wire::Feth::kSelectivityMask);
  if (f.placement() == 0 || (f.placement() & ~kKnownPlacement) != 0 || reserved != 0) return false;
  if (f.selectivity() != kFlushRange && f.selectivity() != kFlushMr) return false;
  const uint32_t need = flush_access(f);
  return (qp_access & need) == need;
}

}  // namespace

void Responder::init(uint32_t out_capacity, uint32_t max_resources, uint32_t max_sge) {
  out_.assign(out_capacity, RespItem{});
  resources_.assign(std::max(max_resources, 1u), RdAtomicResource{});
  wqe_.sges.assign(std::max(max_sge, 1u), Sge{});
}

void Responder::reset(Psn epsn) {
  epsn_ = epsn;
  msn_ = 0;
  sent_nak_ = false;
  drop_msg_ = false;
  in_msg_ = InMsg::kNone;
  have_wqe_ = false;
  recv_offset_ = 0;
  out_head_ = out_count_ = 0;
  std::fill(resources_.begin(), resources_.end(), RdAtomicResource{});
  res_next_ = 0;
}

void Responder::resize_resources(uint32_t n) {
  res_used_ = std::min<uint32_t>(n, static_cast<uint32_t>(resources_.size()));
  std::fill(resources_.begin(), resources_.end(), RdAtomicResource{});
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
    if (sent_nak_) {
      e.count(qp, Counter::kDropOutOfSequence);
      return;
    }
    sent_nak_ = true;
    RespItem nak;
    nak.syndrome = Aeth::nak(NakCode::kPsnSequenceError);
    nak.psn = epsn_;
    nak.msn = msn_;
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
    e.count(qp, Counter::kRespRemoteInvalidRequest);
    class_c_error(e, qp, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr, psn);
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
    e.count(qp, Counter::kRespRemoteInvalidRequest);
    class_c_error(e, qp, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr, psn);
    return;
  }
  execute(e, qp, pkt, true);
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

bool Responder::execute(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt, bool rc) {
  if (rc) {
    const auto op = static_cast<Op>(pkt.hdr.bth.opcode & 0x1F);
    if (op == Op::kFlush) return execute_flush(e, qp, pkt);
    if (op == Op::kAtomicWrite) return execute_atomic_write(e, qp, pkt);
  }
  const uint16_t flags = pkt.info->flags;
  const Psn psn = pkt.hdr.bth.psn;
  const std::span<const uint8_t> payload = pkt.payload;
  const bool is_send = (flags & wire::kIsSend) != 0;
  const bool is_write = (flags & wire::kIsWrite) != 0;

  // Step 4: receive WQE (SEND First/Only, WRITE with immediate), before any side effect.
  const bool needs_wqe =
      (is_send && (flags & wire::kFirst) != 0) || (is_write && (flags & wire::kImm) != 0);
  if (needs_wqe && !have_wqe_ && !take_wqe(e, qp)) {
    if (rc) {
      e.count(qp, Counter::kSendRnrErr);
      RespItem rnr;
      rnr.syndrome = Aeth::rnr_nak(qp.attr.min_rnr_timer);
      rnr.psn = psn;
      rnr.msn = msn_;
      queue(rnr);
      sent_nak_ = true;  // later packets of this burst are out of sequence: stay silent
    } else {
      e.count(qp, Counter::kDropNoRecvWqe);
      e.count(qp, Counter::kOutOfBuffer);
      drop_message();
    }
    return false;
  }

  if (is_send) {
    if ((flags & wire::kFirst) != 0) {
      in_msg_ = InMsg::kSend;
      recv_offset_ = 0;
    }
    // IBA 9.7.5.1 length checks: First and Middle carry exactly the PMTU, Last 1..PMTU,
    // Only 0..PMTU (checked by later rxe versions too; a PMTU mismatch shows up here).
    const uint32_t mtu = qp.mtu;
    const bool first_pkt = (flags & wire::kFirst) != 0;
    const bool last_pkt = (flags & wire::kLast) != 0;
    const size_t n = payload.size();
    const bool len_ok = first_pkt && last_pkt ? n <= mtu
                        : last_pkt            ? (n >= 1 && n <= mtu)
                                              : n == mtu;
    if (!len_ok) {
      e.count(qp, Counter::kRespRemoteInvalidRequest);
      if (rc) {
        class_c_error(e, qp, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr, psn);
      } else {
        drop_message();
      }
      return false;
    }
    if (recv_offset_ + payload.size() > wqe_.length) {
      e.count(qp, Counter::kRespLocalLengthError);
      if (rc) {
        class_c_error(e, qp, NakCode::kInvalidRequest, WcStatus::kLocLenErr, psn);
      } else {
        abort_wqe(e, qp, WcStatus::kLocLenErr);
        drop_message();
      }
      return false;
    }
    if (e.memory().scatter(qp.pd, wqe_.sge_list(), recv_offset_, payload) != AccessError::kOk) {
      // IBA 9.9.2 class A: the receive WQE is bad (local protection); the requester learns
      // of it as a remote operational error.
      e.count(qp, Counter::kRespRemoteOperationalError);
      if (rc) {
        class_c_error(e, qp, NakCode::kRemoteOperationalError, WcStatus::kLocProtErr, psn);
      } else {
        abort_wqe(e, qp, WcStatus::kLocProtErr);
        drop_message();
      }
      return false;
    }
    recv_offset_ += payload.size();
    if ((flags & wire::kLast) != 0) {
      Wc wc;
      wc.wr_id = wqe_.wr_id;
      wc.opcode = WcOpcode::kRecv;
      wc.byte_len = static_cast<uint32_t>(recv_offset_);
      wc.qp_num = qp.qpn;
      wc.wc_flags = kWcGrh;
      if ((flags & wire::kImm) != 0) {
        wc.wc_flags |= kWcWithImm;
        wc.imm_data = pkt.hdr.immdt;
      }
      if ((flags & wire::kInv) != 0) {
        // IBA 10.6.7.2: only a memory window or a fast-registration MR can be invalidated
        // remotely, never an ibv_reg_mr region (rxe_invalidate_mr refuses those with
        // -EINVAL). uroce has neither kind, so every SEND with Invalidate is refused: the
        // named R_Key stays valid, the receive completes REM_INV_REQ_ERR and the QP goes to
        // ERR like rxe (class J); unlike rxe, which ACKs, we NAK invalid request so the
        // requester learns of it (docs/engine.md, "deliberately differs").
        e.count(qp, Counter::kRespRemoteInvalidRequest);
        class_c_error(e, qp, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr, psn);
        return false;
      }
      in_msg_ = InMsg::kNone;
      ++msn_;
      e.count(qp, Counter::kRdmaRecvs);
      complete_recv(e, qp, wc, pkt.hdr.bth.se);
    }
  } else if (is_write) {
    const uint32_t mtu = qp.mtu;
    if ((flags & wire::kFirst) != 0) {
      const wire::Reth& r = pkt.hdr.reth;
      e.count(qp, Counter::kRxWriteRequests);
      if (r.dma_len != 0) {
        uint8_t* p = nullptr;
        if (e.memory().check_remote(qp.pd, r.rkey, r.va, r.dma_len, kAccessRemoteWrite, &p) !=
            AccessError::kOk) {
          e.count(qp, Counter::kRespRemoteAccessErrors);
          if (rc) {
            class_c_error(e, qp, NakCode::kRemoteAccessError, WcStatus::kRemAccessErr, psn);
          } else {
            drop_message();
          }
          return false;
        }
      }
      in_msg_ = InMsg::kWrite;
      write_va_ = r.va;
      write_rkey_ = r.rkey;
      write_len_ = r.dma_len;
      write_resid_ = r.dma_len;
    }
    // rxe check_rkey: while more than a PMTU remains, each packet carries exactly PMTU;
    // the last carries exactly the rest (a path MTU mismatch shows up here).
    const bool last = (flags & wire::kLast) != 0;
    const bool seg_ok = write_resid_ > mtu ? (payload.size() == mtu && !last)
                                           : (payload.size() == write_resid_ && last);
    if (!seg_ok) {
      e.count(qp, Counter::kRespRemoteInvalidRequest);
      if (rc) {
        class_c_error(e, qp, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr, psn);
      } else {
        drop_message();
      }
      return false;
    }
    if (!payload.empty()) {
      uint8_t* p = nullptr;
      const uint64_t va = write_va_ + (write_len_ - write_resid_);
      if (e.memory().check_remote(qp.pd, write_rkey_, va, payload.size(), kAccessRemoteWrite, &p) !=
          AccessError::kOk) {
        e.count(qp, Counter::kRespRemoteAccessErrors);
        if (rc) {
          class_c_error(e, qp, NakCode::kRemoteAccessError, WcStatus::kRemAccessErr, psn);
        } else {
          drop_message();
        }
        return false;
      }
      std::memcpy(p, payload.data(), payload.size());
      write_resid_ -= static_cast<uint32_t>(payload.size());
    }
    if (last) {
      in_msg_ = InMsg::kNone;
      ++msn_;
      if ((flags & wire::kImm) != 0) {
        Wc wc;
        wc.wr_id = wqe_.wr_id;
        wc.opcode = WcOpcode::kRecvRdmaWithImm;
        wc.byte_len = write_len_;  // the RETH DMA length (rxe, IBA 10.7.2.4)
        wc.qp_num = qp.qpn;
        wc.wc_flags = kWcGrh | kWcWithImm;
        wc.imm_data = pkt.hdr.immdt;
        complete_recv(e, qp, wc, pkt.hdr.bth.se);
      }
    }
  } else if ((flags & wire::kIsReadRequest) != 0) {
    const wire::Reth& r = pkt.hdr.reth;
    e.count(qp, Counter::kRxReadRequests);
    if (r.dma_len != 0) {
      uint8_t* p = nullptr;
      if (e.memory().check_remote(qp.pd, r.rkey, r.va, r.dma_len, kAccessRemoteRead, &p) !=
          AccessError::kOk) {
        e.count(qp, Counter::kRespRemoteAccessErrors);
        class_c_error(e, qp, NakCode::kRemoteAccessError, WcStatus::kRemAccessErr, psn);
        return false;
      }
    }
    const uint32_t n = read_packets(r.dma_len, qp.mtu);
    RdAtomicResource& res = new_resource();
    res.kind = RdAtomicResource::Kind::kRead;
    res.first_psn = psn;
    res.last_psn = psn + (n - 1);
    res.va = r.va;
    res.rkey = r.rkey;
    res.length = r.dma_len;
    ++msn_;  // C9-148: a READ counts as accepted when it is executed
    RespItem item;
    item.kind = RespItem::Kind::kRead;
    item.psn = psn;
    item.msn = msn_;
    item.va = r.va;
    item.rkey = r.rkey;
    item.length = r.dma_len;
    queue(item);
    epsn_ = psn + n;
    sent_nak_ = false;
    return true;
  } else if ((flags & wire::kIsAtomic) != 0) {
    const wire::AtomicEth& a = pkt.hdr.atomic_eth;
    e.count(qp, Counter::kRxAtomicRequests);
    uint8_t* p = nullptr;
    const AccessError ae = e.memory().check_remote(qp.pd, a.rkey, a.va, 8, kAccessRemoteAtomic, &p);
    if (ae == AccessError::kMisaligned) {
      // rxe RESPST_ERR_MISALIGNED_ATOMIC: class C invalid request (IBA 9.4.5: atomics are 8-byte
      // aligned).
      e.count(qp, Counter::kRespRemoteInvalidRequest);
      class_c_error(e, qp, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr, psn);
      return false;
    }
    if (ae != AccessError::kOk) {
      e.count(qp, Counter::kRespRemoteAccessErrors);
      class_c_error(e, qp, NakCode::kRemoteAccessError, WcStatus::kRemAccessErr, psn);
      return false;
    }
    uint64_t orig = 0;
    std::memcpy(&orig, p, sizeof(orig));
    const bool cas = static_cast<Op>(pkt.hdr.bth.opcode & 0x1F) == Op::kCompareSwap;
    if (cas) {
      if (orig == a.compare) std::memcpy(p, &a.swap_add, sizeof(uint64_t));
    } else {
      const uint64_t sum = orig + a.swap_add;
      std::memcpy(p, &sum, sizeof(sum));
    }
    RdAtomicResource& res = new_resource();
    res.kind = RdAtomicResource::Kind::kAtomic;
    res.first_psn = res.last_psn = psn;
    res.orig = orig;
    ++msn_;
    RespItem item;
    item.kind = RespItem::Kind::kAtomicAck;
    item.syndrome = Aeth::ack();
    item.psn = psn;
    item.msn = msn_;
    item.orig = orig;
    queue(item);
    epsn_ = psn + 1;
    sent_nak_ = false;
    return true;
  }

  epsn_ = psn + 1;
  sent_nak_ = false;
  if (rc && pkt.hdr.bth.ackreq) {
    RespItem ack;
    ack.syndrome = Aeth::ack();
    ack.psn = psn;
    ack.msn = msn_;
    queue(ack);
  }
  return true;
}

void Responder::queue_empty_read_response(Psn psn) {
  RespItem item;
  item.kind = RespItem::Kind::kRead;  // length 0: one READ Response Only, no payload
  item.psn = psn;
  item.msn = msn_;
  queue(item);
}

// IBA 1.5 FLUSH (rxe check_rkey + process_flush): the R_Key must grant the placement type's
// FLUSH right; a range FLUSH must lie inside the MR, a whole-region FLUSH names only the key.
// uroce memory is ordinary process memory: the one effect a FLUSH can have is that every
// earlier write the responder executed is visible to every thread of the process before the
// answer leaves (a full fence, rxe's wmb()). Persistence cannot be promised, so no MR is
// registered for it (reg_mr refuses FLUSH_PERSISTENT) and a persistent FLUSH always draws
// NAK remote access error (or invalid request if the QP lacks the right).
bool Responder::execute_flush(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt) {
  const Psn psn = pkt.hdr.bth.psn;
  const wire::Reth& r = pkt.hdr.reth;
  const uint32_t access = flush_access(pkt.hdr.feth);
  uint8_t* p = nullptr;
  const AccessError ae = pkt.hdr.feth.selectivity() == kFlushMr
                             ? e.memory().check_remote_region(qp.pd, r.rkey, access)
                             : e.memory().check_remote(qp.pd, r.rkey, r.va, r.dma_len, access, &p);
  if (ae != AccessError::kOk) {
    e.count(qp, Counter::kRespRemoteAccessErrors);
    class_c_error(e, qp, NakCode::kRemoteAccessError, WcStatus::kRemAccessErr, psn);
    return false;
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  RdAtomicResource& res = new_resource();
  res.kind = RdAtomicResource::Kind::kFlushOrAtomicWrite;
  res.first_psn = res.last_psn = psn;
  ++msn_;
  queue_empty_read_response(psn);
  epsn_ = psn + 1;
  sent_nak_ = false;
  return true;
}

// IBA 1.5 ATOMIC WRITE (rxe check_rkey + atomic_write_reply): RETH DMA length exactly 8 (the
// payload, fixed by the opcode table, is 8), REMOTE_WRITE on [va, va+8), va 8-byte aligned;
// the 8 bytes land as one store that no earlier write of this QP can pass (release order).
bool Responder::execute_atomic_write(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt) {
  const Psn psn = pkt.hdr.bth.psn;
  const wire::Reth& r = pkt.hdr.reth;
  e.count(qp, Counter::kRxWriteRequests);
  if (r.dma_len != wire::kAtomicWritePayloadLen) {
    // rxe check_rkey: payload length != DMA length -> RESPST_ERR_LENGTH (class C).
    e.count(qp, Counter::kRespRemoteInvalidRequest);
    class_c_error(e, qp, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr, psn);
    return false;
  }
  uint8_t* p = nullptr;
  if (e.memory().check_remote(qp.pd, r.rkey, r.va, r.dma_len, kAccessRemoteWrite, &p) !=
      AccessError::kOk) {
    e.count(qp, Counter::kRespRemoteAccessErrors);
    class_c_error(e, qp, NakCode::kRemoteAccessError, WcStatus::kRemAccessErr, psn);
    return false;
  }
  if ((r.va & 7) != 0) {
    // rxe_mr_do_atomic_write: misaligned -> RESPST_ERR_MISALIGNED_ATOMIC, NAK invalid request.
    e.count(qp, Counter::kRespRemoteInvalidRequest);
    class_c_error(e, qp, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr, psn);
    return false;
  }
  uint64_t value = 0;
  std::memcpy(&value, pkt.payload.data(), sizeof(value));  // the bytes as sent, in order
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p))
      .store(value, std::memory_order_release);
  RdAtomicResource& res = new_resource();
  res.kind = RdAtomicResource::Kind::kFlushOrAtomicWrite;
  res.first_psn = res.last_psn = psn;
  ++msn_;
  queue_empty_read_response(psn);
  epsn_ = psn + 1;
  sent_nak_ = false;
  return true;
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
      if (r.dma_len != 0 && e.memory().check_remote(qp.pd, r.rkey, r.va, r.dma_len,
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
  RespItem& it = out_[out_head_];
  wire::Headers h{};
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
      if (len != 0 && e.memory().check_remote(qp.pd, it.rkey, it.va + off, len, kAccessRemoteRead,
                                              &src) != AccessError::kOk) {
        // The MR went away while the reply was streaming: NAK in its place (class C).
        e.count(qp, Counter::kRespRemoteAccessErrors);
        it.kind = RespItem::Kind::kAck;
        it.syndrome = Aeth::nak(NakCode::kRemoteAccessError);
        it.psn = it.psn + k;
        if (qp.state != QpState::kErr) e.enter_error(qp);
        return fill(e, qp, slot);
      }
      std::span<uint8_t> payload = begin_packet(slot, h, len, &size);
      if (size != 0 && len != 0) std::memcpy(payload.data(), src, len);
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
    out_head_ = (out_head_ + 1) % static_cast<uint32_t>(out_.size());
    --out_count_;
  }
  return FillResult::kProduced;
}

}  // namespace uroce::transport
