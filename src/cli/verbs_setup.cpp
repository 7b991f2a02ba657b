// Device, GID, buffer and QP helpers shared by pingpong and perf: see verbs_setup.hpp.
#include "cli/verbs_setup.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>

#include "cli/doctor_checks.hpp"
#include "config/host_options.hpp"
#include "net/netdev.hpp"
#include "net/udp_device.hpp"

namespace uroce::cli {
namespace {

constexpr size_t kPageSize = 4096;

// -g/-x N without -d, before the side channel opens the device: the client's device is the
// one of this host's route to `host` (the side channel goes out of it); a server's is not
// known yet, so it fails only when no device has index N. A host that does not resolve or
// has no route is left to the connect, which says why.
std::string gid_index_on_this_host(int port, int gid_index, const std::string& host) {
  if (gid_index < 0) return {};
  std::string error;
  const auto devices = cli_host_devices({}, error);
  if (!devices || devices->empty()) return error;
  const auto index = static_cast<size_t>(gid_index);
  if (!host.empty()) {
    const std::optional<Route> route = route_to(host, nullptr);
    const auto local = route ? net::IpAddr::parse(route->local_address) : std::nullopt;
    const net::HostDevice* d = local ? net::find_device_with_gid(*devices, *local) : nullptr;
    if (d == nullptr || index < d->port.gids.size()) return {};
    return fmt::format(
        "can't read sgid of index {} on port {}: {}, the device of this host's route to {}, has "
        "GID indexes 0 to {} (see uroce gids)",
        gid_index, port, d->name, host, d->port.gids.size() - 1);
  }
  const net::HostDevice* most = &devices->front();
  for (const net::HostDevice& d : *devices) {
    if (index < d.port.gids.size()) return {};
    if (d.port.gids.size() > most->port.gids.size()) most = &d;
  }
  return fmt::format(
      "can't read sgid of index {} on port {}: no device of this host has that many GIDs (the "
      "most: {}, indexes 0 to {}; see uroce gids)",
      gid_index, port, most->name, most->port.gids.size() - 1);
}

}  // namespace

std::string open_before_side_channel(const std::string& name, std::optional<int> port,
                                     int gid_index, const std::string& host,
                                     const net::CcOverride& cc,
                                     std::unique_ptr<device::Device>& dev) {
  std::string error;
  // Opening checks the environment as well.
  if (!name.empty()) {
    dev = open_cli_device(name, std::nullopt, error, cc);
    if (dev && gid_index >= 0) (void)choose_gid(*dev, port, gid_index, net::IpAddr{}, error);
    return error;
  }
  auto env = config::HostOptions::from_env(error);
  if (!env) return error;
  net::UdpDeviceOptions options;
  if (!net::apply_env_options(*env, options, error)) return error;
  if (std::string cpus = net::check_progress_cpus(options.progress.cpus); !cpus.empty()) {
    return cpus;
  }
  return gid_index_on_this_host(port.value_or(1), gid_index, host);
}

std::unique_ptr<device::Device> open_cli_device(const std::string& name,
                                                const std::optional<net::IpAddr>& reach_via,
                                                std::string& error, const net::CcOverride& cc) {
  auto env = config::HostOptions::from_env(error);
  if (!env) return nullptr;
  net::UdpDeviceOptions options;
  if (!net::apply_env_options(*env, options, error)) return nullptr;
  options.name = name;
  options.cc = cc;
  if (name.empty() && reach_via) {
    // The device whose GID the peer reaches us on; with none (e.g. NAT), the first device.
    auto devices = net::discover_host_devices(options.netdevs);
    if (!devices) {
      error = devices.error().message;
      return nullptr;
    }
    if (const net::HostDevice* d = net::find_device_with_gid(devices.value(), *reach_via)) {
      options.name = d->name;
    }
  }
  auto dev = net::open_udp_device(options);
  if (!dev) {
    error = dev.error().message;
    return nullptr;
  }
  return std::move(dev.value());
}

std::optional<std::vector<net::HostDevice>> cli_host_devices(
    const std::vector<std::string>& netdevs, std::string& error) {
  auto env = config::HostOptions::from_env(error);
  if (!env) return std::nullopt;
  auto devices = net::discover_host_devices(netdevs.empty() ? env->netdevs : netdevs);
  if (!devices) {
    error = devices.error().message;
    return std::nullopt;
  }
  return std::move(devices.value());
}

std::optional<GidChoice> choose_gid(const device::Device& dev, std::optional<int> port,
                                    int gid_index, const net::IpAddr& reach_via,
                                    std::string& error) {
  const auto& ports = dev.ports();
  if (gid_index >= 0) {
    const uint8_t p = static_cast<uint8_t>(port.value_or(1));
    GidChoice c{p, static_cast<uint32_t>(gid_index), {}};
    if (const auto st = dev.query_gid(p, c.index, c.gid); !st) {
      error = fmt::format("can't read sgid of index {} on port {}: {}", gid_index, p, st.message());
      // The table's size, so that the fix is in the message: the same words as without -d.
      PortAttr attr;
      if (dev.query_port(p, attr) && attr.gid_tbl_len > 0 && gid_index >= attr.gid_tbl_len) {
        error += fmt::format(" ({} has GID indexes 0 to {}; see uroce gids)", dev.name(),
                             attr.gid_tbl_len - 1);
      }
      return std::nullopt;
    }
    return c;
  }
  std::optional<GidChoice> found;
  for (const device::PortInfo& p : ports) {
    for (size_t i = 0; i < p.gids.size(); ++i) {
      if (p.gids[i].empty() || p.gids[i].gid != reach_via.bytes) continue;
      GidChoice c{p.port_num, static_cast<uint32_t>(i), p.gids[i].gid};
      if (!found || (port && p.port_num == *port && found->port != *port)) found = c;
    }
  }
  if (!found) {
    error = fmt::format(
        "no GID of {} has the address {} that the peer reached us on; give the GID index "
        "with -g/-x (see `uroce gids`)",
        dev.name(), reach_via.to_string());
  }
  return found;
}

std::unique_ptr<RegisteredBuffer> RegisteredBuffer::create(ProtectionDomain& pd, size_t bytes,
                                                           uint32_t access, std::string& error) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + kPageSize - 1) / kPageSize * kPageSize;
  std::unique_ptr<uint8_t, Free> data(
      static_cast<uint8_t*>(std::aligned_alloc(kPageSize, rounded)));
  if (!data) {
    error = fmt::format("couldn't allocate {} bytes", rounded);
    return nullptr;
  }
  std::memset(data.get(), 0, rounded);
  auto mr = pd.reg_mr(data.get(), rounded, access);
  if (!mr) {
    error = fmt::format("couldn't register MR: {}", mr.status().message());
    return nullptr;
  }
  return std::unique_ptr<RegisteredBuffer>(
      new RegisteredBuffer(std::move(data), rounded, std::move(mr.value())));
}

