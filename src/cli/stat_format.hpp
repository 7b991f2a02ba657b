// Text and JSON rendering of counter snapshots for `uroce stat` (stat_command.cpp), kept
// apart from the command so tests check the exact output.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "telemetry/snapshot.hpp"

namespace uroce::cli {

struct StatView {
  std::optional<uint32_t> qpn;                          // only this QP (all its counters)
  const telemetry::DeviceSnapshot* previous = nullptr;  // --watch: show changes since
  double interval_s = 0;
};

// rdma-statistic-like text: "link DEV/1 pid PID" then "  name value" pairs, QP lines, and
// an explanation under every QP whose last completion failed.
[[nodiscard]] std::string format_stat_text(const telemetry::DeviceSnapshot& snap,
                                           const StatView& view);
[[nodiscard]] nlohmann::json stat_json(const telemetry::DeviceSnapshot& snap, const StatView& view);

}  // namespace uroce::cli
