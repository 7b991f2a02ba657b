// Building and running a scenario given as TOML text, for the simulator tests.
#pragma once

#include <memory>
#include <string>

#include "sim/output.hpp"
#include "sim/scenario_toml.hpp"
#include "sim/simulator.hpp"

namespace uroce::sim::test {

inline std::unique_ptr<Simulator> run_scenario(const std::string& toml, uint64_t seed = 0) {
  Scenario sc = parse_scenario(toml, std::string(UROCE_SOURCE_DIR) + "/tests/unit/sim/test.toml");
  if (seed != 0) sc.seed = seed;
  auto sim = std::make_unique<Simulator>(sc, "test.toml");
  sim->run();
  return sim;
}

// The error parse_scenario throws for `toml` ("" when it parses).
inline std::string scenario_error(const std::string& toml) {
  try {
    (void)parse_scenario(toml, "/x/bad.toml");
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "";
}

}  // namespace uroce::sim::test
