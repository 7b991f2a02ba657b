// Small JSON text helpers for the simulator's outputs (summary.json): strings escaped, and
// numbers in the shortest form that reads back as the same double (so an echoed setting
// parses back exactly).
#pragma once

#include <fmt/format.h>

#include <string>

namespace uroce::sim {

inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// Shortest round-trip form (fmt's default for double): 0.2, 100, 1e-06.
inline std::string json_number(double v) {
  return fmt::format("{}", v);
}

}  // namespace uroce::sim
