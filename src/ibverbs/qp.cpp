// Queue pairs: create (RC, UC, UD), modify, query, destroy. Attribute structs map field
// for field onto the engine's (verbs_types.hpp keeps ibverbs' numeric values), and the
// attribute mask bits are IBV_QP_* unchanged, so the engine applies the IBTA/rxe
// transition table to exactly what the application asked for.
#include <cstring>
#include <new>

#include "ibverbs/objects.hpp"

using namespace uroce;
using namespace uroce::ibverbs;

namespace {

bool supported_type(ibv_qp_type t) {
  return t == IBV_QPT_RC || t == IBV_QPT_UC || t == IBV_QPT_UD;
}

}  // namespace

namespace uroce::ibverbs {

ibv_qp_init_attr_ex init_attr_ex(ibv_pd* pd, const ibv_qp_init_attr& attr) {
  ibv_qp_init_attr_ex ex;
  std::memset(&ex, 0, sizeof ex);
  ex.qp_context = attr.qp_context;
  ex.send_cq = attr.send_cq;
  ex.recv_cq = attr.recv_cq;
  ex.srq = attr.srq;
  ex.cap = attr.cap;
  ex.qp_type = attr.qp_type;
  ex.sq_sig_all = attr.sq_sig_all;
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd;
  return ex;
}

ibv_qp* make_qp(ibv_pd* pd, const ibv_qp_init_attr_ex& attr, ibv_qp_cap& granted_out, bool gsi) {
  if (pd == nullptr || attr.send_cq == nullptr || attr.recv_cq == nullptr) {
    return fail_null<ibv_qp>(EINVAL);
  }
  if (!supported_type(attr.qp_type)) return fail_null<ibv_qp>(EOPNOTSUPP);
  if (gsi && attr.qp_type != IBV_QPT_UD) return fail_null<ibv_qp>(EINVAL);
  ibv_context* context = pd->context;
  transport::QpInitAttr init;
  init.qp_type = gsi ? transport::QpType::kGsi : static_cast<transport::QpType>(attr.qp_type);
  init.send_cq = cq_of(attr.send_cq)->id;
  init.recv_cq = cq_of(attr.recv_cq)->id;
  if (attr.srq != nullptr) init.srq = srq_of(attr.srq)->id;
  init.cap.max_send_wr = attr.cap.max_send_wr;
  init.cap.max_recv_wr = attr.cap.max_recv_wr;
  init.cap.max_send_sge = attr.cap.max_send_sge;
  init.cap.max_recv_sge = attr.cap.max_recv_sge;
  init.cap.max_inline_data = attr.cap.max_inline_data;
  init.sq_sig_all = attr.sq_sig_all != 0;
  device::Device& dev = dev_of(context);
  auto r = dev.create_qp(pd_of(pd)->id, init);
  if (!r) return fail_null<ibv_qp>(r.status().code());
  auto* qp = new (std::nothrow) UQp;
  if (qp == nullptr) {
    (void)dev.destroy_qp(r->qpn);
    return fail_null<ibv_qp>(ENOMEM);
  }
  ibv_qp& q = qp->qpx.qp_base;
  q.context = context;
  q.qp_context = attr.qp_context;
  q.pd = pd;
  q.send_cq = attr.send_cq;
  q.recv_cq = attr.recv_cq;
  q.srq = attr.srq;
  q.handle = r->qpn;
  q.qp_num = r->qpn;
  q.state = IBV_QPS_RESET;
  q.qp_type = attr.qp_type;
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  // ibv_create_qp reports the capabilities granted, which may exceed those asked for.
  granted_out.max_send_wr = r->cap.max_send_wr;
  granted_out.max_recv_wr = attr.srq != nullptr ? 0 : r->cap.max_recv_wr;
  granted_out.max_send_sge = r->cap.max_send_sge;
  granted_out.max_recv_sge = attr.srq != nullptr ? 0 : r->cap.max_recv_sge;
  granted_out.max_inline_data = r->cap.max_inline_data;
  if ((attr.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0) {
    if (const int rc = install_qp_ex_ops(*qp, attr.send_ops_flags, granted_out); rc != 0) {
      (void)dev.destroy_qp(r->qpn);
      delete qp;
      return fail_null<ibv_qp>(rc);
    }
  }
  UContext* uctx = ctx_of(context);
  std::lock_guard lock(uctx->mu);
  uctx->qps[r->qpn] = qp;
  return &q;
}

ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  if (context == nullptr || attr == nullptr) return fail_null<ibv_qp>(EINVAL);
  // A PD, empty create flags and the ibv_wr_* send API: no XRC, RSS or TSO.
  constexpr uint32_t kKnown =
      IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  if ((attr->comp_mask & ~kKnown) != 0) return fail_null<ibv_qp>(EOPNOTSUPP);
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0 && supported_type(attr->qp_type) &&
      (attr->send_ops_flags & ~supported_send_ops(attr->qp_type)) != 0) {
    return fail_null<ibv_qp>(EOPNOTSUPP);
  }
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_PD) == 0 || attr->pd == nullptr) {
    return fail_null<ibv_qp>(EINVAL);
  }
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) != 0 && attr->create_flags != 0) {
    return fail_null<ibv_qp>(EOPNOTSUPP);
  }
  if (attr->pd->context != context) return fail_null<ibv_qp>(EINVAL);
  return make_qp(attr->pd, *attr, attr->cap, /*gsi=*/false);
}

}  // namespace uroce::ibverbs

