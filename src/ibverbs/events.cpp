// Async events (ibv_get_async_event / ibv_ack_async_event): the device's queue carries the
// element as an id (QPN, CQ id, SRQ id); the context's maps turn it back into the
// application's object.
#include "ibverbs/objects.hpp"

using namespace uroce;
using namespace uroce::ibverbs;

extern "C" {

// Blocks until an event comes, or -1 with EAGAIN when the application made async_fd
// O_NONBLOCK and none is queued (as ibv_get_cq_event). An event whose object was destroyed
// meanwhile is skipped.
int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  if (context == nullptr || event == nullptr) return fail_minus1(EINVAL);
  UContext* uctx = ctx_of(context);
  for (;;) {
    auto r = uctx->dev->get_async_event(Nanos(0));
    if (!r && r.status().code() == EAGAIN) {
      if (int rc = wait_app_fd(context->async_fd); rc != 0) return fail_minus1(rc);
      continue;
    }
    if (!r) return fail_minus1(r.status().code());
    const transport::AsyncEvent& e = *r;
    std::lock_guard lock(uctx->mu);
    event->event_type = static_cast<ibv_event_type>(e.type);
    switch (e.type) {
      case transport::EventType::kCqErr: {
        auto it = uctx->cqs.find(e.element);
        if (it == uctx->cqs.end()) continue;
        event->element.cq = ibv_cq_ex_to_cq(&it->second->cq);
        return 0;
      }
      case transport::EventType::kSrqErr:
      case transport::EventType::kSrqLimitReached: {
        auto it = uctx->srqs.find(e.element);
        if (it == uctx->srqs.end()) continue;
        event->element.srq = &it->second->srq;
        return 0;
      }
      case transport::EventType::kCqCompletion:
        continue;  // delivered through completion channels, never here
      default: {
        auto it = uctx->qps.find(e.element);
        if (it == uctx->qps.end()) continue;
        event->element.qp = &it->second->qpx.qp_base;
        return 0;
      }
    }
  }
}

void ibv_ack_async_event(ibv_async_event* event) {
  if (event == nullptr) return;
  pthread_mutex_t* mu = nullptr;
  pthread_cond_t* cond = nullptr;
  uint32_t* counter = nullptr;
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR:
      mu = &event->element.cq->mutex;
      cond = &event->element.cq->cond;
      counter = &event->element.cq->async_events_completed;
      break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      mu = &event->element.srq->mutex;
      cond = &event->element.srq->cond;
      counter = &event->element.srq->events_completed;
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      mu = &event->element.qp->mutex;
      cond = &event->element.qp->cond;
      counter = &event->element.qp->events_completed;
      break;
    default:
      return;  // port and device events have no object to count on
  }
  pthread_mutex_lock(mu);
  ++*counter;
  pthread_cond_signal(cond);
  pthread_mutex_unlock(mu);
}

}  // extern "C"
