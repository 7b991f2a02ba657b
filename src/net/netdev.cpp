#include "net/netdev.hpp"

#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "device/device_types.hpp"

namespace uroce::net {
namespace {

std::optional<std::string> read_sysfs(const std::string& ifname, const char* attr) {
  std::ifstream in("/sys/class/net/" + ifname + "/" + attr);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;  // speed on lo reads as EINVAL
  return line;
}

uint8_t prefix_len_of(const sockaddr* mask) {
  if (mask == nullptr) return 0;
  const uint8_t* p = nullptr;
  size_t n = 0;
  if (mask->sa_family == AF_INET) {
    p = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(mask)->sin_addr);
    n = 4;
  } else if (mask->sa_family == AF_INET6) {
    p = reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr.s6_addr;
    n = 16;
  }
  uint8_t bits = 0;
  for (size_t i = 0; i < n; ++i) bits += static_cast<uint8_t>(__builtin_popcount(p[i]));
  return bits;
}

uint32_t mtu_by_ioctl(const std::string& name) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  ifreq req{};
  std::snprintf(req.ifr_name, sizeof req.ifr_name, "%s", name.c_str());
  uint32_t mtu = ioctl(fd, SIOCGIFMTU, &req) == 0 ? static_cast<uint32_t>(req.ifr_mtu) : 0;
  close(fd);
  return mtu;
}

void fill_from_sysfs(Interface& ifc) {
  if (auto v = read_sysfs(ifc.name, "mtu"))
    ifc.mtu = static_cast<uint32_t>(std::strtoul(v->c_str(), nullptr, 10));
  if (ifc.mtu == 0) ifc.mtu = mtu_by_ioctl(ifc.name);
  if (auto v = read_sysfs(ifc.name, "operstate")) ifc.oper = parse_oper_state(*v);
  // "speed" fails with EINVAL on lo and many virtual devices and reads -1 on others
  // (e.g. virtio without a configured speed); both mean unknown.
  if (auto v = read_sysfs(ifc.name, "speed")) {
    long long s = std::strtoll(v->c_str(), nullptr, 10);
    ifc.speed_mbps = s > 0 ? s : -1;
  }
}

bool all_zero(const Mac& mac) {
  return std::all_of(mac.begin(), mac.end(), [](uint8_t b) { return b == 0; });
}

GidEntry make_entry(const Interface& ifc, uint32_t index, const IpAddr& addr) {
  GidEntry e;
  e.index = index;
  e.gid = addr.bytes;
  e.netdev = ifc.name;
  e.ifindex = ifc.ifindex;
  if (addr.is_v4()) e.ipv4 = addr.to_string();
  if (addr.is_link_local()) e.scope_id = static_cast<uint32_t>(ifc.ifindex);
  return e;
}

}  // namespace

std::string_view oper_state_name(OperState s) {
  switch (s) {
    case OperState::kUnknown:
      return "unknown";
    case OperState::kNotPresent:
      return "notpresent";
    case OperState::kDown:
      return "down";
    case OperState::kLowerLayerDown:
      return "lowerlayerdown";
    case OperState::kTesting:
      return "testing";
    case OperState::kDormant:
      return "dormant";
    case OperState::kUp:
      return "up";
  }
  return "unknown";
}

OperState parse_oper_state(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text == "up") return OperState::kUp;
  if (text == "down") return OperState::kDown;
  if (text == "lowerlayerdown") return OperState::kLowerLayerDown;
  if (text == "notpresent") return OperState::kNotPresent;
  if (text == "testing") return OperState::kTesting;
  if (text == "dormant") return OperState::kDormant;
  return OperState::kUnknown;
}

