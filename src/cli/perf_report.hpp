// Results of `uroce perf`: the statistics perftest reports and its exact table format
// (perftest 4.5's RESULT_FMT / REPORT_FMT and RESULT_FMT_LAT / REPORT_FMT_LAT), plus JSON.
//
//   BW:  MB/sec is 2^20 bytes per second, Gb/sec is 10^9 bits per second, MsgRate is
//        millions of messages per second; the peak is the best rate over any window of at
//        least kPeakWindowFraction of the run's messages that starts at a drained sample.
//   Lat: per-iteration samples in microseconds (half the round trip for the ping-pong tests,
//        as perftest reports); t_typical is the median.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace uroce::cli {

inline constexpr std::string_view kResultLine =
    "---------------------------------------------------------------------------------------";

struct BwSample {
  uint64_t messages = 0;  // completed so far (all QPs)
  int64_t ns = 0;         // since the start of the measurement
  // The poll behind this sample left the CQ empty, so `messages` is every completion made by
  // `ns`. A poll that filled its array may have left completions behind, made long before;
  // a peak window starting there would count them as made in the gap to the next poll. With
  // 64 QPs, whose completions reach a poll together, that gave peaks 90 times the average.
  bool drained = true;
};

struct BwResult {
  uint64_t size = 0;
  uint64_t iterations = 0;  // messages completed (all QPs)
  double bw_peak = 0;       // in the report unit (MB/sec or Gb/sec)
  double bw_average = 0;
  double msg_rate_mpps = 0;
};

struct LatResult {
  uint64_t size = 0;
  uint64_t iterations = 0;
  double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0, p99 = 0, p999 = 0;
};

// `samples` in time order, the last one being the end of the run. `unseen` bounds the
// messages complete by a drained sample's time yet not in its count: with a completion every
// N messages (-Q N), each QP may have finished N - 1 more silently, so it is qps * (N - 1). A
// peak window counts only the messages that surely completed inside it.
[[nodiscard]] BwResult compute_bw(uint64_t size, std::span<const BwSample> samples, bool gbits,
                                  uint64_t unseen);
// `usec` is sorted in place.
[[nodiscard]] LatResult compute_lat(uint64_t size, std::vector<double>& usec);

[[nodiscard]] std::string bw_header(bool gbits);
[[nodiscard]] std::string bw_line(const BwResult& r);
[[nodiscard]] std::string lat_header();
[[nodiscard]] std::string lat_line(const LatResult& r);

// perftest's " local address: LID 0000 QPN 0x0011 PSN 0x5c1a2b RKey 0x001234 VAddr 0x..."
// (`with_rdma` adds RKey and VAddr, as for RDMA and atomic tests) and its GID line
// " GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:01" (perftest prints decimals).
[[nodiscard]] std::string perf_address_line(std::string_view who, uint32_t qpn, uint32_t psn,
                                            bool with_rdma, uint32_t rkey, uint64_t vaddr);
[[nodiscard]] std::string perf_gid_line(std::span<const uint8_t, 16> gid);

[[nodiscard]] nlohmann::json to_json(const BwResult& r, bool gbits);
[[nodiscard]] nlohmann::json to_json(const LatResult& r);

}  // namespace uroce::cli
