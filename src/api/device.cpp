// uroce::Device: opening the device on real UDP (through uroce_net) and the device-level
// verbs (attributes, PDs, channels, CQs, async events).
#include <utility>

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

std::vector<DeviceInfo> Device::list() {
  auto ports = net::discover_device_ports({});
  if (!ports) return {};
  DeviceInfo info;
  info.name = "uroce0";
  for (const net::PortGids& pg : ports.value()) {
    PortInfo p;
    p.port_num = pg.port_num;
    p.netdev = pg.netdev.name;
    p.state = pg.netdev.admin_up && pg.netdev.running ? PortState::kActive : PortState::kDown;
    const uint8_t mtu = net::ib_mtu_enum(pg.active_mtu);
    p.active_mtu = mtu == 0 ? Mtu::k256 : static_cast<Mtu>(mtu);
    for (const net::GidEntry& g : pg.gids) {
      if (g.index >= p.gids.size()) p.gids.resize(g.index + 1);
      p.gids[g.index] = g.gid;
    }
    if (info.node_guid == 0 && pg.netdev.mac) {
      info.node_guid = device::node_guid_from_mac(*pg.netdev.mac);
    }
    info.ports.push_back(std::move(p));
  }
  return {std::move(info)};
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
