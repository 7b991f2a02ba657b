// What `uroce gids`, `uroce devinfo` and `uroce stat` print for a kernel RDMA device (rxe,
// mlx5, ...; src/kdev), in the same formats as for uroce's own devices, so the two sit side
// by side and scripts written for show_gids / ibv_devinfo / `uroce stat --json` read both.
#pragma once

#include <nlohmann/json.hpp>

#include <span>
#include <string>
#include <vector>

#include "kdev/kernel_device.hpp"
#include "telemetry/snapshot.hpp"

namespace uroce::cli {

// show_gids rows (DEV PORT INDEX GID IPv4 VER DEV) of every GID of every port, no header;
// VER is v2 for "RoCE v2", v1 for "IB/RoCE v1".
[[nodiscard]] std::string format_kernel_gid_rows(std::span<const kdev::KernelDevice> devices);
// Number of rows format_kernel_gid_rows prints.
[[nodiscard]] size_t kernel_gid_count(std::span<const kdev::KernelDevice> devices);

// One line per port and netdev naming the GID index of RoCE v2 over IPv4 and how to pass
// it, or saying that there is none and what adds it:
//   "rxe0 port 1 (eth0): RoCE v2 over IPv4 is GID index 1 (10.77.0.2): ib_write_bw -d rxe0
//    -x 1, ibv_rc_pingpong -d rxe0 -g 1"
[[nodiscard]] std::string format_kernel_gid_advice(std::span<const kdev::KernelDevice> devices);

// ibv_devinfo's layout with what sysfs holds (no device limits: those need the verbs
// device); `port` 0: every port. GIDs in ibv_devinfo's spelling, with their RoCE version.
[[nodiscard]] std::string format_kernel_devinfo(const kdev::KernelDevice& dev, int port,
                                                bool verbose);

// A counter snapshot of one port for `uroce stat` and the exporter: device "rxe0", pid 0
// (a kernel device, no process), port_num set, names in uroce's published order first
// (telemetry::published_counter_names), then the device's own.
[[nodiscard]] telemetry::DeviceSnapshot kernel_snapshot(const kdev::KernelDevice& dev,
                                                        const kdev::KernelPort& port,
                                                        uint64_t read_unix_ns);

}  // namespace uroce::cli
