#include "uroce/connect.hpp"

namespace uroce {

AhAttr make_ah_attr(const Gid& remote_gid, const ConnectOptions& options) {
  AhAttr ah;
  ah.dgid = remote_gid;
  ah.sgid_index = options.sgid_index;
  ah.port_num = options.port_num;
  ah.traffic_class = options.traffic_class;
  ah.sl = options.sl;
  ah.hop_limit = 64;
  ah.is_global = true;
  return ah;
}

Status qp_to_init(QueuePair& qp, const ConnectOptions& options) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.pkey_index = 0;
  a.port_num = options.port_num;
  uint32_t mask = kQpState | kQpPkeyIndex | kQpPort;
  if (qp.type() == QpType::kUd) {
    a.qkey = options.qkey;
    mask |= kQpQkey;
  } else {
    // UC has no READ or atomics (IBA 9.4.3, 9.4.5): only write access applies.
    a.qp_access_flags = qp.type() == QpType::kUc
                            ? (options.access & (kAccessLocalWrite | kAccessRemoteWrite))
                            : options.access;
    mask |= kQpAccessFlags;
  }
  return qp.modify(a, mask);
}

Status qp_to_rts(QueuePair& qp, uint32_t local_psn, const QpEndpoint& remote,
                 const ConnectOptions& options) {
  QpAttr a;
  a.qp_state = QpState::kRtr;
  uint32_t mask = kQpState;
  if (qp.type() != QpType::kUd) {
    a.path_mtu = options.path_mtu;
    a.dest_qp_num = remote.qpn;
    a.rq_psn = remote.psn;
    a.ah_attr = make_ah_attr(remote.gid, options);
    mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    if (qp.type() == QpType::kRc) {
      a.max_dest_rd_atomic = options.max_dest_rd_atomic;
      a.min_rnr_timer = options.min_rnr_timer;
      mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
      // Go-back-N is the engine's default: leave the extension bit out, so the masks are
      // those of any ibverbs application.
      if (options.recovery != transport::Recovery::kGoBackN) {
        a.recovery = options.recovery;
        mask |= kQpUroceRecovery;
      }
    }
  }
  Status st = qp.modify(a, mask);
  if (!st) return st;

  a = QpAttr{};
  a.qp_state = QpState::kRts;
  a.sq_psn = local_psn;
  mask = kQpState | kQpSqPsn;
  if (qp.type() == QpType::kRc) {
    a.timeout = options.timeout;
    a.retry_cnt = options.retry_cnt;
    a.rnr_retry = options.rnr_retry;
    a.max_rd_atomic = options.max_rd_atomic;
    mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  }
  return qp.modify(a, mask);
}

Status connect_qp(QueuePair& qp, uint32_t local_psn, const QpEndpoint& remote,
                  const ConnectOptions& options) {
  Status st = qp_to_init(qp, options);
  if (!st) return st;
  return qp_to_rts(qp, local_psn, remote, options);
}

}  // namespace uroce
