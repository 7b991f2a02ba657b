// `uroce gids [-d DEV]`: the GID table of every port, like rdma-core's show_gids
// (DEV PORT INDEX GID IPv4 VER DEV). Reads the host's interfaces the same way the device
// does when it opens (net::discover_device_ports), without binding any socket, so it also
// works while another process holds the addresses.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "net/netdev.hpp"
#include "net/udp_device.hpp"

namespace uroce::cli {
namespace {

struct GidsOptions {
  std::string device;
  std::vector<std::string> netdevs;
};

int run_gids(const GidsOptions& o) {
  const net::UdpDeviceOptions defaults;
  if (!o.device.empty() && o.device != defaults.name) {
    fmt::print(stderr, "uroce gids: IB device {} not found; uroce provides {}\n", o.device,
               defaults.name);
    return kExitUsage;
  }
  auto ports = net::discover_device_ports(o.netdevs);
  if (!ports) {
    fmt::print(stderr, "uroce gids: {}\n", ports.error().message);
    return kExitFailure;
  }
  const std::string text = net::format_gid_table(defaults.name, ports.value());
  std::fwrite(text.data(), 1, text.size(), stdout);
  size_t count = 0;
  for (const auto& p : ports.value()) count += p.gids.size();
  fmt::print("n_gids_found={}\n", count);
  return kExitOk;
}

}  // namespace

Subcommand add_gids_command(CLI::App& app) {
  auto options = std::make_shared<GidsOptions>();
  CLI::App* sub = app.add_subcommand("gids", "List the GID table of every port like show_gids");
  sub->add_option("-d,--ib-dev", options->device, "Device (default: uroce0)");
  sub->add_option("--netdev", options->netdevs, "Only these netdevs (default: all that are up)");
  return Subcommand{sub, [options] { return run_gids(*options); }};
}

}  // namespace uroce::cli
