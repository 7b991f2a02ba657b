// Prometheus text exposition (format 0.0.4) of device snapshots.
//
//   uroce_<counter>_total{device}            every engine counter of the device
//   uroce_qp_<counter>_total{device,qp}      the same per QP (qp: decimal QPN)
//   uroce_rx_drops_total{device,reason}      the drop_<reason> counters as one family
//   uroce_qp_rx_drops_total{device,qp,reason}
//   uroce_qp_rtt_seconds{device,qp}          histogram of ACK round trips (rtt_tracker.hpp)
//   uroce_qp_state{device,qp}                ibv_qp_state value
//   uroce_qp_cc_rate_bits_per_second{device,qp,cc}         DCQCN current rate RC (QPs with
//   uroce_qp_cc_target_rate_bits_per_second{device,qp,cc}  a controller only), target RT
//   uroce_qp_cc_alpha{device,qp,cc}                        and alpha (0..1)
//   uroce_qp_error_completions_total{device,qp}
//   uroce_scrape_snapshot_age_seconds{device}
// Byte counters are renamed to Prometheus' unit-last style: bytes_sent -> sent_bytes.
#pragma once

#include <string>
#include <vector>

#include "telemetry/snapshot.hpp"

namespace uroce::telemetry {

// now_unix_ns: for the snapshot age gauge.
[[nodiscard]] std::string render_prometheus(const std::vector<DeviceSnapshot>& snaps,
                                            uint64_t now_unix_ns);

}  // namespace uroce::telemetry
