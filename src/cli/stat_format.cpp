#include "cli/stat_format.hpp"

#include <fmt/format.h>

#include <array>

#include "telemetry/explain.hpp"

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
  size_t on_line = 0;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (skip_zero && values[i] == 0) continue;
    std::string item = fmt::format("{} {}", names[i], values[i]);
    if (before != nullptr && i < before->size() && (*before)[i] != values[i] && interval_s > 0) {
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
}

std::string rtt_text(const telemetry::RttHistogram& h) {
  if (h.count == 0) return "rtt -";
  return fmt::format("rtt avg {} p50<={} p99<={} ({} samples)", ns_text(h.sum_ns / h.count),
                     ns_text(h.quantile_bound_ns(0.5)), ns_text(h.quantile_bound_ns(0.99)),
                     h.count);
}

}  // namespace

std::string format_stat_text(const DeviceSnapshot& snap, const StatView& view) {
  std::string out;
  const QpSnapshot* only = view.qpn ? snap.qp(*view.qpn) : nullptr;
  if (view.qpn && only == nullptr) return out;
  if (!view.qpn) {
    out += fmt::format("link {}/1 pid {}\n", snap.device, snap.pid);
    pairs(out, snap.names, snap.values, view.previous ? &view.previous->values : nullptr,
          view.interval_s, false);
  }
  for (const QpSnapshot& q : snap.qps) {
    if (only != nullptr && &q != only) continue;
    out += fmt::format("link {}/1 pid {} qp {} type {} state {} peer {} rqpn {} {}\n", snap.device,
                       snap.pid, q.qpn, type_name(q.qp_type), state_name(q.state),
                       telemetry::gid_address(q.remote_gid), q.remote_qpn, rtt_text(q.rtt));
    const QpSnapshot* before = view.previous ? view.previous->qp(q.qpn) : nullptr;
    pairs(out, snap.names, q.values, before ? &before->values : nullptr, view.interval_s,
          only == nullptr);
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
  nlohmann::json j;
  j["device"] = snap.device;
  j["port"] = 1;
  j["pid"] = snap.pid;
  j["published_unix_ns"] = snap.published_unix_ns;
  if (!view.qpn) j["counters"] = counters(snap.values);
  j["qps"] = nlohmann::json::array();
  for (const QpSnapshot& q : snap.qps) {
    if (view.qpn && q.qpn != *view.qpn) continue;
    nlohmann::json jq;
    jq["qpn"] = q.qpn;
    jq["type"] = type_name(q.qp_type);
    jq["state"] = state_name(q.state);
    jq["peer"] = telemetry::gid_address(q.remote_gid);
    jq["remote_qpn"] = q.remote_qpn;
    jq["counters"] = counters(q.values);
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

}  // namespace uroce::cli
