// Host interface discovery, the GID tables and the device list, built the way Linux
// Soft-RoCE builds them.
//
// discover_interfaces() reads the host (getifaddrs, sysfs, ioctl) into plain Interface
// records and read_default_route_netdevs() reads the routing table; everything else here is
// a pure function over those records, so tests feed fake interface lists and routes.
//
// The device model (docs/networking.md "Devices"): one device per netdev, named like rxe's
// rxe_<netdev>: uroce_<netdev>, each with one port (1). The device list puts the netdev of
// the default route first (IPv4, then IPv6), the other netdevs next in ifindex order and
// loopback last, so a program that opens the first device (perftest, ibv_*_pingpong without
// -d) gets the one that reaches other hosts. "uroce0", the name of the old single device,
// is a deprecated alias of the first device.
//
// The GID table of a device (docs/networking.md "GID table"), as rxe's:
//   - index 0 is the default GID: fe80::/64 plus the EUI-64 of the MAC (core/cache.c
//     make_default_gid); for a netdev without a MAC (lo) it is ::1;
//   - then every IPv4 address as ::ffff:a.b.c.d (so `-g 1` / `-x 1` is the IPv4 address);
//   - then every IPv6 address that is neither link-local nor already index 0;
//   - all entries RoCE v2.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "net/ip_addr.hpp"
#include "net/result.hpp"

