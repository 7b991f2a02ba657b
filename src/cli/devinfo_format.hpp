// The text of `uroce devinfo`, laid out like rdma-core's `ibv_devinfo [-v]` (libibverbs/
// examples/devinfo.c): same field names, tabs and "(value)" suffixes, so scripts that read
// ibv_devinfo read this too. GIDs are listed for every port (newer rdma-core style, with the
// RoCE version), also without -v, because on RoCE the GID index is what users need to pick.
// -v also shows the congestion control (uroce's own lines, after the device's limits).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "device/device_types.hpp"
#include "uroce/vocab/cc_types.hpp"

namespace uroce::cli {

struct DevinfoPort {
  uint8_t port_num = 1;
  device::PortAttr attr;
  std::vector<std::pair<uint32_t, device::Gid>> gids;  // non-empty entries, index order
};

// `cc` (verbose only, when given): uroce's congestion control after the device attributes,
// "congestion_control:", "cc_line_rate_mbps:" with where the line rate comes from (the
// first port's netdev speed, or the 10 Gb/s default when the speed is unknown), and every
// DCQCN parameter in effect as "name = value" with mlx5's cc_params names.
[[nodiscard]] std::string format_devinfo(std::string_view hca_id, const device::DeviceAttr& dev,
                                         std::span<const DevinfoPort> ports, bool verbose,
                                         const transport::CcConfig* cc = nullptr);

// The GID as ibv_devinfo prints a RoCE v2 one (inet_ntop): "fe80::ff:fe00:1",
// "::ffff:192.0.2.2" for an IPv4-mapped GID.
[[nodiscard]] std::string devinfo_gid_text(const device::Gid& gid);

// ibv_devinfo's names for a port state (1 PORT_DOWN .. 5 PORT_ACTIVE_DEFER) and physical state
// (1 SLEEP .. 7 PHY TEST), "invalid ..." otherwise.
[[nodiscard]] std::string_view ibv_port_state_str(int state);
[[nodiscard]] std::string_view ibv_phys_state_str(int phys_state);

}  // namespace uroce::cli
