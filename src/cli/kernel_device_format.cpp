#include "cli/kernel_device_format.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "cli/devinfo_format.hpp"
#include "kdev/kernel_counters.hpp"
#include "telemetry/device_telemetry.hpp"

namespace uroce::cli {
namespace {

std::string_view version_of(const std::string& type) {
  if (type == "RoCE v2") return "v2";
  if (type == "IB/RoCE v1" || type == "RoCE v1") return "v1";
  return type;
}

template <class... Args>
void put(std::string& out, fmt::format_string<Args...> f, Args&&... args) {
  fmt::format_to(std::back_inserter(out), f, std::forward<Args>(args)...);
}

std::string mtu_line(uint32_t bytes) {
  if (bytes == 0) return "unknown (sysfs has no MTU and rdma-core's libibverbs could not tell)";
  return fmt::format("{} ({})", bytes, kdev::mtu_enum(bytes));
}

// ibv_devinfo's GID line (rdma-core libibverbs/examples/devinfo.c print_formated_gid): a
// RoCE v2 GID as inet_ntop writes it ("fe80::5054:ff:fe77:2", "::ffff:10.77.0.2"), a RoCE
// v1 one in eight groups of four hex digits, then ", RoCE v1" / ", RoCE v2".
std::string devinfo_gid_line(const kdev::KernelGid& g) {
  if (g.roce_v2()) {
    char text[INET6_ADDRSTRLEN] = {};
    inet_ntop(AF_INET6, g.gid.data(), text, sizeof text);
    return std::string(text) + ", RoCE v2";
  }
  if (g.type == "IB/RoCE v1" || g.type == "RoCE v1") return kdev::gid_text(g.gid) + ", RoCE v1";
  return kdev::gid_text(g.gid) + ", " + g.type;
}

}  // namespace

std::string format_kernel_gid_rows(std::span<const kdev::KernelDevice> devices) {
  std::string out;
  char line[256];
  for (const kdev::KernelDevice& d : devices) {
    for (const kdev::KernelPort& p : d.ports) {
      for (const kdev::KernelGid& g : p.gids) {
        std::snprintf(line, sizeof line, "%s\t%u\t%u\t%s\t%-15s\t%s\t%s\n", d.name.c_str(),
                      p.port_num, g.index, kdev::gid_text(g.gid).c_str(), g.ipv4.c_str(),
                      std::string(version_of(g.type)).c_str(), g.ndev.c_str());
        out += line;
      }
    }
  }
  return out;
}

size_t kernel_gid_count(std::span<const kdev::KernelDevice> devices) {
  size_t n = 0;
  for (const kdev::KernelDevice& d : devices) {
    for (const kdev::KernelPort& p : d.ports) n += p.gids.size();
  }
  return n;
}

std::string format_kernel_gid_advice(std::span<const kdev::KernelDevice> devices) {
  std::string out;
  for (const kdev::KernelDevice& d : devices) {
    for (const kdev::KernelPort& p : d.ports) {
      std::vector<std::string> netdevs;
      for (const kdev::KernelGid& g : p.gids) {
        if (!g.ndev.empty() && std::find(netdevs.begin(), netdevs.end(), g.ndev) == netdevs.end())
          netdevs.push_back(g.ndev);
      }
      if (netdevs.empty()) {
        out += fmt::format(
            "{} port {}: no GID has a netdev, so no RoCE v2 over IPv4: the port's netdev has "
            "no address or is down (rdma link show {}/{}; ip addr show)\n",
            d.name, p.port_num, d.name, p.port_num);
        continue;
      }
      for (const std::string& nd : netdevs) {
        if (const kdev::KernelGid* g = kdev::roce_v2_ipv4_gid(p, nd)) {
          out += fmt::format(
              "{} port {} ({}): RoCE v2 over IPv4 is GID index {} ({}): ib_write_bw -d {} -i {} "
              "-x {}, ibv_rc_pingpong -d {} -i {} -g {}\n",
              d.name, p.port_num, nd, g->index, g->ipv4, d.name, p.port_num, g->index, d.name,
              p.port_num, g->index);
        } else {
          out += fmt::format(
              "{} port {} ({}): no RoCE v2 GID with an IPv4 address: ip addr add ADDR/PREFIX "
              "dev {} (the kernel adds a RoCE v2 GID for every address of the netdev)\n",
              d.name, p.port_num, nd, nd);
        }
      }
    }
  }
  return out;
}

std::string format_kernel_devinfo(const kdev::KernelDevice& d, int port, bool verbose) {
  std::string out;
  put(out, "hca_id:\t{}\n", d.name);
  put(out, "\ttransport:\t\t\t{}\n",
      d.node_type == "1: CA" || d.node_type.empty() ? std::string("InfiniBand (0)") : d.node_type);
  if (!d.fw_ver.empty()) put(out, "\tfw_ver:\t\t\t\t{}\n", d.fw_ver);
  put(out, "\tnode_guid:\t\t\t{}\n", d.node_guid);
  put(out, "\tsys_image_guid:\t\t\t{}\n", d.sys_image_guid);
  if (!d.hca_type.empty()) put(out, "\thca_type:\t\t\t{}\n", d.hca_type);
  if (!d.board_id.empty()) put(out, "\tboard_id:\t\t\t{}\n", d.board_id);
  put(out, "\tkernel_driver:\t\t\t{}\n", d.driver.empty() ? "unknown" : d.driver);
  put(out, "\tphys_port_cnt:\t\t\t{}\n", d.ports.size());
  for (const kdev::KernelPort& p : d.ports) {
    if (port != 0 && p.port_num != port) continue;
    put(out, "\t\tport:\t{}\n", p.port_num);
    put(out, "\t\t\tstate:\t\t\t{} ({})\n", ibv_port_state_str(p.state), p.state);
    put(out, "\t\t\tmax_mtu:\t\t{}\n", mtu_line(p.max_mtu));
    put(out, "\t\t\tactive_mtu:\t\t{}\n", mtu_line(p.active_mtu));
    put(out, "\t\t\tlink_layer:\t\t{}\n", p.link_layer.empty() ? "unknown" : p.link_layer);
    if (verbose) {
      put(out, "\t\t\tphys_state:\t\t{} ({})\n", ibv_phys_state_str(p.phys_state), p.phys_state);
      if (!p.rate.empty()) put(out, "\t\t\trate:\t\t\t{}\n", p.rate);
      put(out, "\t\t\tnetdev:\t\t\t{}\n", p.netdev.empty() ? "none" : p.netdev);
    }
    for (const kdev::KernelGid& g : p.gids) {
      put(out, "\t\t\tGID[{:>3}]:\t\t{}\n", g.index, devinfo_gid_line(g));
    }
    put(out, "\n");
  }
  return out;
}

telemetry::DeviceSnapshot kernel_snapshot(const kdev::KernelDevice& dev,
                                          const kdev::KernelPort& port, uint64_t read_unix_ns) {
  const kdev::NamedCounters c = kdev::port_counters(port, telemetry::published_counter_names());
  telemetry::DeviceSnapshot s;
  s.device = dev.name;
  s.pid = 0;
  s.port_num = port.port_num;
  s.kernel_driver = dev.driver.empty() ? "kernel" : dev.driver;
  s.published_unix_ns = read_unix_ns;
  s.names = c.names;
  s.values = c.values;
  return s;
}

}  // namespace uroce::cli
