#include "cli/stat_format.hpp"

#include <fmt/format.h>

#include <time.h>

#include <array>

#include "telemetry/explain.hpp"
#include "transport/cc/cc_config.hpp"

namespace uroce::cli {

namespace {

using telemetry::DeviceSnapshot;
using telemetry::QpSnapshot;

std::string_view state_name(uint8_t s) {
  static constexpr std::array<std::string_view, 8> kNames = {"RESET", "INIT", "RTR", "RTS",
                                                             "SQD",   "SQE",  "ERR", "UNKNOWN"};
  return kNames[s < 7 ? s : 7];
}

std::string_view type_name(uint8_t t) {
  switch (t) {
    case 2:
      return "RC";
    case 3:
      return "UC";
    case 4:
      return "UD";
    default:
      return "QP";
  }
}

std::string ns_text(uint64_t ns) {
  if (ns == UINT64_MAX) return ">524ms";
  if (ns >= 1000000) return fmt::format("{}ms", ns / 1000000);
  return fmt::format("{}us", ns / 1000);
}

// "  name value" pairs, `per_line` to a line; with a previous snapshot, "(+d/s)" after the
// ones that changed.
void pairs(std::string& out, const std::vector<std::string>& names,
           const std::vector<uint64_t>& values, const std::vector<uint64_t>* before,
           double interval_s, bool skip_zero) {
  size_t on_line = 0, shown = 0;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (skip_zero && values[i] == 0) continue;
    ++shown;
    std::string item = fmt::format("{} {}", names[i], values[i]);
    if (before != nullptr && i < before->size() && values[i] > (*before)[i] && interval_s > 0) {
      item +=
          fmt::format(" (+{:.0f}/s)", static_cast<double>(values[i] - (*before)[i]) / interval_s);
    }
    out += on_line == 0 ? "    " : " ";
    out += item;
    if (++on_line == 4) {
      out += '\n';
      on_line = 0;
    }
  }
  if (on_line != 0) out += '\n';
  if (shown == 0) out += "    (all counters 0)\n";
}

std::string who(const DeviceSnapshot& snap, const StatView& view) {
  // A kernel device's port (sysfs): no process, its driver instead.
  if (!snap.kernel_driver.empty()) {
    return fmt::format("link {}/{} kernel ({})", snap.device, snap.port_num, snap.kernel_driver);
  }
  return view.program.empty()
             ? fmt::format("link {}/1 pid {}", snap.device, snap.pid)
             : fmt::format("link {}/1 pid {} ({})", snap.device, snap.pid, view.program);
}

std::string rtt_text(const telemetry::RttHistogram& h) {
  if (h.count == 0) return "rtt -";
  return fmt::format("rtt avg {} p50<={} p99<={} ({} samples)", ns_text(h.sum_ns / h.count),
                     ns_text(h.quantile_bound_ns(0.5)), ns_text(h.quantile_bound_ns(0.99)),
                     h.count);
}

bool has_controller(const QpSnapshot& q) {
  return q.cc.algorithm != transport::CcAlgorithm::kNone &&
         q.cc.algorithm != transport::CcAlgorithm::kDefault;
}

std::string mbps_text(uint64_t bps) {
  return fmt::format("{:.1f} Mb/s", static_cast<double>(bps) / 1e6);
}

// "    cc dcqcn rate 5000.0 Mb/s target 10000.0 Mb/s alpha 512/1024" for a QP with a
// controller; nothing for `none` (no rate to show).
std::string cc_text(const QpSnapshot& q) {
  if (!has_controller(q)) return {};
  return fmt::format("    cc {} rate {} target {} alpha {}/1024\n",
                     transport::cc_algorithm_name(q.cc.algorithm), mbps_text(q.cc.rate_bps),
                     mbps_text(q.cc.target_rate_bps), q.cc.alpha);
}

}  // namespace