NetResult<std::vector<Interface>> discover_interfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    int err = errno;
    return NetError{err, std::string("getifaddrs failed: ") + std::strerror(err)};
  }
  std::map<std::string, Interface> by_name;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    Interface& ifc = by_name[ifa->ifa_name];
    if (ifc.name.empty()) {
      ifc.name = ifa->ifa_name;
      ifc.ifindex = static_cast<int>(if_nametoindex(ifa->ifa_name));
    }
    ifc.admin_up = (ifa->ifa_flags & IFF_UP) != 0;
    ifc.running = (ifa->ifa_flags & IFF_RUNNING) != 0;
    ifc.loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    if (ifa->ifa_addr == nullptr) continue;
    const int family = ifa->ifa_addr->sa_family;
    if (family == AF_PACKET) {
      const auto* ll = reinterpret_cast<const sockaddr_ll*>(ifa->ifa_addr);
      if (ll->sll_halen == 6) {
        Mac mac{};
        std::memcpy(mac.data(), ll->sll_addr, 6);
        if (!all_zero(mac)) ifc.mac = mac;
      }
    } else if (family == AF_INET) {
      InterfaceAddr a;
      a.addr = IpAddr::from_in(reinterpret_cast<const sockaddr_in*>(ifa->ifa_addr)->sin_addr);
      a.prefix_len = prefix_len_of(ifa->ifa_netmask);
      ifc.ipv4.push_back(a);
    } else if (family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr);
      InterfaceAddr a;
      a.addr = IpAddr::from_in6(sin6->sin6_addr);
      a.prefix_len = prefix_len_of(ifa->ifa_netmask);
      a.scope_id = a.addr.is_link_local() ? sin6->sin6_scope_id : 0;
      ifc.ipv6.push_back(a);
    }
  }
  freeifaddrs(list);
  std::vector<Interface> out;
  out.reserve(by_name.size());
  for (auto& [name, ifc] : by_name) {
    fill_from_sysfs(ifc);
    out.push_back(std::move(ifc));
  }
  std::sort(out.begin(), out.end(),
            [](const Interface& a, const Interface& b) { return a.ifindex < b.ifindex; });
  return out;
}

Gid default_gid_from_mac(const Mac& mac) {
  Gid g{};
  g[0] = 0xfe;
  g[1] = 0x80;
  g[8] = mac[0] ^ 0x02;  // modified EUI-64: flip the universal/local bit (RFC 4291 App. A)
  g[9] = mac[1];
  g[10] = mac[2];
  g[11] = 0xff;
  g[12] = 0xfe;
  g[13] = mac[3];
  g[14] = mac[4];
  g[15] = mac[5];
  return g;
}

uint32_t active_mtu_for_netdev_mtu(uint32_t netdev_mtu) {
  constexpr uint32_t kRxeMaxHdrLength = 80;  // rxe RXE_MAX_HDR_LENGTH
  if (netdev_mtu < kRxeMaxHdrLength + 256) return 0;
  const uint32_t room = netdev_mtu - kRxeMaxHdrLength;
  for (uint32_t ib : {4096u, 2048u, 1024u, 512u, 256u}) {
    if (room >= ib) return ib;
  }
  return 0;
}

uint8_t ib_mtu_enum(uint32_t ib_mtu) {
  switch (ib_mtu) {
    case 256:
      return 1;
    case 512:
      return 2;
    case 1024:
      return 3;
    case 2048:
      return 4;
    case 4096:
      return 5;
    default:
      return 0;
  }
}

std::vector<GidEntry> build_gid_table(const Interface& iface) {
  std::vector<GidEntry> out;
  IpAddr index0;
  if (iface.mac) {
    index0.bytes = default_gid_from_mac(*iface.mac);
  } else {
    // No MAC, no EUI-64 (lo, tun, wireguard): use ::1 so index 1 stays the IPv4 address.
    index0.bytes[15] = 1;
  }
  GidEntry def = make_entry(iface, 0, index0);
  def.is_default = true;
  if (!iface.mac) def.scope_id = 0;
  out.push_back(def);
  for (const InterfaceAddr& a : iface.ipv4) {
    out.push_back(make_entry(iface, static_cast<uint32_t>(out.size()), a.addr));
  }
  for (const InterfaceAddr& a : iface.ipv6) {
    // Link-local addresses are covered by the default GID; a link-local that is not EUI-64
    // based (stable-privacy) is left out, like the brief's rule "further global addresses".
    if (a.addr.is_link_local() || a.addr == index0) continue;
    bool dup = std::any_of(out.begin(), out.end(),
                           [&](const GidEntry& e) { return e.gid == a.addr.bytes; });
    if (dup) continue;
    out.push_back(make_entry(iface, static_cast<uint32_t>(out.size()), a.addr));
  }
  return out;
}

std::vector<Interface> select_device_netdevs(std::span<const Interface> all,
                                             std::span<const std::string> only) {
  std::vector<Interface> out;
  for (const Interface& ifc : all) {
    if (!only.empty() && std::find(only.begin(), only.end(), ifc.name) == only.end()) continue;
    const bool up = ifc.admin_up && ifc.running &&
                    (ifc.oper == OperState::kUp || ifc.oper == OperState::kUnknown);
    if (!up || (ifc.ipv4.empty() && ifc.ipv6.empty())) continue;
    out.push_back(ifc);
  }
  std::sort(out.begin(), out.end(),
            [](const Interface& a, const Interface& b) { return a.ifindex < b.ifindex; });
  return out;
}

