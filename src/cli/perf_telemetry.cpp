// `uroce perf --json` device report: see perf_telemetry.hpp.
#include "cli/perf_telemetry.hpp"

#include "telemetry/device_telemetry.hpp"
#include "transport/cc/cc_config.hpp"

namespace uroce::cli {

nlohmann::json run_device_report(const PerfContext& ctx) {
  const device::Device& dev = ctx.dev();
  const transport::CcConfig& cc = dev.config().engine.cc;
  nlohmann::json counters = nlohmann::json::object();
  const std::vector<std::string>& names = telemetry::published_counter_names();
  const std::vector<uint64_t> values = telemetry::device_counter_values(dev);
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) counters[names[i]] = values[i];
  nlohmann::json qps = nlohmann::json::array();
  for (int q = 0; q < ctx.setup().num_qps; ++q) {
    transport::QpAttr attr;
    transport::QpInitAttr init;
    if (!dev.query_qp(ctx.qpn(q), attr, init)) continue;
    qps.push_back({{"qpn", ctx.qpn(q)},
                   {"cc", transport::cc_algorithm_name(attr.cc.algorithm)},
                   {"rate_bps", attr.cc.rate_bps},
                   {"target_rate_bps", attr.cc.target_rate_bps},
                   {"alpha", attr.cc.alpha}});
  }
  return {{"device", dev.name()},
          {"cc", transport::cc_algorithm_name(cc.algorithm)},
          {"line_rate_mbps", cc.line_rate_mbps},
          {"max_rate_mbps", cc.dcqcn.rpg_max_rate != 0 ? cc.dcqcn.rpg_max_rate : cc.line_rate_mbps},
          {"traffic_class", ctx.traffic_class()},
          {"counters", std::move(counters)},
          {"qps", std::move(qps)}};
}

}  // namespace uroce::cli
