// The smaller failures a user hits with `uroce perf` / `uroce pingpong`, on loopback with real
// processes (cli_process.hpp): a refused side channel is reported at once (and retried only
// within --timeout), a metrics port in use is an error and :0 prints the port it got, and
// --capture records the UDP port really used, which `uroce dump --port` decodes.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "cli_process.hpp"
#include "shell_run.hpp"

namespace uroce::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A TCP port nothing listens on: bound, then closed.
uint16_t closed_tcp_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  (void)bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  (void)getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

bool wait_for(const Process& p, const std::string& text, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (p.err().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

std::pair<int, std::string> run(const std::string& cmd) {
  return uroce::test::run_shell(cmd + " 2>&1");
}

TEST(CliFailure, RefusedConnectionIsReportedAtOnceWithItsCause) {
  const uint16_t tcp = closed_tcp_port();
  for (const char* cmd : {"perf", "pingpong"}) {
    std::vector<std::string> args = {cmd};
    if (std::string(cmd) == "perf") args.push_back("write_bw");
    args.insert(args.end(), {"127.0.0.1", "-p", std::to_string(tcp)});
    const auto t0 = Clock::now();
    Process cli(args, next_port());
    EXPECT_EQ(cli.wait(10s), 1) << cli.err();
    EXPECT_LT(Clock::now() - t0, 2s) << cmd;
    EXPECT_EQ(cli.err(), "uroce " + std::string(cmd) + ": connection refused by 127.0.0.1:" +
                             std::to_string(tcp) + ": is the server running?\n");
  }
}

// A variable the device would refuse is named before the wait for a peer (none comes), as
// client and as server; so is a CPU outside the process's affinity (taskset -c 0 here).
TEST(CliFailure, ABadEnvironmentIsNamedBeforeWaitingForAPeer) {
  const uint16_t tcp = closed_tcp_port();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"abc",
       "UROCE_PROGRESS_CPUS=abc is not a CPU list (CPU numbers 0 .. 1023 and ranges, like "
       "2 or 0-3,6)"},
      {"1",
       "UROCE_PROGRESS_CPUS: CPU 1 is not one this process may run on (0); name CPUs from "
       "that list, or widen the process's affinity (taskset)"}};
  for (const auto& [value, message] : cases) {
    for (const char* cmd : {"perf", "pingpong"}) {
      for (const bool client : {true, false}) {
        SCOPED_TRACE(std::string(cmd) + (client ? " client " : " server ") + value);
        std::vector<std::string> args = {cmd};
        if (std::string(cmd) == "perf") args.push_back("write_bw");
        if (client) args.push_back("127.0.0.1");
        args.insert(args.end(), {"-p", std::to_string(tcp), "--timeout", "20"});
        const auto t0 = Clock::now();
        Process p(args, next_port(), [&value] {
          setenv("UROCE_PROGRESS_CPUS", value.c_str(), 1);
          cpu_set_t one;
          CPU_ZERO(&one);
          CPU_SET(0, &one);
          (void)sched_setaffinity(0, sizeof one, &one);
        });
        EXPECT_EQ(p.wait(30s), 1) << p.err();
        EXPECT_LT(Clock::now() - t0, 5s) << "it waited for a peer";
        EXPECT_EQ(p.err(), "uroce " + std::string(cmd) + ": " + message + "\n");
      }
    }
  }
}

