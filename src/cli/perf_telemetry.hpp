// What `uroce perf --json` says about a run besides its results: the device, its congestion
// control (algorithm, line rate, the maximum rate DCQCN allows), the traffic class of its QPs,
// every counter of the device at the end of the run (the names `uroce stat` shows), and each
// QP's congestion state (final rate). The server sends its own in the reply to each "end", so
// the client's JSON holds both sides ("local", "remote").
#pragma once

#include <nlohmann/json.hpp>

#include "cli/perf_context.hpp"

namespace uroce::cli {

//   {"device": "uroce_lo", "cc": "dcqcn", "line_rate_mbps": 10000, "max_rate_mbps": 10000,
//    "traffic_class": 106, "counters": {"sent_pkts": 5000, ...},
//    "qps": [{"qpn": 17, "cc": "dcqcn", "rate_bps": 10000000000, "target_rate_bps": ...,
//             "alpha": 0}]}
[[nodiscard]] nlohmann::json run_device_report(const PerfContext& ctx);

}  // namespace uroce::cli
