// Telemetry of real devices over UDP on 127.0.0.1, seen from outside the process:
// `uroce stat` reads the shared-memory counters exactly, the Prometheus endpoint
// (UROCE_METRICS) passes promtool and is scraped by a real prometheus server, UROCE_CAPTURE
// writes a pcap whose every frame verifies and that `uroce dump --analyze` summarises, and a
// RETRY_EXC_ERR completion is explained in the log and in `uroce stat`; `uroce stat --watch`
// shows timestamps, rates and program names, and hides zero counters unless --all.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include "device_integration_util.hpp"
#include "shell_run.hpp"
#include "wire/frame.hpp"
#include "wire/icrc.hpp"
#include "wire/pcap_file.hpp"

namespace uroce::itest {
namespace {

constexpr int kMessages = 20;
constexpr size_t kMessageBytes = 4096;

using uroce::test::uroce_binary;

std::pair<int, std::string> run(const std::string& cmd) {
  return uroce::test::run_shell(cmd);
}

class TelemetryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("UROCE_STAT_DIR", stat_dir_.path().c_str(), 1);
    metrics_port_ = test::reserve_port();
    setenv("UROCE_METRICS", ("127.0.0.1:" + std::to_string(metrics_port_)).c_str(), 1);
    capture_ = stat_dir_.path() + "/capture.pcap";
    setenv("UROCE_CAPTURE", capture_.c_str(), 1);
    // These tests count every packet of a loss-free loopback run (the capture test asserts no
    // retransmission). The adaptive RTO fires early when a loaded host deschedules a progress
    // thread for a few ms (docs/performance.md): under ASan beside other tests it resent 16-64
    // packets in 4 of 20 runs; with only the QP's 67 ms timeout, 0 of 30.
    setenv("UROCE_ADAPTIVE_RETRANS", "0", 1);
    port_ = pick_udp_port();
    auto a = Device::open(loopback_options(port_, registry_.path()));
    ASSERT_TRUE(a.is_ok()) << a.error().message;
    auto b = Device::open(loopback_options(port_, registry_.path()));
    ASSERT_TRUE(b.is_ok()) << b.error().message;
    a_ = std::make_unique<Side>(std::move(a.value()), 1 << 20);
    b_ = std::make_unique<Side>(std::move(b.value()), 1 << 20);
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    unsetenv("UROCE_METRICS");
    unsetenv("UROCE_CAPTURE");
    unsetenv("UROCE_STAT_DIR");
    unsetenv("UROCE_ADAPTIVE_RETRANS");
  }

