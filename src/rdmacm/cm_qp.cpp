// The QPs of rdma_cm ids: rdma_create_qp(_ex) (with the CQs librdmacm makes when the
// application gives none), the transitions the library drives itself, rdma_init_qp_attr, and
// SRQs. Attributes follow the kernel's cm_init_qp_*_attr and librdmacm's ucma_modify_qp_*:
// docs/cm.md has the table.
#include <cerrno>
#include <cstring>

#include "rdmacm/state.hpp"

namespace uroce::rdmacm {
namespace {

void destroy_cqs(rdma_cm_id* id) {
  if (id->recv_cq != nullptr) {
    ibv_destroy_cq(id->recv_cq);
    if (id->send_cq != nullptr && id->send_cq != id->recv_cq) ibv_destroy_cq(id->send_cq);
  } else if (id->send_cq != nullptr) {
    ibv_destroy_cq(id->send_cq);
  }
  id->recv_cq = id->send_cq = nullptr;
  if (id->recv_cq_channel != nullptr) ibv_destroy_comp_channel(id->recv_cq_channel);
  if (id->send_cq_channel != nullptr && id->send_cq_channel != id->recv_cq_channel) {
    ibv_destroy_comp_channel(id->send_cq_channel);
  }
  id->recv_cq_channel = id->send_cq_channel = nullptr;
}

// librdmacm's ucma_create_cqs: a CQ with its own completion channel for each direction the
// application left without one.
int create_cqs(rdma_cm_id* id, uint32_t send_size, uint32_t recv_size) {
  const auto make = [&](uint32_t size, ibv_comp_channel*& ch, ibv_cq*& cq) {
    ch = ibv_create_comp_channel(id->verbs);
    if (ch == nullptr) return false;
    cq = ibv_create_cq(id->verbs, static_cast<int>(size), id, ch, 0);
    return cq != nullptr;
  };
  if ((recv_size != 0 && !make(recv_size, id->recv_cq_channel, id->recv_cq)) ||
      (send_size != 0 && !make(send_size, id->send_cq_channel, id->send_cq))) {
    const int err = errno;
    destroy_cqs(id);
    return fail(err);
  }
  return 0;
}

int modify(ibv_qp* qp, IdPriv& id, ibv_qp_state state) {
  ibv_qp_attr attr{};
  int mask = 0;
  if (qp_attr_for(id, state, attr, mask) != 0) return -1;
  const int rc = ibv_modify_qp(qp, &attr, mask);
  return rc == 0 ? 0 : fail(rc);
}

}  // namespace

int qp_attr_for(IdPriv& id, ibv_qp_state state, ibv_qp_attr& attr, int& mask) {
  std::memset(&attr, 0, sizeof attr);
  attr.qp_state = state;
  const ibv_qp_type type = id.id.qp != nullptr ? id.id.qp->qp_type : id.id.qp_type;
  const bool ud = type == IBV_QPT_UD;
  const bool rc = type == IBV_QPT_RC;
  switch (state) {
    case IBV_QPS_INIT:
      attr.pkey_index = 0;
      attr.port_num = id.id.port_num != 0 ? id.id.port_num : 1;
      mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
      if (ud) {
        attr.qkey = id.ud_qkey;
        mask |= IBV_QP_QKEY;
      } else {
        attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
        if (rc && id.responder_resources != 0) {
          attr.qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        }
        mask |= IBV_QP_ACCESS_FLAGS;
      }
      return 0;
    case IBV_QPS_RTR: {
      mask = IBV_QP_STATE;
      if (ud) return 0;
      if (id.state != IdState::kRequest && id.state != IdState::kConnecting &&
          id.state != IdState::kAccepting && id.state != IdState::kConnectResponse &&
          id.state != IdState::kConnected) {
        return fail(EINVAL);  // no peer yet
      }
      const ConnAttrs& c = id.conn;
      attr.path_mtu = static_cast<ibv_mtu>(c.path_mtu);
      attr.dest_qp_num = c.remote_qpn;
      attr.rq_psn = c.rq_psn;
      ibv_ah_attr& ah = attr.ah_attr;
      ah.is_global = 1;
      ah.grh.dgid = id.id.route.addr.addr.ibaddr.dgid;
      ah.grh.sgid_index = static_cast<uint8_t>(id.sgid_index);
      ah.grh.hop_limit = c.hop_limit;
      ah.grh.traffic_class = id.tos_set ? id.tos : c.traffic_class;
      ah.grh.flow_label = c.flow_label;
      ah.port_num = id.id.port_num != 0 ? id.id.port_num : 1;
      mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      if (rc) {
        attr.max_dest_rd_atomic = c.max_dest_rd_atomic;
        attr.min_rnr_timer = 0;  // cm_init_qp_rtr_attr's
        mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      }
      return 0;
    }
    case IBV_QPS_RTS: {
      const ConnAttrs& c = id.conn;
      attr.sq_psn = ud ? 0 : c.sq_psn;
      mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
      if (rc) {
        attr.timeout = c.timeout;
        attr.retry_cnt = c.retry_count;
        attr.rnr_retry = c.rnr_retry;
        attr.max_rd_atomic = c.max_rd_atomic;
        mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
      }
      return 0;
    }
    default:
      return fail(EINVAL);
  }
}

int move_qp_to_rts(IdPriv& id) {
  ibv_qp* qp = id.id.qp;
  if (qp == nullptr) return 0;
  // INIT again first: the access flags depend on the responder resources agreed since.
  if (modify(qp, id, IBV_QPS_INIT) != 0 || modify(qp, id, IBV_QPS_RTR) != 0) return -1;
  return modify(qp, id, IBV_QPS_RTS);
}

void move_qp_to_error(IdPriv& id) {
  if (id.id.qp == nullptr) return;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  (void)ibv_modify_qp(id.id.qp, &attr, IBV_QP_STATE);
}

}  // namespace uroce::rdmacm

