// Parsing of the congestion-control settings a device takes from its environment or CLI:
// the algorithm name (`none`, `dcqcn`) and a DCQCN parameter list `name=value,...` with
// mlx5's cc_params names (cc_types.hpp). Strict: an unknown name, a malformed or
// out-of-range value is an error naming the offender and the fix. Pure: the caller reads
// the environment.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "uroce/vocab/cc_types.hpp"

namespace uroce::transport {

// "" on success, else a one-line error starting with `what` (e.g. "UROCE_CC").
[[nodiscard]] std::string parse_cc_algorithm(std::string_view what, std::string_view text,
                                             CcAlgorithm& out);
[[nodiscard]] std::string parse_dcqcn_params(std::string_view what, std::string_view text,
                                             DcqcnParams& out);

[[nodiscard]] std::string_view cc_algorithm_name(CcAlgorithm a);

// One DCQCN parameter: its name and where it lives (for parsing, docs and `devinfo -v`).
struct DcqcnParamInfo {
  std::string_view name;
  uint32_t DcqcnParams::*member;
  uint32_t min;
  uint32_t max;
};
[[nodiscard]] std::span<const DcqcnParamInfo> dcqcn_param_table();

}  // namespace uroce::transport
