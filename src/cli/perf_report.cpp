// perftest statistics and tables: see perf_report.hpp.
#include "cli/perf_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace uroce::cli {
namespace {

constexpr double kMegaByte = 1024.0 * 1024.0;    // perftest's MBS format factor 0x100000
constexpr double kGigaBitBytes = 125'000'000.0;  // 10^9 bits
// The peak window: at least this share of the messages, so a single early completion
// cannot produce an absurd peak. It starts at the start or at a drained sample (BwSample).
constexpr double kPeakWindowFraction = 0.05;

template <typename... Args>
std::string printf_string(const char* format, Args... args) {
  char buf[512];
  const int n = std::snprintf(buf, sizeof buf, format, args...);
  return std::string(buf, n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
}

double percentile(const std::vector<double>& sorted, double fraction) {
  if (sorted.empty()) return 0;
  const auto index = static_cast<size_t>(std::ceil(fraction * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, index == 0 ? 0 : index - 1)];
}

}  // namespace

BwResult compute_bw(uint64_t size, std::span<const BwSample> samples, bool gbits, uint64_t unseen) {
  BwResult r;
  r.size = size;
  if (samples.empty()) return r;
  const BwSample& last = samples.back();
  r.iterations = last.messages;
  const double unit = gbits ? kGigaBitBytes : kMegaByte;
  const double seconds = static_cast<double>(last.ns) / 1e9;
  if (seconds <= 0) return r;
  const double bytes = static_cast<double>(size) * static_cast<double>(last.messages);
  r.bw_average = bytes / seconds / unit;
  r.msg_rate_mpps = static_cast<double>(last.messages) / seconds / 1e6;

  const uint64_t window = std::max<uint64_t>(
      1, static_cast<uint64_t>(kPeakWindowFraction * static_cast<double>(last.messages)));
  double best = r.bw_average;
  size_t j = 0;
  BwSample origin{0, 0};
  for (size_t i = 0; i <= samples.size(); ++i) {
    if (i > 0) {
      if (!samples[i - 1].drained) continue;
      origin = samples[i - 1];
    }
    // The start has nothing unseen; a later origin may have missed `unseen` messages.
    const uint64_t base = origin.messages + (i > 0 ? unseen : 0);
    while (j < samples.size() && samples[j].messages < base + window) ++j;
    if (j == samples.size()) break;
    const int64_t dt = samples[j].ns - origin.ns;
    if (dt <= 0) continue;
    const double rate = static_cast<double>(samples[j].messages - base) *
                        static_cast<double>(size) / (static_cast<double>(dt) / 1e9) / unit;
    best = std::max(best, rate);
  }
  r.bw_peak = best;
  return r;
}

LatResult compute_lat(uint64_t size, std::vector<double>& usec) {
  LatResult r;
  r.size = size;
  r.iterations = usec.size();
  if (usec.empty()) return r;
  std::sort(usec.begin(), usec.end());
  r.t_min = usec.front();
  r.t_max = usec.back();
  r.t_typical = usec[usec.size() / 2];
  r.t_avg = std::accumulate(usec.begin(), usec.end(), 0.0) / static_cast<double>(usec.size());
  double var = 0;
  for (double v : usec) var += (v - r.t_avg) * (v - r.t_avg);
  r.t_stdev = std::sqrt(var / static_cast<double>(usec.size()));
  r.p99 = percentile(usec, 0.99);
  r.p999 = percentile(usec, 0.999);
  return r;
}

std::string bw_header(bool gbits) {
  return gbits ? " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
               : " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
}

std::string bw_line(const BwResult& r) {
  return printf_string(" %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t   %-7.6lf",
                       static_cast<unsigned long>(r.size), static_cast<unsigned long>(r.iterations),
                       r.bw_peak, r.bw_average, r.msg_rate_mpps);
}

std::string lat_header() {
  return " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
         "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";
}

std::string lat_line(const LatResult& r) {
  return printf_string(
      " %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     "
      "\t%-7.2f\t\t%-7.2f "
      "\t\t%-7.2f",
      static_cast<unsigned long>(r.size), static_cast<unsigned long>(r.iterations), r.t_min,
      r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p999);
}

std::string perf_address_line(std::string_view who, uint32_t qpn, uint32_t psn, bool with_rdma,
                              uint32_t rkey, uint64_t vaddr) {
  std::string line = printf_string(" %.*s address: LID %#04x QPN %#06x PSN %#06x",
                                   static_cast<int>(who.size()), who.data(), 0u, qpn, psn);
  if (with_rdma) {
    line +=
        printf_string(" RKey %#08x VAddr %#016llx", rkey, static_cast<unsigned long long>(vaddr));
  }
  return line;
}

std::string perf_gid_line(std::span<const uint8_t, 16> g) {
  return printf_string(
      " GID: %02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d", g[0],
      g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14],
      g[15]);
}

nlohmann::json to_json(const BwResult& r, bool gbits) {
  const char* unit = gbits ? "Gb/sec" : "MB/sec";
  return {{"bytes", r.size},      {"iterations", r.iterations},
          {"bw_peak", r.bw_peak}, {"bw_average", r.bw_average},
          {"bw_unit", unit},      {"msg_rate_mpps", r.msg_rate_mpps}};
}

nlohmann::json to_json(const LatResult& r) {
  return {{"bytes", r.size},
          {"iterations", r.iterations},
          {"t_min_usec", r.t_min},
          {"t_max_usec", r.t_max},
          {"t_typical_usec", r.t_typical},
          {"t_avg_usec", r.t_avg},
          {"t_stdev_usec", r.t_stdev},
          {"p99_usec", r.p99},
          {"p99_9_usec", r.p999}};
}

}  // namespace uroce::cli
