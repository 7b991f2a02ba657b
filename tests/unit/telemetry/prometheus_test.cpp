// Prometheus text exposition of snapshots: exact lines, and Debian's promtool accepts the
// whole page (skipped when promtool is not installed).
#include "telemetry/prometheus.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "telemetry/device_telemetry.hpp"

namespace uroce::telemetry {
namespace {

DeviceSnapshot snapshot() {
  DeviceSnapshot s;
  s.device = "uroce_lo";
  s.pid = 42;
  s.names = {"sent_pkts", "bytes_sent", "drop_bad_qpn", "retransmitted_pkts"};
  s.values = {10, 4096, 3, 2};
  s.published_unix_ns = 1'000'000'000;
  QpSnapshot q;
  q.qpn = 17;
  q.state = 3;
  q.values = {7, 2048, 0, 2};
  q.rtt.add(std::chrono::microseconds(3));
  q.rtt.add(std::chrono::microseconds(30));
  s.qps.push_back(q);
  return s;
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.starts_with(line + "\n");
}

TEST(PrometheusTest, CountersDropsAndHistogramLines) {
  const std::string t = render_prometheus({snapshot()}, 1'500'000'000);
  EXPECT_TRUE(has_line(t, "# TYPE uroce_sent_pkts_total counter"));
  EXPECT_TRUE(has_line(t, "uroce_sent_pkts_total{device=\"uroce_lo\"} 10"));
  EXPECT_TRUE(has_line(t, "uroce_qp_sent_pkts_total{device=\"uroce_lo\",qp=\"17\"} 7"));
  EXPECT_TRUE(has_line(t, "uroce_sent_bytes_total{device=\"uroce_lo\"} 4096"));
  EXPECT_TRUE(has_line(t, "uroce_retransmitted_pkts_total{device=\"uroce_lo\"} 2"));
  EXPECT_TRUE(has_line(t, "uroce_rx_drops_total{device=\"uroce_lo\",reason=\"bad_qpn\"} 3"));
  EXPECT_EQ(t.find("uroce_drop_bad_qpn"), std::string::npos);
  EXPECT_TRUE(has_line(t, "# TYPE uroce_qp_rtt_seconds histogram"));
  EXPECT_TRUE(
      has_line(t, "uroce_qp_rtt_seconds_bucket{device=\"uroce_lo\",qp=\"17\",le=\"2e-06\"} 0"));
  EXPECT_TRUE(
      has_line(t, "uroce_qp_rtt_seconds_bucket{device=\"uroce_lo\",qp=\"17\",le=\"4e-06\"} 1"));
  EXPECT_TRUE(
      has_line(t, "uroce_qp_rtt_seconds_bucket{device=\"uroce_lo\",qp=\"17\",le=\"3.2e-05\"} 2"));
  EXPECT_TRUE(
      has_line(t, "uroce_qp_rtt_seconds_bucket{device=\"uroce_lo\",qp=\"17\",le=\"+Inf\"} 2"));
  EXPECT_TRUE(has_line(t, "uroce_qp_rtt_seconds_sum{device=\"uroce_lo\",qp=\"17\"} 3.3e-05"));
  EXPECT_TRUE(has_line(t, "uroce_qp_rtt_seconds_count{device=\"uroce_lo\",qp=\"17\"} 2"));
  EXPECT_TRUE(has_line(t, "uroce_qp_state{device=\"uroce_lo\",qp=\"17\"} 3"));
  EXPECT_TRUE(has_line(t, "uroce_snapshot_age_seconds{device=\"uroce_lo\"} 0.5"));
}

// The congestion controller's rates: one gauge per QP that has a controller, labelled with
// it; a QP without one (none) has no rate series.
TEST(PrometheusTest, RateGaugesPerQpWithAController) {
  DeviceSnapshot s = snapshot();
  s.qps[0].cc.algorithm = transport::CcAlgorithm::kDcqcn;
  s.qps[0].cc.rate_bps = 2'500'000'000;
  s.qps[0].cc.target_rate_bps = 5'000'000'000;
  s.qps[0].cc.alpha = 512;
  QpSnapshot plain;
  plain.qpn = 18;
  plain.values = {0, 0, 0, 0};
  s.qps.push_back(plain);
  const std::string t = render_prometheus({s}, 1'500'000'000);
  EXPECT_TRUE(has_line(t, "# TYPE uroce_qp_cc_rate_bits_per_second gauge"));
  EXPECT_TRUE(has_line(
      t,
      "uroce_qp_cc_rate_bits_per_second{device=\"uroce_lo\",qp=\"17\",cc=\"dcqcn\"} 2500000000"));
  EXPECT_TRUE(has_line(t,
                       "uroce_qp_cc_target_rate_bits_per_second{device=\"uroce_lo\",qp=\"17\","
                       "cc=\"dcqcn\"} 5000000000"));
  EXPECT_TRUE(has_line(t, "uroce_qp_cc_alpha{device=\"uroce_lo\",qp=\"17\",cc=\"dcqcn\"} 0.5"));
  EXPECT_EQ(t.find("qp=\"18\",cc="), std::string::npos);
  EXPECT_TRUE(has_line(t, "uroce_qp_state{device=\"uroce_lo\",qp=\"18\"} 0"));
}

// rx_discards (the kernel's socket drops) is an ordinary device counter family.
TEST(PrometheusTest, KernelDropsAreACounter) {
  DeviceSnapshot s = snapshot();
  s.names.push_back("rx_discards");
  s.values.push_back(12);
  s.qps[0].values.push_back(0);
  const std::string t = render_prometheus({s}, 1'500'000'000);
  EXPECT_TRUE(has_line(t, "# TYPE uroce_rx_discards_total counter"));
  EXPECT_TRUE(has_line(t, "uroce_rx_discards_total{device=\"uroce_lo\"} 12"));
}

// A kernel device's port (`uroce stat --metrics`: pid 0, its driver's counter names) beside a
// uroce process: the families are the union, each snapshot has samples only for its own
// names, and the kernel one no per-QP families or drop reasons it does not have.
TEST(PrometheusTest, KernelDevicePortBesideAProcess) {
  DeviceSnapshot k;
  k.device = "mlx5_0";
  k.pid = 0;
  k.kernel_driver = "mlx5_core";
  k.names = {"sent_pkts", "np_cnp_sent", "port_xmit_wait"};
  k.values = {100, 7, 15};
  k.published_unix_ns = 1'000'000'000;
  const std::string t = render_prometheus({snapshot(), k}, 1'500'000'000);
  EXPECT_TRUE(has_line(t, "uroce_sent_pkts_total{device=\"uroce_lo\"} 10"));
  EXPECT_TRUE(has_line(t, "uroce_sent_pkts_total{device=\"mlx5_0\"} 100"));
  EXPECT_TRUE(has_line(t, "# TYPE uroce_np_cnp_sent_total counter"));
  EXPECT_TRUE(has_line(t, "uroce_np_cnp_sent_total{device=\"mlx5_0\"} 7"));
  EXPECT_TRUE(has_line(t, "uroce_port_xmit_wait_total{device=\"mlx5_0\"} 15"));
  EXPECT_EQ(t.find("uroce_port_xmit_wait_total{device=\"uroce_lo\"}"), std::string::npos);
  EXPECT_EQ(t.find("uroce_sent_bytes_total{device=\"mlx5_0\"}"), std::string::npos);
  EXPECT_EQ(t.find("uroce_qp_port_xmit_wait_total"), std::string::npos);
  EXPECT_EQ(t.find("uroce_qp_np_cnp_sent_total"), std::string::npos);
  EXPECT_EQ(t.find("uroce_rx_drops_total{device=\"mlx5_0\""), std::string::npos);
}

TEST(PrometheusTest, PromtoolAcceptsEveryEngineCounter) {
  if (!std::filesystem::exists("/usr/bin/promtool")) GTEST_SKIP() << "promtool not installed";
  DeviceSnapshot s = snapshot();
  s.names = published_counter_names();
  s.values.assign(s.names.size(), 1);
  s.qps[0].values.assign(s.names.size(), 1);
  const std::string path = std::filesystem::temp_directory_path() / "uroce-promtool-test.txt";
  std::ofstream(path) << render_prometheus({s}, s.published_unix_ns);
  FILE* p = popen(("/usr/bin/promtool check metrics < " + path + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int status = pclose(p);
  std::filesystem::remove(path);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "");
}

}  // namespace
}  // namespace uroce::telemetry
