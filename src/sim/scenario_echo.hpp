// summary.json's "input": the scenario as the run used it, every key the scenario reader
// knows (scenario_toml.hpp's k*Keys) with its value after defaults, in the file's own names
// and units (duration_us, link_gbps, ...). A results file so says how it was produced, and
// the object written back as TOML parses to the same scenario (tests/unit/sim).
#pragma once

#include <string>
#include <string_view>

#include "sim/scenario.hpp"

namespace uroce::sim {

// The JSON object, on lines indented by `indent` spaces, without a trailing newline.
[[nodiscard]] std::string scenario_echo_json(const Scenario& sc, int indent);

[[nodiscard]] std::string_view op_name(FlowOp op);
[[nodiscard]] std::string_view topology_name(TopologyKind k);
[[nodiscard]] std::string_view workload_kind_name(WorkloadKind k);

}  // namespace uroce::sim
