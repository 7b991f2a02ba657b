// The responder's executors (see responder.cpp for the decision list): one function per
// operation, SEND, WRITE, READ, atomic, FLUSH and ATOMIC WRITE, each ending in the one
// reject path or in its effect and its answer.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "transport/engine_impl.hpp"
#include "transport/responder_rules.hpp"

namespace uroce::transport {

using wire::Aeth;
using wire::NakCode;
using wire::Op;

bool Responder::execute(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt, bool rc) {
  const uint16_t flags = pkt.info->flags;
  if (rc) {
    const auto op = static_cast<Op>(pkt.hdr.bth.opcode & 0x1F);
    if (op == Op::kFlush) return execute_flush(e, qp, pkt);
    if (op == Op::kAtomicWrite) return execute_atomic_write(e, qp, pkt);
    if ((flags & wire::kIsReadRequest) != 0) return execute_read(e, qp, pkt);
    if ((flags & wire::kIsAtomic) != 0) return execute_atomic(e, qp, pkt);
  }
  // SEND or WRITE (on_rc/on_uc let nothing else through).
  const Psn psn = pkt.hdr.bth.psn;
  const bool is_send = (flags & wire::kIsSend) != 0;
  // Step 4: receive WQE (SEND First/Only, WRITE with immediate), before any side effect.
  const bool needs_wqe =
      (is_send && (flags & wire::kFirst) != 0) || (!is_send && (flags & wire::kImm) != 0);
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
  if (!(is_send ? execute_send(e, qp, pkt, rc) : execute_write(e, qp, pkt, rc))) return false;
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

bool Responder::execute_send(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt, bool rc) {
  const uint16_t flags = pkt.info->flags;
  const std::span<const uint8_t> payload = pkt.payload;
  const bool first_pkt = (flags & wire::kFirst) != 0;
  const bool last_pkt = (flags & wire::kLast) != 0;
  if (first_pkt) {
    in_msg_ = InMsg::kSend;
    recv_offset_ = 0;
  }
  // IBA 9.7.5.1 length checks: First and Middle carry exactly the PMTU, Last 1..PMTU,
  // Only 0..PMTU (checked by later rxe versions too; a PMTU mismatch shows up here).
  const uint32_t mtu = qp.mtu;
  const size_t n = payload.size();
  const bool len_ok = first_pkt && last_pkt ? n <= mtu : last_pkt ? (n >= 1 && n <= mtu) : n == mtu;
  if (!len_ok) {
    return reject(e, qp, pkt, rc, Counter::kRespRemoteInvalidRequest, NakCode::kInvalidRequest,
                  WcStatus::kRemInvReqErr);
  }
  if (recv_offset_ + payload.size() > wqe_.length) {
    return reject(e, qp, pkt, rc, Counter::kRespLocalLengthError, NakCode::kInvalidRequest,
                  WcStatus::kLocLenErr, true);
  }
  if (e.memory().scatter(qp.pd, wqe_.sge_list(), recv_offset_, payload) != AccessError::kOk) {
    // IBA 9.9.2 class A: the receive WQE is bad (local protection); the requester learns
    // of it as a remote operational error.
    return reject(e, qp, pkt, rc, Counter::kRespRemoteOperationalError,
                  NakCode::kRemoteOperationalError, WcStatus::kLocProtErr, true);
  }
  recv_offset_ += payload.size();
  if (!last_pkt) return true;
  const bool inv = (flags & wire::kInv) != 0;
  if (inv && !e.memory().invalidate_remote(qp.pd, qp.qpn, pkt.hdr.ieth_rkey)) {
    // IBA 10.6.7.2: a SEND with Invalidate may only invalidate a type 2 window bound to this
    // QP (or a fast-registration MR, which uroce does not have; rxe_invalidate_mr refuses
    // ibv_reg_mr regions with -EINVAL). Otherwise the named R_Key stays as it was, the
    // receive completes REM_INV_REQ_ERR and the QP goes to ERR like rxe (class J); unlike
    // rxe, which ACKs, we NAK invalid request so the requester learns of it
    // (docs/engine.md, "deliberately differs").
    return reject(e, qp, pkt, rc, Counter::kRespRemoteInvalidRequest, NakCode::kInvalidRequest,
                  WcStatus::kRemInvReqErr);
  }
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
  if (inv) {
    wc.wc_flags |= kWcWithInv;
    wc.invalidated_rkey = pkt.hdr.ieth_rkey;
  }
  in_msg_ = InMsg::kNone;
  ++msn_;
  e.count(qp, Counter::kRdmaRecvs);
  complete_recv(e, qp, wc, pkt.hdr.bth.se);
  return true;
}

bool Responder::execute_write(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt, bool rc) {
  const uint16_t flags = pkt.info->flags;
  const std::span<const uint8_t> payload = pkt.payload;
  const uint32_t mtu = qp.mtu;
  if ((flags & wire::kFirst) != 0) {
    const wire::Reth& r = pkt.hdr.reth;
    e.count(qp, Counter::kRxWriteRequests);
    uint8_t* p = nullptr;
    if (r.dma_len != 0 && e.memory().check_remote(qp.pd, qp.qpn, r.rkey, r.va, r.dma_len,
                                                  kAccessRemoteWrite, &p) != AccessError::kOk) {
      return reject(e, qp, pkt, rc, Counter::kRespRemoteAccessErrors, NakCode::kRemoteAccessError,
                    WcStatus::kRemAccessErr);
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
    return reject(e, qp, pkt, rc, Counter::kRespRemoteInvalidRequest, NakCode::kInvalidRequest,
                  WcStatus::kRemInvReqErr);
  }
  if (!payload.empty()) {
    uint8_t* p = nullptr;
    const uint64_t va = write_va_ + (write_len_ - write_resid_);
    if (e.memory().check_remote(qp.pd, qp.qpn, write_rkey_, va, payload.size(), kAccessRemoteWrite,
                                &p) != AccessError::kOk) {
      return reject(e, qp, pkt, rc, Counter::kRespRemoteAccessErrors, NakCode::kRemoteAccessError,
                    WcStatus::kRemAccessErr);
    }
    std::memcpy(p, payload.data(), payload.size());
    write_resid_ -= static_cast<uint32_t>(payload.size());
  }
  if (!last) return true;
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
  return true;
}

bool Responder::execute_read(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt) {
  const Psn psn = pkt.hdr.bth.psn;
  const wire::Reth& r = pkt.hdr.reth;
  e.count(qp, Counter::kRxReadRequests);
  uint8_t* p = nullptr;
  if (r.dma_len != 0 && e.memory().check_remote(qp.pd, qp.qpn, r.rkey, r.va, r.dma_len,
                                                kAccessRemoteRead, &p) != AccessError::kOk) {
    return reject(e, qp, pkt, true, Counter::kRespRemoteAccessErrors, NakCode::kRemoteAccessError,
                  WcStatus::kRemAccessErr);
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
}

bool Responder::execute_atomic(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt) {
  const Psn psn = pkt.hdr.bth.psn;
  const wire::AtomicEth& a = pkt.hdr.atomic_eth;
  e.count(qp, Counter::kRxAtomicRequests);
  uint8_t* p = nullptr;
  const AccessError ae =
      e.memory().check_remote(qp.pd, qp.qpn, a.rkey, a.va, 8, kAccessRemoteAtomic, &p);
  if (ae == AccessError::kMisaligned) {
    // rxe RESPST_ERR_MISALIGNED_ATOMIC: class C invalid request (IBA 9.4.5: atomics are 8-byte
    // aligned).
    return reject(e, qp, pkt, true, Counter::kRespRemoteInvalidRequest, NakCode::kInvalidRequest,
                  WcStatus::kRemInvReqErr);
  }
  if (ae != AccessError::kOk) {
    return reject(e, qp, pkt, true, Counter::kRespRemoteAccessErrors, NakCode::kRemoteAccessError,
                  WcStatus::kRemAccessErr);
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
  const AccessError ae =
      pkt.hdr.feth.selectivity() == kFlushMr
          ? e.memory().check_remote_region(qp.pd, r.rkey, access)
          : e.memory().check_remote(qp.pd, qp.qpn, r.rkey, r.va, r.dma_len, access, &p);
  if (ae != AccessError::kOk) {
    return reject(e, qp, pkt, true, Counter::kRespRemoteAccessErrors, NakCode::kRemoteAccessError,
                  WcStatus::kRemAccessErr);
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
    return reject(e, qp, pkt, true, Counter::kRespRemoteInvalidRequest, NakCode::kInvalidRequest,
                  WcStatus::kRemInvReqErr);
  }
  uint8_t* p = nullptr;
  if (e.memory().check_remote(qp.pd, qp.qpn, r.rkey, r.va, r.dma_len, kAccessRemoteWrite, &p) !=
      AccessError::kOk) {
    return reject(e, qp, pkt, true, Counter::kRespRemoteAccessErrors, NakCode::kRemoteAccessError,
                  WcStatus::kRemAccessErr);
  }
  if ((r.va & 7) != 0) {
    // rxe_mr_do_atomic_write: misaligned -> RESPST_ERR_MISALIGNED_ATOMIC, NAK invalid request.
    return reject(e, qp, pkt, true, Counter::kRespRemoteInvalidRequest, NakCode::kInvalidRequest,
                  WcStatus::kRemInvReqErr);
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

}  // namespace uroce::transport
