// Data-path errors explained: what a work completion's error status most likely means,
// given the counters of its QP. Used in the log line a device writes when poll_cq returns
// an error completion, and by `uroce stat` for QPs whose last completion failed.
//
//   explain_completion(12, snap, qp)
//   -> "retry_exceeded_err=1 with 0 packets received from 10.0.0.2: peer unreachable or UDP
//       4791 blocked — run uroce doctor --peer 10.0.0.2"
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "device/packet_io.hpp"
#include "telemetry/rtt_tracker.hpp"
#include "telemetry/snapshot.hpp"

namespace uroce::telemetry {

// "IBV_WC_RETRY_EXC_ERR" for 12, as ibv_wc_status_str's enum names.
[[nodiscard]] std::string_view wc_status_name(uint8_t status);

// One line: the counters that matter for this status and the likely causes, with the
// command to run next. `qp` must belong to `snap` (its values are indexed by snap.names).
[[nodiscard]] std::string explain_completion(uint8_t status, const DeviceSnapshot& snap,
                                             const QpSnapshot& qp);

// What is known about an RC QP whose requests get no answer: its source GID, path MTU, the
// packet sizes answered and not (RttTracker), and what the network said (ICMP via
// IP_RECVERR, EMSGSIZE). Filled by DeviceTelemetry from the device.
struct StallEvidence {
  std::array<uint8_t, 16> local_gid{};
  uint32_t local_gid_index = 0;
  // A GID of the QP's port of the peer address's family (IPv4-mapped or IPv6), if any.
  std::optional<uint32_t> peer_family_gid_index;
  uint32_t path_mtu = 0;    // bytes: the QP's path_mtu
  uint32_t netdev_mtu = 0;  // of the QP's port
  PacketSizes sizes;
  device::PathReport path;
  uint64_t rnr_naks = 0;  // RNR NAKs received since the last answer
  // How the program sets its path MTU: "-m" (perftest, rdma-core's pingpongs, uroce), "-mt"
  // (qperf, whose -m is the message size); "" when unknown (the fix names ibv_modify_qp's
  // path_mtu). path_mtu_option() picks it from the program's name.
  std::string mtu_option = "-m";
};

// The StallEvidence::mtu_option of the program named `program` (its argv[0] base name).
[[nodiscard]] std::string path_mtu_option(std::string_view program);

// The cause of a stall and its fix, in this order of certainty:
//   (c) the source GID's family differs from the peer's address (IPv6 GID to an IPv4 peer)
//       the peer answers with RNR NAKs only: its application posts no receive
//   (b) the network refused packets as too big (ICMP fragmentation needed, EMSGSIZE)
//   (d) ICMP port unreachable after answers: the peer process is gone
//   (a) ICMP port unreachable / unreachable before any answer, or nothing ever came back
//   (b) smaller packets were answered, the full-size ones are not: path MTU
//   (d) the peer answered before and then stopped
// e.g. "nothing at all came back from 10.0.0.2: UDP 4791 is dropped on the way ... — run
//       uroce doctor --peer 10.0.0.2"
[[nodiscard]] std::string explain_stall(const DeviceSnapshot& snap, const QpSnapshot& qp,
                                        const StallEvidence& ev);

// The largest IB MTU (256..4096) whose packets fit an IP MTU of `ip_mtu` bytes; 0: none.
[[nodiscard]] uint32_t ib_mtu_fitting(uint32_t ip_mtu);

}  // namespace uroce::telemetry
