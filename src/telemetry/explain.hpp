// Data-path errors explained: what a work completion's error status most likely means,
// given the counters of its QP. Used in the log line a device writes when poll_cq returns
// an error completion, and by `uroce stat` for QPs whose last completion failed.
//
//   explain_completion(12, snap, qp)
//   -> "retry_exceeded_err=1 with 0 packets received from 10.0.0.2: peer unreachable or UDP
//       4791 blocked — run uroce doctor --peer 10.0.0.2"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "telemetry/snapshot.hpp"

namespace uroce::telemetry {

// "IBV_WC_RETRY_EXC_ERR" for 12, as ibv_wc_status_str's enum names.
[[nodiscard]] std::string_view wc_status_name(uint8_t status);

// One line: the counters that matter for this status and the likely causes, with the
// command to run next. `qp` must belong to `snap` (its values are indexed by snap.names).
[[nodiscard]] std::string explain_completion(uint8_t status, const DeviceSnapshot& snap,
                                             const QpSnapshot& qp);

}  // namespace uroce::telemetry