void RegisteredBuffer::Free::operator()(uint8_t* p) const {
  std::free(p);
}

ConnectOptions cli_connect_options(const GidChoice& gid, uint32_t access) {
  ConnectOptions o;
  o.port_num = gid.port;
  o.sgid_index = static_cast<uint8_t>(gid.index);
  o.access = access;
  o.qkey = kPingpongQkey;
  o.timeout = 14;
  o.retry_cnt = 7;
  o.rnr_retry = 7;
  o.min_rnr_timer = 12;
  return o;
}

uint32_t ud_max_message(const device::Device& dev) {
  uint32_t mtu = kLargestUdMessage;
  for (const device::PortInfo& p : dev.ports()) {
    mtu = std::min(mtu, transport::mtu_bytes(p.active_mtu));
  }
  return mtu;
}

uint32_t random_psn() {
  static std::mt19937 rng(std::random_device{}());
  return rng() & 0xffffff;
}

std::optional<transport::Mtu> mtu_from_bytes(uint32_t bytes) {
  switch (bytes) {
    case 256:
      return transport::Mtu::k256;
    case 512:
      return transport::Mtu::k512;
    case 1024:
      return transport::Mtu::k1024;
    case 2048:
      return transport::Mtu::k2048;
    case 4096:
      return transport::Mtu::k4096;
    default:
      return std::nullopt;
  }
}

}  // namespace uroce::cli