using namespace uroce::rdmacm;

extern "C" {

int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (id == nullptr || qp_attr == nullptr || qp_attr_mask == nullptr) return fail(EINVAL);
  std::lock_guard lock(Runtime::get().mu);
  return qp_attr_for(*priv_of(id), qp_attr->qp_state, *qp_attr, *qp_attr_mask);
}

int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
  if (id == nullptr || attr == nullptr || id->qp != nullptr || id->verbs == nullptr) {
    return fail(EINVAL);
  }
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_PD) == 0 || attr->pd == nullptr) {
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
    attr->pd = id->pd;
  } else if (attr->pd->context != id->verbs) {
    return fail(EINVAL);
  }
  if ((id->recv_cq != nullptr && attr->recv_cq != nullptr && id->recv_cq != attr->recv_cq) ||
      (id->send_cq != nullptr && attr->send_cq != nullptr && id->send_cq != attr->send_cq)) {
    return fail(EINVAL);
  }
  if (create_cqs(id, attr->send_cq != nullptr || id->send_cq != nullptr ? 0 : attr->cap.max_send_wr,
                 attr->recv_cq != nullptr || id->recv_cq != nullptr ? 0 : attr->cap.max_recv_wr) !=
      0) {
    return -1;
  }
  if (attr->send_cq == nullptr) attr->send_cq = id->send_cq;
  if (attr->recv_cq == nullptr) attr->recv_cq = id->recv_cq;
  if (id->srq != nullptr && attr->srq == nullptr) attr->srq = id->srq;
  ibv_qp* qp = ibv_create_qp_ex(id->verbs, attr);
  if (qp == nullptr) {
    const int err = errno;
    destroy_cqs(id);
    return fail(err);
  }
  IdPriv& p = *priv_of(id);
  int rc = 0;
  {
    std::lock_guard lock(Runtime::get().mu);
    id->qp = qp;
    rc = modify(qp, p, IBV_QPS_INIT);
    if (rc == 0 && qp->qp_type == IBV_QPT_UD) {
      rc = modify(qp, p, IBV_QPS_RTR);
      if (rc == 0) rc = modify(qp, p, IBV_QPS_RTS);
    }
    if (rc != 0) id->qp = nullptr;
  }
  if (rc != 0) {
    const int err = errno;
    ibv_destroy_qp(qp);
    destroy_cqs(id);
    return fail(err);
  }
  id->pd = qp->pd;
  return 0;
}

int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (id == nullptr || qp_init_attr == nullptr) return fail(EINVAL);
  ibv_qp_init_attr_ex ex{};
  std::memcpy(&ex, qp_init_attr, sizeof *qp_init_attr);
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd != nullptr ? pd : id->pd;
  const int rc = rdma_create_qp_ex(id, &ex);
  std::memcpy(qp_init_attr, &ex, sizeof *qp_init_attr);
  return rc;
}

void rdma_destroy_qp(rdma_cm_id* id) {
  if (id == nullptr) return;
  if (id->qp != nullptr) ibv_destroy_qp(id->qp);
  {
    std::lock_guard lock(Runtime::get().mu);
    id->qp = nullptr;
  }
  destroy_cqs(id);
}

int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (id == nullptr || attr == nullptr || id->verbs == nullptr) return fail(EINVAL);
  ibv_srq* srq = ibv_create_srq(pd != nullptr ? pd : id->pd, attr);
  if (srq == nullptr) return -1;
  id->srq = srq;
  id->pd = srq->pd;
  return 0;
}

int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  if (id == nullptr || attr == nullptr) return fail(EINVAL);
  if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) != 0 && attr->srq_type != IBV_SRQT_BASIC) {
    return fail(EOPNOTSUPP);  // uroce has no XRC
  }
  ibv_srq_init_attr basic{};
  basic.srq_context = attr->srq_context;
  basic.attr = attr->attr;
  const bool has_pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) != 0 && attr->pd != nullptr;
  const int rc = rdma_create_srq(id, has_pd ? attr->pd : nullptr, &basic);
  attr->attr = basic.attr;
  return rc;
}

void rdma_destroy_srq(rdma_cm_id* id) {
  if (id == nullptr || id->srq == nullptr) return;
  ibv_destroy_srq(id->srq);
  id->srq = nullptr;
}

}  // extern "C"
