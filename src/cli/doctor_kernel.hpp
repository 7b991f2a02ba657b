// `uroce doctor`'s checks of a kernel RDMA device (rxe, mlx5, ...; src/kdev), the way it
// checks uroce's own: port state, active_mtu against the netdev MTU (and the peer's, with
// --peer), the RoCE v2 GID, the RoCE mode and TOS of the kernel's rdma_cm (configfs), what
// the kernel shows of PFC (iproute2's dcb) and ECN (mlx5's /sys/class/net/<if>/ecn), and
// memlock, which pins every kernel MR. Each WARN/FAIL carries the command that fixes it;
// nothing here changes a setting. Where only a vendor tool can read a setting, the detail
// names the tool and what to look for.
//
// Files are read under the sysfs root (kdev::sysfs_root(): tests point it at a recorded
// tree); configfs as <root>/kernel/config/rdma_cm. Command outputs come in as text.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/doctor_checks.hpp"
#include "kdev/kernel_device.hpp"

namespace uroce::cli {

// What doctor knows about the host beyond the device's own sysfs directory.
struct KernelDoctorEnv {
  std::string root = "/sys";
  // `dcb pfc show dev IF` per netdev; nullopt: the command failed (no dcbnl support) or is
  // missing (dcb_missing).
  std::map<std::string, std::optional<std::string>> dcb_pfc;
  bool dcb_missing = false;
  uint64_t memlock_soft = 0;  // RLIM_INFINITY: unlimited
  bool root_user = false;     // euid 0: CAP_IPC_LOCK, memlock does not apply
};

// The PFC priorities `dcb pfc show` reports on ("prio-pfc 0:off 1:off 2:off 3:on ..."):
// the priorities that are on; nullopt when the text has no prio-pfc field.
[[nodiscard]] std::optional<std::vector<int>> parse_dcb_pfc(const std::string& text);

// The TOS rdma_cm uses on port `port` (configfs default_roce_tos), and its mode; nullopt
// when configfs does not show the device.
struct RdmaCmDefaults {
  std::string mode;  // "RoCE v2"
  int tos = 0;
};
[[nodiscard]] std::optional<RdmaCmDefaults> read_rdma_cm(const std::string& root,
                                                         const std::string& dev, uint8_t port);

// Every check of one device (all its ports).
[[nodiscard]] std::vector<CheckResult> check_kernel_device(const kdev::KernelDevice& dev,
                                                           const KernelDoctorEnv& env);
// Once for all kernel devices: memlock, which limits pinned (kernel) MRs.
[[nodiscard]] CheckResult check_kernel_memlock(uint64_t soft, bool root_user);
// With --peer: the port's active_mtu against the peer's (from the probe reply).
[[nodiscard]] CheckResult check_kernel_peer_mtu(const kdev::KernelDevice& dev,
                                                const kdev::KernelPort& port,
                                                const std::string& peer, uint32_t peer_netdev_mtu,
                                                uint32_t peer_active_mtu);

// The environment of the live host: dcb outputs for the devices' netdevs, memlock, euid.
[[nodiscard]] KernelDoctorEnv live_kernel_doctor_env(const std::vector<kdev::KernelDevice>& devs);

}  // namespace uroce::cli
