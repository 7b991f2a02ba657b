// bench/baselines/xdp_pair, the AF_XDP baseline docs/performance.md compares uroce's UDP path
// with, between two namespaces joined by a veth pair: every frame sent arrives whole (its
// length and its one-byte pattern checked), and the ping-pong loses nothing. Root only; the
// figures it prints are for bench/xdp-vs-udp, not asserted here.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "netns_pair.hpp"
#include "shell_run.hpp"

namespace uroce::ibtest {
namespace {

using namespace std::chrono_literals;

const std::string kXdpPair = std::string(UROCE_BINARY_DIR) + "/bin/xdp_pair";

// The last JSON line of `out` whose "role" is `role` and that is not the ready line.
nlohmann::json result_line(const std::string& out, const std::string& role) {
  nlohmann::json found;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("role", "") == role && !j.contains("ready")) found = j;
  }
  return found;
}

bool wait_ready(Process& p) {
  for (auto waited = 0ms; waited < 5000ms; waited += 20ms) {
    if (p.read_output().find("\"ready\":true") != std::string::npos) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

class XdpPair : public ::testing::Test {
 protected:
  void SetUp() override {
    const int probe = socket(AF_XDP, SOCK_RAW, 0);
    if (probe < 0 && errno == EAFNOSUPPORT) GTEST_SKIP() << "this kernel has no AF_XDP sockets";
    if (probe >= 0) close(probe);
    if (const std::string skip = hosts_.create("xp", 96); !skip.empty()) GTEST_SKIP() << skip;
    // veth takes an XDP program without multi-buffer support up to an MTU of about 3.5 KiB.
    ASSERT_EQ(sh("ip -n " + hosts_.ns_a + " link set " + hosts_.va + " mtu 3000"), 0);
    ASSERT_EQ(sh("ip -n " + hosts_.ns_b + " link set " + hosts_.vb + " mtu 3000"), 0);
    mac_a_ = mac_of(hosts_.ns_a, hosts_.va);
    mac_b_ = mac_of(hosts_.ns_b, hosts_.vb);
    ASSERT_EQ(mac_a_.size(), 17u);
    ASSERT_EQ(mac_b_.size(), 17u);
  }

  static std::string mac_of(const std::string& ns, const std::string& dev) {
    auto [status, out] =
        test::run_shell("ip -n " + ns + " -br link show " + dev + " | awk '{print $3}'");
    EXPECT_EQ(status, 0);
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  }

  // xdp_pair `mode` on A's side addressed to B (a_to_b), or on B's addressed to A (b_to_a),
  // then `more`.
  [[nodiscard]] std::vector<std::string> a_to_b(const std::string& mode,
                                                std::vector<std::string> more) const {
    return flow(hosts_.ns_a, mode, hosts_.va, mac_b_, hosts_.addr_a, hosts_.addr_b,
                std::move(more));
  }
  [[nodiscard]] std::vector<std::string> b_to_a(const std::string& mode,
                                                std::vector<std::string> more) const {
    return flow(hosts_.ns_b, mode, hosts_.vb, mac_a_, hosts_.addr_b, hosts_.addr_a,
                std::move(more));
  }

  NetnsPair hosts_;
  std::string mac_a_, mac_b_;

 private:
  static std::vector<std::string> flow(const std::string& ns, const std::string& mode,
                                       const std::string& dev, const std::string& dst_mac,
                                       const std::string& src, const std::string& dst,
                                       std::vector<std::string> more) {
    std::vector<std::string> argv = {kXdpPair, mode,    "--dev", dev,     "--dst-mac",
                                     dst_mac,  "--src", src,     "--dst", dst};
    argv.insert(argv.end(), more.begin(), more.end());
    return NetnsPair::in(ns, argv);
  }
};

TEST_F(XdpPair, EveryFrameSentArrivesWhole) {
  Process receiver(NetnsPair::in(hosts_.ns_b, {kXdpPair, "receive", "--dev", hosts_.vb, "--seconds",
                                               "1", "--verify", "2064", "--place"}),
                   hosts_.env_b);
  ASSERT_TRUE(wait_ready(receiver)) << receiver.read_output();
  Process sender(a_to_b("send", {"--size", "2064", "--seconds", "1"}), hosts_.env_a);
  const ProcResult sent = sender.wait(20s);
  ASSERT_EQ(sent.exit_code, 0) << sent.output;
  const ProcResult got = receiver.wait(20s);
  ASSERT_EQ(got.exit_code, 0) << got.output;
  const nlohmann::json tx = result_line(sent.output, "xdp_sender");
  const nlohmann::json rx = result_line(got.output, "xdp_receiver");
  ASSERT_TRUE(tx.is_object()) << sent.output;
  ASSERT_TRUE(rx.is_object()) << got.output;
  EXPECT_EQ(rx.at("bad").get<uint64_t>(), 0u);
  EXPECT_GT(rx.at("frames").get<uint64_t>(), 1000u);
  // The receiver stops counting a second after its first frame, the sender a second after its
  // start (and counts the frames the kernel completed): the receiver may miss the last few.
  EXPECT_LE(rx.at("frames").get<uint64_t>(), tx.at("frames").get<uint64_t>());
  EXPECT_EQ(rx.at("bytes").get<uint64_t>(), rx.at("frames").get<uint64_t>() * 2064);
}

TEST_F(XdpPair, PingPongLosesNothing) {
  Process server(b_to_a("ping-pong", {"--server", "--size", "14", "--seconds", "1"}), hosts_.env_b);
  ASSERT_TRUE(wait_ready(server)) << server.read_output();
  Process client(a_to_b("ping-pong", {"--size", "14", "--seconds", "1"}), hosts_.env_a);
  const ProcResult r = client.wait(20s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = result_line(r.output, "xdp_ping_pong");
  ASSERT_TRUE(j.is_object()) << r.output;
  EXPECT_EQ(j.at("lost").get<uint64_t>(), 0u);
  EXPECT_GT(j.at("round_trips").get<uint64_t>(), 100u);
  EXPECT_GT(j.at("median_us").get<double>(), 0.0);
  EXPECT_GE(j.at("p99_us").get<double>(), j.at("median_us").get<double>());
  server.kill_group();
}

TEST_F(XdpPair, AMistypedMacIsRefusedWithTheFormItWants) {
  Process sender(NetnsPair::in(hosts_.ns_a, {kXdpPair, "send", "--dev", hosts_.va, "--dst-mac",
                                             "02:00:00:00:00", "--seconds", "1"}),
                 hosts_.env_a);
  const ProcResult r = sender.wait(20s);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--dst-mac wants aa:bb:cc:dd:ee:ff"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace uroce::ibtest