std::string device_name_for(std::string_view netdev) {
  return std::string(kDeviceNamePrefix) + std::string(netdev);
}

namespace {

struct RouteRow {
  std::string netdev;
  uint64_t metric = 0;
};

std::vector<std::string> by_metric(std::vector<RouteRow> rows) {
  std::stable_sort(rows.begin(), rows.end(),
                   [](const RouteRow& a, const RouteRow& b) { return a.metric < b.metric; });
  std::vector<std::string> out;
  for (RouteRow& r : rows) {
    if (std::find(out.begin(), out.end(), r.netdev) == out.end()) out.push_back(r.netdev);
  }
  return out;
}

std::vector<std::vector<std::string>> rows_of(std::string_view text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::vector<std::string> fields;
    for (std::string w; f >> w;) fields.push_back(w);
    if (!fields.empty()) rows.push_back(std::move(fields));
  }
  return rows;
}

uint64_t hex(const std::string& s) {
  return std::strtoull(s.c_str(), nullptr, 16);
}

std::string read_file(const char* path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

constexpr uint64_t kRtfUp = 0x0001;      // linux/route.h RTF_UP
constexpr uint64_t kRtfReject = 0x0200;  // RTF_REJECT: "unreachable" routes

uint64_t node_guid_for(const Interface& ifc) {
  if (ifc.mac) return device::node_guid_from_mac(*ifc.mac);
  // No MAC (lo, tun): a locally administered MAC from the first IPv4 address.
  std::array<uint8_t, 6> mac = {0x02, 0x00, 0x7F, 0x00, 0x00, 0x01};
  if (!ifc.ipv4.empty()) {
    const auto& b = ifc.ipv4.front().addr.bytes;
    mac = {0x02, 0x00, b[12], b[13], b[14], b[15]};
  }
  return device::node_guid_from_mac(mac);
}

}  // namespace

std::vector<std::string> parse_ipv4_default_routes(std::string_view proc_net_route) {
  // Iface Destination Gateway Flags RefCnt Use Metric Mask MTU Window IRTT (hex fields)
  std::vector<RouteRow> rows;
  for (const auto& f : rows_of(proc_net_route)) {
    if (f.size() < 8 || f[0] == "Iface") continue;
    if (hex(f[1]) != 0 || hex(f[7]) != 0) continue;  // destination and mask 0.0.0.0/0
    const uint64_t flags = hex(f[3]);
    if ((flags & kRtfUp) == 0 || (flags & kRtfReject) != 0) continue;
    rows.push_back(RouteRow{f[0], std::strtoull(f[6].c_str(), nullptr, 10)});
  }
  return by_metric(std::move(rows));
}

std::vector<std::string> parse_ipv6_default_routes(std::string_view proc_net_ipv6_route) {
  // dest dest_plen src src_plen next_hop metric refcnt use flags devname (hex fields)
  std::vector<RouteRow> rows;
  for (const auto& f : rows_of(proc_net_ipv6_route)) {
    if (f.size() < 10 || f[1] != "00") continue;
    if (f[0].find_first_not_of('0') != std::string::npos) continue;  // ::/0 only
    const uint64_t flags = hex(f[8]);
    if ((flags & kRtfUp) == 0 || (flags & kRtfReject) != 0) continue;
    rows.push_back(RouteRow{f[9], hex(f[5])});
  }
  return by_metric(std::move(rows));
}

std::vector<std::string> read_default_route_netdevs() {
  std::vector<std::string> out = parse_ipv4_default_routes(read_file("/proc/net/route"));
  for (std::string& n : parse_ipv6_default_routes(read_file("/proc/net/ipv6_route"))) {
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
  }
  return out;
}

std::vector<HostDevice> build_host_devices(std::span<const Interface> selected,
                                           std::span<const std::string> default_route) {
  std::vector<const Interface*> order;
  auto add = [&](const Interface& ifc) {
    if (std::find(order.begin(), order.end(), &ifc) == order.end()) order.push_back(&ifc);
  };
  for (const std::string& name : default_route) {
    for (const Interface& ifc : selected) {
      if (ifc.name == name && !ifc.loopback) add(ifc);
    }
  }
  std::vector<const Interface*> rest;
  for (const Interface& ifc : selected) rest.push_back(&ifc);
  std::stable_sort(rest.begin(), rest.end(), [](const Interface* a, const Interface* b) {
    if (a->loopback != b->loopback) return !a->loopback;  // loopback last
    return a->ifindex < b->ifindex;
  });
  for (const Interface* ifc : rest) add(*ifc);

  std::vector<HostDevice> out;
  for (const Interface* ifc : order) {
    HostDevice d;
    d.name = device_name_for(ifc->name);
    d.port.port_num = 1;
    d.port.netdev = *ifc;
    d.port.active_mtu = active_mtu_for_netdev_mtu(ifc->mtu);
    d.port.gids = build_gid_table(*ifc);
    d.node_guid = node_guid_for(*ifc);
    out.push_back(std::move(d));
  }
  return out;
}

