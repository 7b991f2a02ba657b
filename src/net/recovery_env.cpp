#include "net/recovery_env.hpp"

#include <cstdlib>

#include "config/host_options.hpp"

namespace uroce::net {

std::string recovery_config_from_env(transport::RecoveryConfig& rc) {
  std::string error;
  rc.adaptive = config::env_flag("UROCE_ADAPTIVE_RETRANS", rc.adaptive, error);
  if (!error.empty()) return error;
  if (const char* v = std::getenv("UROCE_RECOVERY"); v != nullptr && *v != '\0') {
    return transport::parse_recovery("UROCE_RECOVERY", v, rc.offer);
  }
  return {};
}

}  // namespace uroce::net
