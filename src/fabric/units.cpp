// Rates and sizes as tc writes them (units.hpp).
#include "fabric/units.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <span>

namespace uroce::fabric {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits "123.5unit" into the number and the unit; false if there is no number.
bool split_number(std::string_view s, double& value, std::string& unit) {
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return false;
  const auto r = std::from_chars(s.data(), s.data() + i, value);
  if (r.ec != std::errc() || r.ptr != s.data() + i || !std::isfinite(value)) return false;
  unit = lower(s.substr(i));
  return true;
}

struct Unit {
  std::string_view name;
  double factor;
};

std::optional<uint64_t> scaled(std::string_view text, std::span<const Unit> units,
                               std::string_view what, std::string_view accepted,
                               std::string& error) {
  double v = 0;
  std::string unit;
  if (split_number(text, v, unit)) {
    for (const Unit& u : units) {
      if (u.name == unit) {
        const double bytes = v * u.factor;
        if (bytes >= 9.2e18) break;  // llround returns a long long
        return static_cast<uint64_t>(std::llround(bytes));
      }
    }
  }
  error = fmt::format("{} '{}' is not valid; use {}", what, text, accepted);
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> parse_rate(std::string_view text, std::string& error) {
  if (lower(text) == "unlimited") return 0;
  // Bits per second as tc writes them; "bps" is bytes per second (tc's meaning).
  static constexpr std::array<Unit, 10> kUnits = {{{"", 1.0 / 8},
                                                   {"bit", 1.0 / 8},
                                                   {"kbit", 1e3 / 8},
                                                   {"mbit", 1e6 / 8},
                                                   {"gbit", 1e9 / 8},
                                                   {"tbit", 1e12 / 8},
                                                   {"bps", 1},
                                                   {"kbps", 1e3},
                                                   {"mbps", 1e6},
                                                   {"gbps", 1e9}}};
  const auto r =
      scaled(text, kUnits, "rate", "e.g. 1gbit, 100mbit, 125mbps (bytes/s) or unlimited", error);
  if (r && *r == 0) {
    double v = 0;
    std::string unit;
    if (!split_number(text, v, unit) || v != 0) {
      error = fmt::format("rate '{}' rounds to 0 bytes/s; use at least 8bit or 'unlimited'", text);
      return std::nullopt;
    }
  }
  return r;
}

std::optional<uint64_t> parse_size(std::string_view text, std::string& error) {
  static constexpr std::array<Unit, 11> kUnits = {{{"", 1},
                                                   {"b", 1},
                                                   {"k", 1024},
                                                   {"kb", 1024},
                                                   {"kib", 1024},
                                                   {"m", 1048576},
                                                   {"mb", 1048576},
                                                   {"mib", 1048576},
                                                   {"g", 1073741824},
                                                   {"gb", 1073741824},
                                                   {"gib", 1073741824}}};
  return scaled(text, kUnits, "size", "bytes with an optional unit, e.g. 1500, 512KB, 2MB", error);
}

}  // namespace uroce::fabric
