// Kernel RDMA devices as sysfs shows them: /sys/class/infiniband/<dev>/ (node_guid, fw_ver,
// hca_type, ports/<p>/{state,phys_state,rate,link_layer,gids/N,gid_attrs/types/N,
// gid_attrs/ndevs/N,hw_counters/*,counters/*}) and the netdev of each GID under
// /sys/class/net/<if>/ (mtu, operstate). Read-only: nothing here writes a file.
//
// Every reader takes the sysfs root ("/sys", or UROCE_SYSFS_ROOT for tests that point it at
// a recorded tree, tests/data/sysfs/), so the same code reads a live host and a recording.
//
// sysfs has no port MTU: active_mtu and max_mtu come from a port file of that name when the
// tree has one (recorded trees carry what ibv_devinfo printed), else from ibv_query_port
// through the system libibverbs (kernel_verbs.hpp), else they stay 0 (unknown).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace uroce::kdev {

using GidBytes = std::array<uint8_t, 16>;

struct KernelGid {
  uint32_t index = 0;
  GidBytes gid{};
  std::string type;  // gid_attrs/types/N: "RoCE v2", "IB/RoCE v1"
  std::string ndev;  // gid_attrs/ndevs/N: the netdev the GID belongs to
  std::string ipv4;  // "a.b.c.d" when the GID is IPv4-mapped, else ""
  [[nodiscard]] bool roce_v2() const { return type == "RoCE v2"; }
};

struct KernelPort {
  uint8_t port_num = 1;
  int state = 0;           // ports/N/state "4: ACTIVE" -> 4
  std::string state_name;  // "ACTIVE"
  int phys_state = 0;      // "5: LinkUp" -> 5
  std::string phys_state_name;
  std::string link_layer;   // "Ethernet"
  std::string rate;         // "100 Gb/sec (4X EDR)"
  uint32_t active_mtu = 0;  // bytes; 0: unknown
  uint32_t max_mtu = 0;
  std::string mtu_source;       // "sysfs file", "ibv_query_port", "" (unknown)
  std::vector<KernelGid> gids;  // non-zero entries, index order
  std::vector<std::pair<std::string, uint64_t>> hw_counters;  // name order
  std::vector<std::pair<std::string, uint64_t>> counters;     // ports/N/counters (PMA)
  // The netdev of the port: the ndev of its first GID (rxe and mlx5 have one per port).
  std::string netdev;
};

struct KernelDevice {
  std::string name;       // "rxe0", "mlx5_0"
  std::string driver;     // "rxe", "mlx5_core", ... ("" when unknown)
  std::string node_type;  // "1: CA"
  std::string node_guid;  // "5254:00ff:fe77:0002"
  std::string sys_image_guid;
  std::string fw_ver;
  std::string hca_type;  // mlx5: "MT4125"
  std::string board_id;
  std::vector<KernelPort> ports;
  [[nodiscard]] bool is_rxe() const { return driver == "rxe"; }
  [[nodiscard]] bool is_mlx5() const { return driver.starts_with("mlx5"); }
};

// The sysfs root: UROCE_SYSFS_ROOT when set (tests), else "/sys".
[[nodiscard]] std::string sysfs_root();

// Every kernel device of <root>/class/infiniband (not uroce's own, hca_type "uroce", which
// `uroce exec` adds there for its program), name order. None (an empty list) when the
// directory does not exist: a host without kernel RDMA. `query_mtu`: ask libibverbs for the
// port MTUs when the tree has no MTU file (off in tests, so a recorded tree is all they see).
[[nodiscard]] std::vector<KernelDevice> read_kernel_devices(const std::string& root,
                                                            bool query_mtu = true);
// One device, or nullopt when <root>/class/infiniband/<name> does not exist.
[[nodiscard]] std::optional<KernelDevice> read_kernel_device(const std::string& root,
                                                             const std::string& name,
                                                             bool query_mtu = true);

// Re-reads only the counters of `port` of device `dev` (for --watch and scrapes).
void read_port_counters(const std::string& root, const std::string& dev, KernelPort& port);

// A netdev as /sys/class/net/<if>/ shows it.
struct KernelNetdev {
  std::string name;
  uint32_t mtu = 0;       // 0: the netdev does not exist
  std::string operstate;  // "up", "down", "unknown"
  bool exists = false;
};
[[nodiscard]] KernelNetdev read_netdev(const std::string& root, const std::string& name);

// The names of the devices, ", "-separated ("rxe0, mlx5_0"), "none" when empty.
[[nodiscard]] std::string kernel_device_names(const std::vector<KernelDevice>& devices);

// The first RoCE v2 GID whose address is IPv4-mapped on `netdev` (what perftest's -x and
// ibv_*_pingpong's -g need for RoCE v2 over IPv4); nullptr when there is none.
[[nodiscard]] const KernelGid* roce_v2_ipv4_gid(const KernelPort& port, std::string_view netdev);

// "fe80:0000:0000:0000:5054:00ff:fe77:0002": sysfs' and show_gids' spelling.
[[nodiscard]] std::string gid_text(const GidBytes& gid);

// IB MTU in bytes from the ibv_mtu enum (1 -> 256 ... 5 -> 4096); 0 otherwise. And back.
[[nodiscard]] uint32_t mtu_bytes(int ib_mtu_enum);
[[nodiscard]] int mtu_enum(uint32_t bytes);

}  // namespace uroce::kdev
