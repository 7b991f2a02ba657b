#include "ibverbs/options.hpp"

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace uroce::ibverbs {
namespace {

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

bool parse_uint(const char* text, unsigned long max, unsigned long& out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long v = std::strtoul(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v > max) return false;
  out = v;
  return true;
}

}  // namespace

bool options_from_env(net::UdpDeviceOptions& options, std::string& error) {
  if (const char* port = std::getenv("UROCE_PORT"); port != nullptr && *port != '\0') {
    unsigned long v = 0;
    if (!parse_uint(port, 65535, v) || v == 0) {
      error = std::string("UROCE_PORT=") + port + " is not a UDP port (1 .. 65535)";
      return false;
    }
    options.udp_port = static_cast<uint16_t>(v);
  }
  if (const char* devs = std::getenv("UROCE_NETDEVS"); devs != nullptr && *devs != '\0') {
    options.netdevs = split_list(devs);
  }
  if (const char* addrs = std::getenv("UROCE_DEVICE_ADDR"); addrs != nullptr && *addrs != '\0') {
    for (const std::string& a : split_list(addrs)) {
      auto ip = net::IpAddr::parse(a);
      if (!ip) {
        error = "UROCE_DEVICE_ADDR: '" + a + "' is not an IPv4 or IPv6 address";
        return false;
      }
      options.bind.push_back(*ip);
    }
  }
  if (const char* mtu = std::getenv("UROCE_MTU"); mtu != nullptr && *mtu != '\0') {
    unsigned long v = 0;
    if (!parse_uint(mtu, 4096, v)) {
      error = std::string("UROCE_MTU=") + mtu + " is not 256, 512, 1024, 2048 or 4096";
      return false;
    }
    options.active_mtu = static_cast<uint32_t>(v);
  }
  if (const char* spin = std::getenv("UROCE_SPIN_US"); spin != nullptr && *spin != '\0') {
    unsigned long v = 0;
    if (!parse_uint(spin, 1000000, v)) {
      error = std::string("UROCE_SPIN_US=") + spin + " is not a number of microseconds";
      return false;
    }
    options.progress.spin = std::chrono::microseconds(v);
  }
  return true;
}

void report(const std::string& message) {
  const char* quiet = std::getenv("UROCE_QUIET");
  if (quiet != nullptr && std::string_view(quiet) == "1") return;
  std::fprintf(stderr, "uroce: %s\n", message.c_str());
}

}  // namespace uroce::ibverbs
