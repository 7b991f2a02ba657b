// `uroce gids [-d DEV]`: the GID table of every device, like rdma-core's show_gids
// (DEV PORT INDEX GID IPv4 VER DEV), devices in list order. Reads the host's interfaces the
// same way a device does when it opens (net::discover_host_devices), without binding any
// socket, so it also works while another process holds the addresses.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "cli/verbs_setup.hpp"
#include "net/netdev.hpp"
#include "net/udp_device.hpp"

namespace uroce::cli {
namespace {

struct GidsOptions {
  std::string device;
  std::vector<std::string> netdevs;
};

int run_gids(const GidsOptions& o) {
  std::string error;
  auto devices = cli_host_devices(o.netdevs, error);
  if (!devices) {
    fmt::print(stderr, "uroce gids: {}\n", error);
    return kExitFailure;
  }
  std::vector<net::HostDevice> shown = std::move(*devices);
  if (!o.device.empty()) {
    const net::HostDevice* d = net::find_host_device(shown, o.device);
    if (d == nullptr) {
      fmt::print(stderr, "uroce gids: IB device {} not found; uroce provides {}\n", o.device,
                 net::device_names(shown));
      return kExitUsage;
    }
    shown = {*d};
  }
  const std::string text = net::format_gid_table(shown);
  std::fwrite(text.data(), 1, text.size(), stdout);
  size_t count = 0;
  for (const auto& d : shown) count += d.port.gids.size();
  fmt::print("n_gids_found={}\n", count);
  return kExitOk;
}

}  // namespace

Subcommand add_gids_command(CLI::App& app) {
  auto options = std::make_shared<GidsOptions>();
  CLI::App* sub = app.add_subcommand("gids", "List the GID table of every port like show_gids");
  sub->add_option("-d,--ib-dev", options->device, "Only this device (default: every device)");
  sub->add_option("--netdev", options->netdevs,
                  "Only these netdevs (default: UROCE_NETDEVS, else all that are up)");
  return Subcommand{sub, [options] { return run_gids(*options); }};
}

}  // namespace uroce::cli