namespace uroce::net {

using Mac = std::array<uint8_t, 6>;

// /sys/class/net/X/operstate (RFC 2863 names).
enum class OperState : uint8_t {
  kUnknown,
  kNotPresent,
  kDown,
  kLowerLayerDown,
  kTesting,
  kDormant,
  kUp
};
[[nodiscard]] std::string_view oper_state_name(OperState s);
[[nodiscard]] OperState parse_oper_state(std::string_view text);

struct InterfaceAddr {
  IpAddr addr;
  uint8_t prefix_len = 0;
  uint32_t scope_id = 0;  // IPv6 link-local: the ifindex to put in sin6_scope_id
};

struct Interface {
  std::string name;
  int ifindex = 0;
  std::optional<Mac> mac;  // none for lo (all-zero hardware address) and L3 devices
  uint32_t mtu = 0;
  OperState oper = OperState::kUnknown;
  bool admin_up = false;    // IFF_UP
  bool running = false;     // IFF_RUNNING
  bool loopback = false;    // IFF_LOOPBACK
  int64_t speed_mbps = -1;  // sysfs speed; -1 when the driver does not know (lo, veth, VMs)
  std::vector<InterfaceAddr> ipv4;
  std::vector<InterfaceAddr> ipv6;
};

// Reads the host's interfaces, sorted by ifindex. Fails only if getifaddrs() fails.
[[nodiscard]] NetResult<std::vector<Interface>> discover_interfaces();

// The RoCE v2 default GID: fe80::/64 + modified EUI-64 of `mac` (universal/local bit flipped,
// ff:fe inserted in the middle).
[[nodiscard]] Gid default_gid_from_mac(const Mac& mac);

// rxe's active_mtu: the netdev MTU minus 80 header bytes (RXE_MAX_HDR_LENGTH), rounded down to
// an IB MTU (256, 512, 1024, 2048, 4096). 0 when below 256+80, i.e. unusable.
[[nodiscard]] uint32_t active_mtu_for_netdev_mtu(uint32_t netdev_mtu);
// IB MTU enum value as in ibv_mtu: 256 -> 1 ... 4096 -> 5; 0 for anything else.
[[nodiscard]] uint8_t ib_mtu_enum(uint32_t ib_mtu);

enum class GidType : uint8_t { kRoceV2 };

struct GidEntry {
  uint32_t index = 0;
  Gid gid{};
  GidType type = GidType::kRoceV2;
  std::string netdev;
  int ifindex = 0;
  std::string ipv4;         // "a.b.c.d" for an IPv4-mapped GID, empty otherwise (show_gids)
  bool is_default = false;  // index 0, derived from the MAC (or ::1 on a MAC-less netdev)
  uint32_t scope_id = 0;    // for link-local GIDs: the ifindex
};

struct PortGids {
  uint8_t port_num = 1;  // 1-based, as in ibv_query_port; every device has only port 1
  Interface netdev;
  uint32_t active_mtu = 0;
  std::vector<GidEntry> gids;
};

// The GID table of one netdev (one port), index order as described at the top.
[[nodiscard]] std::vector<GidEntry> build_gid_table(const Interface& iface);

// Interfaces that get a device: admin up, running, operstate up or unknown (lo and many
// virtual devices report "unknown"), with at least one IPv4 or IPv6 address; ifindex order.
// A non-empty `only` restricts the choice to those names (kept in ifindex order).
[[nodiscard]] std::vector<Interface> select_device_netdevs(std::span<const Interface> all,
                                                           std::span<const std::string> only = {});

inline constexpr std::string_view kDeviceNamePrefix = "uroce_";
inline constexpr std::string_view kLegacyDeviceName = "uroce0";  // deprecated: the first device

// "uroce_" + netdev, like rxe_eth0.
[[nodiscard]] std::string device_name_for(std::string_view netdev);

// One device of the host: its name, its one port (the netdev and its GID table) and the node
// GUID (the netdev's MAC as EUI-64; a MAC-less netdev: 02:00 + its first IPv4 address).
struct HostDevice {
  std::string name;
  PortGids port;
  uint64_t node_guid = 0;
};

// The netdevs of the default routes in /proc/net/route (IPv4) and /proc/net/ipv6_route
// text, lowest metric first; routes that are down or reject (the IPv6 "unreachable" default
// on lo) are not default routes.
[[nodiscard]] std::vector<std::string> parse_ipv4_default_routes(std::string_view proc_net_route);
[[nodiscard]] std::vector<std::string> parse_ipv6_default_routes(
    std::string_view proc_net_ipv6_route);
// This network namespace's default-route netdevs: IPv4 ones, then IPv6 ones, no repeats.
[[nodiscard]] std::vector<std::string> read_default_route_netdevs();

// The devices of `selected` in list order: the netdevs of `default_route` first (in that
// order), then the other non-loopback netdevs by ifindex, then loopback.
[[nodiscard]] std::vector<HostDevice> build_host_devices(
    std::span<const Interface> selected, std::span<const std::string> default_route);

// The device called `name`; "" and "uroce0" (the deprecated alias) mean the first one.
[[nodiscard]] const HostDevice* find_host_device(std::span<const HostDevice> devices,
                                                 std::string_view name);
// The device one of whose GIDs is `addr` (IPv4 as ::ffff:a.b.c.d).
[[nodiscard]] const HostDevice* find_device_with_gid(std::span<const HostDevice> devices,
                                                     const IpAddr& addr);
// "uroce_eth0, uroce_lo": for error messages.
[[nodiscard]] std::string device_names(std::span<const HostDevice> devices);

struct GidLocation {
  uint8_t port_num = 0;
  uint32_t gid_index = 0;
  const GidEntry* entry = nullptr;
};

// The port and GID index whose GID is `addr` (IPv4 as ::ffff:a.b.c.d).
[[nodiscard]] std::optional<GidLocation> find_gid(std::span<const PortGids> ports,
                                                  const IpAddr& addr);

// The interface holding `addr` as one of its addresses.
[[nodiscard]] const Interface* find_interface_by_addr(std::span<const Interface> all,
                                                      const IpAddr& addr);

// The source address the kernel's routing would pick to reach `dst`: connects a throw-away UDP
// socket (no packet is sent) and reads getsockname(). `scope_id` for link-local IPv6.
[[nodiscard]] NetResult<IpAddr> route_source_for(const IpAddr& dst, uint32_t scope_id = 0);

// One line per GID like rdma-core's show_gids:
// DEV     PORT INDEX GID                                     IPv4            VER DEV
[[nodiscard]] std::string format_gid_table(std::span<const HostDevice> devices);

// "lo 127.0.0.1 ::1, eth0 192.0.2.2 fd00::2 fe80::fc:ff:fe00:1": for error messages.
[[nodiscard]] std::string describe_host_addresses(std::span<const Interface> all);

}  // namespace uroce::net
