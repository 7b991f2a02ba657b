#include "transport/cc/factory.hpp"

#include "transport/cc/dcqcn.hpp"

namespace uroce::transport {

std::unique_ptr<CongestionControl> make_controller(CcAlgorithm algorithm, const CcConfig& config) {
  switch (algorithm) {
    case CcAlgorithm::kDcqcn:
      return std::make_unique<Dcqcn>(config.dcqcn, config.line_rate_mbps);
    case CcAlgorithm::kDefault:
    case CcAlgorithm::kNone:
      break;
  }
  return nullptr;
}

}  // namespace uroce::transport
