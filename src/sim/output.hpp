// The result files of one run (the format is docs/simulator-scenarios.md "Output files"):
// summary.json, flows.csv, queues.csv, ports.csv, hosts.csv, rates.csv (DCQCN only) and
// goodput.csv. Every one is a pure function of the scenario and seed: integers as integers,
// floats as printf's %.6g, rows in a fixed order, no wall-clock value, no path.
#pragma once

#include <string>

#include "sim/simulator.hpp"

namespace uroce::sim {

struct OutputFiles {
  std::string summary_json;
  std::string flows_csv;
  std::string queues_csv;
  std::string ports_csv;
  std::string hosts_csv;
  std::string rates_csv;  // empty when cc is not DCQCN (no file written)
  std::string goodput_csv;
};

[[nodiscard]] OutputFiles render_outputs(const Simulator& sim);
// Writes the files into `dir` (created if missing). Throws std::runtime_error naming the file.
void write_outputs(const OutputFiles& files, const std::string& dir);

// Percentile by nearest rank (the ceil(p * n)-th smallest), the usual FCT-slowdown choice.
[[nodiscard]] double percentile(std::vector<double> v, double p);

}  // namespace uroce::sim
