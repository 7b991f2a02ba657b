#include "kdev/kernel_verbs.hpp"

#include <dlfcn.h>
#include <infiniband/verbs.h>

#include <cstring>

#include "kdev/kernel_device.hpp"

namespace uroce::kdev {
namespace {

// Where Debian/Ubuntu (multiarch), Fedora and others install rdma-core's library.
constexpr const char* kLibibverbs[] = {"/usr/lib/x86_64-linux-gnu/libibverbs.so.1",
                                       "/usr/lib/aarch64-linux-gnu/libibverbs.so.1",
                                       "/usr/lib64/libibverbs.so.1", "/usr/lib/libibverbs.so.1"};

struct Verbs {
  void* handle = nullptr;
  decltype(&ibv_get_device_list) get_device_list = nullptr;
  decltype(&ibv_free_device_list) free_device_list = nullptr;
  decltype(&ibv_get_device_name) get_device_name = nullptr;
  decltype(&ibv_open_device) open_device = nullptr;
  decltype(&ibv_close_device) close_device = nullptr;
  // The exported symbol (IBVERBS_1.1) takes the compat layout, whose leading fields, the
  // MTUs among them, are ibv_port_attr's.
  int (*query_port)(ibv_context*, uint8_t, ibv_port_attr*) = nullptr;
};

const Verbs* load() {
  static const Verbs verbs = [] {
    Verbs v;
    for (const char* path : kLibibverbs) {
      v.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (v.handle != nullptr) break;
    }
    if (v.handle == nullptr) return v;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(v.handle, name));
    };
    sym(v.get_device_list, "ibv_get_device_list");
    sym(v.free_device_list, "ibv_free_device_list");
    sym(v.get_device_name, "ibv_get_device_name");
    sym(v.open_device, "ibv_open_device");
    sym(v.close_device, "ibv_close_device");
    sym(v.query_port, "ibv_query_port");
    return v;
  }();
  const bool ok = verbs.get_device_list && verbs.free_device_list && verbs.get_device_name &&
                  verbs.open_device && verbs.close_device && verbs.query_port;
  return ok ? &verbs : nullptr;
}

}  // namespace

std::optional<PortMtu> query_port_mtu(const std::string& device, uint8_t port) {
  const Verbs* v = load();
  if (v == nullptr) return std::nullopt;
  int n = 0;
  ibv_device** list = v->get_device_list(&n);
  if (list == nullptr) return std::nullopt;
  std::optional<PortMtu> out;
  for (int i = 0; i < n && !out; ++i) {
    const char* name = v->get_device_name(list[i]);
    if (name == nullptr || device != name) continue;
    ibv_context* ctx = v->open_device(list[i]);
    if (ctx == nullptr) break;
    ibv_port_attr attr;
    std::memset(&attr, 0, sizeof attr);
    if (v->query_port(ctx, port, &attr) == 0) {
      out = PortMtu{mtu_bytes(attr.active_mtu), mtu_bytes(attr.max_mtu)};
    }
    v->close_device(ctx);
  }
  v->free_device_list(list);
  return out;
}

}  // namespace uroce::kdev
