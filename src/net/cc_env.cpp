#include "net/cc_env.hpp"

#include <cstdlib>

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

}  // namespace uroce::net