// A GID index the device lacks is named before the wait for a peer (none comes): on the named
// device; without -d on the device of the route to the host (loopback's here), and for a
// server when no device of the host has that many GIDs.
TEST(CliFailure, AGidIndexTheDeviceLacksIsNamedBeforeWaitingForAPeer) {
  const uint16_t tcp = closed_tcp_port();
  for (const char* cmd : {"perf", "pingpong"}) {
    const std::string gid_flag = std::string(cmd) == "perf" ? "-x" : "-g";
    for (const int where : {0, 1, 2}) {  // client without -d, client with -d, server
      SCOPED_TRACE(std::string(cmd) + " case " + std::to_string(where));
      std::vector<std::string> args = {cmd};
      if (std::string(cmd) == "perf") args.push_back("write_bw");
      if (where != 2) args.push_back("127.0.0.1");
      if (where == 1) args.insert(args.end(), {"-d", "uroce_lo"});
      args.insert(args.end(), {gid_flag, "200", "-p", std::to_string(tcp), "--timeout", "20"});
      const auto t0 = Clock::now();
      Process p(args, next_port());
      EXPECT_EQ(p.wait(30s), 1) << p.err();
      EXPECT_LT(Clock::now() - t0, 5s) << "it waited for a peer";
      const std::string head =
          "uroce " + std::string(cmd) + ": can't read sgid of index 200 on port 1: ";
      const std::string why[] = {
          "uroce_lo, the device of this host's route to 127.0.0.1, has GID indexes 0 to ",
          "GID index beyond the GID table (uroce_lo has GID indexes 0 to ",
          "no device of this host has that many GIDs (the most: "};
      EXPECT_EQ(p.err().rfind(head + why[where], 0), 0u) << p.err();
      EXPECT_EQ(p.err().find("connection refused"), std::string::npos) << p.err();
    }
  }
}

TEST(CliFailure, RefusedConnectionIsRetriedQuietlyWithinTimeout) {
  const uint16_t tcp = next_port();
  const uint16_t udp = next_port();
  Process cli(
      {"perf", "write_bw", "127.0.0.1", "-p", std::to_string(tcp), "-n", "20", "--timeout", "30"},
      udp);
  std::this_thread::sleep_for(1500ms);
  Process srv({"perf", "write_bw", "-p", std::to_string(tcp), "--timeout", "30"}, udp);
  EXPECT_EQ(cli.wait(40s), 0) << cli.err();
  EXPECT_EQ(srv.wait(10s), 0) << srv.err();
  EXPECT_EQ(cli.err().find("refused"), std::string::npos) << cli.err();
}

TEST(CliFailure, KilledServerIsNoticedAtOnceOverLoopback) {
  const uint16_t tcp = next_port();
  const uint16_t udp = next_port();
  Process srv({"perf", "write_bw", "-p", std::to_string(tcp), "--timeout", "60"}, udp);
  std::this_thread::sleep_for(300ms);
  Process cli(
      {"perf", "write_bw", "127.0.0.1", "-p", std::to_string(tcp), "-D", "30", "--timeout", "60"},
      udp);
  std::this_thread::sleep_for(2s);
  srv.wait(0s);  // kills it (SIGKILL)
  const auto t0 = Clock::now();
  EXPECT_EQ(cli.wait(10s), 1) << cli.err();
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_NE(cli.err().find("the server closed the side channel during the run: its process is "
                           "gone (killed or crashed)"),
            std::string::npos)
      << cli.err();
}

class CliMetrics : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/uroce-cli-stat-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    stat_dir_ = pattern;
    setenv("UROCE_STAT_DIR", stat_dir_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("UROCE_STAT_DIR");
    std::error_code ignored;
    std::filesystem::remove_all(stat_dir_, ignored);
  }
  std::string stat_dir_;
};