  // kMessages SENDs of kMessageBytes from qa to qb, all completed.
  void traffic(QueuePair& qa, QueuePair& qb) {
    ASSERT_TRUE(connect_qp(qa, 100, QpEndpoint{qb.qp_num(), 200, b_->gid()}));
    ASSERT_TRUE(connect_qp(qb, 200, QpEndpoint{qa.qp_num(), 100, a_->gid()}));
    const Sge r = b_->mr.sge(0, kMessageBytes);
    for (int i = 0; i < kMessages; ++i)
      ASSERT_TRUE(qb.post_recv(RecvWr{uint64_t(i), std::span<const Sge>(&r, 1)}));
    const Sge s = a_->mr.sge(0, kMessageBytes);
    for (int i = 0; i < kMessages; ++i)
      ASSERT_TRUE(qa.post_send(make_wr(i, WrOpcode::kSend, &s, 1)));
    ASSERT_EQ(wait_wcs(a_->cq, kMessages).size(), size_t(kMessages));
    ASSERT_EQ(wait_wcs(b_->cq, kMessages).size(), size_t(kMessages));
    // Both progress threads go idle and publish their final counters.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  TempDir registry_;
  TempDir stat_dir_;
  uint16_t port_ = 0;
  uint16_t metrics_port_ = 0;
  std::string capture_;
  std::unique_ptr<Side> a_;
  std::unique_ptr<Side> b_;
};

TEST_F(TelemetryTest, StatReadsTheCountersOfThisProcessExactly) {
  QueuePair qa = a_->make_qp(QpType::kRc);
  QueuePair qb = b_->make_qp(QpType::kRc);
  traffic(qa, qb);
  const Counters ca = *qa.counters();

  auto [status, out] = run("UROCE_STAT_DIR=" + stat_dir_.path() + " " + uroce_binary() +
                           " stat --json --pid " + std::to_string(getpid()));
  ASSERT_EQ(status, 0) << out;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j.size(), 2u);  // two devices in this process
  const nlohmann::json* qp = nullptr;
  for (const auto& dev : j) {
    EXPECT_EQ(dev["pid"], getpid());
    for (const auto& q : dev["qps"]) {
      if (q["qpn"] == qa.qp_num()) qp = &q;
    }
  }
  ASSERT_NE(qp, nullptr) << out;
  EXPECT_EQ((*qp)["state"], "RTS");
  EXPECT_EQ((*qp)["type"], "RC");
  EXPECT_EQ((*qp)["peer"], "127.0.0.1");
  EXPECT_EQ((*qp)["remote_qpn"], qb.qp_num());
  for (size_t i = 0; i < transport::kCounterCount; ++i) {
    EXPECT_EQ((*qp)["counters"][std::string(transport::kCounterNames[i])], ca.values[i])
        << transport::kCounterNames[i];
  }
  EXPECT_EQ((*qp)["counters"]["rdma_sends"], kMessages);
  EXPECT_GE((*qp)["rtt"]["count"].get<uint64_t>(), 1u);
  EXPECT_EQ((*qp)["counters"]["acks_rcvd"], ca[transport::Counter::kRcvdPkts]);

  auto [qst, qout] =
      run("UROCE_STAT_DIR=" + stat_dir_.path() + " " + uroce_binary() + " stat --qp " +
          std::to_string(qa.qp_num()) + " --pid " + std::to_string(getpid()));
  ASSERT_EQ(qst, 0);
  EXPECT_NE(qout.find(fmt::format("qp {} type RC state RTS peer 127.0.0.1 rqpn {} rtt avg",
                                  qa.qp_num(), qb.qp_num())),
            std::string::npos)
      << qout;
  EXPECT_NE(qout.find(fmt::format("rdma_sends {}", kMessages)), std::string::npos) << qout;
}

