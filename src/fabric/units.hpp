// The fabric's units as people write them, shared by `uroce switch` (--rate, --buffer, --ecn)
// and UROCE_IMPAIR's bottleneck (rate=, queue=, kmin=, kmax=), so both read them alike:
//
//   rates  like tc: "1gbit", "100mbit", "2500kbit", "1000000bit" (bit/s, k/m/g/t = 10^3..);
//          "125mbps" is bytes/s (tc's "bps"); "unlimited" or "0" = no shaping (0)
//   sizes  like tc: "512KB", "512k", "2MB", "1500" (bytes; k/KB/KiB = 1024, m/MB/MiB = 1024^2)
//
// Units are case-insensitive. On a bad value the result is empty and `error` says, in one
// line, what was wrong and what is accepted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace uroce::fabric {

// bytes/s; 0 = unlimited.
[[nodiscard]] std::optional<uint64_t> parse_rate(std::string_view text, std::string& error);
// bytes.
[[nodiscard]] std::optional<uint64_t> parse_size(std::string_view text, std::string& error);

}  // namespace uroce::fabric
