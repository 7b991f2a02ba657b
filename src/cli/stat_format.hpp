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
  bool all = false;     // --all: also the counters that are 0
  std::string program;  // the process' program ("uroce perf", "ib_write_bw"); "" unknown
};

// rdma-statistic-like text: "link DEV/1 pid PID (PROGRAM)" ("link rxe0/1 kernel (rxe)" for a
// kernel device's port) then "  name value" pairs (the
// non-zero ones unless view.all or a single QP), with "(+N/s)" after those that moved since
// view.previous, QP lines (with "cc dcqcn rate R target T alpha A/1024" under a QP that runs a
// congestion controller), and an explanation under every QP whose last completion failed.
[[nodiscard]] std::string format_stat_text(const telemetry::DeviceSnapshot& snap,
                                           const StatView& view);
// Every counter (zero or not); "program"; "kernel_driver" for a kernel device's port; per QP "cc":
// algorithm, rate_bps, target_rate_bps, alpha (/1024; rates 0 for `none`); with view.previous,
// "rates": per-second change of every counter over view.interval_s.
[[nodiscard]] nlohmann::json stat_json(const telemetry::DeviceSnapshot& snap, const StatView& view);

// The line that opens each --watch refresh: "--- 2026-12-01 09:20:01.123 +0000 ---" (local
// time, as `date` prints it).
[[nodiscard]] std::string format_refresh_header(uint64_t unix_ns);

}  // namespace uroce::cli
