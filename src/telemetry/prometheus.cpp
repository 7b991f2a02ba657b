#include "telemetry/prometheus.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>

#include "transport/cc/cc_config.hpp"

namespace uroce::telemetry {

namespace {

constexpr std::string_view kDropPrefix = "drop_";

std::string metric_base(std::string_view counter) {
  if (counter == "bytes_sent") return "sent_bytes";
  if (counter == "bytes_rcvd") return "rcvd_bytes";
  return std::string(counter);
}

// Label values: escape backslash, quote and newline (exposition format).
std::string esc(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

std::string seconds(uint64_t ns) {
  return fmt::format("{:.9g}", static_cast<double>(ns) / 1e9);
}

}  // namespace

std::string render_prometheus(const std::vector<DeviceSnapshot>& snaps, uint64_t now_unix_ns) {
  std::string out;
  out.reserve(16384);
  auto b = std::back_inserter(out);
  if (snaps.empty()) return out;
  // Every snapshot of one process has the same names (one build); a kernel device's port
  // (pid 0, read from sysfs by `uroce stat --metrics`) has its driver's. The families are the
  // union, in first-seen order; a snapshot only gets a sample for the names it has.
  std::vector<std::string> names;
  for (const DeviceSnapshot& s : snaps) {
    for (const std::string& n : s.names) {
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
  }
  auto has = [](const DeviceSnapshot& s, const std::string& n) {
    return std::find(s.names.begin(), s.names.end(), n) != s.names.end();
  };

  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].starts_with(kDropPrefix)) continue;
    const std::string base = metric_base(names[i]);
    const std::string dev_name = "uroce_" + base + "_total";
    family(out, dev_name, "counter", fmt::format("Device counter {} (rxe/mlx5 name)", names[i]));
    bool of_process = false;
    for (const DeviceSnapshot& s : snaps) {
      if (!has(s, names[i])) continue;
      of_process = of_process || s.pid != 0;
      fmt::format_to(b, "{}{{device=\"{}\"}} {}\n", dev_name, esc(s.device), s.value(names[i]));
    }
    if (!of_process) continue;  // kernel devices have no per-QP counters in sysfs
    const std::string qp_name = "uroce_qp_" + base + "_total";
    family(out, qp_name, "counter", fmt::format("Per-QP counter {}", names[i]));
    for (const DeviceSnapshot& s : snaps) {
      for (const QpSnapshot& q : s.qps) {
        fmt::format_to(b, "{}{{device=\"{}\",qp=\"{}\"}} {}\n", qp_name, esc(s.device), q.qpn,
                       s.qp_value(q, names[i]));
      }
    }
  }

  family(out, "uroce_rx_drops_total", "counter", "Received packets dropped, by reason");
  for (const DeviceSnapshot& s : snaps) {
    for (const std::string& n : names) {
      if (!n.starts_with(kDropPrefix) || !has(s, n)) continue;
      fmt::format_to(b, "uroce_rx_drops_total{{device=\"{}\",reason=\"{}\"}} {}\n", esc(s.device),
                     n.substr(kDropPrefix.size()), s.value(n));
    }
  }
  family(out, "uroce_qp_rx_drops_total", "counter", "Received packets dropped per QP, by reason");
  for (const DeviceSnapshot& s : snaps) {
    for (const QpSnapshot& q : s.qps) {
      for (const std::string& n : names) {
        if (!n.starts_with(kDropPrefix)) continue;
        fmt::format_to(b, "uroce_qp_rx_drops_total{{device=\"{}\",qp=\"{}\",reason=\"{}\"}} {}\n",
                       esc(s.device), q.qpn, n.substr(kDropPrefix.size()), s.qp_value(q, n));
      }
    }
  }

