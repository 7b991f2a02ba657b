// Fuzzes the one UROCE_* environment parser (config::HostOptions::from_env, which the drop-in,
// the CLI and the C++ API all use) with invariants. The input is up to eight NUL-separated
// values for the variables in kVars (a missing one stays unset). Then:
//   - a rejection is one line that names a variable, and is the only outcome (the message is
//     empty exactly when the parse succeeded);
//   - an accepted number is all decimal digits, equals its text and lies in the table's range
//     (UDP port 1..65535 and UROCE_PORT, its alias, agrees; MTU 256..4096; spin at most 1 s);
//   - every UROCE_NETDEVS name is non-empty and has no comma;
//   - every accepted address (UROCE_DEVICE_ADDR entries, UROCE_PEER) is an IPv4/IPv6 text.
#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "config/host_options.hpp"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "env_options_fuzz invariant violated: %s (%s)\n", what, detail.c_str());
  std::abort();
}

constexpr const char* kVars[] = {"UROCE_UDP_PORT",    "UROCE_PORT", "UROCE_NETDEVS",
                                 "UROCE_DEVICE_ADDR", "UROCE_MTU",  "UROCE_SPIN_US",
                                 "UROCE_PEER",        "UROCE_QUIET"};
constexpr size_t kCount = sizeof kVars / sizeof kVars[0];

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

void check_number(const char* name, const std::string& text, uint64_t got, uint64_t lo,
                  uint64_t hi) {
  if (!all_digits(text)) fail("a number with other characters was accepted", name + (": " + text));
  if (std::strtoull(text.c_str(), nullptr, 10) != got) fail("accepted with another value", name);
  if (got < lo || got > hi) fail("accepted outside its range", name + (": " + text));
}

bool is_address(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> values;
  std::string cur;
  for (size_t i = 0; i < size && values.size() < kCount; ++i) {
    if (data[i] == 0) {
      values.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  if (values.size() < kCount && !cur.empty()) values.push_back(cur);
  std::map<std::string, std::string> env;
  for (size_t i = 0; i < values.size(); ++i) env[kVars[i]] = values[i];
  auto get = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto value = [&](size_t i) { return i < values.size() ? values[i] : std::string(); };

  std::string error;
  const auto opt = uroce::config::HostOptions::from_env(error, get);
  if (!opt) {
    if (error.empty()) fail("rejected without a message", "");
    if (error.find('\n') != std::string::npos) fail("message of more than one line", error);
    bool names = false;
    for (const char* v : kVars) names = names || error.find(v) != std::string::npos;
    if (!names) fail("message names no variable", error);
    return 0;
  }
  if (!error.empty()) fail("accepted with a message", error);
  if (opt->udp_port) {
    const std::string text = !value(0).empty() ? value(0) : value(1);
    check_number("UROCE_UDP_PORT", text, *opt->udp_port, 1, 65535);
    if (!value(0).empty() && !value(1).empty() &&
        std::strtoull(value(1).c_str(), nullptr, 10) != *opt->udp_port) {
      fail("UROCE_PORT and UROCE_UDP_PORT disagree but were accepted", value(0) + "/" + value(1));
    }
  } else if (!value(0).empty() || !value(1).empty()) {
    fail("a UDP port was given but none taken", value(0) + "/" + value(1));
  }
  for (const std::string& n : opt->netdevs) {
    if (n.empty() || n.find(',') != std::string::npos) fail("bad netdev name accepted", n);
  }
  for (const std::string& a : opt->device_addrs) {
    if (!is_address(a)) fail("UROCE_DEVICE_ADDR entry is not an address", a);
  }
  if (opt->mtu) check_number("UROCE_MTU", value(4), *opt->mtu, 256, 4096);
  if (opt->spin_us) check_number("UROCE_SPIN_US", value(5), *opt->spin_us, 0, 1000000);
  if (opt->peer && !is_address(*opt->peer)) fail("UROCE_PEER is not an address", *opt->peer);
  return 0;
}
