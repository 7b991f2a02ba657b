// Engine: the public facade (forwarding to EngineImpl) and the helpers the protocol
// machines share: completions, the error state, the TX ready list, events.
#include "transport/engine.hpp"

#include <algorithm>

#include "transport/cc/factory.hpp"
#include "transport/engine_impl.hpp"
#include "transport/wr_kind.hpp"

namespace uroce::transport {

// ---------------------------------------------------------------------------------------
// EngineImpl: construction and shared helpers.

namespace {

EngineConfig normalized(EngineConfig c) {
  if (c.qpn_count == 0) c.qpn_count = c.limits.max_qp;
  return c;
}

}  // namespace

EngineImpl::EngineImpl(const EngineConfig& config)
    : config_(normalized(config)), memory_(config_.limits, config_.seed) {
  qps_.resize(size_t{config_.qpn_count} + 1);  // the last slot is QP1 (GSI)
  cqs_.resize(config_.limits.max_cq);
  srqs_.resize(config_.limits.max_srq);
  timers_.reserve((config_.qpn_count + 1) * kTimerCount);
  tx_ring_.assign(size_t{config_.qpn_count} + 1, 0);
  events_.assign(1024, AsyncEvent{});
  scratch_wqe_.sges.assign(std::max({config_.limits.max_sge, config_.limits.max_srq_sge, 1u}),
                           Sge{});
}

Srq* EngineImpl::srq(SrqId id) {
  const auto i = static_cast<uint32_t>(id);
  return i < srqs_.size() ? srqs_[i].get() : nullptr;
}

Cq* EngineImpl::cq(CqId id) {
  const auto i = static_cast<uint32_t>(id);
  return i < cqs_.size() ? cqs_[i].get() : nullptr;
}

Qp* EngineImpl::qp_by_qpn(uint32_t qpn) {
  return const_cast<Qp*>(static_cast<const EngineImpl*>(this)->qp_by_qpn(qpn));
}

const Qp* EngineImpl::qp_by_qpn(uint32_t qpn) const {
  if (qpn == 1) return qps_[config_.qpn_count].get();
  if (qpn < config_.qpn_base || qpn - config_.qpn_base >= config_.qpn_count) return nullptr;
  return qps_[qpn - config_.qpn_base].get();
}

const Counters* EngineImpl::qp_counters(uint32_t qpn) const {
  const Qp* qp = qp_by_qpn(qpn);
  return qp == nullptr ? nullptr : &qp->counters;
}

std::optional<Psn> EngineImpl::qp_acked_psn(uint32_t qpn) const {
  const Qp* qp = qp_by_qpn(qpn);
  if (qp == nullptr) return std::nullopt;
  return qp->comp.psn();
}

Status EngineImpl::set_congestion_control(uint32_t qpn, CongestionControl* cc) {
  Qp* qp = qp_by_qpn(qpn);
  if (qp == nullptr) return Status(EINVAL, "set_congestion_control: no such QP");
  qp->cc = cc != nullptr ? cc : qp->own_cc.get();
  sync_cc_timer(*qp);
  disarm_timer(*qp, TimerKind::kPacing);
  schedule_tx(*qp);
  return Status::ok();
}

void EngineImpl::install_controller(Qp& qp) {
  const bool external = qp.cc != nullptr && qp.cc != qp.own_cc.get();
  qp.own_cc = make_controller(qp.cc_algorithm, config_.cc);
  if (!external) qp.cc = qp.own_cc.get();
  qp.cnp_due = false;
  qp.ce_in_gap = false;
}

void EngineImpl::sync_cc_timer(Qp& qp) {
  const TimePoint t = qp.cc != nullptr ? qp.cc->next_timer() : kNever;
  if (t == kNever) {
    disarm_timer(qp, TimerKind::kCc);
  } else {
    arm_timer(qp, TimerKind::kCc, t);
  }
  // A rate change moves the pacer's "not before" time (either way): a requester it holds
  // follows, so a rise applies to the waiting packet rather than after the old gap. A time
  // already passed fires at the next on_timer.
  if (qp.cc != nullptr && timer_armed(qp, TimerKind::kPacing)) {
    arm_timer(qp, TimerKind::kPacing, qp.cc->next_send_time());
  }
}

void EngineImpl::disarm_all_timers(Qp& qp) {
  for (uint32_t k = 0; k < kTimerCount; ++k) disarm_timer(qp, static_cast<TimerKind>(k));
}

void EngineImpl::push_event(EventType type, uint32_t element) {
  if (ev_count_ == events_.size()) {
    count(Counter::kEventOverflow);
    return;
  }
  events_[(ev_head_ + ev_count_) % events_.size()] = AsyncEvent{type, element};
  ++ev_count_;
}

size_t EngineImpl::poll_events(std::span<AsyncEvent> out) {
  size_t n = 0;
  while (n < out.size() && ev_count_ > 0) {
    out[n++] = events_[ev_head_];
    ev_head_ = (ev_head_ + 1) % static_cast<uint32_t>(events_.size());
    --ev_count_;
  }
  return n;
}

void EngineImpl::complete_send_head(Qp& qp, WcStatus status) {
  const SendWqe& w = qp.sq.at(qp.sq.head());
  if (status == WcStatus::kSuccess && is_send_op(w.opcode)) count(qp, Counter::kRdmaSends);
  if (status == WcStatus::kWrFlushErr) {
    count(qp, Counter::kReqCqeFlushError);
  } else if (status != WcStatus::kSuccess) {
    count(qp, Counter::kReqCqeError);
  }
  // IBA 10.7.2.1: unsignaled WQEs complete silently, but never an unsuccessful one.
  const bool report = status != WcStatus::kSuccess || w.signaled;
  Wc wc;
  wc.wr_id = w.wr_id;
  wc.status = status;
  wc.opcode = wc_opcode_of(w.opcode);
  wc.byte_len = w.length;
  wc.qp_num = qp.qpn;
  // The slot is retired before the completion is visible: poll_cq takes no lock, and an
  // application that posts again as soon as it polls (perftest keeps exactly tx_depth WRs
  // outstanding) must find the room its completion promised, or post_send says ENOMEM.
  qp.sq.pop();
  if (report) push_completion(qp, qp.send_cq, wc, false);
}

void EngineImpl::complete_recv(Qp& qp, const Wc& wc, bool solicited) {
  if (wc.status == WcStatus::kWrFlushErr) {
    count(qp, Counter::kRespCqeFlushError);
  } else if (wc.status != WcStatus::kSuccess) {
    count(qp, Counter::kRespCqeError);
  }
  push_completion(qp, qp.recv_cq, wc, solicited);
}

void EngineImpl::push_completion(Qp& qp, CqId cq_id, const Wc& wc, bool solicited) {
  switch (cq(cq_id)->push(wc, solicited, now_)) {
    case Cq::PushResult::kStored:
      break;
    case Cq::PushResult::kStoredNotify:
      push_event(EventType::kCqCompletion, static_cast<uint32_t>(cq_id));
      break;
    case Cq::PushResult::kOverflow:
      count(qp, Counter::kCqOverflow);
      push_event(EventType::kCqErr, static_cast<uint32_t>(cq_id));
      break;
  }
}

bool EngineImpl::take_recv_wqe(Qp& qp, RecvWqe& out) {
  if (!qp.srq) return qp.rq.pop(out);
  Srq* s = srq(*qp.srq);
  if (!s->queue.pop(out)) return false;
  // IBA 10.2.9.4 / ibv_modify_srq(3): the limit event fires once when the number of WQEs
  // drops below the armed limit; the SRQ is then disarmed.
  if (s->limit != 0 && s->queue.size() < s->limit) {
    s->limit = 0;
    push_event(EventType::kSrqLimitReached, static_cast<uint32_t>(*qp.srq));
  }
  return true;
}

void EngineImpl::enter_error(Qp& qp) {
  if (qp.state == QpState::kErr) return;
  qp.state = QpState::kErr;
  qp.sq.set_accepting(true);  // an RTR QP that fails takes posts from now on, to flush them
  qp.sq_draining = false;
  disarm_all_timers(qp);
  qp.ce_in_gap = false;
  // Outstanding send WQEs complete in order: a WQE that failed carries its own status, the
  // rest are flushed (IBA 10.3.1 "Error state").
  while (!qp.sq.empty()) {
    const SendWqe& w = qp.sq.at(qp.sq.head());
    complete_send_head(qp, w.error != WcStatus::kSuccess ? w.error : WcStatus::kWrFlushErr);
  }
  qp.req.reset(qp.req.psn(), qp.sq.head());
  qp.resp.abort_wqe(*this, qp, WcStatus::kWrFlushErr);
  // Receive WQEs of the QP's own queue are flushed; an SRQ keeps its WQEs for other QPs. From
  // now on a post goes to the engine's post_recv, which flushes it at once.
  qp.rq.drain(RecvQueue::Mode::kEngine, [&](uint64_t wr_id) {
    Wc wc;
    wc.wr_id = wr_id;
    wc.status = WcStatus::kWrFlushErr;
    wc.opcode = WcOpcode::kRecv;
    wc.qp_num = qp.qpn;
    complete_recv(qp, wc, false);
  });
  if (qp.srq) push_event(EventType::kQpLastWqeReached, qp.qpn);
  schedule_tx(qp);  // a NAK queued before the error still goes out
}

void EngineImpl::check_drained(Qp& qp) {
  if (qp.state != QpState::kSqd || !qp.sq_draining) return;
  if (!qp.sq.empty() && qp.sq.at(qp.sq.head()).state == WqeState::kStarted) return;
  qp.sq_draining = false;
  if (qp.attr.en_sqd_async_notify != 0) push_event(EventType::kSqDrained, qp.qpn);
}

void EngineImpl::tx_list_push(Qp& qp) {
  qp.in_tx_list = true;
  tx_ring_[(tx_head_ + tx_count_) % tx_ring_.size()] = qp.index;
  ++tx_count_;
}

void EngineImpl::schedule_tx(Qp& qp) {
  if (qp.in_tx_list) return;
  if (qp.cnp_due || qp.resp.has_output() ||
      (qp.req.ready(qp) && !timer_armed(qp, TimerKind::kPacing))) {
    tx_list_push(qp);
  }
}

void EngineImpl::schedule_tx(Qp& qp, TimePoint now) {
  if (qp.req.ready(qp)) (void)pacing_holds(qp, now);
  schedule_tx(qp);
}

bool EngineImpl::pacing_holds(Qp& qp, TimePoint now) {
  if (qp.cc == nullptr) return false;
  const TimePoint not_before = qp.cc->next_send_time();
  if (not_before <= now) return false;
  arm_timer(qp, TimerKind::kPacing, not_before);
  return true;
}

// ---------------------------------------------------------------------------------------
// Engine: forwarding.

Engine::Engine(const EngineConfig& config) : impl_(std::make_unique<EngineImpl>(config)) {}
Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

const EngineConfig& Engine::config() const {
  return impl_->config();
}
void Engine::set_payload_by_reference(bool on) {
  impl_->set_payload_by_reference(on);
}
Result<PdId> Engine::alloc_pd() {
  return impl_->memory().alloc_pd();
}
Status Engine::dealloc_pd(PdId pd) {
  return impl_->memory().dealloc_pd(pd);
}
Result<MrInfo> Engine::reg_mr(PdId pd, void* addr, size_t length, uint32_t access) {
  return impl_->memory().reg_mr(pd, addr, length, access);
}
Result<MrInfo> Engine::rereg_mr(uint32_t lkey, PdId pd, void* addr, size_t length,
                                uint32_t access) {
  return impl_->memory().rereg_mr(lkey, pd, addr, length, access);
}
Status Engine::dereg_mr(uint32_t lkey) {
  return impl_->memory().dereg_mr(lkey);
}
void Engine::set_time(TimePoint now) {
  impl_->set_time(now);
}
Result<uint32_t> Engine::alloc_mw(PdId pd, MwType type) {
  return impl_->memory().alloc_mw(pd, type);
}
Status Engine::dealloc_mw(uint32_t rkey) {
  return impl_->memory().dealloc_mw(rkey);
}
Result<CqId> Engine::create_cq(uint32_t cqe) {
  return impl_->create_cq(cqe);
}
uint32_t Engine::cq_capacity(CqId cq) const {
  const Cq* c = const_cast<EngineImpl&>(*impl_).cq(cq);
  return c == nullptr ? 0 : c->capacity();
}
Status Engine::resize_cq(CqId cq, uint32_t cqe) {
  Cq* c = impl_->cq(cq);
  if (c == nullptr) return Status(EINVAL, "resize_cq: no such CQ");
  if (cqe == 0 || cqe > impl_->config().limits.max_cqe) {
    return Status(EINVAL, "resize_cq: cqe must be 1..max_cqe");
  }
  if (!c->resize(cqe)) {
    return Status(EINVAL, "resize_cq: more completions are queued than the new size holds");
  }
  return Status::ok();
}
Status Engine::destroy_cq(CqId cq) {
  return impl_->destroy_cq(cq);
}
Result<SrqId> Engine::create_srq(PdId pd, const SrqInitAttr& attr) {
  return impl_->create_srq(pd, attr);
}
Status Engine::modify_srq(SrqId srq, const SrqAttr& attr, uint32_t mask) {
  return impl_->modify_srq(srq, attr, mask);
}
Status Engine::query_srq(SrqId srq, SrqAttr& attr) const {
  return impl_->query_srq(srq, attr);
}
Status Engine::destroy_srq(SrqId srq) {
  return impl_->destroy_srq(srq);
}
Result<QpInfo> Engine::create_qp(PdId pd, const QpInitAttr& attr) {
  return impl_->create_qp(pd, attr);
}
Status Engine::modify_qp(uint32_t qpn, const QpAttr& attr, uint32_t mask) {
  return impl_->modify_qp(qpn, attr, mask);
}
Status Engine::query_qp(uint32_t qpn, QpAttr& attr, QpInitAttr& init) const {
  return impl_->query_qp(qpn, attr, init);
}
Status Engine::destroy_qp(uint32_t qpn) {
  return impl_->destroy_qp(qpn);
}
Status Engine::post_send(TimePoint now, uint32_t qpn, const SendWr& wr) {
  return impl_->post_send(now, qpn, wr);
}
Status Engine::post_recv(uint32_t qpn, const RecvWr& wr) {
  return impl_->post_recv(qpn, wr);
}
Status Engine::submit_recv(uint32_t qpn, const RecvWr& wr, bool* to_engine) {
  return impl_->submit_recv(qpn, wr, to_engine);
}
Status Engine::post_srq_recv(SrqId srq, const RecvWr& wr) {
  return impl_->post_srq_recv(srq, wr);
}
int Engine::poll_cq(CqId cq, std::span<Wc> out) {
  return impl_->poll_cq(cq, out);
}
Status Engine::req_notify_cq(CqId cq, bool solicited_only) {
  return impl_->req_notify_cq(cq, solicited_only);
}
void Engine::on_packet(TimePoint now, const PacketMeta& meta, std::span<const uint8_t> roce) {
  impl_->on_packet(now, meta, roce);
}
void Engine::on_timer(TimePoint now) {
  impl_->on_timer(now);
}
TimePoint Engine::next_deadline() const {
  return impl_->next_deadline();
}
size_t Engine::poll_tx(TimePoint now, std::span<TxSlot> slots) {
  return impl_->poll_tx(now, slots);
}
bool Engine::has_tx() const {
  return impl_->has_tx();
}
bool Engine::has_events() const {
  return impl_->has_events();
}
size_t Engine::poll_events(std::span<AsyncEvent> out) {
  return impl_->poll_events(out);
}
const Counters& Engine::counters() const {
  return impl_->counters();
}
const Counters* Engine::qp_counters(uint32_t qpn) const {
  return impl_->qp_counters(qpn);
}
std::optional<Psn> Engine::qp_acked_psn(uint32_t qpn) const {
  return impl_->qp_acked_psn(qpn);
}
Status Engine::submit_send(uint32_t qpn, const SendWr& wr, bool* was_idle) {
  return impl_->submit_send(qpn, wr, was_idle);
}
Status Engine::set_congestion_control(uint32_t qpn, CongestionControl* cc) {
  return impl_->set_congestion_control(qpn, cc);
}

}  // namespace uroce::transport
