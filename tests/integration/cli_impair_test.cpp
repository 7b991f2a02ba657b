// `uroce perf --impair` with two real processes on loopback: a 5 % loss run still verifies
// every byte and its capture shows the retransmissions; a 2 ms delay on each side raises
// write_lat's typical latency by 2 ms; CE marks with DCQCN on make the server send CNPs; a
// malformed spec is a usage error (exit 2, one line) on perf and pingpong alike.
#include <gtest/gtest.h>
#include <signal.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cli_process.hpp"

namespace uroce::test {
namespace {

using std::chrono::seconds;

struct PerfRun {
  int client_rc = -1;
  int server_rc = -1;
  std::string client_out;
  std::string client_err;
  std::string server_err;
};

PerfRun perf(const std::string& test, const std::vector<std::string>& server_extra,
             const std::vector<std::string>& client_extra, uint16_t udp) {
  const uint16_t tcp = next_port();
  std::vector<std::string> server = {"perf", test, "-p", std::to_string(tcp), "--timeout", "60"};
  server.insert(server.end(), server_extra.begin(), server_extra.end());
  std::vector<std::string> client = {"perf",      test, "127.0.0.1", "-p", std::to_string(tcp),
                                     "--timeout", "60"};
  client.insert(client.end(), client_extra.begin(), client_extra.end());
  Process srv(server, udp);
  Process cli(client, udp);
  PerfRun r;
  r.client_rc = cli.wait(seconds(120));
  r.server_rc = srv.wait(seconds(30));
  r.client_out = cli.out();
  r.client_err = cli.err();
  r.server_err = srv.err();
  return r;
}

// `uroce dump --analyze --json` of a capture taken on UDP port `udp`.
nlohmann::json analyze(const std::string& pcap, uint16_t udp) {
  const std::string cmd =
      uroce_binary() + " dump --analyze --json --port " + std::to_string(udp) + " " + pcap;
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p != nullptr && !feof(p)) {
    const size_t n = fread(buf, 1, sizeof buf, p);
    out.append(buf, n);
  }
  if (p != nullptr) pclose(p);
  return nlohmann::json::parse(out, nullptr, false);
}

// Waits until `uroce stat` shows process `pid`'s bottleneck queue (--impair rate=) has held
// at least `bytes` (impair_queue_max_bytes).
bool wait_for_queued_bytes(pid_t pid, uint64_t bytes, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  const std::string cmd = uroce_binary() + " stat --json --pid " + std::to_string(pid);
  while (std::chrono::steady_clock::now() < end) {
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    while (p != nullptr && !feof(p)) out.append(buf, fread(buf, 1, sizeof buf, p));
    if (p != nullptr) pclose(p);
    const auto j = nlohmann::json::parse(out, nullptr, false);
    if (j.is_array() && !j.empty() && j[0].contains("counters") &&
        j[0]["counters"].value("impair_queue_max_bytes", uint64_t{0}) >= bytes) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

class CliImpair : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/uroce-impair-it-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    unsetenv("UROCE_CC");
    unsetenv("UROCE_DCQCN");
  }
  std::string dir_;
};

TEST_F(CliImpair, WriteBwUnderFivePercentLossVerifiesAndRetransmits) {
  const uint16_t udp = next_port();
  const std::string pcap = dir_ + "/client.pcap";
  const PerfRun r = perf(
      "write_bw", {},
      {"-s", "65536", "-n", "100", "--verify", "--impair", "loss=5%,seed=1", "--capture", pcap},
      udp);
  ASSERT_EQ(r.client_rc, 0) << r.client_out << r.client_err;
  ASSERT_EQ(r.server_rc, 0) << r.server_err;
  EXPECT_NE(r.client_out.find("Data verification passed: 6553600 bytes checked"), std::string::npos)
      << r.client_out;
  EXPECT_EQ(r.client_err, "");
  // The capture holds what the engine sent, the dropped packets too: resent PSNs show.
  const auto a = analyze(pcap, udp);
  ASSERT_TRUE(a.is_object());
  ASSERT_GE(a["connections"].size(), 1u);
  uint64_t retransmitted = 0;
  for (const auto& c : a["connections"])
    retransmitted += c["retransmitted_packets"].get<uint64_t>();
  EXPECT_GT(retransmitted, 0u);
}

// A healthy but slow path: -Q 512 asks for one completion per 512 messages, here 32 MiB
// through a 20 Mbit/s bottleneck (about 14 s), longer than perf's 10 s stall limit. The
// engine's 128 unacknowledged PSNs keep the queue (and the round trip, ~55 ms) under the QP's
// 67 ms ACK timeout, so nothing is lost or resent: ACKs keep moving the QP's acknowledged
// PSN, and the run is not a stall.
TEST_F(CliImpair, ASlowPathWithSparseCompletionsIsNotAStall) {
  const PerfRun r = perf("write_bw", {},
                         {"-s", "65536", "-n", "512", "-t", "512", "-Q", "512", "--json",
                          "--impair", "rate=20mbit,queue=4MB"},
                         next_port());
  ASSERT_EQ(r.client_rc, 0) << r.client_out << r.client_err;
  ASSERT_EQ(r.server_rc, 0) << r.server_err;
  const auto j = nlohmann::json::parse(r.client_out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.client_out;
  EXPECT_TRUE(j.value("ok", false)) << r.client_out;
  EXPECT_EQ(j["results"][0].value("iterations", 0ull), 512u) << r.client_out;
  // 20 Mbit/s is 2.38 MiB/s of frames; 1024 of each ~1082 bytes are payload (2.25 MiB/s).
  const double mb = j["results"][0].value("bw_average", 0.0);
  EXPECT_GT(mb, 1.5) << r.client_out;
  EXPECT_LT(mb, 2.4) << r.client_out;
}

// The same slow path with the server stopped for 150 ms (SIGSTOP: a descheduled process). The
// client's bottleneck queue (--impair runs in the client) holds about 210 ms of 4 KiB packets,
// longer than the QP's 67 ms ACK timeout, which fires while no ACK comes. Resending the whole
// window into that queue (128 packets, 210 ms more of it) would hold back the next ACK
// progress past the timeout again once the server resumes, and again: before the timeout's
// probe, a pause like this (of the client) cost 15 644 resent packets and ran at 0.29 MB/s.
// Now each timeout resends one packet, and the first response (ACKs of originals, beyond
// it) resumes the transfer.
TEST_F(CliImpair, APauseOnASlowPathResendsOnePacketPerTimeoutNotAWindow) {
  const uint16_t tcp = next_port();
  const uint16_t udp = next_port();
  Process srv({"perf", "write_bw", "-p", std::to_string(tcp), "--timeout", "120"}, udp);
  Process cli(
      {"perf", "write_bw", "127.0.0.1", "-p", std::to_string(tcp), "-s", "65536", "-n", "128", "-t",
       "128", "-Q", "128", "--json", "--impair", "rate=20mbit,queue=4MB", "--timeout", "120"},
      udp);
  // A full window waits in the bottleneck (128 x 4 KiB; `uroce stat` of the client, which
  // may take a while to start under a sanitizer) before the pause.
  ASSERT_TRUE(wait_for_queued_bytes(cli.pid(), 500'000, seconds(60))) << cli.err();
  kill(srv.pid(), SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  kill(srv.pid(), SIGCONT);
  ASSERT_EQ(cli.wait(seconds(150)), 0) << cli.out() << cli.err();
  ASSERT_EQ(srv.wait(seconds(30)), 0) << srv.err();
  const auto j = nlohmann::json::parse(cli.out(), nullptr, false);
  ASSERT_TRUE(j.is_object()) << cli.out();
  EXPECT_EQ(j["results"][0].value("iterations", 0ull), 128u) << cli.out();
  const auto& c = j["local"]["counters"];
  const uint64_t timeouts = c["local_ack_timeout_err"].get<uint64_t>();
  EXPECT_GE(timeouts, 1u) << "no ACK timeout in the server's pause: " << c.dump();
  // One packet per timeout (a second timeout in the pause probes again), and the response
  // after the pause showed the originals arriving.
  EXPECT_EQ(c["retransmitted_pkts"].get<uint64_t>(), timeouts) << c.dump();
  EXPECT_GE(c["timeout_spurious"].get<uint64_t>(), 1u) << c.dump();
  EXPECT_LE(c["timeout_spurious"].get<uint64_t>(), timeouts) << c.dump();
  EXPECT_EQ(c["sent_pkts"].get<uint64_t>(), 128u * 16u + timeouts) << c.dump();
}

double typical_usec(const PerfRun& r) {
  const auto j = nlohmann::json::parse(r.client_out, nullptr, false);
  if (!j.is_object() || !j.contains("results") || j["results"].empty()) return -1;
  return j["results"][0]["t_typical_usec"].get<double>();
}

TEST_F(CliImpair, TwoMillisecondsEachWayRaiseWriteLatByTwoMilliseconds) {
  const std::vector<std::string> lat = {"-s", "64", "-n", "200", "--json"};
  std::vector<std::string> delayed_client = lat;
  delayed_client.insert(delayed_client.end(), {"--impair", "delay=2ms"});
  // perftest's latency is half the round trip, and each side holds what it sends 2 ms: the
  // delayed run can never be under 2000 us. Load on a shared machine only ever adds time, so
  // the upper bound (no more than 3 ms added) gets three tries of the pair of runs.
  std::string seen;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const PerfRun plain = perf("write_lat", {}, lat, next_port());
    ASSERT_EQ(plain.client_rc, 0) << plain.client_err;
    const PerfRun delayed =
        perf("write_lat", {"--impair", "delay=2ms"}, delayed_client, next_port());
    ASSERT_EQ(delayed.client_rc, 0) << delayed.client_err;
    ASSERT_EQ(delayed.server_rc, 0) << delayed.server_err;
    const double base = typical_usec(plain);
    const double with_delay = typical_usec(delayed);
    ASSERT_GT(base, 0.0) << plain.client_out;
    ASSERT_GE(with_delay, 2000.0) << base << " -> " << with_delay;
    if (with_delay - base < 3000.0) return;
    seen += std::to_string(base) + " -> " + std::to_string(with_delay) + "; ";
  }
  ADD_FAILURE() << "2 ms each way added 3 ms or more to write_lat in three tries: " << seen;
}

TEST_F(CliImpair, CeMarksWithDcqcnMakeTheServerSendCnps) {
  setenv("UROCE_CC", "dcqcn", 1);  // both processes inherit it
  setenv("UROCE_DCQCN", "rpg_min_rate=2000", 1);
  const uint16_t udp = next_port();
  const std::string pcap = dir_ + "/server.pcap";
  const PerfRun r = perf("write_bw", {"--capture", pcap},
                         {"-s", "65536", "-n", "50", "--verify", "--impair", "ce=100%"}, udp);
  ASSERT_EQ(r.client_rc, 0) << r.client_out << r.client_err;
  ASSERT_EQ(r.server_rc, 0) << r.server_err;
  const auto a = analyze(pcap, udp);
  ASSERT_TRUE(a.is_object());
  uint64_t cnps = 0;
  for (const auto& c : a["connections"]) cnps += c["cnps"].get<uint64_t>();
  EXPECT_GT(cnps, 0u);
}

TEST_F(CliImpair, AMalformedSpecIsAUsageError) {
  for (const char* cmd : {"perf", "pingpong"}) {
    std::vector<std::string> args = {cmd};
    if (std::string(cmd) == "perf") args.emplace_back("write_bw");
    args.insert(args.end(), {"--impair", "loss=5"});
    Process p(args, next_port());
    EXPECT_EQ(p.wait(seconds(20)), 2) << cmd;
    EXPECT_EQ(p.err(), std::string("uroce ") + cmd +
                           ": --impair: loss: '5' is not a percentage; write loss=P% with P from 0 "
                           "to 100 and at most 7 decimals (e.g. loss=2%); run 'uroce " +
                           cmd + " --help' for usage\n");
    EXPECT_EQ(p.out(), "");
  }
  // The bottleneck keys are checked together: RED needs its three keys.
  Process p({"perf", "write_bw", "--impair", "rate=1gbit,kmin=20KB,kmax=100KB"}, next_port());
  EXPECT_EQ(p.wait(seconds(20)), 2);
  EXPECT_EQ(p.err(),
            "uroce perf: --impair: pmax is missing: RED/ECN marking needs kmin, kmax and pmax "
            "together (e.g. kmin=20KB,kmax=100KB,pmax=0.2); run 'uroce perf --help' for usage\n");
}

}  // namespace
}  // namespace uroce::test
