// Strict parsing of the environment table's variables (host_options.hpp).
#include "config/host_options.hpp"

#include <arpa/inet.h>

#include <cstdlib>

#include "config/env_table.hpp"

namespace uroce::config {
namespace {

// "NAME=value" for a one-line message: control bytes in the value (a stray newline from a
// script, say) are shown as \xNN so the message stays on one line and says what was there.
std::string printable(std::string_view value) {
  std::string out;
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char c : value) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

std::string assignment(std::string_view name, std::string_view value) {
  return std::string(name) + "=" + printable(value);
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool is_address(const std::string& text) {
  unsigned char buf[16];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 || inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

bool is_ib_mtu(uint64_t v) {
  return v == 256 || v == 512 || v == 1024 || v == 2048 || v == 4096;
}

// A decimal CPU number below kMaxCpu, the whole of `text`.
std::optional<int> cpu_number(std::string_view text) {
  if (text.empty() || text.size() > 4) return std::nullopt;
  int v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v >= kMaxCpu) return std::nullopt;
  return v;
}

}  // namespace

std::optional<std::vector<int>> parse_cpu_list_var(std::string_view name, std::string_view value,
                                                   std::string& error) {
  std::vector<bool> seen(kMaxCpu, false);
  size_t start = 0;
  while (start <= value.size()) {
    size_t end = value.find(',', start);
    if (end == std::string_view::npos) end = value.size();
    const std::string_view item = value.substr(start, end - start);
    const size_t dash = item.find('-');
    const auto first = cpu_number(item.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : cpu_number(item.substr(dash + 1));
    if (!first || !last || *last < *first) {
      error = assignment(name, value) + " is not a CPU list (CPU numbers 0 .. " +
              std::to_string(kMaxCpu - 1) + " and ranges, like 2 or 0-3,6)";
      return std::nullopt;
    }
    for (int c = *first; c <= *last; ++c) seen[static_cast<size_t>(c)] = true;
    start = end + 1;
  }
  std::vector<int> cpus;
  for (int c = 0; c < kMaxCpu; ++c) {
    if (seen[static_cast<size_t>(c)]) cpus.push_back(c);
  }
  return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t last = i;
    while (last + 1 < cpus.size() && cpus[last + 1] == cpus[last] + 1) ++last;
    out += (out.empty() ? "" : ",") + std::to_string(cpus[i]) +
           (last > i ? "-" + std::to_string(cpus[last]) : "");
    i = last + 1;
  }
  return out;
}

std::optional<uint64_t> parse_uint_var(std::string_view name, std::string_view value,
                                       std::string& error) {
  const EnvVar* var = find_env_var(name);
  const uint64_t min = var != nullptr ? var->min : 0;
  const uint64_t max = var != nullptr ? var->max : UINT64_MAX;
  const std::string what =
      var != nullptr && !var->what.empty() ? std::string(var->what) : std::string("a number");
  const std::string range = var != nullptr ? std::string(var->range_text) : std::string();
  auto fail = [&] {
    error = assignment(name, value) + " is not " + what + (range.empty() ? "" : " (" + range + ")");
    return std::nullopt;
  };
  // Digits only: no sign, no spaces, no "123abc" read as 123, no hex.
  if (value.empty() || value.size() > 20) return fail();
  uint64_t v = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return fail();
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return fail();
    v = v * 10 + digit;
  }
  if (v < min || v > max) return fail();
  if (var != nullptr && var->name == "UROCE_MTU" && !is_ib_mtu(v)) return fail();
  return v;
}

std::optional<bool> parse_bool_var(std::string_view name, std::string_view value,
                                   std::string& error) {
  if (value == "0") return false;
  if (value == "1") return true;
  error = assignment(name, value) + " is not 0 or 1";
  return std::nullopt;
}

bool env_flag(const char* name, bool fallback, std::string& error) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return parse_bool_var(name, v, error).value_or(fallback);
}

