// The ibv_modify_qp admission check: the IBTA QP state transition table with the required
// and optional attribute masks per QP type (IBA 10.3, Linux core/verbs.c qp_state_table,
// ib_modify_qp_is_ok) and rxe's value checks (rxe_qp_chk_attr). Pure: it decides, the
// engine applies. See docs/rxe-facts.md §1.
#pragma once

#include <cstdint>

#include "uroce/vocab/verbs_types.hpp"

namespace uroce::transport {

// Checks a modify_qp call against a QP of `type` that is really in `real_state`. On success
// `*new_state` is the state to move to. EOPNOTSUPP for mask bits outside 0..20 (rxe), EINVAL
// for everything the table or the value checks refuse.
Status check_modify_qp(QpType type, QpState real_state, bool sq_draining, const QpAttr& attr,
                       uint32_t mask, const DeviceLimits& limits, QpState* new_state);

// Whether ibv_post_send accepts WRs in `state`: from RTS on (RTS, SQD, SQE, ERR; in ERR they
// complete with a flush error). rxe refuses them below RTS with EINVAL.
[[nodiscard]] constexpr bool accepts_posts(QpState state) {
  return state != QpState::kReset && state != QpState::kInit && state != QpState::kRtr;
}

// Required and optional masks of one transition (without kQpState); for tests and docs.
struct TransitionMasks {
  bool valid = false;
  uint32_t required = 0;
  uint32_t optional = 0;
};
[[nodiscard]] TransitionMasks transition_masks(QpType type, QpState from, QpState to);

[[nodiscard]] constexpr uint8_t round_up_pow2(uint8_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return v == 0 ? 0 : static_cast<uint8_t>(p);
}

}  // namespace uroce::transport
