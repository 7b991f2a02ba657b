// Makes the controller a QP runs: nullptr for CcAlgorithm::kNone (plain RoCE v2).
#pragma once

#include <memory>

#include "uroce/vocab/cc_types.hpp"
#include "transport/congestion.hpp"

namespace uroce::transport {

[[nodiscard]] std::unique_ptr<CongestionControl> make_controller(CcAlgorithm algorithm,
                                                                 const CcConfig& config);

}  // namespace uroce::transport
