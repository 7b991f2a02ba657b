// `uroce gids [-d DEV]`: the GID table of every device, like rdma-core's show_gids
// (DEV PORT INDEX GID IPv4 VER DEV), devices in list order. Reads the host's interfaces the
// same way a device does when it opens (net::discover_host_devices), without binding any
// socket, so it also works while another process holds the addresses.
//
// Kernel RDMA devices (rxe, mlx5, ...; /sys/class/infiniband) follow uroce's in the same
// table, then one line per port and netdev names the GID index of RoCE v2 over IPv4 and how
// perftest and ibv_*_pingpong take it (kernel_device_format.hpp).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "cli/kernel_device_format.hpp"
#include "cli/verbs_setup.hpp"
#include "kdev/kernel_device.hpp"
#include "net/netdev.hpp"
#include "net/udp_device.hpp"

namespace uroce::cli {
namespace {

struct GidsOptions {
  std::string device;
  std::vector<std::string> netdevs;
};

int run_gids(const GidsOptions& o) {
  std::vector<kdev::KernelDevice> kernel = kdev::read_kernel_devices(kdev::sysfs_root(), false);
  std::string error;
  auto devices = cli_host_devices(o.netdevs, error);
  if (!devices && (kernel.empty() || !o.netdevs.empty())) {
    fmt::print(stderr, "uroce gids: {}\n", error);
    return kExitFailure;
  }
  std::vector<net::HostDevice> shown =
      devices ? std::move(*devices) : std::vector<net::HostDevice>{};
  if (!o.device.empty()) {
    const auto k = std::find_if(kernel.begin(), kernel.end(),
                                [&](const kdev::KernelDevice& d) { return d.name == o.device; });
    const net::HostDevice* d = k == kernel.end() ? net::find_host_device(shown, o.device) : nullptr;
    if (k == kernel.end() && d == nullptr) {
      fmt::print(stderr, "uroce gids: IB device {} not found; uroce provides {}{}\n", o.device,
                 net::device_names(shown),
                 kernel.empty() ? std::string()
                                : "; kernel RDMA devices: " + kdev::kernel_device_names(kernel));
      return kExitUsage;
    }
    if (d != nullptr) {
      shown = {*d};
      kernel.clear();
    } else {
      shown.clear();
      kernel = {*k};
    }
  }
  // --netdev restricts uroce's devices; kernel ports are kept when their netdev is listed.
  if (!o.netdevs.empty()) {
    for (kdev::KernelDevice& d : kernel) {
      std::erase_if(d.ports, [&](const kdev::KernelPort& p) {
        return std::find(o.netdevs.begin(), o.netdevs.end(), p.netdev) == o.netdevs.end();
      });
    }
    std::erase_if(kernel, [](const kdev::KernelDevice& d) { return d.ports.empty(); });
  }
  std::string text = net::format_gid_table(shown) + format_kernel_gid_rows(kernel);
  std::fwrite(text.data(), 1, text.size(), stdout);
  size_t count = kernel_gid_count(kernel);
  for (const auto& d : shown) count += d.port.gids.size();
  fmt::print("n_gids_found={}\n", count);
  text = format_kernel_gid_advice(kernel);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return kExitOk;
}

}  // namespace

Subcommand add_gids_command(CLI::App& app) {
  auto options = std::make_shared<GidsOptions>();
  CLI::App* sub =
      app.add_subcommand("gids",
                         "List the GID table of every port like show_gids (uroce devices and "
                         "kernel RDMA devices), with the RoCE v2 IPv4 index to pass to perftest");
  sub->add_option("-d,--ib-dev", options->device,
                  "Only this device, uroce's or a kernel one (default: every device)");
  sub->add_option("--netdev", options->netdevs,
                  "Only these netdevs (default: UROCE_NETDEVS, else all that are up)");
  return Subcommand{sub, [options] { return run_gids(*options); }};
}

}  // namespace uroce::cli
