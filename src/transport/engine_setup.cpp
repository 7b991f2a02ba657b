// Engine setup path: CQs, SRQs, QP creation, modify_qp (admission by qp_state.cpp, then
// attribute application and the state change), query and destroy.
#include <algorithm>
#include <cerrno>

#include "transport/engine_impl.hpp"
#include "transport/qp_state.hpp"

namespace uroce::transport {
namespace {

// Responses one QP can have queued (ACKs, NAKs, READ replies); a well-behaved peer keeps at
// most kMaxUnackedPsns + 1 requests in flight, each needing one at most: twice that. (The
// ring is most of an idle QP's memory: 256 items of 32 bytes.)
constexpr uint32_t kResponseQueueCapacity = 256;

// Linux hash_32(): golden-ratio multiplicative hash.
constexpr uint32_t hash_32(uint32_t v, uint32_t bits) {
  return (v * 0x61C88647u) >> (32 - bits);
}

// rxe_qp_init_req: 0xC000 + hash_32(qpn, 14).
constexpr uint16_t initial_sport(uint32_t qpn) {
  return static_cast<uint16_t>(0xC000 | (hash_32(qpn, 14) & 0x3FFF));
}

// include/rdma/ib_verbs.h rdma_get_udp_sport / rdma_calc_flow_label (§2f): symmetric in the
// two QPNs, so both ends of a connection pick the same port.
constexpr uint16_t av_sport(uint32_t flow_label, uint32_t lqpn, uint32_t rqpn) {
  uint32_t fl = flow_label;
  if (fl == 0) {
    uint64_t v = uint64_t{lqpn} * rqpn;
    v ^= v >> 20;
    v ^= v >> 40;
    fl = static_cast<uint32_t>(v & 0xFFFFF);
  }
  uint32_t low = fl & 0x3FFF;
  const uint32_t high = fl & 0xFC000;
  low ^= high >> 14;
  return static_cast<uint16_t>(low | 0xC000);
}

}  // namespace

Result<CqId> EngineImpl::create_cq(uint32_t cqe) {
  if (cqe == 0 || cqe > config_.limits.max_cqe) {
    return Status(EINVAL, "create_cq: cqe must be 1..max_cqe");
  }
  // cqs_ never grows (see its declaration): a free slot or none.
  for (uint32_t i = 0; i < cqs_.size(); ++i) {
    if (!cqs_[i]) {
      cqs_[i] = std::make_unique<Cq>(cqe);
      return CqId{i};
    }
  }
  return Status(ENOMEM, "create_cq: max_cq reached");
}

Status EngineImpl::destroy_cq(CqId id) {
  Cq* c = cq(id);
  if (c == nullptr) return Status(EINVAL, "destroy_cq: no such CQ");
  if (c->users != 0) return Status(EBUSY, "destroy_cq: QPs still use this CQ");
  cqs_[static_cast<uint32_t>(id)].reset();
  return Status::ok();
}

int EngineImpl::poll_cq(CqId id, std::span<Wc> out) {
  Cq* c = cq(id);
  if (c == nullptr) return -EINVAL;
  cq_polls_.store(cq_polls_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return c->poll(out);
}

Status EngineImpl::req_notify_cq(CqId id, bool solicited_only) {
  Cq* c = cq(id);
  if (c == nullptr) return Status(EINVAL, "req_notify_cq: no such CQ");
  c->arm(solicited_only);
  return Status::ok();
}

Result<SrqId> EngineImpl::create_srq(PdId pd, const SrqInitAttr& attr) {
  if (!memory_.pd_valid(pd)) return Status(EINVAL, "create_srq: no such protection domain");
  if (attr.max_wr == 0 || attr.max_wr > config_.limits.max_srq_wr) {
    return Status(EINVAL, "create_srq: max_wr must be 1..max_srq_wr");
  }
  if (attr.max_sge > config_.limits.max_srq_sge)
    return Status(EINVAL, "create_srq: max_sge above max_srq_sge");
  auto s = std::make_unique<Srq>();
  s->pd = pd;
  s->max_wr = attr.max_wr;
  s->queue.init(attr.max_wr, std::max(attr.max_sge, 1u), RecvQueue::Mode::kAccept);
  uint32_t slot = 0;
  while (slot < srqs_.size() && srqs_[slot]) ++slot;
  if (slot == srqs_.size()) return Status(ENOMEM, "create_srq: max_srq reached");
  srqs_[slot] = std::move(s);
  memory_.pd_ref(pd, +1);
  return SrqId{slot};
}

Status EngineImpl::modify_srq(SrqId id, const SrqAttr& attr, uint32_t mask) {
  Srq* s = srq(id);
  if (s == nullptr) return Status(EINVAL, "modify_srq: no such SRQ");
  if ((mask & ~(kSrqMaxWr | kSrqLimit)) != 0)
    return Status(EINVAL, "modify_srq: unknown attribute mask bits");
  const uint32_t new_max = (mask & kSrqMaxWr) != 0 ? attr.max_wr : s->max_wr;
  if ((mask & kSrqMaxWr) != 0 && (attr.max_wr > config_.limits.max_srq_wr ||
                                  attr.max_wr < s->queue.size() || attr.max_wr == 0)) {
    return Status(EINVAL, "modify_srq: max_wr must hold the queued WQEs and stay <= max_srq_wr");
  }
  if ((mask & kSrqLimit) != 0 && attr.srq_limit > new_max) {
    return Status(EINVAL, "modify_srq: srq_limit above max_wr");
  }
  if ((mask & kSrqMaxWr) != 0) {
    s->queue.grow(new_max);
    s->max_wr = std::max(new_max, s->max_wr);
  }
  if ((mask & kSrqLimit) != 0) s->limit = attr.srq_limit;
  return Status::ok();
}

Status EngineImpl::query_srq(SrqId id, SrqAttr& attr) const {
  const auto i = static_cast<uint32_t>(id);
  if (i >= srqs_.size() || !srqs_[i]) return Status(EINVAL, "query_srq: no such SRQ");
  const Srq& s = *srqs_[i];
  attr.max_wr = s.max_wr;
  attr.max_sge = s.queue.max_sge();
  attr.srq_limit = s.limit;
  return Status::ok();
}

Status EngineImpl::destroy_srq(SrqId id) {
  Srq* s = srq(id);
  if (s == nullptr) return Status(EINVAL, "destroy_srq: no such SRQ");
  if (s->users != 0) return Status(EBUSY, "destroy_srq: QPs still use this SRQ");
  memory_.pd_ref(s->pd, -1);
  srqs_[static_cast<uint32_t>(id)].reset();
  return Status::ok();
}

Status EngineImpl::post_srq_recv(SrqId id, const RecvWr& wr) {
  Srq* s = srq(id);
  if (s == nullptr) return Status(EINVAL, "post_srq_recv: no such SRQ");
  return s->queue.push(wr);
}

Result<QpInfo> EngineImpl::create_qp(PdId pd, const QpInitAttr& attr) {
  const DeviceLimits& lim = config_.limits;
  if (!memory_.pd_valid(pd)) return Status(EINVAL, "create_qp: no such protection domain");
  if (cq(attr.send_cq) == nullptr || cq(attr.recv_cq) == nullptr) {
    return Status(EINVAL, "create_qp: no such send or receive CQ");
  }
  if (attr.srq && srq(*attr.srq) == nullptr) return Status(EINVAL, "create_qp: no such SRQ");
  if (attr.qp_type != QpType::kRc && attr.qp_type != QpType::kUc && attr.qp_type != QpType::kUd &&
      attr.qp_type != QpType::kGsi) {
    return Status(EINVAL, "create_qp: QP type must be RC, UC, UD or GSI");
  }
  const QpCap& cap = attr.cap;
  if (cap.max_send_wr > lim.max_qp_wr || cap.max_recv_wr > lim.max_qp_wr) {
    return Status(EINVAL, "create_qp: max_send_wr/max_recv_wr above max_qp_wr");
  }
  if (cap.max_send_sge > lim.max_sge || cap.max_recv_sge > lim.max_sge) {
    return Status(EINVAL, "create_qp: max_send_sge/max_recv_sge above max_sge");
  }
  if (cap.max_inline_data > lim.max_inline_data) {
    return Status(EINVAL, "create_qp: max_inline_data above the device limit");
  }
  if (attr.cc != CcAlgorithm::kDefault && attr.cc != CcAlgorithm::kNone &&
      attr.cc != CcAlgorithm::kDcqcn) {
    return Status(EINVAL, "create_qp: cc must be kDefault, kNone or kDcqcn");
  }
  uint32_t slot = 0;
  uint32_t qpn = 0;
  if (attr.qp_type == QpType::kGsi) {
    slot = config_.qpn_count;
    if (qps_[slot]) return Status(EBUSY, "create_qp: QP1 (GSI) exists already");
    qpn = 1;
  } else {
    if (qp_count_ >= config_.qpn_count) return Status(ENOMEM, "create_qp: no free QPN");
    // Round-robin so a destroyed QP's number is not reused at once (late packets).
    slot = next_qp_;
    while (qps_[slot]) slot = (slot + 1) % config_.qpn_count;
    next_qp_ = (slot + 1) % config_.qpn_count;
    qpn = config_.qpn_base + slot;
    ++qp_count_;
  }
  auto qp = std::make_unique<Qp>();
  qp->qpn = qpn;
  qp->index = slot;
  qp->type = attr.qp_type;
  qp->pd = pd;
  qp->send_cq = attr.send_cq;
  qp->recv_cq = attr.recv_cq;
  qp->srq = attr.srq;
  qp->cap = cap;
  if (attr.srq) qp->cap.max_recv_wr = qp->cap.max_recv_sge = 0;
  qp->sq_sig_all = attr.sq_sig_all;
  // Congestion control runs on connected QPs only: a UD/GSI QP has no single peer to pace
  // towards or to send CNPs to.
  qp->cc_algorithm = qp->is_ud()                        ? CcAlgorithm::kNone
                     : attr.cc == CcAlgorithm::kDefault ? config_.cc.algorithm
                                                        : attr.cc;
  install_controller(*qp);
  qp->sport = initial_sport(qpn);
  qp->sq.init(std::max(cap.max_send_wr, 1u), cap.max_send_sge, cap.max_inline_data);
  uint32_t recv_sge = cap.max_recv_sge;
  if (attr.srq) {
    recv_sge = srq(*attr.srq)->queue.max_sge();
  } else {
    qp->rq.init(std::max(cap.max_recv_wr, 1u), cap.max_recv_sge);
  }
  qp->resp.init(kResponseQueueCapacity, lim.max_qp_rd_atom, std::max(recv_sge, 1u));
  qp->attr.path_mtu = Mtu::k1024;
  qp->mtu = qp->is_ud() ? mtu_bytes(config_.active_mtu) : mtu_bytes(qp->attr.path_mtu);
  qp->req.reset(Psn(0), 0);
  qp->comp.reset(Psn(0), 0, 0);
  qp->resp.reset(Psn(0));
  memory_.pd_ref(pd, +1);
  cq(attr.send_cq)->users++;
  cq(attr.recv_cq)->users++;
  if (attr.srq) srq(*attr.srq)->users++;
  QpInfo info{qpn, qp->cap};
  qps_[slot] = std::move(qp);
  return info;
}

void EngineImpl::reset_qp(Qp& qp) {
  qp.state = QpState::kReset;
  qp.sq_draining = false;
  disarm_all_timers(qp);
  install_controller(qp);                 // a reset QP starts again at the line rate
  qp.attr.recovery = Recovery::kGoBackN;  // a new connection agrees again
  qp.sq.reset();
  qp.rq.drain(RecvQueue::Mode::kRefuse, [](uint64_t) {});
  // Its completions still queued go too (Cq::remove_qp says why); a shared CQ keeps the rest.
  for (CqId id : {qp.send_cq, qp.recv_cq}) {
    if (Cq* c = cq(id)) c->remove_qp(qp.qpn);
  }
  qp.req.reset(Psn(0), 0);
  qp.comp.reset(Psn(0), qp.attr.retry_cnt, qp.attr.rnr_retry);
  qp.resp.reset(Psn(0));
}

void EngineImpl::apply_attrs(Qp& qp, const QpAttr& a, uint32_t mask) {
  QpAttr& s = qp.attr;
  if (mask & kQpAccessFlags) s.qp_access_flags = a.qp_access_flags;
  if (mask & kQpPkeyIndex) s.pkey_index = a.pkey_index;
  if (mask & kQpPort) s.port_num = a.port_num;
  if (mask & kQpQkey) s.qkey = a.qkey;
  if (mask & kQpDestQpn) s.dest_qp_num = a.dest_qp_num & Psn::kMask;
  if (mask & kQpAv) {
    s.ah_attr = a.ah_attr;
    // rxe_modify_qp: the UDP source port follows the AV's flow label and the QPNs.
    qp.sport = av_sport(a.ah_attr.flow_label, qp.qpn, s.dest_qp_num);
    if (qp.is_rc()) qp.peer = peers_.index_of(a.ah_attr.dgid);
  }
  if (mask & kQpPathMtu) {
    s.path_mtu = a.path_mtu;
    if (!qp.is_ud()) qp.mtu = mtu_bytes(a.path_mtu);
  }
  if (mask & kQpTimeout) s.timeout = a.timeout;
  if (mask & kQpRetryCnt) s.retry_cnt = a.retry_cnt;
  if (mask & kQpRnrRetry) s.rnr_retry = a.rnr_retry;
  if (mask & (kQpRetryCnt | kQpRnrRetry)) qp.comp.reset_retry_counters(s.retry_cnt, s.rnr_retry);
  if (mask & kQpRqPsn) {
    s.rq_psn = a.rq_psn & Psn::kMask;  // rxe masks wider values to 24 bits
    qp.resp.reset(Psn(s.rq_psn));
  }
  if (mask & kQpSqPsn) {
    s.sq_psn = a.sq_psn & Psn::kMask;
    qp.req.reset(Psn(s.sq_psn), qp.sq.head());
    qp.comp.reset(Psn(s.sq_psn), s.retry_cnt, s.rnr_retry);
  }
  // rxe_qp_from_attr: both depths are rounded up to a power of two.
  if (mask & kQpMaxQpRdAtomic) s.max_rd_atomic = round_up_pow2(a.max_rd_atomic);
  if (mask & kQpMaxDestRdAtomic) {
    s.max_dest_rd_atomic = round_up_pow2(a.max_dest_rd_atomic);
    qp.resp.resize_resources(s.max_dest_rd_atomic);
  }
  if (mask & kQpMinRnrTimer) s.min_rnr_timer = a.min_rnr_timer & 0x1F;
  if (mask & kQpEnSqdAsyncNotify) s.en_sqd_async_notify = a.en_sqd_async_notify;
  if (mask & kQpPathMigState) s.path_mig_state = a.path_mig_state;
  if (mask & kQpUroceRecovery) s.recovery = a.recovery;
}

Status EngineImpl::modify_qp(uint32_t qpn, const QpAttr& attr, uint32_t mask) {
  Qp* qp = qp_by_qpn(qpn);
  if (qp == nullptr) return Status(EINVAL, "modify_qp: no such QP");
  // WRs submitted before the call are in the queue the transition acts on (flushed by ERR,
  // dropped by RESET), as on a NIC that fetched them before the modify.
  take_posts(now_);
  QpState next = qp->state;
  const Status st =
      check_modify_qp(qp->type, qp->state, qp->sq_draining, attr, mask, config_.limits, &next);
  if (!st.is_ok()) return st;
  apply_attrs(*qp, attr, mask);
  switch (next) {
    case QpState::kReset:
      reset_qp(*qp);
      break;
    case QpState::kErr:
      enter_error(*qp);
      break;
    case QpState::kSqd:
      if (qp->state != QpState::kSqd) {
        qp->state = QpState::kSqd;
        qp->sq_draining = true;
        check_drained(*qp);
      }
      break;
    default:
      qp->state = next;
      break;
  }
  qp->sq.set_accepting(accepts_posts(qp->state));
  qp->rq.set_mode(qp->state == QpState::kReset ? RecvQueue::Mode::kRefuse
                  : qp->state == QpState::kErr ? RecvQueue::Mode::kEngine
                                               : RecvQueue::Mode::kAccept);
  schedule_tx(*qp);
  return Status::ok();
}

Status EngineImpl::query_qp(uint32_t qpn, QpAttr& attr, QpInitAttr& init) const {
  const Qp* qp = qp_by_qpn(qpn);
  if (qp == nullptr) return Status(EINVAL, "query_qp: no such QP");
  attr = qp->attr;
  attr.qp_state = qp->state;
  attr.cur_qp_state = qp->state;
  attr.cap = qp->cap;
  attr.sq_draining = qp->sq_draining ? 1 : 0;
  init.qp_type = qp->type;
  init.send_cq = qp->send_cq;
  init.recv_cq = qp->recv_cq;
  init.srq = qp->srq;
  init.cap = qp->cap;
  init.sq_sig_all = qp->sq_sig_all;
  init.cc = qp->cc_algorithm;
  if (qp->cc != nullptr) attr.cc = qp->cc->state();
  return Status::ok();
}

Status EngineImpl::destroy_qp(uint32_t qpn) {
  Qp* qp = qp_by_qpn(qpn);
  if (qp == nullptr) return Status(EINVAL, "destroy_qp: no such QP");
  take_posts(now_);  // unlinks the QP from the list of QPs with submitted WRs
  disarm_all_timers(*qp);
  if (qp->in_tx_list) {
    // Drop its entry from the TX ring, keeping the others in order (setup path).
    uint32_t kept = 0;
    for (uint32_t i = 0; i < tx_count_; ++i) {
      const uint32_t idx = tx_ring_[(tx_head_ + i) % tx_ring_.size()];
      if (idx != qp->index) tx_ring_[(tx_head_ + kept++) % tx_ring_.size()] = idx;
    }
    tx_count_ = kept;
  }
  memory_.unbind_qp(qpn);
  memory_.pd_ref(qp->pd, -1);
  cq(qp->send_cq)->users--;
  cq(qp->recv_cq)->users--;
  if (qp->srq) srq(*qp->srq)->users--;
  if (qp->type != QpType::kGsi) --qp_count_;
  qps_[qp->index].reset();
  return Status::ok();
}

}  // namespace uroce::transport
