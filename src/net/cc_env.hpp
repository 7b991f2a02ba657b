// The congestion-control settings of a device from the environment (kept in one function so
// they can join the shared device configuration table):
//   UROCE_CC=none|dcqcn                  the algorithm of every QP (default none)
//   UROCE_DCQCN=name=value,...           DCQCN parameters, mlx5 cc_params names
//   (docs/congestion.md)
#pragma once

#include <string>

#include "transport/cc/cc_types.hpp"

namespace uroce::net {

// "" on success (unset variables leave `cc` as it is), else a one-line error.
[[nodiscard]] std::string cc_config_from_env(transport::CcConfig& cc);

}  // namespace uroce::net