// A QP that runs DCQCN: its current rate reaches `uroce stat` (text and JSON) and /metrics
// through the segment, and the device's rx_discards is published (0: nothing overflowed).
TEST_F(TelemetryTest, DcqcnRateOfEachQpIsPublished) {
  auto dcqcn_qp = [](Side& side) {
    QpInitAttr init;
    init.qp_type = QpType::kRc;
    init.send_cq = side.cq.id();
    init.recv_cq = side.cq.id();
    init.cap = QpCap{256, 1024, 2, 2, 64};
    init.cc = transport::CcAlgorithm::kDcqcn;
    return std::move(side.pd.create_qp(init).value());
  };
  QueuePair qa = dcqcn_qp(*a_);
  QueuePair qb = b_->make_qp(QpType::kRc);
  traffic(qa, qb);
  const std::string env = "UROCE_STAT_DIR=" + stat_dir_.path() + " ";
  auto [st, out] = run(env + uroce_binary() + " stat --json --qp " + std::to_string(qa.qp_num()) +
                       " --pid " + std::to_string(getpid()));
  ASSERT_EQ(st, 0) << out;
  const auto j = nlohmann::json::parse(out);
  const nlohmann::json* qp = nullptr;
  for (const auto& dev : j) {
    for (const auto& q : dev["qps"]) qp = &q;
  }
  ASSERT_NE(qp, nullptr) << out;
  EXPECT_EQ((*qp)["cc"], (nlohmann::json{{"algorithm", "dcqcn"},
                                         {"rate_bps", 10'000'000'000ull},
                                         {"target_rate_bps", 10'000'000'000ull},
                                         {"alpha", 0}}));
  auto [tst, text] = run(env + uroce_binary() + " stat --qp " + std::to_string(qa.qp_num()) +
                         " --pid " + std::to_string(getpid()));
  ASSERT_EQ(tst, 0);
  EXPECT_NE(text.find("\n    cc dcqcn rate 10000.0 Mb/s target 10000.0 Mb/s alpha 0/1024\n"),
            std::string::npos)
      << text;
  auto [bst, other] = run(env + uroce_binary() + " stat --json --qp " +
                          std::to_string(qb.qp_num()) + " --pid " + std::to_string(getpid()));
  ASSERT_EQ(bst, 0);
  std::string plain_cc;
  for (const auto& dev : nlohmann::json::parse(other)) {
    for (const auto& q : dev["qps"]) plain_cc = q["cc"]["algorithm"];
  }
  EXPECT_EQ(plain_cc, "none");
  auto [ast, all] = run(env + uroce_binary() + " stat --json --pid " + std::to_string(getpid()));
  ASSERT_EQ(ast, 0);
  for (const auto& dev : nlohmann::json::parse(all)) EXPECT_EQ(dev["counters"]["rx_discards"], 0);

  httplib::Client http("127.0.0.1", metrics_port_);
  const auto res = http.Get("/metrics");
  ASSERT_TRUE(res) << "no answer from the exporter";
  EXPECT_NE(
      res->body.find(fmt::format("uroce_qp_cc_rate_bits_per_second{{device=\"uroce_lo\",qp=\"{}"
                                 "\",cc=\"dcqcn\"}} 10000000000\n",
                                 qa.qp_num())),
      std::string::npos)
      << res->body;
  EXPECT_EQ(res->body.find(fmt::format("qp=\"{}\",cc=", qb.qp_num())), std::string::npos);
}

// Runs `cmd` in the background, collecting its stdout line by line; `started` turns true once
// the first line arrived (for `uroce stat --watch`: the first reading was taken).
class Background {
 public:
  explicit Background(const std::string& cmd)
      : thread_([this, cmd] {
          FILE* p = popen(cmd.c_str(), "r");
          if (p == nullptr) return;
          char line[65536];
          while (fgets(line, sizeof line, p) != nullptr) {
            std::lock_guard lock(mu_);
            lines_.emplace_back(line);
            started_ = true;
          }
          status_ = pclose(p);
        }) {}
  ~Background() {
    if (thread_.joinable()) thread_.join();
  }
  bool wait_started(std::chrono::seconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (started_.load()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  std::vector<std::string> finish() {
    thread_.join();
    return lines_;
  }
  int status() const { return status_; }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
  std::atomic<bool> started_{false};
  int status_ = -1;
  std::thread thread_;
};

// `uroce stat --watch`: each refresh opens with a timestamp, names the program of the
// process, and the second one shows per-second rates of what moved in between (text:
// "(+N/s)"; JSON: exactly the change over the interval between the two publications).
TEST_F(TelemetryTest, StatWatchShowsTimestampsRatesAndTheProgram) {
  QueuePair qa = a_->make_qp(QpType::kRc);
  QueuePair qb = b_->make_qp(QpType::kRc);
  const std::string env = "UROCE_STAT_DIR=" + stat_dir_.path() + " ";
  const std::string pid = std::to_string(getpid());
  Background text(env + uroce_binary() + " stat --watch 1 --iterations 2 --pid " + pid);
  Background json(env + uroce_binary() + " stat --json --watch 1 --iterations 2 --pid " + pid);
  ASSERT_TRUE(text.wait_started(std::chrono::seconds(10)));
  ASSERT_TRUE(json.wait_started(std::chrono::seconds(10)));
  traffic(qa, qb);  // between the first reading and the second (1 s later)
  const std::vector<std::string> lines = text.finish();
  const std::vector<std::string> jlines = json.finish();
  EXPECT_EQ(text.status(), 0);
  EXPECT_EQ(json.status(), 0);

  // Text: two refreshes, each opened by its timestamp.
  static const std::regex kHeader(
      R"(--- \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} [+-]\d{4} ---\n)");
  std::vector<std::string> refreshes;
  for (const std::string& l : lines) {
    if (std::regex_match(l, kHeader)) {
      refreshes.emplace_back();
    } else if (!refreshes.empty()) {
      refreshes.back() += l;
    }
  }
  ASSERT_EQ(refreshes.size(), 2u) << fmt::format("{}", fmt::join(lines, ""));
  EXPECT_EQ(lines[0].substr(0, 4), "--- ");
  EXPECT_NE(refreshes[1].find(" pid " + pid + " (telemetry_stat_test)\n"), std::string::npos)
      << refreshes[1];
  EXPECT_EQ(refreshes[0].find("/s)"), std::string::npos) << refreshes[0];
  EXPECT_TRUE(std::regex_search(refreshes[1], std::regex(R"(sent_pkts \d+ \(\+\d+/s\))")))
      << refreshes[1];
  // Counters that are 0 are hidden (this loopback pair has no bad P_Keys).
  EXPECT_EQ(refreshes[1].find("drop_bad_pkey"), std::string::npos) << refreshes[1];

  // JSON: one array per refresh; the rate is the change over the publication interval.
  ASSERT_EQ(jlines.size(), 2u);
  const auto first = nlohmann::json::parse(jlines[0]);
  const auto second = nlohmann::json::parse(jlines[1]);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_FALSE(first[0].contains("rates"));
  double moved = 0;
  for (size_t d = 0; d < 2; ++d) {
    EXPECT_EQ(second[d]["program"], "telemetry_stat_test");
    EXPECT_GT(second[d]["read_unix_ns"].get<uint64_t>(), first[d]["read_unix_ns"].get<uint64_t>());
    const double interval = static_cast<double>(second[d]["published_unix_ns"].get<uint64_t>() -
                                                first[d]["published_unix_ns"].get<uint64_t>()) /
                            1e9;
    ASSERT_GT(interval, 0) << second[d].dump();
    EXPECT_EQ(second[d]["interval_s"].get<double>(), interval);
    const uint64_t before = first[d]["counters"]["sent_pkts"].get<uint64_t>();
    const uint64_t after = second[d]["counters"]["sent_pkts"].get<uint64_t>();
    EXPECT_EQ(second[d]["rates"]["sent_pkts"].get<double>(),
              static_cast<double>(after - before) / interval);
    moved += static_cast<double>(after - before);
  }
  EXPECT_GE(moved, 2.0 * kMessages);  // every SEND and its ACK, on one device or the other
}

TEST_F(TelemetryTest, StatAllShowsTheZeroCountersToo) {
  QueuePair qa = a_->make_qp(QpType::kRc);
  QueuePair qb = b_->make_qp(QpType::kRc);
  traffic(qa, qb);
  const std::string cmd = "UROCE_STAT_DIR=" + stat_dir_.path() + " " + uroce_binary() +
                          " stat --pid " + std::to_string(getpid());
  auto [st, out] = run(cmd);
  ASSERT_EQ(st, 0) << out;
  auto [ast, all] = run(cmd + " --all");
  ASSERT_EQ(ast, 0) << all;
  EXPECT_EQ(out.find("drop_bad_pkey"), std::string::npos) << out;
  EXPECT_NE(all.find(" drop_bad_pkey 0"), std::string::npos) << all;
  EXPECT_NE(out.find(fmt::format("rdma_sends {}", kMessages)), std::string::npos) << out;
}

TEST_F(TelemetryTest, PrometheusEndpointPassesPromtoolAndIsScraped) {
  QueuePair qa = a_->make_qp(QpType::kRc);
  QueuePair qb = b_->make_qp(QpType::kRc);
  traffic(qa, qb);

  httplib::Client http("127.0.0.1", metrics_port_);
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res) << "no answer on " << metrics_port_;
  ASSERT_EQ(res->status, 200);
  const Counters da = a_->dev.counters();
  const std::string& page = res->body;
  EXPECT_NE(page.find(fmt::format("uroce_sent_pkts_total{{device=\"uroce_lo\"}} {}\n",
                                  da[transport::Counter::kSentPkts])),
            std::string::npos);
  EXPECT_NE(page.find(fmt::format("uroce_qp_rdma_sends_total{{device=\"uroce_lo\",qp=\"{}\"}} {}\n",
                                  qa.qp_num(), kMessages)),
            std::string::npos);
  EXPECT_NE(page.find(fmt::format("uroce_qp_rtt_seconds_count{{device=\"uroce_lo\",qp=\"{}\"}}",
                                  qa.qp_num())),
            std::string::npos);

  if (std::filesystem::exists("/usr/bin/promtool")) {
    std::ofstream(stat_dir_.path() + "/metrics.txt") << page;
    auto [st, out] =
        run("/usr/bin/promtool check metrics < " + stat_dir_.path() + "/metrics.txt 2>&1");
    EXPECT_EQ(st, 0) << out;
    EXPECT_EQ(out, "");
  }

  if (!std::filesystem::exists("/usr/bin/prometheus")) GTEST_SKIP() << "prometheus not installed";
  const uint16_t prom_port = test::reserve_port();
  const std::string cfg = stat_dir_.path() + "/prometheus.yml";
  std::ofstream(cfg) << "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: uroce\n"
                        "    static_configs:\n      - targets: ['127.0.0.1:"
                     << metrics_port_ << "']\n";
  const pid_t prom = fork();
  if (prom == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    const std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(prom_port);
    const std::string tsdb = "--storage.tsdb.path=" + stat_dir_.path() + "/tsdb";
    const std::string config = "--config.file=" + cfg;
    execl("/usr/bin/prometheus", "prometheus", config.c_str(), tsdb.c_str(), listen.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  httplib::Client api("127.0.0.1", prom_port);
  const std::string query =
      "/api/v1/query?query=uroce_sent_pkts_total%7Bdevice%3D%22uroce_lo%22%7D";
  std::string value;
  for (int i = 0; i < 60 && value.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto r = api.Get(query.c_str());
    if (!r || r->status != 200) continue;
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    if (j.is_discarded() || j["data"]["result"].empty()) continue;
    value = j["data"]["result"][0]["value"][1].get<std::string>();
  }
  kill(prom, SIGTERM);
  int st = 0;
  waitpid(prom, &st, 0);
  EXPECT_EQ(value, std::to_string(da[transport::Counter::kSentPkts]));
}

TEST_F(TelemetryTest, CaptureHoldsEveryPacketAndAnalyzes) {
  QueuePair qa = a_->make_qp(QpType::kRc);
  QueuePair qb = b_->make_qp(QpType::kRc);
  traffic(qa, qb);
  const Counters ca = a_->dev.counters();
  const Counters cb = b_->dev.counters();
  a_.reset();  // closes the devices: the capture is flushed and closed
  b_.reset();

  wire::PcapReader reader;
  ASSERT_TRUE(reader.open(capture_)) << reader.error();
  wire::CapturedFrame f;
  uint64_t frames = 0, verified = 0;
  while (reader.next(f)) {
    ++frames;
    // The frames carry the devices' real UDP port; their ICRC is computed as for 4791
    // (src/net/udp_device.hpp), so check it on a copy that says 4791 (IPv4: UDP at 20).
    wire::RoceFrame rf;
    rf.roce_port = port_;
    if (wire::decap_frame(reader.link_type(), f.bytes, rf) != wire::FrameError::kOk) continue;
    EXPECT_EQ(rf.ip.dport, port_);
    std::vector<uint8_t> as_4791(rf.ip_datagram.begin(), rf.ip_datagram.end());
    as_4791[22] = 4791 >> 8;
    as_4791[23] = 4791 & 0xff;
    if (wire::verify_icrc_ip_datagram(as_4791)) ++verified;
  }
  // Each packet once as sent and once as received (both devices are in this process).
  const uint64_t sent = ca[transport::Counter::kSentPkts] + cb[transport::Counter::kSentPkts];
  const uint64_t rcvd = ca[transport::Counter::kRcvdPkts] + cb[transport::Counter::kRcvdPkts];
  EXPECT_EQ(frames, sent + rcvd);
  EXPECT_EQ(verified, frames);

  auto [st, out] = run(uroce_binary() + " dump --analyze --json --port " + std::to_string(port_) +
                       " " + capture_);
  ASSERT_EQ(st, 0) << out;
  const auto j = nlohmann::json::parse(out);
  uint64_t messages = 0, retrans = 0;
  for (const auto& c : j["connections"]) {
    messages += c["messages"].get<uint64_t>();
    retrans += c["retransmitted_packets"].get<uint64_t>();
  }
  // Every packet is in the file twice (sent by one device, received by the other): the
  // analysis counts each once and says so.
  EXPECT_EQ(messages, uint64_t{kMessages});
  EXPECT_EQ(retrans, 0u);
  EXPECT_EQ(j["connections"].size(), 1u);
  EXPECT_EQ(j["connections"][0]["duplicate_copies"].get<uint64_t>() +
                j["connections"][0]["request_packets"].get<uint64_t>() +
                j["connections"][0]["acks"].get<uint64_t>(),
            frames);
}

TEST_F(TelemetryTest, RetryExceededIsExplainedInTheLogAndInStat) {
  QueuePair qa = a_->make_qp(QpType::kRc);
  ConnectOptions opt;
  opt.timeout = 1;  // 8 us, rounded up to the engine's minimum ACK timeout
  opt.retry_cnt = 1;
  // QP 0x3fffff exists nowhere: every request is dropped (drop_bad_qpn), nothing answers.
  ASSERT_TRUE(connect_qp(qa, 1, QpEndpoint{0x3fffff, 1, b_->gid()}, opt));
  const std::string log = stat_dir_.path() + "/stderr.txt";
  fflush(stderr);
  const int saved = dup(2);
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(fd, 2);
  const Sge s = a_->mr.sge(0, 64);
  ASSERT_TRUE(qa.post_send(make_wr(1, WrOpcode::kSend, &s, 1)));
  auto wcs = wait_wcs(a_->cq, 1, std::chrono::seconds(20));
  fflush(stderr);
  dup2(saved, 2);
  close(fd);
  close(saved);
  ASSERT_EQ(wcs.size(), 1u);
  ASSERT_EQ(wcs[0].status, WcStatus::kRetryExcErr);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));

  std::ifstream in(log);
  std::string logged((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string why =
      "retry_exceeded_err=1 with 0 packets received from 127.0.0.1: peer unreachable or UDP 4791 "
      "blocked — run uroce doctor --peer 127.0.0.1";
  // The log line carries the stall diagnosis (telemetry/explain.hpp explain_stall), which
  // names the device's real UDP port; `uroce stat` only has the snapshot's counters.
  EXPECT_EQ(logged,
            fmt::format("uroce: uroce_lo QP {}: IBV_WC_RETRY_EXC_ERR (12): retry_exceeded_err=1: "
                        "nothing at all came back from 127.0.0.1: UDP {} is dropped on the way (a "
                        "firewall: nft list ruleset | grep {}), the peer uses another UDP port, "
                        "or there is no route — run uroce doctor --peer 127.0.0.1\n",
                        qa.qp_num(), port_, port_));

  auto [st, out] = run("UROCE_STAT_DIR=" + stat_dir_.path() + " " + uroce_binary() + " stat --qp " +
                       std::to_string(qa.qp_num()));
  ASSERT_EQ(st, 0) << out;
  EXPECT_NE(out.find("state ERR"), std::string::npos) << out;
  EXPECT_NE(out.find("    error IBV_WC_RETRY_EXC_ERR (12): " + why + "\n"), std::string::npos)
      << out;
}

TEST(TelemetryStatTest, NoProcessIsAnErrorWithAReason) {
  TempDir empty;
  auto [st, out] = run("UROCE_STAT_DIR=" + empty.path() + " " + uroce_binary() + " stat 2>&1");
  EXPECT_EQ(st, 1);
  EXPECT_EQ(
      out, "uroce stat: no running uroce process of this network namespace publishes counters in " +
               empty.path() + "\n");
}

}  // namespace
}  // namespace uroce::itest
