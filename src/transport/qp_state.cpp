// The QP state transition table (see qp_state.hpp). Values transcribed from Linux 6.1
// core/verbs.c qp_state_table, as listed in docs/rxe-facts.md §1.
#include "transport/qp_state.hpp"

#include <array>
#include <cerrno>

namespace uroce::transport {
namespace {

constexpr int kTypeUd = 0;
constexpr int kTypeUc = 1;
constexpr int kTypeRc = 2;
constexpr int kTypeGsi = 3;
constexpr int kStates = 7;

struct Entry {
  bool valid = false;
  std::array<uint32_t, 4> req{};  // by kType*
  std::array<uint32_t, 4> opt{};
};

using Table = std::array<std::array<Entry, kStates>, kStates>;

constexpr int idx(QpState s) {
  return static_cast<int>(s);
}

constexpr Table make_table() {
  Table t{};
  const auto all_valid = [&](QpState from, QpState to) { t[idx(from)][idx(to)].valid = true; };
  using S = QpState;
  for (S from : {S::kReset, S::kInit, S::kRtr, S::kRts, S::kSqd, S::kSqe, S::kErr}) {
    all_valid(from, S::kReset);
    if (from != S::kReset) all_valid(from, S::kErr);
  }

  Entry& reset_init = t[idx(S::kReset)][idx(S::kInit)];
  reset_init.valid = true;
  reset_init.req[kTypeUd] = kQpPkeyIndex | kQpPort | kQpQkey;
  reset_init.req[kTypeUc] = kQpPkeyIndex | kQpPort | kQpAccessFlags;
  reset_init.req[kTypeRc] = kQpPkeyIndex | kQpPort | kQpAccessFlags;
  reset_init.req[kTypeGsi] = kQpPkeyIndex | kQpQkey;

  Entry& init_init = t[idx(S::kInit)][idx(S::kInit)];
  init_init.valid = true;
  init_init.opt[kTypeUd] = kQpPkeyIndex | kQpPort | kQpQkey;
  init_init.opt[kTypeUc] = kQpPkeyIndex | kQpPort | kQpAccessFlags;
  init_init.opt[kTypeRc] = kQpPkeyIndex | kQpPort | kQpAccessFlags;
  init_init.opt[kTypeGsi] = kQpPkeyIndex | kQpQkey;

  Entry& init_rtr = t[idx(S::kInit)][idx(S::kRtr)];
  init_rtr.valid = true;
  init_rtr.req[kTypeUc] = kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
  init_rtr.req[kTypeRc] =
      kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
  init_rtr.opt[kTypeUd] = kQpPkeyIndex | kQpQkey;
  init_rtr.opt[kTypeUc] = kQpAltPath | kQpAccessFlags | kQpPkeyIndex;
  init_rtr.opt[kTypeRc] = kQpAltPath | kQpAccessFlags | kQpPkeyIndex | kQpUroceRecovery;
  init_rtr.opt[kTypeGsi] = kQpPkeyIndex | kQpQkey;

  Entry& rtr_rts = t[idx(S::kRtr)][idx(S::kRts)];
  rtr_rts.valid = true;
  rtr_rts.req[kTypeUd] = kQpSqPsn;
  rtr_rts.req[kTypeUc] = kQpSqPsn;
  rtr_rts.req[kTypeRc] = kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  rtr_rts.req[kTypeGsi] = kQpSqPsn;
  rtr_rts.opt[kTypeUd] = kQpCurState | kQpQkey;
  rtr_rts.opt[kTypeUc] = kQpCurState | kQpAltPath | kQpAccessFlags | kQpPathMigState;
  rtr_rts.opt[kTypeRc] =
      kQpCurState | kQpAltPath | kQpAccessFlags | kQpMinRnrTimer | kQpPathMigState;
  rtr_rts.opt[kTypeGsi] = kQpCurState | kQpQkey;

  Entry& rts_rts = t[idx(S::kRts)][idx(S::kRts)];
  rts_rts.valid = true;
  rts_rts.opt[kTypeUd] = kQpCurState | kQpQkey;
  rts_rts.opt[kTypeUc] = kQpCurState | kQpAccessFlags | kQpAltPath | kQpPathMigState;
  rts_rts.opt[kTypeRc] =
      kQpCurState | kQpAccessFlags | kQpAltPath | kQpPathMigState | kQpMinRnrTimer;
  rts_rts.opt[kTypeGsi] = kQpCurState | kQpQkey;

  Entry& rts_sqd = t[idx(S::kRts)][idx(S::kSqd)];
  rts_sqd.valid = true;
  for (int ty = 0; ty < 4; ++ty) rts_sqd.opt[ty] = kQpEnSqdAsyncNotify;

  Entry& sqd_rts = t[idx(S::kSqd)][idx(S::kRts)];
  sqd_rts.valid = true;
  sqd_rts.opt[kTypeUd] = kQpCurState | kQpQkey;
  sqd_rts.opt[kTypeUc] = kQpCurState | kQpAltPath | kQpAccessFlags | kQpPathMigState;
  sqd_rts.opt[kTypeRc] =
      kQpCurState | kQpAltPath | kQpAccessFlags | kQpMinRnrTimer | kQpPathMigState;
  sqd_rts.opt[kTypeGsi] = kQpCurState | kQpQkey;

  Entry& sqd_sqd = t[idx(S::kSqd)][idx(S::kSqd)];
  sqd_sqd.valid = true;
  sqd_sqd.opt[kTypeUd] = kQpPkeyIndex | kQpQkey;
  sqd_sqd.opt[kTypeUc] = kQpAv | kQpAltPath | kQpAccessFlags | kQpPkeyIndex | kQpPathMigState;
  sqd_sqd.opt[kTypeRc] = kQpPort | kQpAv | kQpTimeout | kQpRetryCnt | kQpRnrRetry |
                         kQpMaxQpRdAtomic | kQpMaxDestRdAtomic | kQpAltPath | kQpAccessFlags |
                         kQpPkeyIndex | kQpMinRnrTimer | kQpPathMigState;
  sqd_sqd.opt[kTypeGsi] = kQpPkeyIndex | kQpQkey;

  Entry& sqe_rts = t[idx(S::kSqe)][idx(S::kRts)];
  sqe_rts.valid = true;
  sqe_rts.opt[kTypeUd] = kQpCurState | kQpQkey;
  sqe_rts.opt[kTypeUc] = kQpCurState | kQpAccessFlags;
  sqe_rts.opt[kTypeGsi] = kQpCurState | kQpQkey;
  return t;
}

constexpr Table kTable = make_table();

constexpr int type_index(QpType type) {
  switch (type) {
    case QpType::kUd:
      return kTypeUd;
    case QpType::kUc:
      return kTypeUc;
    case QpType::kRc:
      return kTypeRc;
    case QpType::kGsi:
      return kTypeGsi;
  }
  return kTypeRc;
}

// IBV_QP_STATE .. IBV_QP_DEST_QPN, and uroce's recovery bit (the drop-in refuses that one).
constexpr uint32_t kKnownBits = ((1u << 21) - 1) | kQpUroceRecovery;

}  // namespace

TransitionMasks transition_masks(QpType type, QpState from, QpState to) {
  const Entry& e = kTable[idx(from)][idx(to)];
  return {e.valid, e.req[type_index(type)], e.opt[type_index(type)]};
}

Status check_modify_qp(QpType type, QpState real_state, bool sq_draining, const QpAttr& attr,
                       uint32_t mask, const DeviceLimits& limits, QpState* new_state) {
  // rxe_modify_qp refuses any bit outside 0..20 (RATE_LIMIT included) before the table.
  if ((mask & ~kKnownBits) != 0) {
    return Status(EOPNOTSUPP,
                  "modify_qp: attribute mask bits outside IBV_QP_STATE..IBV_QP_DEST_QPN");
  }
  if (((mask & kQpCurState) != 0 && idx(attr.cur_qp_state) > idx(QpState::kErr)) ||
      ((mask & kQpState) != 0 && idx(attr.qp_state) > idx(QpState::kErr))) {
    return Status(EINVAL, "modify_qp: state value out of range");
  }
  // ib_modify_qp_is_ok: a supplied current state must be RTR, RTS, SQD or SQE, and the
  // table is looked up with it (not compared with the real state, like rxe).
  QpState cur = real_state;
  if ((mask & kQpCurState) != 0) {
    cur = attr.cur_qp_state;
    if (cur != QpState::kRtr && cur != QpState::kRts && cur != QpState::kSqd &&
        cur != QpState::kSqe) {
      return Status(EINVAL, "modify_qp: IBV_QP_CUR_STATE must be RTR, RTS, SQD or SQE");
    }
  }
  const QpState next = (mask & kQpState) != 0 ? attr.qp_state : cur;
  const TransitionMasks m = transition_masks(type, cur, next);
  if (!m.valid) return Status(EINVAL, "modify_qp: invalid state transition");
  const uint32_t given = mask & ~kQpState;
  if ((given & m.required) != m.required) {
    return Status(EINVAL, "modify_qp: a required attribute for this transition is missing");
  }
  if ((given & ~(m.required | m.optional)) != 0) {
    return Status(EINVAL, "modify_qp: attribute not allowed for this transition and QP type");
  }
  // rxe_qp_chk_attr: a draining SQD QP may only go to ERR.
  if (real_state == QpState::kSqd && sq_draining && next != QpState::kErr &&
      next != QpState::kReset) {
    return Status(EINVAL, "modify_qp: send queue still draining; only ERR or RESET allowed");
  }
  if ((mask & kQpPort) != 0 && (attr.port_num < 1 || attr.port_num > limits.phys_port_cnt))
    return Status(EINVAL, "modify_qp: port_num names no port of this device");
  if ((mask & kQpAv) != 0) {
    if (!attr.ah_attr.is_global)
      return Status(EINVAL, "modify_qp: a RoCE address vector needs a GRH");
    if (attr.ah_attr.port_num < 1 || attr.ah_attr.port_num > limits.phys_port_cnt)
      return Status(EINVAL, "modify_qp: AV port_num names no port of this device");
  }
  // RoCE has no automatic path migration (core refuses ALT_PATH on RoCE ports).
  if ((mask & kQpAltPath) != 0)
    return Status(EINVAL, "modify_qp: alternate paths are not supported on RoCE");
  if ((mask & kQpPathMtu) != 0 &&
      (static_cast<uint8_t>(attr.path_mtu) < 1 || static_cast<uint8_t>(attr.path_mtu) > 5)) {
    return Status(EINVAL, "modify_qp: path_mtu must be IBV_MTU_256..IBV_MTU_4096");
  }
  if ((mask & kQpTimeout) != 0 && attr.timeout > 31)
    return Status(EINVAL, "modify_qp: timeout > 31");
  if ((mask & kQpMaxQpRdAtomic) != 0 && attr.max_rd_atomic > limits.max_qp_init_rd_atom) {
    return Status(EINVAL, "modify_qp: max_rd_atomic above max_qp_init_rd_atom");
  }
  // Stricter than rxe (which only has the u8 limit): responder resources are pre-sized.
  if ((mask & kQpMaxDestRdAtomic) != 0 && attr.max_dest_rd_atomic > limits.max_qp_rd_atom) {
    return Status(EINVAL, "modify_qp: max_dest_rd_atomic above max_qp_rd_atom");
  }
  if ((mask & kQpRetryCnt) != 0 && attr.retry_cnt > 7)
    return Status(EINVAL, "modify_qp: retry_cnt > 7");
  if ((mask & kQpRnrRetry) != 0 && attr.rnr_retry > 7)
    return Status(EINVAL, "modify_qp: rnr_retry > 7");
  *new_state = next;
  return Status::ok();
}

}  // namespace uroce::transport
