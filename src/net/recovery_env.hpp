// The loss-recovery settings of a device from the environment (docs/congestion.md
// "Loss recovery"):
//   UROCE_ADAPTIVE_RETRANS=0|1   1 (default): adaptive retransmission timer; 0: rxe-style
//                                go-back-N on the configured timeout only
//   UROCE_RECOVERY=gbn|sr        what uroce perf offers its peer (default gbn); a QP uses
//                                selective repeat only when both ends agreed
#pragma once

#include <string>

#include "uroce/vocab/recovery.hpp"

namespace uroce::net {

// "" on success (unset variables leave `rc` as it is), else a one-line error.
[[nodiscard]] std::string recovery_config_from_env(transport::RecoveryConfig& rc);

}  // namespace uroce::net