std::string format_stat_text(const DeviceSnapshot& snap, const StatView& view) {
  std::string out;
  const QpSnapshot* only = view.qpn ? snap.qp(*view.qpn) : nullptr;
  if (view.qpn && only == nullptr) return out;
  if (!view.qpn) {
    out += who(snap, view) + "\n";
    pairs(out, snap.names, snap.values, view.previous ? &view.previous->values : nullptr,
          view.interval_s, !view.all);
  }
  for (const QpSnapshot& q : snap.qps) {
    if (only != nullptr && &q != only) continue;
    out += fmt::format("{} qp {} type {} state {} peer {} rqpn {} {}\n", who(snap, view), q.qpn,
                       type_name(q.qp_type), state_name(q.state),
                       telemetry::gid_address(q.remote_gid), q.remote_qpn, rtt_text(q.rtt));
    const QpSnapshot* before = view.previous ? view.previous->qp(q.qpn) : nullptr;
    pairs(out, snap.names, q.values, before ? &before->values : nullptr, view.interval_s,
          only == nullptr && !view.all);
    out += cc_text(q);
    if (q.last_error_status != 0) {
      out += fmt::format("    error {} ({}): {}\n", telemetry::wc_status_name(q.last_error_status),
                         q.last_error_status,
                         telemetry::explain_completion(q.last_error_status, snap, q));
    }
  }
  if (snap.qp_overflow != 0) {
    out +=
        fmt::format("    ({} more QPs not shown; device totals include them)\n", snap.qp_overflow);
  }
  return out;
}

nlohmann::json stat_json(const DeviceSnapshot& snap, const StatView& view) {
  auto counters = [&](const std::vector<uint64_t>& values) {
    nlohmann::json c = nlohmann::json::object();
    for (size_t i = 0; i < snap.names.size() && i < values.size(); ++i)
      c[snap.names[i]] = values[i];
    return c;
  };
  // Per-second change of every counter; counters only grow, a smaller value (a reused
  // pid) counts as no change.
  auto rates = [&](const std::vector<uint64_t>& values, const std::vector<uint64_t>& before) {
    nlohmann::json c = nlohmann::json::object();
    for (size_t i = 0; i < snap.names.size() && i < values.size(); ++i) {
      const uint64_t b = i < before.size() ? before[i] : 0;
      c[snap.names[i]] = values[i] > b && view.interval_s > 0
                             ? static_cast<double>(values[i] - b) / view.interval_s
                             : 0.0;
    }
    return c;
  };
  nlohmann::json j;
  j["device"] = snap.device;
  j["port"] = snap.port_num;
  j["pid"] = snap.pid;
  if (!snap.kernel_driver.empty()) j["kernel_driver"] = snap.kernel_driver;
  j["program"] = view.program;
  j["published_unix_ns"] = snap.published_unix_ns;
  if (!view.qpn) j["counters"] = counters(snap.values);
  if (!view.qpn && view.previous != nullptr) {
    j["interval_s"] = view.interval_s;
    j["rates"] = rates(snap.values, view.previous->values);
  }
  j["qps"] = nlohmann::json::array();
  for (const QpSnapshot& q : snap.qps) {
    if (view.qpn && q.qpn != *view.qpn) continue;
    nlohmann::json jq;
    jq["qpn"] = q.qpn;
    jq["type"] = type_name(q.qp_type);
    jq["state"] = state_name(q.state);
    jq["peer"] = telemetry::gid_address(q.remote_gid);
    jq["remote_qpn"] = q.remote_qpn;
    jq["cc"] = {{"algorithm", transport::cc_algorithm_name(q.cc.algorithm)},
                {"rate_bps", q.cc.rate_bps},
                {"target_rate_bps", q.cc.target_rate_bps},
                {"alpha", q.cc.alpha}};
    jq["counters"] = counters(q.values);
    if (const QpSnapshot* before = view.previous ? view.previous->qp(q.qpn) : nullptr) {
      jq["rates"] = rates(q.values, before->values);
    }
    jq["rtt"] = {{"count", q.rtt.count},
                 {"sum_ns", q.rtt.sum_ns},
                 {"p50_le_ns", q.rtt.quantile_bound_ns(0.5)},
                 {"p99_le_ns", q.rtt.quantile_bound_ns(0.99)}};
    jq["error_completions"] = q.error_completions;
    if (q.last_error_status != 0) {
      jq["last_error"] = {
          {"status", q.last_error_status},
          {"name", telemetry::wc_status_name(q.last_error_status)},
          {"explanation", telemetry::explain_completion(q.last_error_status, snap, q)}};
    }
    j["qps"].push_back(std::move(jq));
  }
  return j;
}

std::string format_refresh_header(uint64_t unix_ns) {
  const time_t secs = static_cast<time_t>(unix_ns / 1000000000);
  tm local{};
  localtime_r(&secs, &local);
  char date[32] = {}, zone[8] = {};
  strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S", &local);
  strftime(zone, sizeof zone, "%z", &local);
  return fmt::format("--- {}.{:03d} {} ---\n", date, (unix_ns / 1000000) % 1000, zone);
}

}  // namespace uroce::cli
