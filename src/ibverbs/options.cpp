#include "ibverbs/options.hpp"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "config/host_options.hpp"

namespace uroce::ibverbs {

bool options_from_env(net::UdpDeviceOptions& options, std::string& error) {
  auto env = config::HostOptions::from_env(error);
  return env && net::apply_env_options(*env, options, error);
}

void report(const std::string& message) {
  const char* quiet = std::getenv("UROCE_QUIET");
  if (quiet != nullptr && std::string_view(quiet) == "1") return;
  std::fprintf(stderr, "uroce: %s\n", message.c_str());
}

}  // namespace uroce::ibverbs