const HostDevice* find_host_device(std::span<const HostDevice> devices, std::string_view name) {
  if (devices.empty()) return nullptr;
  if (name.empty() || name == kLegacyDeviceName) return &devices.front();
  for (const HostDevice& d : devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

const HostDevice* find_device_with_gid(std::span<const HostDevice> devices, const IpAddr& addr) {
  for (const HostDevice& d : devices) {
    for (const GidEntry& e : d.port.gids) {
      if (e.gid == addr.bytes) return &d;
    }
  }
  return nullptr;
}

std::string device_names(std::span<const HostDevice> devices) {
  std::string out;
  for (const HostDevice& d : devices) out += (out.empty() ? "" : ", ") + d.name;
  return out.empty() ? "no device" : out;
}

std::optional<GidLocation> find_gid(std::span<const PortGids> ports, const IpAddr& addr) {
  for (const PortGids& p : ports) {
    for (const GidEntry& e : p.gids) {
      if (e.gid == addr.bytes) return GidLocation{p.port_num, e.index, &e};
    }
  }
  return std::nullopt;
}

const Interface* find_interface_by_addr(std::span<const Interface> all, const IpAddr& addr) {
  for (const Interface& ifc : all) {
    for (const auto* list : {&ifc.ipv4, &ifc.ipv6}) {
      for (const InterfaceAddr& a : *list) {
        if (a.addr == addr) return &ifc;
      }
    }
  }
  return nullptr;
}

NetResult<IpAddr> route_source_for(const IpAddr& dst, uint32_t scope_id) {
  const int family = dst.is_v4() ? AF_INET : AF_INET6;
  int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int err = errno;
    return NetError{err, std::string("socket() failed: ") + std::strerror(err)};
  }
  // connect() on UDP only runs the route lookup and fixes the source address; nothing is sent.
  SockAddr to = SockAddr::make(dst, 4791, scope_id);
  if (connect(fd, to.get(), to.len) != 0) {
    int err = errno;
    close(fd);
    return NetError{err, "no route to " + dst.to_string() + ": " + std::strerror(err)};
  }
  SockAddr local;
  local.len = sizeof local.storage;
  int rc = getsockname(fd, local.get(), &local.len);
  int err = errno;
  close(fd);
  if (rc != 0) return NetError{err, std::string("getsockname failed: ") + std::strerror(err)};
  auto split = SockAddr::split(local.get());
  if (!split) return NetError{EAFNOSUPPORT, "unexpected address family from getsockname"};
  return split->first;
}

std::string format_gid_table(std::span<const HostDevice> devices) {
  std::string out = "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4\t\tVER\tDEV\n";
  out += "---\t----\t-----\t---\t\t\t\t\t------------\t---\t---\n";
  char line[256];
  for (const HostDevice& d : devices) {
    for (const GidEntry& e : d.port.gids) {
      char gid[48];
      std::snprintf(gid, sizeof gid,
                    "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
                    e.gid[0], e.gid[1], e.gid[2], e.gid[3], e.gid[4], e.gid[5], e.gid[6], e.gid[7],
                    e.gid[8], e.gid[9], e.gid[10], e.gid[11], e.gid[12], e.gid[13], e.gid[14],
                    e.gid[15]);
      std::snprintf(line, sizeof line, "%s\t%u\t%u\t%s\t%-15s\tv2\t%s\n", d.name.c_str(),
                    d.port.port_num, e.index, gid, e.ipv4.c_str(), e.netdev.c_str());
      out += line;
    }
  }
  return out;
}

std::string describe_host_addresses(std::span<const Interface> all) {
  std::string out;
  for (const Interface& ifc : all) {
    if (ifc.ipv4.empty() && ifc.ipv6.empty()) continue;
    if (!out.empty()) out += ", ";
    out += ifc.name;
    for (const auto* list : {&ifc.ipv4, &ifc.ipv6}) {
      for (const InterfaceAddr& a : *list) out += " " + a.addr.to_string();
    }
  }
  return out.empty() ? "(none)" : out;
}

}  // namespace uroce::net
