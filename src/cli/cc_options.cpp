// --cc, --dcqcn and -T/--tclass: see cc_options.hpp.
#include "cli/cc_options.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "transport/cc/cc_config.hpp"

namespace uroce::cli {
namespace {

// Control characters would split the one-line error.
std::string printable(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u == 0x7F ? fmt::format("\\x{:02x}", u) : std::string(1, c);
  }
  return out;
}

}  // namespace

void add_cc_options(CLI::App& sub, CcCliOptions& o, bool with_tclass) {
  sub.add_option("--cc", o.cc,
                 "Congestion control of the QPs: none or dcqcn (default: UROCE_CC, else none)");
  sub.add_option("--dcqcn", o.dcqcn,
                 "DCQCN parameters name=value,... with mlx5 cc_params names (as UROCE_DCQCN, "
                 "whose other names stay)");
  if (with_tclass) {
    sub.add_option("-T,--tclass,--tos", o.tclass,
                   "Traffic class of the QPs' GRH: the IP TOS byte, DSCP << 2 | ECN (default 0)");
  }
}

std::string finish_cc_options(CcCliOptions& o) {
  o.resolved = {};
  if (!o.cc.empty()) {
    transport::CcAlgorithm a = transport::CcAlgorithm::kNone;
    if (std::string err = transport::parse_cc_algorithm("--cc", printable(o.cc), a); !err.empty()) {
      return err;
    }
    o.resolved.algorithm = a;
  }
  if (!o.dcqcn.empty()) {
    // Checked here so a bad list fails before anything connects; the device applies it.
    transport::DcqcnParams check;
    o.resolved.dcqcn = printable(o.dcqcn);
    if (std::string err = transport::parse_dcqcn_params("--dcqcn", o.resolved.dcqcn, check);
        !err.empty()) {
      return err;
    }
  }
  o.traffic_class = 0;
  if (o.tclass) {
    if (*o.tclass < 0 || *o.tclass > 255) {
      return fmt::format(
          "-T/--tclass {} is out of range; give 0..255 (the IP TOS byte: DSCP << 2 | ECN)",
          *o.tclass);
    }
    o.traffic_class = static_cast<uint8_t>(*o.tclass);
  }
  return {};
}

}  // namespace uroce::cli
