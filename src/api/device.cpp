// uroce::Device: opening the device on real UDP (through uroce_net) and the device-level
// verbs (attributes, PDs, channels, CQs, async events).
#include <utility>

#include "config/host_options.hpp"
#include "device/device.hpp"
#include "net/udp_device.hpp"
#include "uroce/verbs.hpp"

namespace uroce {

OpenResult Device::open(const OpenOptions& options) {
  net::UdpDeviceOptions o;
  o.name = options.name;
  o.netdevs = options.netdevs;
  for (const std::string& text : options.bind) {
    auto addr = net::IpAddr::parse(text);
    if (!addr) {
      return OpenError{EINVAL, "bind address '" + text + "' is not an IPv4 or IPv6 address"};
    }
    o.bind.push_back(*addr);
  }
  o.udp_port = options.udp_port;
  o.active_mtu = options.active_mtu;
  o.share = options.share_port;
  o.registry_dir = options.registry_dir;
  o.seed = options.seed;
  o.limits = options.limits;
  o.progress = options.progress;
  auto dev = net::open_udp_device(o);
  if (!dev) return OpenError{dev.error().code, dev.error().message};
  return Device(std::shared_ptr<device::Device>(std::move(dev.value())));
}

std::optional<OpenOptions> OpenOptions::from_env(std::string& error) {
  auto env = config::HostOptions::from_env(error);
  if (!env) return std::nullopt;
  OpenOptions o;
  if (env->udp_port) o.udp_port = *env->udp_port;
  o.netdevs = env->netdevs;
  o.bind = env->device_addrs;
  if (env->mtu) o.active_mtu = *env->mtu;
  if (env->spin_us) o.progress.spin = std::chrono::microseconds(*env->spin_us);
  if (env->handoff_us) o.progress.app_handoff = std::chrono::microseconds(*env->handoff_us);
  if (env->batch_posts) o.progress.batch_posts = *env->batch_posts;
  if (!env->progress_cpus.empty()) o.progress.cpus = env->progress_cpus;
  return o;
}

std::vector<DeviceInfo> Device::list(const std::vector<std::string>& netdevs) {
  auto devices = net::discover_host_devices(netdevs);
  if (!devices) return {};
  std::vector<DeviceInfo> out;
  for (const net::HostDevice& d : devices.value()) {
    const net::PortGids& pg = d.port;
    DeviceInfo info;
    info.name = d.name;
    info.node_guid = d.node_guid;
    PortInfo p;
    p.port_num = pg.port_num;
    p.netdev = pg.netdev.name;
    // The same rule as the opened device's port state (net/udp_device.cpp port_info_of).
    const bool up =
        pg.netdev.admin_up && pg.netdev.running &&
        (pg.netdev.oper == net::OperState::kUp || pg.netdev.oper == net::OperState::kUnknown);
    p.state = up ? PortState::kActive : PortState::kDown;
    const uint8_t mtu = net::ib_mtu_enum(pg.active_mtu);
    p.active_mtu = mtu == 0 ? Mtu::k256 : static_cast<Mtu>(mtu);
    for (const net::GidEntry& g : pg.gids) {
      if (g.index >= p.gids.size()) p.gids.resize(g.index + 1);
      p.gids[g.index] = g.gid;
    }
    info.ports.push_back(std::move(p));
    out.push_back(std::move(info));
  }
  return out;
}

Device::Device(std::shared_ptr<device::Device> dev) : dev_(std::move(dev)) {}

const std::string& Device::name() const {
  return dev_->name();
}
DeviceAttr Device::query_device() const {
  return dev_->query_device();
}
Status Device::query_port(uint8_t port_num, PortAttr& attr) const {
  return dev_->query_port(port_num, attr);
}
Status Device::query_gid(uint8_t port_num, uint32_t index, Gid& gid) const {
  return dev_->query_gid(port_num, index, gid);
}

Result<ProtectionDomain> Device::alloc_pd() {
  auto r = dev_->alloc_pd();
  if (!r) return r.status();
  return ProtectionDomain(dev_, *r);
}

Result<CompletionChannel> Device::create_comp_channel() {
  auto r = dev_->create_comp_channel();
  if (!r) return r.status();
  return CompletionChannel(dev_, *r);
}

Result<CompletionQueue> Device::create_cq(uint32_t cqe, const CompletionChannel* channel) {
  std::optional<device::ChannelId> ch;
  if (channel != nullptr) ch = channel->id();
  auto r = dev_->create_cq(cqe, ch);
  if (!r) return r.status();
  return CompletionQueue(dev_, *r);
}

int Device::async_fd() const {
  return dev_->async_fd();
}
Result<AsyncEvent> Device::get_async_event(Nanos timeout) {
  return dev_->get_async_event(timeout);
}
Counters Device::counters() const {
  return dev_->counters();
}

}  // namespace uroce
