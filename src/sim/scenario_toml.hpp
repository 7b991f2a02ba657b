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

// The keys the reader knows, per table, as its unknown-key errors list them. summary.json's
// echo of the scenario (scenario_echo.hpp) writes every one of them; a test checks that.
inline constexpr std::string_view kTopKeys =
    "name, description, seed, duration_us, sample_us, message_bytes, host_buffer_bytes, "
    "[topology], [link], [switch], [transport], [[workload]], [[storm]]";
inline constexpr std::string_view kTopologyKeys =
    "kind, hosts, hosts_per_side, hosts_per_leaf, leaves, spines, link_gbps, fabric_gbps, "
    "delay_ns";
inline constexpr std::string_view kLinkKeys = "impair";
inline constexpr std::string_view kSwitchKeys =
    "buffer_mode, buffer_bytes, port_buffer_bytes, threshold, alpha, queue_packets, priorities, "
    "ecn, kmin_bytes, kmax_bytes, pmax, mark_at, xoff_bytes, xon_bytes, headroom_bytes, "
    "pause_quanta, pause_refresh_quanta, lossless_priorities, scheduler, dwrr_weights";
inline constexpr std::string_view kTransportKeys =
    "cc, recovery, adaptive_retrans, min_rto_us, timeout, retry_cnt, mtu, window, dcqcn";
inline constexpr std::string_view kWorkloadKeys =
    "kind, op, bytes, priority, start_us, start_jitter_us, count, src, dst, senders, cdf, load, "
    "flows, message_bytes, window";
inline constexpr std::string_view kStormKeys = "host, start_us, end_us, priority, refresh";

// `path` names the file in messages and anchors relative CDF paths. Throws ScenarioError.
Scenario parse_scenario(std::string_view text, const std::string& path);
Scenario load_scenario(const std::string& path);

}  // namespace uroce::sim
