// Reading a scenario from TOML (toml++): a strict reader. Every key is known or an error;
// every value is checked for type and range; the error is one line naming the file, the line,
// the key and what it must be, e.g.
//   incast.toml:7: topology.hosts: must be an integer from 2 to 1024 (got 1)
// The schema is in docs/simulator-scenarios.md ("Scenario file").
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "sim/scenario.hpp"

namespace uroce::sim {

class ScenarioError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `path` names the file in messages and anchors relative CDF paths. Throws ScenarioError.
Scenario parse_scenario(std::string_view text, const std::string& path);
Scenario load_scenario(const std::string& path);

}  // namespace uroce::sim
