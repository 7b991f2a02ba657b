// The sysfs and /dev files of `uroce exec`'s view (exec_view.hpp). Values are spelled as the
// kernel spells them (drivers/infiniband/core/sysfs.c): "4: ACTIVE", "5: LinkUp", GIDs as
// eight groups of four hex digits, node GUIDs as four, rates as "<n> Gb/sec (<w>X <speed>)".
#include "cli/exec_view.hpp"

#include <fmt/format.h>

#include "kdev/kernel_device.hpp"
#include "uroce/vocab/counters.hpp"

namespace uroce::cli {
namespace {

std::string guid_text(uint64_t guid) {
  return fmt::format("{:04x}:{:04x}:{:04x}:{:04x}", (guid >> 48) & 0xffff, (guid >> 32) & 0xffff,
                     (guid >> 16) & 0xffff, guid & 0xffff);
}

// ib_get_eth_speed's choice for the netdev's speed, as sysfs' rate file prints it. Unknown
// speeds (lo, veth, most VMs) give 1X SDR, as rxe shows on them.
std::string rate_text(int64_t speed_mbps) {
  if (speed_mbps >= 100000) return "100 Gb/sec (4X EDR)";
  if (speed_mbps >= 40000) return "40 Gb/sec (4X QDR)";
  if (speed_mbps >= 25000) return "25 Gb/sec (1X EDR)";
  if (speed_mbps >= 10000) return "10 Gb/sec (1X FDR10)";
  return "2.5 Gb/sec (1X SDR)";
}

void add(std::vector<ViewFile>& out, std::string path, std::string content) {
  out.push_back(ViewFile{std::move(path), std::move(content) + "\n", false});
}

}  // namespace

std::vector<ViewFile> sysfs_view(std::span<const net::HostDevice> devices) {
  std::vector<ViewFile> out;
  add(out, "infiniband_verbs/abi_version", "6");
  for (size_t n = 0; n < devices.size(); ++n) {
    const net::HostDevice& d = devices[n];
    const std::string dir = "infiniband/" + d.name + "/";
    const std::string& netdev = d.port.netdev.name;
    add(out, dir + "node_type", "1: CA");
    add(out, dir + "node_guid", guid_text(d.node_guid));
    add(out, dir + "sys_image_guid", guid_text(d.node_guid));
    add(out, dir + "node_desc", "uroce " + netdev);
    add(out, dir + "fw_ver", "0.1.0");
    add(out, dir + "hca_type", std::string(kViewHcaType));
    add(out, dir + "parent", netdev);
    out.push_back(ViewFile{dir + "device/net/" + netdev, "/sys/class/net/" + netdev, true});

    const std::string port = dir + "ports/1/";
    add(out, port + "state", "4: ACTIVE");
    add(out, port + "phys_state", "5: LinkUp");
    add(out, port + "link_layer", "Ethernet");
    add(out, port + "rate", rate_text(d.port.netdev.speed_mbps));
    // Not kernel sysfs files (the kernel has no port MTU there): what ibv_devinfo would say,
    // as uroce's recorded kernel trees carry it.
    add(out, port + "active_mtu", std::to_string(d.port.active_mtu));
    add(out, port + "max_mtu", "4096");
    add(out, port + "lid", "0x0");
    add(out, port + "sm_lid", "0x0");
    add(out, port + "sm_sl", "0");
    add(out, port + "lid_mask_count", "0");
    add(out, port + "cap_mask", "0x00010000");  // IB_PORT_CM_SUP, as rxe
    add(out, port + "pkeys/0", "0xffff");
    for (const net::GidEntry& g : d.port.gids) {
      const std::string i = std::to_string(g.index);
      add(out, port + "gids/" + i, kdev::gid_text(g.gid));
      add(out, port + "gid_attrs/types/" + i, "RoCE v2");
      add(out, port + "gid_attrs/ndevs/" + i, g.netdev.empty() ? netdev : g.netdev);
    }
    for (ViewFile& f : counter_files(d.name)) out.push_back(std::move(f));

    const std::string verbs = fmt::format("infiniband_verbs/uverbs{}/", n);
    add(out, verbs + "ibdev", d.name);
    add(out, verbs + "abi_version", "1");
    add(out, verbs + "dev", fmt::format("{}:{}", kUverbsMajor, kUverbsMinorBase + n));
  }
  return out;
}

std::vector<ViewFile> dev_view(std::span<const net::HostDevice> devices) {
  std::vector<ViewFile> out;
  for (size_t n = 0; n < devices.size(); ++n) {
    out.push_back(ViewFile{fmt::format("infiniband/uverbs{}", n), "", false});
  }
  return out;
}

std::vector<ViewFile> counter_files(const std::string& device,
                                    std::span<const telemetry::DeviceSnapshot> snaps) {
  std::vector<ViewFile> out;
  const std::string dir = "infiniband/" + device + "/ports/1/hw_counters/";
  for (std::string_view name : transport::kCounterNames) {
    uint64_t sum = 0;
    for (const telemetry::DeviceSnapshot& s : snaps) {
      if (s.device == device) sum += s.value(name);
    }
    add(out, dir + std::string(name), std::to_string(sum));
  }
  return out;
}

}  // namespace uroce::cli
