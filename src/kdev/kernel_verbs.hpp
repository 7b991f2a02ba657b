// The port MTUs of a kernel RDMA device, which sysfs does not show: asked of the system's
// libibverbs (rdma-core), loaded with dlopen by its full path so a LD_LIBRARY_PATH that
// points at uroce's drop-in libibverbs.so.1 does not answer instead. Opens the device
// read-only in effect (ibv_open_device + ibv_query_port, nothing allocated), unprivileged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace uroce::kdev {

struct PortMtu {
  uint32_t active_mtu = 0;  // bytes
  uint32_t max_mtu = 0;
};

// nullopt when rdma-core's libibverbs is not installed, the device is not in its list or the
// query fails.
[[nodiscard]] std::optional<PortMtu> query_port_mtu(const std::string& device, uint8_t port);

}  // namespace uroce::kdev
