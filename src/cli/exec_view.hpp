// The files `uroce exec` shows a program: uroce's devices as the kernel would show RDMA
// devices in sysfs and /dev, for programs that look there instead of (or besides) asking
// libibverbs: UCX (it stats /dev/infiniband/<dev_name> and reads gid_attrs/), NCCL,
// rdma-core's test suite (device/net/<netdev> for rdma_cm), Mooncake.
//
// Layout (paths relative to /sys/class, and to /dev for dev_entries):
//   infiniband/<dev>/{node_type,node_guid,sys_image_guid,node_desc,fw_ver,hca_type,parent}
//   infiniband/<dev>/device/net/<netdev>      -> /sys/class/net/<netdev>
//   infiniband/<dev>/ports/1/{state,phys_state,link_layer,rate,active_mtu,max_mtu,lid,sm_lid,
//                             sm_sl,lid_mask_count,cap_mask,pkeys/0}
//   infiniband/<dev>/ports/1/gids/<i>, gid_attrs/types/<i> ("RoCE v2"), gid_attrs/ndevs/<i>
//   infiniband/<dev>/ports/1/hw_counters/<counter>   (uroce's counter names = rxe's)
//   infiniband_verbs/abi_version, infiniband_verbs/uverbs<N>/{ibdev,abi_version,dev}
//   /dev/infiniband/uverbs<N>
// <N> is the device's position in the drop-in's list, which names ibv_device.dev_name
// "uverbs<N>" to match. hca_type is "uroce": kdev's readers skip such devices, so `uroce gids`
// run inside the view does not list uroce's devices twice (once as kernel devices).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "net/netdev.hpp"
#include "telemetry/snapshot.hpp"

namespace uroce::cli {

struct ViewFile {
  std::string path;     // relative to the view's root (/sys/class or /dev)
  std::string content;  // file text; for a symlink, its target
  bool symlink = false;
};

// The hca_type of uroce's devices in the view.
inline constexpr std::string_view kViewHcaType = "uroce";
// uverbs' character device major (ib_uverbs), as /sys/class/infiniband_verbs/uverbsN/dev says.
inline constexpr unsigned kUverbsMajor = 231;
inline constexpr unsigned kUverbsMinorBase = 192;

// The /sys/class files of `devices` (in drop-in list order); counters all 0.
[[nodiscard]] std::vector<ViewFile> sysfs_view(std::span<const net::HostDevice> devices);
// The /dev files: infiniband/uverbs<N> for each device (content empty).
[[nodiscard]] std::vector<ViewFile> dev_view(std::span<const net::HostDevice> devices);

// The hw_counters files of device `device` (relative to /sys/class): each counter summed over
// the snapshots of that device (other devices' are ignored). Given every segment seen since
// the view was made, ended processes' last counts included (telemetry::SegmentFollower), the
// files count everything since then, as a kernel device counts everything since it was made.
[[nodiscard]] std::vector<ViewFile> counter_files(
    const std::string& device, std::span<const telemetry::DeviceSnapshot> snaps = {});

}  // namespace uroce::cli
