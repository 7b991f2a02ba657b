// `uroce devinfo [-v] [-d DEV] [-i PORT]`: the device and port attributes, laid out like
// rdma-core's ibv_devinfo (devinfo_format.hpp), for every device in list order or the one
// named. Opens each device (binding its UDP sockets) so what it prints is what an
// application would get from query_device/port/gid. -v adds the congestion control in effect
// (UROCE_CC/UROCE_DCQCN, or --cc/--dcqcn as a run would take them).
//
// Kernel RDMA devices (rxe, mlx5, ...) follow uroce's, with what sysfs and ibv_query_port
// (through rdma-core's own libibverbs) say of them (kernel_device_format.hpp).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/cc_options.hpp"
#include "cli/command.hpp"
#include "cli/devinfo_format.hpp"
#include "cli/kernel_device_format.hpp"
#include "cli/verbs_setup.hpp"
#include "kdev/kernel_device.hpp"

namespace uroce::cli {
namespace {

struct DevinfoOptions {
  std::string device;
  int port = 0;  // 0: all
  bool verbose = false;
  bool list = false;
  CcCliOptions cc;  // --cc/--dcqcn: show what a run with them would use
};

int print_device(const DevinfoOptions& o, const std::string& name) {
  std::string error;
  auto dev = open_cli_device(name, std::nullopt, error, o.cc.resolved);
  if (!dev) {
    fmt::print(stderr, "uroce devinfo: {}\n", error);
    return kExitFailure;
  }
  const device::DeviceAttr attr = dev->query_device();
  if (o.port > attr.phys_port_cnt) {
    fmt::print(stderr, "uroce devinfo: {} has {} port(s); -i {} does not exist\n", dev->name(),
               attr.phys_port_cnt, o.port);
    return kExitUsage;
  }
  std::vector<DevinfoPort> ports;
  for (const device::PortInfo& info : dev->ports()) {
    if (o.port != 0 && info.port_num != o.port) continue;
    DevinfoPort p;
    p.port_num = info.port_num;
    if (const auto st = dev->query_port(info.port_num, p.attr); !st) {
      fmt::print(stderr, "uroce devinfo: failed to query port {} props: {}\n", info.port_num,
                 st.message());
      return kExitFailure;
    }
    for (uint32_t i = 0; i < static_cast<uint32_t>(p.attr.gid_tbl_len); ++i) {
      device::Gid gid{};
      if (dev->query_gid(info.port_num, i, gid) && gid != device::Gid{}) {
        p.gids.emplace_back(i, gid);
      }
    }
    ports.push_back(std::move(p));
  }
  const std::string text =
      format_devinfo(dev->name(), attr, ports, o.verbose, &dev->config().engine.cc);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return kExitOk;
}

// As ibv_devinfo: every device in list order, or the one given with -d.
int run_devinfo(DevinfoOptions& o) {
  if (std::string cc = finish_cc_options(o.cc); !cc.empty()) {
    fmt::print(stderr, "uroce devinfo: {}\n", cc);
    return kExitUsage;
  }
  std::vector<kdev::KernelDevice> kernel = kdev::read_kernel_devices(kdev::sysfs_root());
  std::string error;
  auto devices = cli_host_devices({}, error);
  if (!devices && kernel.empty()) {
    fmt::print(stderr, "uroce devinfo: {}\n", error);
    return kExitFailure;
  }
  std::vector<net::HostDevice> host =
      devices ? std::move(*devices) : std::vector<net::HostDevice>{};
  std::vector<std::string> names;
  std::vector<const kdev::KernelDevice*> kernel_shown;
  const auto k = std::find_if(kernel.begin(), kernel.end(),
                              [&](const kdev::KernelDevice& d) { return d.name == o.device; });
  if (o.device.empty()) {
    for (const net::HostDevice& d : host) names.push_back(d.name);
    for (const kdev::KernelDevice& d : kernel) kernel_shown.push_back(&d);
  } else if (k != kernel.end()) {
    kernel_shown.push_back(&*k);
  } else if (const net::HostDevice* d = net::find_host_device(host, o.device)) {
    names.push_back(d->name);
  } else {
    fmt::print(stderr, "uroce devinfo: IB device {} not found; uroce provides {}{}\n", o.device,
               net::device_names(host),
               kernel.empty() ? std::string()
                              : "; kernel RDMA devices: " + kdev::kernel_device_names(kernel));
    return kExitUsage;
  }
  for (const kdev::KernelDevice* d : kernel_shown) {
    if (o.port > static_cast<int>(d->ports.size())) {
      fmt::print(stderr, "uroce devinfo: {} has {} port(s); -i {} does not exist (use -i 1{})\n",
                 d->name, d->ports.size(), o.port,
                 d->ports.size() > 1 ? fmt::format(" .. -i {}", d->ports.size()) : "");
      return kExitUsage;
    }
  }
  if (o.list) {
    const size_t n = names.size() + kernel_shown.size();
    fmt::print("{} HCA{} found:\n", n, n == 1 ? "" : "s");
    for (const std::string& name : names) fmt::print("\t{}\n", name);
    for (const kdev::KernelDevice* d : kernel_shown) fmt::print("\t{}\n", d->name);
    fmt::print("\n");
    return kExitOk;
  }
  for (const std::string& n : names) {
    if (const int rc = print_device(o, n); rc != kExitOk) return rc;
  }
  for (const kdev::KernelDevice* d : kernel_shown) {
    const std::string text = format_kernel_devinfo(*d, o.port, o.verbose);
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  return kExitOk;
}

}  // namespace

Subcommand add_devinfo_command(CLI::App& app) {
  auto options = std::make_shared<DevinfoOptions>();
  CLI::App* sub = app.add_subcommand(
      "devinfo", "Print the device and port attributes like ibv_devinfo (-v: all limits)");
  sub->add_option("-d,--ib-dev", options->device, "Only this device (default: every device)");
  sub->add_option("-i,--ib-port", options->port, "Only this port (default: all ports)")
      ->check(CLI::Range(1, 255));
  sub->add_flag("-l,--list", options->list, "Print only the device names");
  sub->add_flag("-v,--verbose", options->verbose, "Print all the attributes of the device");
  add_cc_options(*sub, options->cc, false);
  return Subcommand{sub, [options] { return run_devinfo(*options); }};
}

}  // namespace uroce::cli