std::optional<HostOptions> HostOptions::from_env(std::string& error, const Getenv& get_in) {
  warn_unknown_env_once();
  const Getenv get = get_in ? get_in : Getenv([](const char* n) { return std::getenv(n); });
  auto value = [&](const char* name) -> std::optional<std::string_view> {
    const char* v = get(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string_view(v);
  };
  HostOptions o;

  // UROCE_UDP_PORT is the name; UROCE_PORT (what the drop-in read first) is an alias.
  std::optional<uint64_t> port;
  std::optional<uint64_t> alias;
  if (auto v = value("UROCE_UDP_PORT")) {
    if (!(port = parse_uint_var("UROCE_UDP_PORT", *v, error))) return std::nullopt;
  }
  if (auto v = value("UROCE_PORT")) {
    if (!(alias = parse_uint_var("UROCE_PORT", *v, error))) return std::nullopt;
  }
  if (port && alias && *port != *alias) {
    error = "UROCE_UDP_PORT=" + std::to_string(*port) +
            " and its alias UROCE_PORT=" + std::to_string(*alias) +
            " disagree; set only UROCE_UDP_PORT";
    return std::nullopt;
  }
  if (port || alias) o.udp_port = static_cast<uint16_t>(port ? *port : *alias);

  if (auto v = value("UROCE_NETDEVS")) {
    o.netdevs = split_list(*v);
    if (o.netdevs.empty()) {
      error = assignment("UROCE_NETDEVS", *v) + " names no netdev (comma-separated names)";
      return std::nullopt;
    }
  }
  if (auto v = value("UROCE_DEVICE_ADDR")) {
    for (const std::string& a : split_list(*v)) {
      if (!is_address(a)) {
        error = assignment("UROCE_DEVICE_ADDR", *v) + ": '" + printable(a) +
                "' is not an IPv4 or IPv6 address";
        return std::nullopt;
      }
      o.device_addrs.push_back(a);
    }
  }
  if (auto v = value("UROCE_MTU")) {
    auto mtu = parse_uint_var("UROCE_MTU", *v, error);
    if (!mtu) return std::nullopt;
    o.mtu = static_cast<uint32_t>(*mtu);
  }
  if (auto v = value("UROCE_SPIN_US")) {
    auto spin = parse_uint_var("UROCE_SPIN_US", *v, error);
    if (!spin) return std::nullopt;
    o.spin_us = static_cast<uint32_t>(*spin);
  }
  if (auto v = value("UROCE_HANDOFF_US")) {
    auto handoff = parse_uint_var("UROCE_HANDOFF_US", *v, error);
    if (!handoff) return std::nullopt;
    o.handoff_us = static_cast<uint32_t>(*handoff);
  }
  if (auto v = value("UROCE_BATCH_POSTS")) {
    auto batch = parse_bool_var("UROCE_BATCH_POSTS", *v, error);
    if (!batch) return std::nullopt;
    o.batch_posts = *batch;
  }
  if (auto v = value("UROCE_PROGRESS_CPUS")) {
    auto cpus = parse_cpu_list_var("UROCE_PROGRESS_CPUS", *v, error);
    if (!cpus) return std::nullopt;
    o.progress_cpus = std::move(*cpus);
  }
  if (auto v = value("UROCE_PEER")) {
    if (!is_address(std::string(*v))) {
      error = assignment("UROCE_PEER", *v) + " is not an IPv4 or IPv6 address";
      return std::nullopt;
    }
    o.peer = std::string(*v);
  }
  if (auto v = value("UROCE_QUIET")) {
    auto q = parse_bool_var("UROCE_QUIET", *v, error);
    if (!q) return std::nullopt;
    o.quiet = *q;
  }
  if (auto v = value("UROCE_STAT")) {
    if (!parse_bool_var("UROCE_STAT", *v, error)) return std::nullopt;
  }
  return o;
}

}  // namespace uroce::config
