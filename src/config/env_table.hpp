// The table of every UROCE_* environment variable: the single source for parsing ranges,
// the unknown-variable warning, docs/configuration.md and `uroce --help`.
//
// Adding a variable is one row in env_table.cpp; a test fails until docs/configuration.md
// carries the regenerated table (the test prints it).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace uroce::config {

enum class EnvKind : uint8_t {
  kUint,      // decimal integer in [min, max]
  kBool,      // 0 or 1
  kText,      // free text (a path, HOST:PORT)
  kList,      // comma-separated names
  kAddr,      // one IPv4 or IPv6 address
  kAddrList,  // comma-separated IPv4/IPv6 addresses
  kCpuList,   // CPU numbers and ranges, taskset -c style: 2 or 0-3,6
};

struct EnvVar {
  std::string_view name;
  EnvKind kind = EnvKind::kText;
  std::string_view meaning;
  std::string_view default_text;
  std::string_view range_text;  // what the message of a bad value and the docs show
  std::string_view what;        // kUint: the noun of a bad-value message ("a UDP port")
  std::string_view readers;     // who reads it
  uint64_t min = 0;             // kUint only
  uint64_t max = 0;
  std::string_view alias_of;  // non-empty: a second name of that variable
};

[[nodiscard]] std::span<const EnvVar> env_table();
[[nodiscard]] const EnvVar* find_env_var(std::string_view name);

// The known variable closest to `name` (edit distance at most 3), for "did you mean".
[[nodiscard]] std::optional<std::string_view> closest_env_var(std::string_view name);

// One line per UROCE_* entry of `environ_entries` ("NAME=value") that is not in the table.
[[nodiscard]] std::vector<std::string> unknown_env_warnings(
    std::span<const std::string> environ_entries);

// Prints unknown_env_warnings(environ) on stderr the first time it is called in a process
// (later calls do nothing), unless UROCE_QUIET=1.
void warn_unknown_env_once();

// The table as a Markdown table (docs/configuration.md) and as plain text (`uroce --help`).
[[nodiscard]] std::string render_env_table_markdown();
[[nodiscard]] std::string render_env_table_text();

}  // namespace uroce::config
