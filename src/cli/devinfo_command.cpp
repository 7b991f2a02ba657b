// `uroce devinfo [-v] [-d DEV] [-i PORT]`: the device and port attributes, laid out like
// rdma-core's ibv_devinfo (devinfo_format.hpp), for every device in list order or the one
// named. Opens each device (binding its UDP sockets) so what it prints is what an
// application would get from query_device/port/gid. -v adds the congestion control in effect
// (UROCE_CC/UROCE_DCQCN, or --cc/--dcqcn as a run would take them).
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cli/cc_options.hpp"
#include "cli/command.hpp"
#include "cli/devinfo_format.hpp"
#include "cli/verbs_setup.hpp"

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
  std::string error;
  auto devices = cli_host_devices({}, error);
  if (!devices) {
    fmt::print(stderr, "uroce devinfo: {}\n", error);
    return kExitFailure;
  }
  std::vector<std::string> names;
  if (o.device.empty()) {
    for (const net::HostDevice& d : *devices) names.push_back(d.name);
  } else if (const net::HostDevice* d = net::find_host_device(*devices, o.device)) {
    names.push_back(d->name);
  } else {
    fmt::print(stderr, "uroce devinfo: IB device {} not found; uroce provides {}\n", o.device,
               net::device_names(*devices));
    return kExitUsage;
  }
  if (o.list) {
    fmt::print("{} HCA{} found:\n", names.size(), names.size() == 1 ? "" : "s");
    for (const std::string& n : names) fmt::print("\t{}\n", n);
    fmt::print("\n");
    return kExitOk;
  }
  for (const std::string& n : names) {
    if (const int rc = print_device(o, n); rc != kExitOk) return rc;
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
