// Device discovery and contexts: ibv_get_device_list, ibv_open_device, ibv_close_device.
//
// One device per netdev that is up with an address, named and ordered as rxe's would be
// (uroce_<netdev>, the default route's netdev first, loopback last: net/netdev.hpp and
// docs/networking.md), so programs that open the first device reach other hosts. Each
// ibv_open_device assembles its own device::Device on UDP (open_udp_device): its own sockets
// in the address's reuseport group, its own QPN slot and progress thread, so contexts are as
// independent as contexts of a hardware NIC. ibv_close_device tears it all down.
#include <endian.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>

#include "ibverbs/objects.hpp"
#include "ibverbs/options.hpp"

using namespace uroce;
using namespace uroce::ibverbs;

namespace {

struct DeviceSlot {
  ibv_device dev{};
  uint64_t node_guid = 0;  // big-endian bytes as a number (device::DeviceAttr convention)
  int index = 0;           // ibv_get_device_index: position of first listing
};

std::mutex g_list_mu;
// Every device ever listed, kept for the process lifetime: an ibv_device* handed out stays
// valid after ibv_free_device_list and across listings (netdevs may come and go).
std::deque<DeviceSlot> g_slots;

void copy_name(char* dst, size_t room, const std::string& src) {
  std::strncpy(dst, src.c_str(), room - 1);
  dst[room - 1] = '\0';
}

DeviceSlot& slot_for(const net::HostDevice& d) {
  for (DeviceSlot& s : g_slots) {
    if (d.name == s.dev.name) return s;
  }
  DeviceSlot& slot = g_slots.emplace_back();
  slot.index = static_cast<int>(g_slots.size() - 1);
  slot.dev.node_type = IBV_NODE_CA;
  slot.dev.transport_type = IBV_TRANSPORT_IB;
  copy_name(slot.dev.name, sizeof slot.dev.name, d.name);
  // uverbs<N> as the kernel names its character devices: `uroce exec` creates
  // /dev/infiniband/uverbs<N> and /sys/class/infiniband_verbs/uverbs<N> for the device at
  // position N of the list, which UCX looks for (src/cli/exec_view.hpp).
  const std::string uverbs = "uverbs" + std::to_string(slot.index);
  copy_name(slot.dev.dev_name, sizeof slot.dev.dev_name, uverbs);
  copy_name(slot.dev.dev_path, sizeof slot.dev.dev_path, "/sys/class/infiniband_verbs/" + uverbs);
  copy_name(slot.dev.ibdev_path, sizeof slot.dev.ibdev_path, "/sys/class/infiniband/" + d.name);
  return slot;
}

// The devices of this moment, in list order.
std::vector<DeviceSlot*> discover() {
  net::UdpDeviceOptions options;
  std::string error;
  if (!options_from_env(options, error)) {
    report(error);
    return {};
  }
  auto devices = net::discover_host_devices(options.netdevs);
  if (!devices) {
    report(devices.error().message);
    return {};
  }
  std::lock_guard lock(g_list_mu);
  std::vector<DeviceSlot*> out;
  for (const net::HostDevice& d : devices.value()) {
    DeviceSlot& slot = slot_for(d);
    slot.node_guid = d.node_guid;
    out.push_back(&slot);
  }
  return out;
}

}  // namespace

extern "C" {

ibv_device** ibv_get_device_list(int* num_devices) {
  const std::vector<DeviceSlot*> slots = discover();
  auto** list = static_cast<ibv_device**>(std::calloc(slots.size() + 1, sizeof(ibv_device*)));
  if (list == nullptr) return fail_null<ibv_device*>(ENOMEM);
  int n = 0;
  for (DeviceSlot* slot : slots) list[n++] = &slot->dev;
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
  return device == nullptr ? -1 : reinterpret_cast<DeviceSlot*>(device)->index;
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
  v.advise_mr = advise_mr;
  v.query_rt_values = query_rt_values;
  ibv_context& c = v.context;
  c.device = device;
  // A real context's cmd_fd is its open uverbs file, which programs may dup, poll or pass to
  // ibv_import_device (rdma-core's tests dup it). An eventfd stands in: a valid fd that never
  // becomes readable; ibv_import_device answers EOPNOTSUPP (compat.cpp).
  c.cmd_fd = eventfd(0, EFD_CLOEXEC);
  c.async_fd = make_app_fd(uctx->dev->async_fd());
  if (c.async_fd < 0 || c.cmd_fd < 0) {
    const int err = c.async_fd < 0 ? -c.async_fd : errno;
    if (c.cmd_fd >= 0) close(c.cmd_fd);
    if (c.async_fd >= 0) close_app_fd(c.async_fd);
    delete uctx;
    return fail_null<ibv_context>(err);
  }
  c.num_comp_vectors = 1;
  pthread_mutex_init(&c.mutex, nullptr);
  c.abi_compat = __VERBS_ABI_IS_EXTENDED;
  install_datapath_ops(c.ops);
  install_mw_ops(c.ops);
  return &c;
}

int ibv_close_device(ibv_context* context) {
  if (context == nullptr) return fail_int(EINVAL);
  UContext* uctx = ctx_of(context);
  pthread_mutex_destroy(&context->mutex);
  close_app_fd(context->async_fd);
  close(context->cmd_fd);
  delete uctx;  // stops the progress thread, closes the sockets
  return 0;
}

}  // extern "C"
