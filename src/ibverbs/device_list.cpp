// Device discovery and contexts: ibv_get_device_list, ibv_open_device, ibv_close_device.
//
// There is one device, uroce0, present whenever some netdev is up with an address (the
// ports are those netdevs, see docs/networking.md). Each ibv_open_device assembles its own
// device::Device on UDP (open_udp_device): its own sockets in the address's reuseport
// group, its own QPN slot and progress thread, so contexts are as independent as contexts
// of a hardware NIC. ibv_close_device tears it all down.
#include <endian.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>

#include "ibverbs/objects.hpp"
#include "ibverbs/options.hpp"

using namespace uroce;
using namespace uroce::ibverbs;

namespace {

constexpr const char* kDeviceName = "uroce0";

struct DeviceSlot {
  ibv_device dev{};
  uint64_t node_guid = 0;  // big-endian bytes as a number (device::DeviceAttr convention)
};

std::mutex g_list_mu;
DeviceSlot* g_device = nullptr;  // created on first listing, kept for the process lifetime

// Same rule as open_udp_device: the MAC of the first port that has one, else a locally
// administered MAC built from the first IPv4 address (a device on lo only).
uint64_t node_guid_of(const std::vector<net::PortGids>& ports) {
  for (const net::PortGids& p : ports) {
    if (p.netdev.mac) return device::node_guid_from_mac(*p.netdev.mac);
  }
  std::array<uint8_t, 6> mac = {0x02, 0x00, 0x7F, 0x00, 0x00, 0x01};
  for (const net::PortGids& p : ports) {
    if (!p.netdev.ipv4.empty()) {
      const auto& b = p.netdev.ipv4.front().addr.bytes;
      mac = {0x02, 0x00, b[12], b[13], b[14], b[15]};
      break;
    }
  }
  return device::node_guid_from_mac(mac);
}

void copy_name(char* dst, size_t room, const std::string& src) {
  std::strncpy(dst, src.c_str(), room - 1);
  dst[room - 1] = '\0';
}

DeviceSlot* discover() {
  net::UdpDeviceOptions options;
  std::string error;
  if (!options_from_env(options, error)) {
    report(error);
    return nullptr;
  }
  auto ports = net::discover_device_ports(options.netdevs);
  if (!ports) {
    report(ports.error().message);
    return nullptr;
  }
  std::lock_guard lock(g_list_mu);
  if (g_device == nullptr) {
    auto* slot = new DeviceSlot;
    slot->dev.node_type = IBV_NODE_CA;
    slot->dev.transport_type = IBV_TRANSPORT_IB;
    copy_name(slot->dev.name, sizeof slot->dev.name, kDeviceName);
    copy_name(slot->dev.dev_name, sizeof slot->dev.dev_name, std::string("uverbs-") + kDeviceName);
    copy_name(slot->dev.dev_path, sizeof slot->dev.dev_path,
              std::string("/sys/class/infiniband_verbs/uverbs-") + kDeviceName);
    copy_name(slot->dev.ibdev_path, sizeof slot->dev.ibdev_path,
              std::string("/sys/class/infiniband/") + kDeviceName);
    g_device = slot;
  }
  g_device->node_guid = node_guid_of(ports.value());
  return g_device;
}

}  // namespace

extern "C" {

ibv_device** ibv_get_device_list(int* num_devices) {
  DeviceSlot* slot = discover();
  auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
  if (list == nullptr) return fail_null<ibv_device*>(ENOMEM);
  int n = 0;
  if (slot != nullptr) list[n++] = &slot->dev;
  if (num_devices != nullptr) *num_devices = n;
  return list;
}

void ibv_free_device_list(ibv_device** list) {
  std::free(list);
}

const char* ibv_get_device_name(ibv_device* device) {
  return device == nullptr ? nullptr : device->name;
}

__be64 ibv_get_device_guid(ibv_device* device) {
  if (device == nullptr) return 0;
  return htobe64(reinterpret_cast<DeviceSlot*>(device)->node_guid);
}

int ibv_get_device_index(ibv_device* device) {
  return device == nullptr ? -1 : 0;
}

ibv_context* ibv_open_device(ibv_device* device) {
  if (device == nullptr) return fail_null<ibv_context>(EINVAL);
  net::UdpDeviceOptions options;
  std::string error;
  if (!options_from_env(options, error)) {
    report(error);
    return fail_null<ibv_context>(EINVAL);
  }
  options.name = device->name;
  auto opened = net::open_udp_device(options);
  if (!opened) {
    report("cannot open " + options.name + ": " + opened.error().message);
    return fail_null<ibv_context>(opened.error().code != 0 ? opened.error().code : ENODEV);
  }
  auto* uctx = new (std::nothrow) UContext;
  if (uctx == nullptr) return fail_null<ibv_context>(ENOMEM);
  uctx->dev = std::move(opened.value());

  verbs_context& v = uctx->vctx;
  v.sz = sizeof(verbs_context);
  v.query_port = query_port_ex;
  v.query_device_ex = query_device_ex;
  v.create_cq_ex = create_cq_ex;
  v.create_qp_ex = create_qp_ex;
  ibv_context& c = v.context;
  c.device = device;
  c.cmd_fd = -1;
  c.async_fd = uctx->dev->async_fd();
  c.num_comp_vectors = 1;
  pthread_mutex_init(&c.mutex, nullptr);
  c.abi_compat = __VERBS_ABI_IS_EXTENDED;
  install_datapath_ops(c.ops);
  return &c;
}

int ibv_close_device(ibv_context* context) {
  if (context == nullptr) return fail_int(EINVAL);
  UContext* uctx = ctx_of(context);
  pthread_mutex_destroy(&context->mutex);
  delete uctx;  // stops the progress thread, closes the sockets
  return 0;
}

}  // extern "C"
