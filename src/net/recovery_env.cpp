#include "net/recovery_env.hpp"

#include <chrono>
#include <cstdlib>

#include "config/host_options.hpp"

namespace uroce::net {

std::string recovery_config_from_env(transport::RecoveryConfig& rc) {
  std::string error;
  rc.adaptive = config::env_flag("UROCE_ADAPTIVE_RETRANS", rc.adaptive, error);
  if (!error.empty()) return error;
  if (const char* v = std::getenv("UROCE_RTO_MIN_US"); v != nullptr && *v != '\0') {
    const auto us = config::parse_uint_var("UROCE_RTO_MIN_US", v, error);
    if (!us) return error;
    rc.min_rto = std::chrono::microseconds(*us);
  }
  if (const char* v = std::getenv("UROCE_RECOVERY"); v != nullptr && *v != '\0') {
    return transport::parse_recovery("UROCE_RECOVERY", v, rc.offer);
  }
  return {};
}

}  // namespace uroce::net
