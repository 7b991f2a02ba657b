#include "transport/cc/cc_config.hpp"

#include <array>
#include <charconv>
#include <cstdint>

namespace uroce::transport {
namespace {

constexpr uint32_t kAny = UINT32_MAX;

constexpr std::array<DcqcnParamInfo, 19> kParams = {{
    {"initial_alpha_value", &DcqcnParams::initial_alpha_value, 0, 1023},
    {"dce_tcp_g", &DcqcnParams::dce_tcp_g, 0, 1024},
    {"dce_tcp_rtt", &DcqcnParams::dce_tcp_rtt, 1, 131071},
    {"rate_reduce_monitor_period", &DcqcnParams::rate_reduce_monitor_period, 0, kAny},
    {"rpg_time_reset", &DcqcnParams::rpg_time_reset, 1, kAny},
    {"rpg_byte_reset", &DcqcnParams::rpg_byte_reset, 0, kAny},
    {"rpg_threshold", &DcqcnParams::rpg_threshold, 1, 31},
    {"rpg_ai_rate", &DcqcnParams::rpg_ai_rate, 0, kAny},
    {"rpg_hai_rate", &DcqcnParams::rpg_hai_rate, 0, kAny},
    {"rpg_gd", &DcqcnParams::rpg_gd, 0, 30},
    {"rpg_min_dec_fac", &DcqcnParams::rpg_min_dec_fac, 1, 100},
    {"rpg_min_rate", &DcqcnParams::rpg_min_rate, 0, kAny},
    {"rpg_max_rate", &DcqcnParams::rpg_max_rate, 0, kAny},
    {"rate_to_set_on_first_cnp", &DcqcnParams::rate_to_set_on_first_cnp, 0, kAny},
    {"clamp_tgt_rate", &DcqcnParams::clamp_tgt_rate, 0, 1},
    {"clamp_tgt_rate_after_time_inc", &DcqcnParams::clamp_tgt_rate_after_time_inc, 0, 1},
    {"pacer_burst_bytes", &DcqcnParams::pacer_burst_bytes, 0, kAny},
    {"min_time_between_cnps", &DcqcnParams::min_time_between_cnps, 0, kAny},
    {"cnp_dscp", &DcqcnParams::cnp_dscp, 0, 63},
}};

std::string known_names() {
  std::string s;
  for (const DcqcnParamInfo& p : kParams) {
    if (!s.empty()) s += ", ";
    s += p.name;
  }
  return s;
}

}  // namespace

std::span<const DcqcnParamInfo> dcqcn_param_table() {
  return kParams;
}

std::string_view cc_algorithm_name(CcAlgorithm a) {
  switch (a) {
    case CcAlgorithm::kDefault:
      return "default";
    case CcAlgorithm::kNone:
      return "none";
    case CcAlgorithm::kDcqcn:
      return "dcqcn";
  }
  return "?";
}

std::string parse_cc_algorithm(std::string_view what, std::string_view text, CcAlgorithm& out) {
  if (text == "none") {
    out = CcAlgorithm::kNone;
  } else if (text == "dcqcn") {
    out = CcAlgorithm::kDcqcn;
  } else {
    return std::string(what) + ": unknown congestion control '" + std::string(text) +
           "'; use none or dcqcn";
  }
  return {};
}

std::string parse_dcqcn_params(std::string_view what, std::string_view text, DcqcnParams& out) {
  DcqcnParams p = out;
  const std::string w(what);
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (item.empty()) return w + ": empty item; give name=value pairs separated by commas";
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return w + ": '" + std::string(item) + "' has no value; write " + std::string(item) +
             "=<unsigned integer>";
    }
    const std::string_view name = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    const DcqcnParamInfo* info = nullptr;
    for (const DcqcnParamInfo& k : kParams) {
      if (k.name == name) info = &k;
    }
    if (info == nullptr) {
      return w + ": unknown parameter '" + std::string(name) + "' (known: " + known_names() + ")";
    }
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (value.empty() || ec != std::errc{} || end != value.data() + value.size() ||
        v > UINT32_MAX) {
      return w + ": " + std::string(name) + "='" + std::string(value) +
             "' is not an unsigned 32-bit integer";
    }
    if (v < info->min || v > info->max) {
      return w + ": " + std::string(name) + "=" + std::string(value) + " is out of range; use " +
             std::to_string(info->min) + ".." + std::to_string(info->max);
    }
    p.*(info->member) = static_cast<uint32_t>(v);
  }
  out = p;
  return {};
}

}  // namespace uroce::transport
