// The congestion-control settings of a device, from the environment and then the command
// line (kept together so they can join the shared device configuration table):
//   UROCE_CC=none|dcqcn                  the algorithm of every QP (default none)
//   UROCE_DCQCN=name=value,...           DCQCN parameters, mlx5 cc_params names
//   --cc / --dcqcn (CcOverride)          the same from a `uroce` command line; they win:
//                                        --cc replaces UROCE_CC, --dcqcn's names replace
//                                        those UROCE_DCQCN set, the others stay
//   (docs/congestion.md)
#pragma once

#include <optional>
#include <string>

#include "uroce/vocab/cc_types.hpp"

namespace uroce::net {

// "" on success (unset variables leave `cc` as it is), else a one-line error.
[[nodiscard]] std::string cc_config_from_env(transport::CcConfig& cc);

// What a command line asks for; empty: nothing.
struct CcOverride {
  std::optional<transport::CcAlgorithm> algorithm;  // --cc
  std::string dcqcn;                                // --dcqcn name=value,...
};

// Applies `o` on top of `cc` (after cc_config_from_env); "" or a one-line error naming
// --dcqcn.
[[nodiscard]] std::string apply_cc_override(const CcOverride& o, transport::CcConfig& cc);

// The line rate DCQCN starts at (and never exceeds unless rpg_max_rate says otherwise): the
// netdev's speed in Mb/s, or 10 Gb/s when the driver does not say (lo, most virtual devices
// report none or -1; veth says 10000).
inline constexpr uint32_t kDefaultLineRateMbps = 10000;
[[nodiscard]] uint32_t line_rate_from_speed(int64_t speed_mbps);

}  // namespace uroce::net
