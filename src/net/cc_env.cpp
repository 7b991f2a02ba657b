#include "net/cc_env.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "transport/cc/cc_config.hpp"

namespace uroce::net {

std::string cc_config_from_env(transport::CcConfig& cc) {
  if (const char* v = std::getenv("UROCE_CC"); v != nullptr) {
    std::string err = transport::parse_cc_algorithm("UROCE_CC", v, cc.algorithm);
    if (!err.empty()) return err;
  }
  if (const char* v = std::getenv("UROCE_DCQCN"); v != nullptr) {
    return transport::parse_dcqcn_params("UROCE_DCQCN", v, cc.dcqcn);
  }
  return {};
}

std::string apply_cc_override(const CcOverride& o, transport::CcConfig& cc) {
  if (o.algorithm) cc.algorithm = *o.algorithm;
  if (o.dcqcn.empty()) return {};
  return transport::parse_dcqcn_params("--dcqcn", o.dcqcn, cc.dcqcn);
}

uint32_t line_rate_from_speed(int64_t speed_mbps) {
  if (speed_mbps <= 0) return kDefaultLineRateMbps;
  return static_cast<uint32_t>(std::min<int64_t>(speed_mbps, std::numeric_limits<uint32_t>::max()));
}

}  // namespace uroce::net
