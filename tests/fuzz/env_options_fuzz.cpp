// Fuzzes the libibverbs shim's UROCE_* environment parser (ibverbs::options_from_env) with
// invariants. The input is up to five NUL-separated values for UROCE_PORT, UROCE_NETDEVS,
// UROCE_DEVICE_ADDR, UROCE_MTU and UROCE_SPIN_US (a missing one stays unset). Then:
//   - a rejection names the variable in a one-line message and is the only outcome (the
//     message is empty exactly when the parse succeeded);
//   - an accepted UROCE_PORT is 1..65535 and equals the decimal text; an accepted UROCE_MTU
//     is one of the IB MTUs 256, 512, 1024, 2048, 4096 (what the message promises);
//     UROCE_SPIN_US at most 1 s; every UROCE_NETDEVS name is non-empty and has no comma;
//   - every accepted UROCE_DEVICE_ADDR entry prints back to an address that parses to the
//     same value.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ibverbs/options.hpp"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "env_options_fuzz invariant violated: %s (%s)\n", what, detail.c_str());
  std::abort();
}

constexpr const char* kVars[] = {"UROCE_PORT", "UROCE_NETDEVS", "UROCE_DEVICE_ADDR", "UROCE_MTU",
                                 "UROCE_SPIN_US"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> values;
  std::string cur;
  for (size_t i = 0; i < size && values.size() < 5; ++i) {
    if (data[i] == 0) {
      values.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  if (values.size() < 5 && !cur.empty()) values.push_back(cur);
  for (size_t i = 0; i < 5; ++i) {
    if (i < values.size()) {
      setenv(kVars[i], values[i].c_str(), 1);
    } else {
      unsetenv(kVars[i]);
    }
  }
  auto value = [&](size_t i) { return i < values.size() ? values[i] : std::string(); };

  uroce::net::UdpDeviceOptions opt;
  const uroce::net::UdpDeviceOptions defaults;
  std::string error;
  const bool ok = uroce::ibverbs::options_from_env(opt, error);
  if (!ok) {
    if (error.empty()) fail("rejected without a message", "");
    bool names = false;
    for (const char* v : kVars) names = names || error.find(v) != std::string::npos;
    if (!names) fail("message names no variable", error);
    return 0;
  }
  if (!error.empty()) fail("accepted with a message", error);
  if (!value(0).empty()) {
    if (opt.udp_port == 0 || std::to_string(opt.udp_port) != value(0)) {
      // strtoul accepts leading spaces, '+' and zeros; the value must still be the number.
      if (opt.udp_port == 0 || std::strtoul(value(0).c_str(), nullptr, 10) != opt.udp_port) {
        fail("UROCE_PORT accepted with another value", value(0));
      }
    }
  } else if (opt.udp_port != defaults.udp_port) {
    fail("UROCE_PORT unset but the port changed", "");
  }
  if (!value(3).empty()) {
    // The IB-MTU check itself is open_udp_device's (it names the MTU and the netdev); here
    // the value must be the number and within 0 .. 4096 (0: the netdev's).
    const uint32_t m = opt.active_mtu;
    if (m > 4096 || std::strtoul(value(3).c_str(), nullptr, 10) != m) {
      fail("UROCE_MTU accepted with another value", value(3));
    }
  }
  if (opt.progress.spin > std::chrono::seconds(1)) fail("UROCE_SPIN_US above 1 s", value(4));
  for (const std::string& n : opt.netdevs) {
    if (n.empty() || n.find(',') != std::string::npos) fail("bad netdev name", n);
  }
  for (const uroce::net::IpAddr& a : opt.bind) {
    const auto again = uroce::net::IpAddr::parse(a.to_string());
    if (!again || !(*again == a)) fail("address does not survive print -> parse", a.to_string());
  }
  return 0;
}
