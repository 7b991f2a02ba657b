// The device's attribute vocabulary of the C++ API (uroce::DeviceAttr, PortAttr, Gid,
// ProgressOptions, ...): what ibv_query_device / ibv_query_port report, and how the device's
// progress is driven. The device's own configuration (device/device_types.hpp) builds on it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "uroce/vocab/time.hpp"
#include "uroce/vocab/verbs_types.hpp"

namespace uroce::device {

using Gid = std::array<uint8_t, 16>;

// A completion channel of a Device.
enum class ChannelId : uint32_t {};

// ibv_port_state
enum class PortState : uint8_t { kNop = 0, kDown = 1, kInit = 2, kArmed = 3, kActive = 4 };

// ibv_atomic_cap
enum class AtomicCap : uint8_t { kNone = 0, kHca = 1, kGlob = 2 };

inline constexpr uint8_t kLinkLayerEthernet = 2;         // IBV_LINK_LAYER_ETHERNET
inline constexpr uint32_t kVendorIdSoftRoce = 0xFFFFFF;  // what rxe reports

// ibv_port_attr (the fields that mean something on RoCE).
struct PortAttr {
  PortState state = PortState::kDown;
  transport::Mtu max_mtu = transport::Mtu::k4096;
  transport::Mtu active_mtu = transport::Mtu::k1024;
  int gid_tbl_len = 0;
  uint32_t port_cap_flags = 0;
  uint32_t max_msg_sz = 0;
  uint16_t pkey_tbl_len = 1;
  uint8_t active_width = 0;  // IBV_WIDTH_* bits
  uint8_t active_speed = 0;  // IBV_SPEED_*
  uint8_t phys_state = 0;    // 5: LinkUp, 3: Disabled
  uint8_t link_layer = kLinkLayerEthernet;
  uint32_t netdev_mtu = 0;
  int64_t speed_mbps = -1;
  std::string netdev;
};

// ibv_device_attr plus max_inline_data (ibverbs reports that through create_qp only).
struct DeviceAttr {
  std::string fw_ver = "0.1.0";
  uint64_t node_guid = 0;  // big-endian bytes as a number, like ibverbs' __be64
  uint64_t sys_image_guid = 0;
  uint64_t max_mr_size = 0;
  uint64_t page_size_cap = 0xFFFFF000;
  uint32_t vendor_id = kVendorIdSoftRoce;
  uint32_t vendor_part_id = 0;
  uint32_t hw_ver = 0;
  int max_qp = 0;
  int max_qp_wr = 0;
  uint32_t device_cap_flags = 0;
  int max_sge = 0;
  int max_sge_rd = 0;
  int max_cq = 0;
  int max_cqe = 0;
  int max_mr = 0;
  int max_mw = 0;
  int max_pd = 0;
  int max_qp_rd_atom = 0;
  int max_ee_rd_atom = 0;
  int max_res_rd_atom = 0;
  int max_qp_init_rd_atom = 0;
  int max_ee_init_rd_atom = 0;
  AtomicCap atomic_cap = AtomicCap::kHca;
  int max_srq = 0;
  int max_srq_wr = 0;
  int max_srq_sge = 0;
  uint16_t max_pkeys = 1;
  uint8_t local_ca_ack_delay = 15;  // rxe's RXE_LOCAL_CA_ACK_DELAY
  uint8_t phys_port_cnt = 0;
  int max_inline_data = 0;
};

// ibv_device_cap_flags the device honours.
enum DeviceCap : uint32_t {
  kDeviceResizeMaxWr = 1 << 0,
  kDeviceBadPkeyCntr = 1 << 1,
  kDeviceBadQkeyCntr = 1 << 2,
  kDevicePortActiveEvent = 1 << 10,
  kDeviceSysImageGuid = 1 << 11,
  kDeviceRcRnrNakGen = 1 << 12,
  kDeviceSrqResize = 1 << 13,
  kDeviceMemWindow = 1 << 17,
  kDeviceMemWindowType2B = 1 << 24,
};

struct ProgressOptions {
  bool thread = true;                          // run the progress thread
  Nanos spin = std::chrono::microseconds(30);  // busy-poll this long after the last work
  Nanos max_sleep = std::chrono::seconds(1);   // upper bound of one PacketIo::wait
  bool app_calls_drive = true;  // poll_cq / post_send also move packets when the I/O is free
  // Handing the device to a busy-polling application: after an application thread's poll
  // moved packets, the progress thread parks (no spinning, no socket wake-ups) until no such
  // poll has happened for this long, or the application arms a CQ (req_notify_cq: it is
  // about to block). Two busy threads per process on a 2-core host halve a ping-pong's
  // latency against four. Zero: never park (the thread spins and sleeps as before).
  Nanos app_handoff = std::chrono::microseconds(500);
  // While such an application drives, post_send only queues its WQE: what is posted between
  // two polls leaves at the next poll, in one system call with GSO runs, as a NIC fetches
  // the WQEs of a doorbell in one go. False: every post sends at once when the I/O is free.
  bool batch_posts = true;
  // The CPUs the progress thread may run on (UROCE_PROGRESS_CPUS); empty: the affinity of
  // the thread that created the device. Opening a device fails (EINVAL) if one of them is
  // not in this process's affinity mask.
  std::vector<int> cpus;
};

}  // namespace uroce::device
