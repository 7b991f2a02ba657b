// Makes the controller a QP runs: nullptr for CcAlgorithm::kNone (plain RoCE v2).
#pragma once

#include <memory>

#include "transport/congestion.hpp"
#include "uroce/vocab/cc_types.hpp"

namespace uroce::transport {

[[nodiscard]] std::unique_ptr<CongestionControl> make_controller(CcAlgorithm algorithm,
                                                                 const CcConfig& config);

}  // namespace uroce::transport
