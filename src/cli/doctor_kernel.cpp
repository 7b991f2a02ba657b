#include "cli/doctor_kernel.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "net/netdev.hpp"

namespace uroce::cli {
namespace {

namespace fs = std::filesystem;

std::string value_at(const fs::path& p) {
  return trim(read_text_file(p.string()));
}

std::string port_name(const kdev::KernelDevice& d, const kdev::KernelPort& p) {
  return fmt::format("{}/{}", d.name, p.port_num);
}

// DSCP d lands in priority d / 8 under DSCP trust with the default DSCP-to-priority map
// (mlx5's and most switches'): DSCP 26 -> priority 3.
int priority_of_tos(int tos) {
  return (tos >> 2) / 8;
}

std::string prio_list(const std::vector<int>& p) {
  if (p.empty()) return "none";
  std::string out;
  for (int v : p) out += fmt::format("{}{}", out.empty() ? "" : ",", v);
  return out;
}

// The smallest netdev MTU that gives active_mtu `ib` on rxe: ib + 80 header bytes.
uint32_t netdev_mtu_for(uint32_t ib) {
  return ib + 80;
}

CheckResult check_state(const kdev::KernelDevice& d, const kdev::KernelPort& p,
                        const kdev::KernelNetdev& nd) {
  CheckResult r{port_name(d, p) + " state"};
  r.detail = fmt::format("{} ({}), phys_state {} ({}); netdev {}", p.state_name, p.state,
                         p.phys_state_name, p.phys_state,
                         nd.exists ? fmt::format("{} {}", nd.name, nd.operstate) : "none");
  if (p.state == 4 && (p.phys_state == 5 || p.phys_state == 0)) return r;
  r.level = CheckLevel::kFail;
  if (!nd.exists) {
    r.detail += ": the port has no netdev with an address";
    r.fix =
        d.is_rxe()
            ? fmt::format("rdma link delete {0}; rdma link add {0} type rxe netdev IFACE", d.name)
            : "ip link set dev IFACE up; ip addr add ADDR/PREFIX dev IFACE";
    return r;
  }
  r.detail += d.is_rxe() ? ": rxe's port follows its netdev" : ": the link is not up";
  r.fix = d.is_rxe() ? fmt::format("ip link set dev {} up", nd.name)
                     : fmt::format(
                           "ip link set dev {0} up; if it stays down: ethtool {0} (Link "
                           "detected?), then the cable, the transceiver and the switch port",
                           nd.name);
  return r;
}

CheckResult check_mtu(const kdev::KernelDevice& d, const kdev::KernelPort& p,
                      const kdev::KernelNetdev& nd) {
  CheckResult r{port_name(d, p) + " mtu"};
  if (p.active_mtu == 0) {
    r.level = CheckLevel::kWarn;
    r.detail = "active_mtu unknown: sysfs has no port MTU and rdma-core's libibverbs is missing";
    r.fix = fmt::format("apt-get install ibverbs-providers ibverbs-utils; ibv_devinfo -d {} -i {}",
                        d.name, p.port_num);
    return r;
  }
  if (!nd.exists || nd.mtu == 0) {
    r.detail =
        fmt::format("active_mtu {} (max {}); no netdev to compare with", p.active_mtu, p.max_mtu);
    return r;
  }
  const uint32_t fits = net::active_mtu_for_netdev_mtu(nd.mtu);
  r.detail = fmt::format("active_mtu {} (max_mtu {}); {} MTU {} carries RoCE payloads of {}",
                         p.active_mtu, p.max_mtu, nd.name, nd.mtu, fits);
  if (p.active_mtu > fits) {
    r.level = CheckLevel::kFail;
    r.detail += fmt::format(
        ": packets of active_mtu {} are {} bytes on the wire, larger than the netdev MTU, and "
        "are dropped",
        p.active_mtu, netdev_mtu_for(p.active_mtu));
    r.fix = fmt::format("ip link set dev {} mtu {} (and every switch port on the path)", nd.name,
                        netdev_mtu_for(p.active_mtu));
  } else if (p.active_mtu < fits) {
    r.level = CheckLevel::kWarn;
    r.detail += fmt::format(
        ": RoCE uses {}-byte packets where the link takes {} (perftest and ibv_rc_pingpong "
        "use active_mtu)",
        p.active_mtu, fits);
    r.fix = d.is_rxe()
                ? fmt::format(
                      "rdma link delete {0}; rdma link add {0} type rxe netdev {1} (rxe takes "
                      "active_mtu from the netdev MTU)",
                      d.name, nd.name)
                : fmt::format(
                      "ip link set dev {0} mtu {1} (the driver sets the port MTU from the "
                      "netdev's; on ConnectX check the port MTU with mlxlink -d {2} --show_mtu)",
                      nd.name, nd.mtu, d.name);
  }
  return r;
}

CheckResult check_gid(const kdev::KernelDevice& d, const kdev::KernelPort& p,
                      const std::string& netdev) {
  CheckResult r{port_name(d, p) + " gid"};
  if (netdev.empty()) {
    r.level = CheckLevel::kFail;
    r.detail = "no GID of the port belongs to a netdev: no RoCE traffic is possible";
    r.fix = "ip link set dev IFACE up; ip addr add ADDR/PREFIX dev IFACE";
    return r;
  }
  if (const kdev::KernelGid* g = kdev::roce_v2_ipv4_gid(p, netdev)) {
    r.detail = fmt::format(
        "RoCE v2 over IPv4 on {} is GID index {} ({}): ib_write_bw -d {} -i {} -x {}, "
        "ibv_rc_pingpong -d {} -i {} -g {}",
        netdev, g->index, g->ipv4, d.name, p.port_num, g->index, d.name, p.port_num, g->index);
    return r;
  }
  r.level = CheckLevel::kFail;
  const auto v1 = std::find_if(p.gids.begin(), p.gids.end(), [&](const kdev::KernelGid& g) {
    return g.ndev == netdev && !g.ipv4.empty();
  });
  if (v1 != p.gids.end()) {
    r.detail = fmt::format(
        "{}'s IPv4 address {} has only a {} GID (index {}): RoCE v2 peers (rxe, uroce, most "
        "fabrics) do not answer RoCE v1",
        netdev, v1->ipv4, v1->type, v1->index);
    r.fix = fmt::format(
        "the device's RoCE v2 mode is off: cat /sys/class/infiniband/{0}/ports/{1}/gid_attrs/"
        "types/*; on ConnectX: mlxconfig -d {0} query (look for ROCE_MODE / "
        "ROCE_CC_PRIO_MASK) and the driver's roce_mode",
        d.name, p.port_num);
  } else {
    r.detail = fmt::format("no RoCE v2 GID with an IPv4 address on {}", netdev);
    r.fix = fmt::format(
        "ip addr add ADDR/PREFIX dev {} (the kernel adds a RoCE v2 GID for every address of the "
        "netdev)",
        netdev);
  }
  return r;
}

CheckResult check_rdma_cm(const std::string& root, const kdev::KernelDevice& d,
                          const kdev::KernelPort& p, const std::optional<RdmaCmDefaults>& cm) {
  CheckResult r{port_name(d, p) + " rdma_cm"};
  const fs::path base = fs::path(root) / "kernel" / "config" / "rdma_cm";
  if (!cm) {
    std::error_code ec;
    if (fs::is_directory(base, ec)) {
      r.detail = fmt::format(
          "rdma_cm uses its defaults on {} (RoCE v2, TOS 0: DSCP 0, Not-ECT); configfs shows "
          "them once the device's directory exists: mkdir /sys/kernel/config/rdma_cm/{}",
          d.name, d.name);
    } else {
      r.detail =
          "rdma_cm's configfs is not there (rdma_cm not loaded or configfs not mounted); its "
          "defaults are RoCE v2 and TOS 0 (DSCP 0, Not-ECT). To read them: modprobe rdma_cm; "
          "mount -t configfs none /sys/kernel/config; mkdir /sys/kernel/config/rdma_cm/" +
          d.name;
    }
    return r;
  }
  r.detail = fmt::format(
      "default_roce_mode {}, default_roce_tos {} (DSCP {}, ECN {}: priority {} under DSCP "
      "trust)",
      cm->mode, cm->tos, cm->tos >> 2, cm->tos & 3, priority_of_tos(cm->tos));
  if (cm->mode != "RoCE v2") {
    r.level = CheckLevel::kWarn;
    r.detail +=
        ": rdma_cm connections (rping, NVMe-oF, SMB Direct, MPI over UCX's rdmacm) use "
        "RoCE v1, which routed fabrics and RoCE v2 peers do not carry";
    r.fix =
        fmt::format("echo \"RoCE v2\" > /sys/kernel/config/rdma_cm/{}/ports/{}/default_roce_mode",
                    d.name, p.port_num);
  }
  return r;
}

CheckResult check_pfc(const kdev::KernelDevice& d, const kdev::KernelPort& p,
                      const std::string& netdev, const KernelDoctorEnv& env, int tos) {
  CheckResult r{port_name(d, p) + " pfc"};
  const int prio = priority_of_tos(tos);
  const std::string vendor =
      d.is_mlx5() ? fmt::format(
                        "; on ConnectX, mlnx_qos -i {} shows PFC per priority and the trust "
                        "state (look for \"Priority trust state: dscp\" and the PFC line)",
                        netdev)
                  : "";
  if (env.dcb_missing) {
    r.level = CheckLevel::kWarn;
    r.detail = "cannot read PFC: iproute2's dcb is not installed" + vendor;
    r.fix = "apt-get install iproute2; dcb pfc show dev " + netdev;
    return r;
  }
  const auto it = env.dcb_pfc.find(netdev);
  const std::optional<std::string> text = it == env.dcb_pfc.end() ? std::nullopt : it->second;
  const auto prios = text ? parse_dcb_pfc(*text) : std::nullopt;
  if (!prios) {
    r.detail = fmt::format(
        "{} shows no DCB (dcb pfc show dev {} fails: the driver has no dcbnl{}): PFC, if any, is "
        "set outside the kernel; {}",
        netdev, netdev, d.is_rxe() ? ", as every rxe netdev without a DCB NIC" : "",
        d.is_rxe() ? "rxe's traffic is lossy unless the NIC and switch pause it"
                   : "ask the NIC's tool" + vendor);
    return r;
  }
  r.detail =
      fmt::format("dcb pfc show dev {}: PFC on priorities {}; the RoCE TOS {} is priority {}",
                  netdev, prio_list(*prios), tos, prio);
  if (prios->empty()) {
    r.level = CheckLevel::kWarn;
    r.detail +=
        ": no priority is lossless, so RoCE relies on ECN and retransmission; if the switch "
        "runs PFC on a priority, turn it on here too";
    r.fix = fmt::format("dcb pfc set dev {} prio-pfc {}:on (the switch's lossless priority)",
                        netdev, prio);
  } else if (std::find(prios->begin(), prios->end(), prio) == prios->end()) {
    r.level = CheckLevel::kWarn;
    r.detail += fmt::format(": RoCE traffic is not in a PFC priority ({})", prio_list(*prios));
    r.fix = fmt::format(
        "echo {} > /sys/kernel/config/rdma_cm/{}/ports/{}/default_roce_tos (DSCP {} -> priority "
        "{}), and -T {} in perftest",
        (prios->front() * 8) << 2 | 2, d.name, p.port_num, prios->front() * 8, prios->front(),
        (prios->front() * 8) << 2 | 2);
  }
  return r;
}

CheckResult check_ecn(const std::string& root, const kdev::KernelDevice& d,
                      const kdev::KernelPort& p, const std::string& netdev, int tos) {
  CheckResult r{port_name(d, p) + " ecn"};
  const fs::path ecn = fs::path(root) / "class" / "net" / netdev / "ecn";
  std::error_code ec;
  if (!fs::is_directory(ecn, ec)) {
    if (d.is_rxe()) {
      r.detail =
          "rxe has no ECN reaction: it neither sends CNPs for CE-marked packets nor slows down "
          "on CNPs (no DCQCN in the kernel driver), so ECN marking on the path does nothing for "
          "it";
    } else {
      r.detail = fmt::format(
          "{} has no /sys/class/net/{}/ecn: the NIC's own tool shows its congestion control "
          "(on ConnectX: the roce_np/roce_rp enable files of mlx5, or mlxreg)",
          d.name, netdev);
    }
    return r;
  }
  const int prio = priority_of_tos(tos);
  std::string seen;
  std::vector<std::string> off;
  for (const char* side : {"roce_np", "roce_rp"}) {
    std::vector<int> on;
    for (int i = 0; i < 8; ++i) {
      if (value_at(ecn / side / "enable" / std::to_string(i)) == "1") on.push_back(i);
    }
    seen +=
        fmt::format("{}{} enabled on priorities {}", seen.empty() ? "" : ", ", side, prio_list(on));
    if (std::find(on.begin(), on.end(), prio) == on.end()) off.push_back(side);
  }
  r.detail = seen + fmt::format("; the RoCE TOS {} is priority {}", tos, prio);
  if (!off.empty()) {
    r.level = CheckLevel::kWarn;
    r.detail += fmt::format(": {} off there, so CE marks {} for this traffic",
                            off.size() == 2 ? "both are" : off.front() + " is",
                            off.size() == 2            ? "make no CNPs and CNPs slow nothing"
                            : off.front() == "roce_np" ? "make no CNPs"
                                                       : "slow nothing down");
    for (const std::string& side : off) {
      r.fix += fmt::format("{}echo 1 > /sys/class/net/{}/ecn/{}/enable/{}",
                           r.fix.empty() ? "" : "; ", netdev, side, prio);
    }
  }
  return r;
}

}  // namespace

std::optional<std::vector<int>> parse_dcb_pfc(const std::string& text) {
  static const std::regex kField(R"(prio-pfc((?:\s+\d+:(?:on|off))+))");
  static const std::regex kItem(R"((\d+):(on|off))");
  std::smatch m;
  if (!std::regex_search(text, m, kField)) return std::nullopt;
  const std::string items = m[1];
  std::vector<int> on;
  for (std::sregex_iterator it(items.begin(), items.end(), kItem), end; it != end; ++it) {
    if ((*it)[2] == "on") on.push_back(std::stoi((*it)[1]));
  }
  return on;
}

std::optional<RdmaCmDefaults> read_rdma_cm(const std::string& root, const std::string& dev,
                                           uint8_t port) {
  const fs::path dir =
      fs::path(root) / "kernel" / "config" / "rdma_cm" / dev / "ports" / std::to_string(port);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  RdmaCmDefaults d;
  d.mode = value_at(dir / "default_roce_mode");
  const std::string tos = value_at(dir / "default_roce_tos");
  d.tos = !tos.empty() && std::all_of(tos.begin(), tos.end(), ::isdigit) ? std::stoi(tos) : 0;
  return d;
}

std::vector<CheckResult> check_kernel_device(const kdev::KernelDevice& d,
                                             const KernelDoctorEnv& env) {
  std::vector<CheckResult> out;
  for (const kdev::KernelPort& p : d.ports) {
    const kdev::KernelNetdev nd = kdev::read_netdev(env.root, p.netdev);
    out.push_back(check_state(d, p, nd));
    out.push_back(check_mtu(d, p, nd));
    out.push_back(check_gid(d, p, p.netdev));
    const auto cm = read_rdma_cm(env.root, d.name, p.port_num);
    out.push_back(check_rdma_cm(env.root, d, p, cm));
    if (p.netdev.empty()) continue;
    const int tos = cm ? cm->tos : 0;
    out.push_back(check_pfc(d, p, p.netdev, env, tos));
    out.push_back(check_ecn(env.root, d, p, p.netdev, tos));
  }
  return out;
}

CheckResult check_kernel_memlock(uint64_t soft, bool root_user) {
  CheckResult r{"kernel_memlock"};
  const std::string limit =
      soft == RLIM_INFINITY ? std::string("unlimited") : fmt::format("{} KiB", soft / 1024);
  if (root_user) {
    r.detail = fmt::format(
        "ulimit -l {}, but root has CAP_IPC_LOCK: kernel devices pin MRs without limit", limit);
    return r;
  }
  r.detail = fmt::format("ulimit -l {}: a kernel RDMA device pins every MR (ibv_reg_mr)", limit);
  if (soft == RLIM_INFINITY) return r;
  r.level = CheckLevel::kWarn;
  r.detail += fmt::format(
      ", so a process can register at most {} KiB before ibv_reg_mr fails with ENOMEM (Cannot "
      "allocate memory)",
      soft / 1024);
  r.fix =
      "ulimit -l unlimited (for logins: '* soft memlock unlimited' and '* hard memlock "
      "unlimited' in /etc/security/limits.d/rdma.conf; for services: LimitMEMLOCK=infinity)";
  return r;
}

CheckResult check_kernel_peer_mtu(const kdev::KernelDevice& d, const kdev::KernelPort& p,
                                  const std::string& peer, uint32_t peer_netdev_mtu,
                                  uint32_t peer_active_mtu) {
  CheckResult r{port_name(d, p) + " mtu_peer"};
  r.detail = fmt::format("active_mtu {} here ({} on {}), {} at {} (MTU {})", p.active_mtu, d.name,
                         p.netdev, peer_active_mtu, peer, peer_netdev_mtu);
  if (p.active_mtu != 0 && peer_active_mtu != p.active_mtu) {
    r.level = CheckLevel::kWarn;
    const uint32_t lower = std::min(p.active_mtu, peer_active_mtu);
    r.detail += fmt::format(
        "; both sides must use path_mtu {} (ibv_rc_pingpong -m {}, perftest -m {}): each "
        "defaults to its own active_mtu, and the larger side's packets are dropped",
        lower, lower, lower);
    r.fix = p.active_mtu < peer_active_mtu
                ? fmt::format("ip link set dev {} mtu {} (here) or the peer's MTU to {}", p.netdev,
                              peer_netdev_mtu, netdev_mtu_for(p.active_mtu))
                : fmt::format("set the peer's MTU to {} or here: ip link set dev {} mtu {}",
                              netdev_mtu_for(p.active_mtu), p.netdev, peer_netdev_mtu);
  }
  return r;
}

KernelDoctorEnv live_kernel_doctor_env(const std::vector<kdev::KernelDevice>& devs) {
  KernelDoctorEnv env;
  env.root = kdev::sysfs_root();
  env.dcb_missing = !command_output("dcb help >/dev/null 2>&1; command -v dcb").has_value();
  for (const kdev::KernelDevice& d : devs) {
    for (const kdev::KernelPort& p : d.ports) {
      if (p.netdev.empty() || env.dcb_pfc.contains(p.netdev) || env.dcb_missing) continue;
      // Under a recorded tree the netdevs are not this host's: only a file in the tree counts.
      if (env.root != "/sys") {
        const std::string f = env.root + "/../dcb/" + p.netdev + ".pfc";
        const std::string t = read_text_file(f);
        env.dcb_pfc[p.netdev] = t.empty() ? std::nullopt : std::optional<std::string>(t);
        continue;
      }
      env.dcb_pfc[p.netdev] = command_output("dcb pfc show dev " + p.netdev);
    }
  }
  rlimit l{};
  getrlimit(RLIMIT_MEMLOCK, &l);
  env.memlock_soft = l.rlim_cur;
  env.root_user = geteuid() == 0;
  return env;
}

}  // namespace uroce::cli
