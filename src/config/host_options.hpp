// HostOptions: what the environment says about the devices of this process, parsed once
// and strictly, in one place, for the libibverbs drop-in, the `uroce` CLI and the C++ API.
//
//   std::string error;
//   auto env = config::HostOptions::from_env(error);
//   if (!env) { fprintf(stderr, "uroce: %s\n", error.c_str()); ... }
//
// A malformed value is an error naming the variable, the value and what is allowed
// ("UROCE_UDP_PORT=123abc is not a UDP port (1 .. 65535)"), never a silent partial read.
// The first call in a process also warns once about unknown UROCE_* variables.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace uroce::config {

struct HostOptions {
  std::optional<uint16_t> udp_port;       // UROCE_UDP_PORT (or its alias UROCE_PORT)
  std::vector<std::string> netdevs;       // UROCE_NETDEVS
  std::vector<std::string> device_addrs;  // UROCE_DEVICE_ADDR, each a valid IPv4/IPv6 text
  std::optional<uint32_t> mtu;            // UROCE_MTU, an IB MTU in bytes
  std::optional<uint32_t> spin_us;        // UROCE_SPIN_US
  std::optional<uint32_t> handoff_us;     // UROCE_HANDOFF_US
  std::optional<bool> batch_posts;        // UROCE_BATCH_POSTS
  std::vector<int> progress_cpus;         // UROCE_PROGRESS_CPUS, ascending, no repeats
  std::optional<std::string> peer;        // UROCE_PEER, a valid address text
  bool quiet = false;                     // UROCE_QUIET

  using Getenv = std::function<const char*(const char*)>;
  // nullopt with `error` set (one line) when a variable is malformed. `get` defaults to
  // std::getenv; tests pass a map.
  [[nodiscard]] static std::optional<HostOptions> from_env(std::string& error,
                                                           const Getenv& get = {});
};

// Strict parsers for one variable's text, with the table's range; nullopt and `error` set
// ("NAME=value is not ... (range)") when the value is not acceptable. Empty counts as unset
// only for the callers (they skip unset/empty variables before calling).
[[nodiscard]] std::optional<uint64_t> parse_uint_var(std::string_view name, std::string_view value,
                                                     std::string& error);
[[nodiscard]] std::optional<bool> parse_bool_var(std::string_view name, std::string_view value,
                                                 std::string& error);

// A CPU list as taskset -c takes it ("2", "0-3,6"): ascending CPU numbers without repeats,
// each below kMaxCpu. Syntax only: whether this process may run on them is for the caller.
inline constexpr int kMaxCpu = 1024;  // CPU_SETSIZE
[[nodiscard]] std::optional<std::vector<int>> parse_cpu_list_var(std::string_view name,
                                                                 std::string_view value,
                                                                 std::string& error);
// The list back in that syntax, runs as ranges ({0, 1, 2, 5} -> "0-2,5"); `cpus` ascending.
[[nodiscard]] std::string format_cpu_list(const std::vector<int>& cpus);

// Reads a 0/1 variable of the table with `fallback` when unset or empty; a malformed value
// sets `error` and returns `fallback`.
[[nodiscard]] bool env_flag(const char* name, bool fallback, std::string& error);

}  // namespace uroce::config
