// `uroce stat` rendering on exact snapshots: zero counters hidden unless --all, per-second
// rates after the counters that moved (text) and for every counter (JSON), the program name
// of each process, the --watch refresh timestamp, and how the program name is derived from a
// command line.
#include "cli/stat_format.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <string>

#include "telemetry/shm_segment.hpp"

namespace uroce::cli {
namespace {

using telemetry::DeviceSnapshot;
using telemetry::QpSnapshot;

DeviceSnapshot snapshot(std::vector<uint64_t> device, std::vector<uint64_t> qp) {
  DeviceSnapshot s;
  s.device = "uroce_eth0";
  s.pid = 4242;
  s.published_unix_ns = 1000000000;
  s.names = {"sent_pkts", "rcvd_pkts", "icrc_errors", "retransmitted_pkts", "acks_rcvd"};
  s.values = std::move(device);
  QpSnapshot q;
  q.qpn = 17;
  q.remote_qpn = 18;
  q.remote_gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};
  q.qp_type = 2;
  q.state = 3;
  q.values = std::move(qp);
  s.qps.push_back(q);
  return s;
}

TEST(StatFormatTest, ZeroCountersAreHiddenUnlessAll) {
  const DeviceSnapshot s = snapshot({20, 20, 0, 0, 20}, {20, 20, 0, 0, 20});
  StatView view;
  view.program = "ib_write_bw";
  EXPECT_EQ(
      format_stat_text(s, view),
      "link uroce_eth0/1 pid 4242 (ib_write_bw)\n"
      "    sent_pkts 20 rcvd_pkts 20 acks_rcvd 20\n"
      "link uroce_eth0/1 pid 4242 (ib_write_bw) qp 17 type RC state RTS peer 10.0.0.2 rqpn 18 "
      "rtt -\n"
      "    sent_pkts 20 rcvd_pkts 20 acks_rcvd 20\n");
  view.all = true;
  EXPECT_EQ(
      format_stat_text(s, view),
      "link uroce_eth0/1 pid 4242 (ib_write_bw)\n"
      "    sent_pkts 20 rcvd_pkts 20 icrc_errors 0 retransmitted_pkts 0\n"
      "    acks_rcvd 20\n"
      "link uroce_eth0/1 pid 4242 (ib_write_bw) qp 17 type RC state RTS peer 10.0.0.2 rqpn 18 "
      "rtt -\n"
      "    sent_pkts 20 rcvd_pkts 20 icrc_errors 0 retransmitted_pkts 0\n"
      "    acks_rcvd 20\n");
}

TEST(StatFormatTest, AllZeroIsSaidAndAnUnknownProgramIsLeftOut) {
  const DeviceSnapshot s = snapshot({0, 0, 0, 0, 0}, {0, 0, 0, 0, 0});
  StatView view;
  view.qpn = 17;  // a single QP shows every counter, as before
  EXPECT_EQ(format_stat_text(s, view),
            "link uroce_eth0/1 pid 4242 qp 17 type RC state RTS peer 10.0.0.2 rqpn 18 rtt -\n"
            "    sent_pkts 0 rcvd_pkts 0 icrc_errors 0 retransmitted_pkts 0\n"
            "    acks_rcvd 0\n");
  view.qpn.reset();
  EXPECT_EQ(format_stat_text(s, view),
            "link uroce_eth0/1 pid 4242\n"
            "    (all counters 0)\n"
            "link uroce_eth0/1 pid 4242 qp 17 type RC state RTS peer 10.0.0.2 rqpn 18 rtt -\n"
            "    (all counters 0)\n");
}

TEST(StatFormatTest, WatchShowsPerSecondRatesOfWhatMoved) {
  const DeviceSnapshot before = snapshot({20, 20, 0, 0, 20}, {20, 20, 0, 0, 20});
  DeviceSnapshot now = snapshot({1020, 520, 0, 3, 20}, {1020, 520, 0, 3, 20});
  now.published_unix_ns = before.published_unix_ns + 500000000;  // 0.5 s later
  StatView view;
  view.program = "uroce perf";
  view.previous = &before;
  view.interval_s = 0.5;
  EXPECT_EQ(format_stat_text(now, view),
            "link uroce_eth0/1 pid 4242 (uroce perf)\n"
            "    sent_pkts 1020 (+2000/s) rcvd_pkts 520 (+1000/s) retransmitted_pkts 3 (+6/s) "
            "acks_rcvd 20\n"
            "link uroce_eth0/1 pid 4242 (uroce perf) qp 17 type RC state RTS peer 10.0.0.2 rqpn 18 "
            "rtt -\n"
            "    sent_pkts 1020 (+2000/s) rcvd_pkts 520 (+1000/s) retransmitted_pkts 3 (+6/s) "
            "acks_rcvd 20\n");
  const nlohmann::json j = stat_json(now, view);
  EXPECT_EQ(j["program"], "uroce perf");
  EXPECT_EQ(j["interval_s"], 0.5);
  EXPECT_EQ(j["rates"], (nlohmann::json{{"sent_pkts", 2000.0},
                                        {"rcvd_pkts", 1000.0},
                                        {"icrc_errors", 0.0},
                                        {"retransmitted_pkts", 6.0},
                                        {"acks_rcvd", 0.0}}));
  EXPECT_EQ(j["qps"][0]["rates"]["sent_pkts"], 2000.0);
  EXPECT_EQ(j["counters"]["icrc_errors"], 0u);  // JSON keeps every counter
  // A counter smaller than before (a reused pid) is no change, not a wrapped huge rate.
  EXPECT_EQ(stat_json(before, StatView{.previous = &now, .interval_s = 0.5})["rates"]["sent_pkts"],
            0.0);
  EXPECT_FALSE(stat_json(now, StatView{}).contains("rates"));
}

// A QP that runs DCQCN shows its current rate, target and alpha under its counters (text)
// and in "cc" (JSON); a QP without a controller has no rate line and "none" in JSON.
TEST(StatFormatTest, CongestionControlRatePerQp) {
  DeviceSnapshot s = snapshot({20, 20, 0, 0, 20}, {20, 20, 0, 0, 20});
  s.qps[0].cc.algorithm = transport::CcAlgorithm::kDcqcn;
  s.qps[0].cc.rate_bps = 2'500'060'000;
  s.qps[0].cc.target_rate_bps = 10'000'000'000;
  s.qps[0].cc.alpha = 512;
  StatView view;
  view.qpn = 17;
  EXPECT_EQ(format_stat_text(s, view),
            "link uroce_eth0/1 pid 4242 qp 17 type RC state RTS peer 10.0.0.2 rqpn 18 rtt -\n"
            "    sent_pkts 20 rcvd_pkts 20 icrc_errors 0 retransmitted_pkts 0\n"
            "    acks_rcvd 20\n"
            "    cc dcqcn rate 2500.1 Mb/s target 10000.0 Mb/s alpha 512/1024\n");
  const nlohmann::json j = stat_json(s, view);
  EXPECT_EQ(j["qps"][0]["cc"], (nlohmann::json{{"algorithm", "dcqcn"},
                                               {"rate_bps", 2'500'060'000u},
                                               {"target_rate_bps", 10'000'000'000u},
                                               {"alpha", 512}}));
  s.qps[0].cc = transport::QpCcState{};
  EXPECT_EQ(format_stat_text(s, view).find("cc "), std::string::npos);
  EXPECT_EQ(stat_json(s, view)["qps"][0]["cc"],
            (nlohmann::json{
                {"algorithm", "none"}, {"rate_bps", 0}, {"target_rate_bps", 0}, {"alpha", 0}}));
}

TEST(StatFormatTest, RefreshHeaderIsTheLocalTimeWithItsOffset) {
  const char* old = getenv("TZ");
  const std::string saved = old != nullptr ? old : "";
  setenv("TZ", "UTC", 1);
  tzset();
  // 2026-12-01 09:20:01.123 UTC
  EXPECT_EQ(format_refresh_header(1796116801123456789ULL),
            "--- 2026-12-01 09:20:01.123 +0000 ---\n");
  setenv("TZ", "CET-1", 1);
  tzset();
  EXPECT_EQ(format_refresh_header(1796116801123456789ULL),
            "--- 2026-12-01 10:20:01.123 +0100 ---\n");
  if (old != nullptr) {
    setenv("TZ", saved.c_str(), 1);
  } else {
    unsetenv("TZ");
  }
  tzset();
}

TEST(StatFormatTest, ProgramNameFromTheCommandLine) {
  using telemetry::program_from_cmdline;
  using namespace std::string_literals;
  EXPECT_EQ(program_from_cmdline("/usr/bin/ib_write_bw\0-x\0"
                                 "1\0"s),
            "ib_write_bw");
  EXPECT_EQ(program_from_cmdline("/build/bin/uroce\0perf\0write_bw\0"s), "uroce perf");
  EXPECT_EQ(program_from_cmdline("uroce\0--version\0"s), "uroce");
  EXPECT_EQ(program_from_cmdline("python3\0/src/rc_pingpong.py\0"s), "python3 rc_pingpong.py");
  EXPECT_EQ(program_from_cmdline(""), "");
  EXPECT_EQ(telemetry::process_program(getpid()), "telemetry_stat_format_test");
}

}  // namespace
}  // namespace uroce::cli
