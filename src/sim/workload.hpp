// The flows a scenario's [[workload]] tables ask for, expanded into one list: each flow is
// (source host, destination host, operation, bytes, priority, start time). Flow ids are the
// list order after a stable sort by start time, so they are a pure function of the scenario
// and seed. Randomness (permutation pairs, CDF sizes, Poisson arrivals) comes from one Rng
// per workload, seeded with the scenario seed and the workload's index.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/scenario.hpp"
#include "sim/topology.hpp"

namespace uroce::sim {

struct FlowSpec {
  uint32_t id = 0;
  uint32_t src = 0;
  uint32_t dst = 0;
  FlowOp op = FlowOp::kWrite;
  uint64_t bytes = 0;  // 0: long-lived
  uint8_t priority = 0;
  uint64_t start_ns = 0;
  uint64_t message_bytes = 1 << 20;  // WR size
  uint32_t window = 8;               // WRs outstanding
};

// Throws ScenarioError (scenario_toml.hpp) for host names the topology lacks or a bad CDF.
std::vector<FlowSpec> expand_workloads(const Scenario& sc, const Topology& topo,
                                       const std::string& file);

}  // namespace uroce::sim
