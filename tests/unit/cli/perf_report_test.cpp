// perftest's tables, byte for byte, and the statistics behind them.
#include <gtest/gtest.h>

#include <vector>

#include "cli/perf_pattern.hpp"
#include "cli/perf_report.hpp"

namespace uroce::cli {
namespace {

TEST(PerfReport, BandwidthHeaderAndLineAreperftests) {
  EXPECT_EQ(bw_header(false),
            " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]");
  EXPECT_EQ(bw_header(true),
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]");
  BwResult r;
  r.size = 65536;
  r.iterations = 5000;
  r.bw_peak = 11030.54;
  r.bw_average = 11028.93;
  r.msg_rate_mpps = 0.176463;
  // perftest 4.5 REPORT_FMT: " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t   %-7.6lf"
  EXPECT_EQ(bw_line(r), " 65536      5000             11030.54            11028.93\t\t   0.176463");
}

TEST(PerfReport, LatencyHeaderAndLineAreperftests) {
  EXPECT_EQ(lat_header(),
            " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
            "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ");
  LatResult r;
  r.size = 2;
  r.iterations = 1000;
  r.t_min = 1.5;
  r.t_max = 20.25;
  r.t_typical = 2;
  r.t_avg = 2.5;
  r.t_stdev = 0.75;
  r.p99 = 10;
  r.p999 = 20.25;
  EXPECT_EQ(
      lat_line(r),
      " 2       1000          1.50           20.25        2.00     \t       2.50        \t0.75   "
      "\t\t10.00   \t\t20.25  ");
}

TEST(PerfReport, BandwidthUnits) {
  // 1000 messages of 1 MiB in one second: 1000 MB/sec (MB = 2^20) and 8.388608 Gb/sec.
  const std::vector<BwSample> samples = {{500, 500'000'000}, {1000, 1'000'000'000}};
  const BwResult mb = compute_bw(1 << 20, samples, false, 0);
  EXPECT_DOUBLE_EQ(mb.bw_average, 1000.0);
  EXPECT_DOUBLE_EQ(mb.msg_rate_mpps, 0.001);
  EXPECT_EQ(mb.iterations, 1000u);
  const BwResult gb = compute_bw(1 << 20, samples, true, 0);
  EXPECT_DOUBLE_EQ(gb.bw_average, 8.388608);
}

TEST(PerfReport, PeakIsTheBestWindow) {
  // First half slow (100 msgs/s), second half fast (900 msgs in 0.1 s).
  const std::vector<BwSample> samples = {{100, 1'000'000'000}, {1000, 1'100'000'000}};
  const BwResult r = compute_bw(1 << 20, samples, false, 0);
  EXPECT_NEAR(r.bw_average, 1000.0 / 1.1, 1e-9);
  EXPECT_DOUBLE_EQ(r.bw_peak, 9000.0);
}

TEST(PerfReport, PeakWindowsStartOnlyWhereThePollDrainedTheCq) {
  // 100 messages in the first second; then a poll that filled its array (more completions,
  // made during that second, were still queued) and a drained poll 0.1 ms later with 900
  // more. Starting a window at the full poll would claim 900 messages in 0.1 ms.
  const std::vector<BwSample> samples = {{100, 1'000'000'000, false}, {1000, 1'000'100'000, true}};
  const BwResult r = compute_bw(1 << 20, samples, false, 0);
  EXPECT_NEAR(r.bw_average, 1000.0 / 1.0001, 1e-9);
  EXPECT_DOUBLE_EQ(r.bw_peak, r.bw_average);
  // The same samples, the first drained: then 900 messages did complete in 0.1 ms.
  const std::vector<BwSample> drained = {{100, 1'000'000'000, true}, {1000, 1'000'100'000, true}};
  EXPECT_NEAR(compute_bw(1 << 20, drained, false, 0).bw_peak, 900.0 / 1e-4, 1e-3);
}

TEST(PerfReport, PeakWindowsCountOnlyMessagesSurelyCompletedInside) {
  // Two QPs, a completion every 100 messages: at a drained sample each QP may have finished
  // 99 more without a completion. 1000 messages in the first second; 0.1 ms later both QPs'
  // next completions (200 messages, most of them finished long before). A peak of 200
  // messages in 0.1 ms is not shown; 2000 messages in the following second count, less the
  // 198 that may precede the window.
  const std::vector<BwSample> samples = {
      {1000, 1'000'000'000, true}, {1200, 1'000'100'000, true}, {3200, 2'000'100'000, true}};
  const BwResult r = compute_bw(1 << 20, samples, false, 2 * 99);
  EXPECT_NEAR(r.bw_average, 3200.0 / 2.0001, 1e-9);
  EXPECT_NEAR(r.bw_peak, (3200.0 - 1000 - 198) / 1.0001, 1e-9);
  EXPECT_LT(r.bw_peak, 2100.0);
}

TEST(PerfReport, LatencyStatistics) {
  std::vector<double> us;
  for (int i = 1000; i >= 1; --i) us.push_back(i);
  const LatResult r = compute_lat(8, us);
  EXPECT_EQ(r.iterations, 1000u);
  EXPECT_DOUBLE_EQ(r.t_min, 1);
  EXPECT_DOUBLE_EQ(r.t_max, 1000);
  EXPECT_DOUBLE_EQ(r.t_typical, 501);
  EXPECT_DOUBLE_EQ(r.t_avg, 500.5);
  EXPECT_NEAR(r.t_stdev, 288.6749, 1e-4);
  EXPECT_DOUBLE_EQ(r.p99, 990);
  EXPECT_DOUBLE_EQ(r.p999, 999);
}

TEST(PerfReport, AddressAndGidLinesArePerftests) {
  EXPECT_EQ(perf_address_line("local", 0x11, 0x5c1a2b, false, 0, 0),
            " local address: LID 0000 QPN 0x0011 PSN 0x5c1a2b");
  EXPECT_EQ(
      perf_address_line("remote", 0x80000, 0x1, true, 0x1234, 0x7f0000001000),
      " remote address: LID 0000 QPN 0x80000 PSN 0x0001 RKey 0x001234 VAddr 0x007f0000001000");
  const std::array<uint8_t, 16> gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  EXPECT_EQ(perf_gid_line(gid), " GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:01");
}

TEST(PerfPattern, EveryIterationAndPositionDiffers) {
  std::vector<uint8_t> a(4099), b(4099);
  fill_pattern(a, 7);
  fill_pattern(b, 8);
  EXPECT_FALSE(check_pattern(a, 7).has_value());
  EXPECT_EQ(check_pattern(a, 8), std::optional<size_t>(0));
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  EXPECT_LT(same, 64u);  // ~1/256 of the bytes may agree by chance
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], pattern_byte(7, i)) << i;
  a[4098] ^= 1;
  EXPECT_EQ(check_pattern(a, 7), std::optional<size_t>(4098));
  // A message shifted by one byte is caught at its first byte.
  std::vector<uint8_t> shifted(a.begin() + 1, a.end());
  EXPECT_EQ(check_pattern(shifted, 7), std::optional<size_t>(0));
}

}  // namespace
}  // namespace uroce::cli
