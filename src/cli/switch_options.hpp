// Values of `uroce switch`'s options, parsed strictly: a bad value gives one line naming the
// option, the value and what is accepted.
//
//   rates, sizes  fabric::parse_rate, fabric::parse_size (src/fabric/units.hpp: like tc,
//                 shared with UROCE_IMPAIR's bottleneck)
//   --ecn  kmin=SIZE,kmax=SIZE,pmax=P[,at=enqueue|dequeue]   (0 < P <= 1)
//   --pfc  xoff=SIZE,xon=SIZE[,headroom=SIZE]
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fabric/switch_queue.hpp"
#include "fabric/units.hpp"

namespace uroce::cli {

using fabric::parse_rate;  // bytes/s; 0 = unlimited
using fabric::parse_size;
// Fills red (enabled) from "kmin=..,kmax=..,pmax=..[,at=..]".
[[nodiscard]] bool parse_ecn(std::string_view text, fabric::RedParams& red, std::string& error);
[[nodiscard]] bool parse_pfc(std::string_view text, fabric::PfcParams& pfc, std::string& error);

}  // namespace uroce::cli
