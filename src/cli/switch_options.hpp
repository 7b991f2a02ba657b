// Values of `uroce switch`'s options, parsed strictly: a bad value gives one line naming the
// option, the value and what is accepted.
//
//   rates  like tc: "1gbit", "100mbit", "2500kbit", "1000000bit" (bit/s, k/m/g/t = 10^3..);
//          "125mbps" is bytes/s (tc's "bps"); "unlimited" or "0" = no shaping
//   sizes  like tc: "512KB", "512k", "2MB", "1500" (bytes; k/KB/KiB = 1024, m/MB/MiB = 1024^2)
//   --ecn  kmin=SIZE,kmax=SIZE,pmax=P[,at=enqueue|dequeue]   (0 < P <= 1)
//   --pfc  xoff=SIZE,xon=SIZE[,headroom=SIZE]
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fabric/switch_queue.hpp"

namespace uroce::cli {

// bytes/s; 0 = unlimited.
[[nodiscard]] std::optional<uint64_t> parse_rate(std::string_view text, std::string& error);
[[nodiscard]] std::optional<uint64_t> parse_size(std::string_view text, std::string& error);
// Fills red (enabled) from "kmin=..,kmax=..,pmax=..[,at=..]".
[[nodiscard]] bool parse_ecn(std::string_view text, fabric::RedParams& red, std::string& error);
[[nodiscard]] bool parse_pfc(std::string_view text, fabric::PfcParams& pfc, std::string& error);

}  // namespace uroce::cli