TEST_F(CliMetrics, MetricsPortInUseIsAnError) {
  const uint16_t metrics = closed_tcp_port();
  const std::string where = "127.0.0.1:" + std::to_string(metrics);
  // -d: a server with a named device opens it (and its exporter) before a client connects.
  Process first({"perf", "write_bw", "-d", "uroce_lo", "-p", std::to_string(next_port()),
                 "--metrics", where, "--timeout", "20"},
                next_port());
  // The first server owns the port once it answers.
  const auto end = Clock::now() + 10s;
  bool up = false;
  while (!up && Clock::now() < end) {
    httplib::Client http("127.0.0.1", metrics);
    up = static_cast<bool>(http.Get("/metrics"));
    if (!up) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(up);
  Process second({"perf", "write_bw", "-d", "uroce_lo", "-p", std::to_string(next_port()),
                  "--metrics", where, "--timeout", "20"},
                 next_port());
  EXPECT_EQ(second.wait(10s), 1) << second.err();
  EXPECT_EQ(second.err(), "uroce perf: cannot listen for metrics on " + where +
                              ": the port is in use (another uroce process?) or the address is "
                              "not local; choose another port, or :0 for any free one\n");
}

TEST_F(CliMetrics, PortZeroPrintsThePortAndTooBigDropsAreExported) {
  Process srv({"perf", "write_bw", "-d", "uroce_lo", "-p", std::to_string(next_port()), "--metrics",
               "127.0.0.1:0", "--timeout", "20"},
              next_port());
  ASSERT_TRUE(wait_for(srv, "/metrics\n", 10s)) << srv.err();
  std::smatch m;
  const std::string err = srv.err();
  ASSERT_TRUE(std::regex_search(
      err, m, std::regex("^uroce: metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics\\n$")))
      << err;
  const int port = std::stoi(m[1].str());
  ASSERT_GT(port, 0);
  httplib::Client http("127.0.0.1", port);
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  for (const char* name : {"tx_drop_too_big", "tx_drop_error", "icmp_port_unreachable",
                           "icmp_unreachable", "icmp_too_big"}) {
    EXPECT_TRUE(std::regex_search(res->body, std::regex("\\nuroce_" + std::string(name) +
                                                        "_total\\{device=\"[^\"]+\"\\} 0\\n")))
        << name << "\n"
        << res->body;
  }
  auto [st, out] = run(uroce_binary() + " stat --json");
  ASSERT_EQ(st, 0) << out;
  for (const char* name : {"tx_drop_too_big", "tx_drop_error", "icmp_port_unreachable",
                           "icmp_unreachable", "icmp_too_big"}) {
    EXPECT_NE(out.find("\"" + std::string(name) + "\": 0"), std::string::npos) << name << out;
  }
}

TEST(CliCapture, CaptureRecordsTheRealUdpPortAndDumpDecodesItWithPort) {
  const uint16_t tcp = next_port();
  const uint16_t udp = next_port();
  char pattern[] = "/tmp/uroce-cli-cap-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  const std::string file = dir + "/run.pcap";
  Process srv({"perf", "write_bw", "-p", std::to_string(tcp), "--timeout", "30"}, udp);
  std::this_thread::sleep_for(300ms);
  Process cli({"perf", "write_bw", "127.0.0.1", "-p", std::to_string(tcp), "-s", "64", "-n", "5",
               "--capture", file, "--timeout", "30"},
              udp);
  ASSERT_EQ(cli.wait(40s), 0) << cli.err();
  ASSERT_EQ(srv.wait(10s), 0) << srv.err();

  auto [st4791, out4791] = run(uroce_binary() + " dump " + file);
  EXPECT_EQ(st4791, 0);
  EXPECT_NE(out4791.find("uroce dump: 0 RoCE packets"), std::string::npos) << out4791;

  auto [st, out] = run(uroce_binary() + " dump --json --port " + std::to_string(udp) + " " + file);
  ASSERT_EQ(st, 0) << out;
  std::istringstream lines(out);
  std::string line;
  std::set<std::string> write_psns;
  int acks = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("{", 0) != 0) continue;
    if (line.find("\"opcode\":\"RC_RDMA_WRITE_ONLY\"") != std::string::npos) {
      const size_t at = line.find("\"psn\":");
      ASSERT_NE(at, std::string::npos) << line;
      write_psns.insert(line.substr(at + 6, line.find(',', at) - at - 6));
    }
    if (line.find("\"opcode\":\"RC_ACKNOWLEDGE\"") != std::string::npos) ++acks;
    EXPECT_NE(line.find("\"dport\":" + std::to_string(udp)), std::string::npos) << line;
    EXPECT_NE(line.find("\"icrc_ok\":true"), std::string::npos) << line;
  }
  // Both directions: the 5 WRITEs (5 PSNs; on a loaded host an early retransmission timer
  // may send some again, under the same PSNs) and their ACKs (one per WRITE, or fewer when
  // the responder coalesced the ACKs of WRITEs that arrived together).
  EXPECT_EQ(write_psns.size(), 5u) << out;
  EXPECT_GE(acks, 1) << out;

  auto [ast, aout] =
      run(uroce_binary() + " dump --analyze --json --port " + std::to_string(udp) + " " + file);
  EXPECT_EQ(ast, 0) << aout;
  auto [a4791, aout4791] = run(uroce_binary() + " dump --analyze --json " + file);
  EXPECT_NE(aout, aout4791);  // with --port the connection is seen, without it nothing is
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace
}  // namespace uroce::test
