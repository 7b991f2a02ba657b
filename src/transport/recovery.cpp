#include "uroce/vocab/recovery.hpp"

namespace uroce::transport {

std::string parse_recovery(std::string_view what, std::string_view text, Recovery& out) {
  if (text == "gbn") {
    out = Recovery::kGoBackN;
  } else if (text == "sr") {
    out = Recovery::kSelectiveRepeat;
  } else {
    return std::string(what) + ": unknown loss recovery '" + std::string(text) +
           "'; use gbn (go-back-N) or sr (selective repeat, uroce peers only)";
  }
  return {};
}

std::string_view recovery_name(Recovery r) {
  return r == Recovery::kSelectiveRepeat ? "sr" : "gbn";
}

}  // namespace uroce::transport