extern "C" {

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (pd == nullptr || attr == nullptr) return fail_null<ibv_qp>(EINVAL);
  return make_qp(pd, init_attr_ex(pd, *attr), attr->cap, /*gsi=*/false);
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  if (qp == nullptr || attr == nullptr) return fail_int(EINVAL);
  const auto mask = static_cast<uint32_t>(attr_mask);
  // uroce's selective-repeat bit is not an ibv bit: the drop-in stays RoCE v2 go-back-N and
  // refuses it as rxe refuses every unknown bit.
  if ((mask & transport::kQpUroceRecovery) != 0) return fail_int(EOPNOTSUPP);
  transport::QpAttr a;
  a.qp_state = static_cast<transport::QpState>(attr->qp_state);
  a.cur_qp_state = static_cast<transport::QpState>(attr->cur_qp_state);
  a.path_mtu = static_cast<transport::Mtu>(attr->path_mtu);
  a.path_mig_state = static_cast<uint8_t>(attr->path_mig_state);
  a.qkey = attr->qkey;
  a.rq_psn = attr->rq_psn;
  a.sq_psn = attr->sq_psn;
  a.dest_qp_num = attr->dest_qp_num;
  a.qp_access_flags = attr->qp_access_flags;
  a.cap.max_send_wr = attr->cap.max_send_wr;
  a.cap.max_recv_wr = attr->cap.max_recv_wr;
  a.cap.max_send_sge = attr->cap.max_send_sge;
  a.cap.max_recv_sge = attr->cap.max_recv_sge;
  a.cap.max_inline_data = attr->cap.max_inline_data;
  if ((mask & IBV_QP_AV) != 0) {
    if (int rc = ah_from_ibv(qp->context, attr->ah_attr, a.ah_attr); rc != 0) return fail_int(rc);
    if ((mask & IBV_QP_PORT) != 0 && attr->ah_attr.port_num == 0) {
      a.ah_attr.port_num = attr->port_num;
    }
  }
  if ((mask & IBV_QP_ALT_PATH) != 0) {
    if (int rc = ah_from_ibv(qp->context, attr->alt_ah_attr, a.alt_ah_attr); rc != 0)
      return fail_int(rc);
  }
  a.pkey_index = attr->pkey_index;
  a.alt_pkey_index = attr->alt_pkey_index;
  a.en_sqd_async_notify = attr->en_sqd_async_notify;
  a.max_rd_atomic = attr->max_rd_atomic;
  a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
  a.min_rnr_timer = attr->min_rnr_timer;
  a.port_num = attr->port_num;
  a.timeout = attr->timeout;
  a.retry_cnt = attr->retry_cnt;
  a.rnr_retry = attr->rnr_retry;
  a.alt_port_num = attr->alt_port_num;
  a.alt_timeout = attr->alt_timeout;
  a.rate_limit = attr->rate_limit;
  transport::Status st = dev_of(qp->context).modify_qp(qp->qp_num, a, mask);
  if (!st) return fail_int(st.code());
  if ((mask & IBV_QP_STATE) != 0) qp->state = attr->qp_state;
  return 0;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
  if (qp == nullptr || attr == nullptr || init_attr == nullptr) return fail_int(EINVAL);
  (void)attr_mask;  // every attribute is returned, as rdma-core does
  transport::QpAttr a;
  transport::QpInitAttr init;
  transport::Status st = dev_of(qp->context).query_qp(qp->qp_num, a, init);
  if (!st) return fail_int(st.code());
  std::memset(attr, 0, sizeof *attr);
  attr->qp_state = static_cast<ibv_qp_state>(a.qp_state);
  attr->cur_qp_state = static_cast<ibv_qp_state>(a.cur_qp_state);
  attr->path_mtu = static_cast<ibv_mtu>(a.path_mtu);
  attr->path_mig_state = static_cast<ibv_mig_state>(a.path_mig_state);
  attr->qkey = a.qkey;
  attr->rq_psn = a.rq_psn;
  attr->sq_psn = a.sq_psn;
  attr->dest_qp_num = a.dest_qp_num;
  attr->qp_access_flags = a.qp_access_flags;
  attr->cap.max_send_wr = a.cap.max_send_wr;
  attr->cap.max_recv_wr = a.cap.max_recv_wr;
  attr->cap.max_send_sge = a.cap.max_send_sge;
  attr->cap.max_recv_sge = a.cap.max_recv_sge;
  attr->cap.max_inline_data = a.cap.max_inline_data;
  ah_to_ibv(a.ah_attr, attr->ah_attr);
  ah_to_ibv(a.alt_ah_attr, attr->alt_ah_attr);
  attr->pkey_index = a.pkey_index;
  attr->alt_pkey_index = a.alt_pkey_index;
  attr->en_sqd_async_notify = a.en_sqd_async_notify;
  attr->sq_draining = a.sq_draining;
  attr->max_rd_atomic = a.max_rd_atomic;
  attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
  attr->min_rnr_timer = a.min_rnr_timer;
  attr->port_num = a.port_num;
  attr->timeout = a.timeout;
  attr->retry_cnt = a.retry_cnt;
  attr->rnr_retry = a.rnr_retry;
  attr->alt_port_num = a.alt_port_num;
  attr->alt_timeout = a.alt_timeout;
  attr->rate_limit = a.rate_limit;
  std::memset(init_attr, 0, sizeof *init_attr);
  init_attr->qp_context = qp->qp_context;
  init_attr->send_cq = qp->send_cq;
  init_attr->recv_cq = qp->recv_cq;
  init_attr->srq = qp->srq;
  init_attr->cap = attr->cap;
  init_attr->qp_type = qp->qp_type;
  init_attr->sq_sig_all = init.sq_sig_all ? 1 : 0;
  qp->state = attr->qp_state;
  return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
  if (qp == nullptr) return fail_int(EINVAL);
  UContext* uctx = ctx_of(qp->context);
  transport::Status st = uctx->dev->destroy_qp(qp->qp_num);
  if (!st) return fail_int(st.code());
  {
    std::lock_guard lock(uctx->mu);
    uctx->qps.erase(qp->qp_num);
  }
  pthread_mutex_destroy(&qp->mutex);
  pthread_cond_destroy(&qp->cond);
  delete reinterpret_cast<UQp*>(qp);
  return 0;
}

// The ibv_wr_* API of a QP created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS; NULL for any other
// QP, as rdma-core answers for a QP without the extended ops.
ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  if (qp == nullptr) return fail_null<ibv_qp_ex>(EINVAL);
  UQp* u = reinterpret_cast<UQp*>(qp);
  if (u->batch == nullptr) return fail_null<ibv_qp_ex>(EOPNOTSUPP);
  return &u->qpx;
}

}  // extern "C"
