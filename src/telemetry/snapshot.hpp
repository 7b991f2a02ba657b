// DeviceSnapshot: one consistent copy of a device's counters, per-QP counters, congestion
// state (current rate) and ACK round-trip histograms, with the counter names that index them. Built
// by the device's telemetry observer, written to / read from the shared-memory segment
// (shm_segment.hpp), rendered by `uroce stat` and the Prometheus exporter.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "telemetry/shm_layout.hpp"
#include "uroce/vocab/cc_types.hpp"
#include "uroce/vocab/time.hpp"

namespace uroce::telemetry {

struct RttHistogram {
  std::array<uint64_t, kRttBuckets + 1> buckets{};  // non-cumulative; last: +Inf
  uint64_t count = 0;
  uint64_t sum_ns = 0;

  void add(Nanos rtt);
  // Smallest bucket bound (ns) at or above quantile q of the samples; 0 when empty.
  [[nodiscard]] uint64_t quantile_bound_ns(double q) const;
};

struct QpSnapshot {
  uint32_t qpn = 0;
  uint32_t remote_qpn = 0;
  std::array<uint8_t, 16> remote_gid{};
  uint8_t qp_type = 0;
  uint8_t state = 0;
  uint8_t last_error_status = 0;
  uint64_t error_completions = 0;
  transport::QpCcState cc;  // congestion control and current rate (query_qp's QpAttr::cc)
  RttHistogram rtt;
  std::vector<uint64_t> values;  // indexed like DeviceSnapshot::names
};

struct DeviceSnapshot {
  std::string device;
  int pid = 0;  // 0: a kernel RDMA device's port read from sysfs (no process)
  uint8_t port_num = 1;
  std::string kernel_driver;  // a kernel device: its driver ("rxe", "mlx5_core"); "" for uroce
  uint64_t published_unix_ns = 0;
  uint64_t qp_overflow = 0;
  std::vector<std::string> names;
  std::vector<uint64_t> values;
  std::vector<QpSnapshot> qps;

  // The value of counter `name` in `values` (device) or in a QP's values; 0 when absent.
  [[nodiscard]] uint64_t value(std::string_view name) const;
  [[nodiscard]] uint64_t qp_value(const QpSnapshot& qp, std::string_view name) const;
  [[nodiscard]] const QpSnapshot* qp(uint32_t qpn) const;
};

// "10.0.0.2" for an IPv4-mapped GID, the IPv6 text otherwise.
[[nodiscard]] std::string gid_address(const std::array<uint8_t, 16>& gid);

}  // namespace uroce::telemetry