  family(out, "uroce_qp_rtt_seconds", "histogram",
         "Round trip from sending an RC request with AckReq to the ACK covering it");
  for (const DeviceSnapshot& s : snaps) {
    for (const QpSnapshot& q : s.qps) {
      uint64_t cumulative = 0;
      for (size_t i = 0; i < kRttBuckets; ++i) {
        cumulative += q.rtt.buckets[i];
        fmt::format_to(b, "uroce_qp_rtt_seconds_bucket{{device=\"{}\",qp=\"{}\",le=\"{}\"}} {}\n",
                       esc(s.device), q.qpn, seconds(rtt_bucket_bound_ns(i)), cumulative);
      }
      fmt::format_to(b, "uroce_qp_rtt_seconds_bucket{{device=\"{}\",qp=\"{}\",le=\"+Inf\"}} {}\n",
                     esc(s.device), q.qpn, q.rtt.count);
      fmt::format_to(b, "uroce_qp_rtt_seconds_sum{{device=\"{}\",qp=\"{}\"}} {}\n", esc(s.device),
                     q.qpn, seconds(q.rtt.sum_ns));
      fmt::format_to(b, "uroce_qp_rtt_seconds_count{{device=\"{}\",qp=\"{}\"}} {}\n", esc(s.device),
                     q.qpn, q.rtt.count);
    }
  }

  family(out, "uroce_qp_state", "gauge", "QP state (ibv_qp_state: 0 RESET .. 3 RTS, 6 ERR)");
  for (const DeviceSnapshot& s : snaps) {
    for (const QpSnapshot& q : s.qps) {
      fmt::format_to(b, "uroce_qp_state{{device=\"{}\",qp=\"{}\"}} {}\n", esc(s.device), q.qpn,
                     q.state);
    }
  }
  // The congestion controller's rates, for QPs that have one (DCQCN): gauges, bit/s.
  struct CcGauge {
    std::string_view name;
    std::string_view help;
  };
  static constexpr std::array<CcGauge, 3> kCcGauges = {{
      {"uroce_qp_cc_rate_bits_per_second",
       "Current sending rate of the QP's congestion control (DCQCN RC), bit/s"},
      {"uroce_qp_cc_target_rate_bits_per_second", "Target rate of the QP's DCQCN (RT), bit/s"},
      {"uroce_qp_cc_alpha", "DCQCN congestion estimate alpha of the QP (0..1)"},
  }};
  for (size_t g = 0; g < kCcGauges.size(); ++g) {
    family(out, kCcGauges[g].name, "gauge", kCcGauges[g].help);
    for (const DeviceSnapshot& s : snaps) {
      for (const QpSnapshot& q : s.qps) {
        if (q.cc.algorithm == transport::CcAlgorithm::kNone ||
            q.cc.algorithm == transport::CcAlgorithm::kDefault) {
          continue;
        }
        const std::string value =
            g == 0   ? std::to_string(q.cc.rate_bps)
            : g == 1 ? std::to_string(q.cc.target_rate_bps)
                     : fmt::format("{:.9g}", static_cast<double>(q.cc.alpha) / 1024.0);
        fmt::format_to(b, "{}{{device=\"{}\",qp=\"{}\",cc=\"{}\"}} {}\n", kCcGauges[g].name,
                       esc(s.device), q.qpn, transport::cc_algorithm_name(q.cc.algorithm), value);
      }
    }
  }
  family(out, "uroce_qp_error_completions_total", "counter",
         "Work completions with an error status other than a flush");
  for (const DeviceSnapshot& s : snaps) {
    for (const QpSnapshot& q : s.qps) {
      fmt::format_to(b, "uroce_qp_error_completions_total{{device=\"{}\",qp=\"{}\"}} {}\n",
                     esc(s.device), q.qpn, q.error_completions);
    }
  }
  family(out, "uroce_snapshot_age_seconds", "gauge",
         "Time since the device last published its counters");
  for (const DeviceSnapshot& s : snaps) {
    const uint64_t age = now_unix_ns > s.published_unix_ns ? now_unix_ns - s.published_unix_ns : 0;
    fmt::format_to(b, "uroce_snapshot_age_seconds{{device=\"{}\"}} {}\n", esc(s.device),
                   seconds(age));
  }
  return out;
}

}  // namespace uroce::telemetry
