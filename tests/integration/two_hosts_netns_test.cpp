// Two hosts, as a new user sets them up: two network namespaces joined by a veth pair (each
// with lo up and a default route through the peer), and the rdma-core habits with NO
// uroce-specific environment variable: Debian's `ibv_rc_pingpong -g 1`, `ib_write_bw -x 1`
// and `ib_read_lat -x 1` over the drop-in, and `uroce perf write_bw -x 1`. None of them names
// a device, so each opens the first one, which must be uroce_<veth> (lo is last), and GID
// index 1 of it is the veth's IPv4 address, as on rxe (docs/networking.md "Devices").
//
// Root only (skipped otherwise). Namespaces, veths, addresses and the TCP port are derived
// from the pid, so parallel runs never meet; the UDP port is the default 4791, which is
// private to each namespace. Each namespace also gets its own XDG_RUNTIME_DIR (a generic
// variable, not a uroce one) so the reuseport registries of the two sides stay apart.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <regex>

#include "netns_pair.hpp"

namespace uroce::ibtest {
namespace {

// perftest's result row: "#bytes #iterations <two or three numbers>".
struct Row {
  uint64_t bytes = 0;
  uint64_t iters = 0;
  double first = 0;  // BW peak (MB/sec) or t_min (usec)
};

std::vector<Row> result_rows(const std::string& out) {
  static const std::regex kRow(R"(^ +([0-9]+) +([0-9]+) +([0-9.]+) +[0-9.]+.*$)");
  std::vector<Row> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, kRow)) {
      rows.push_back(Row{std::stoull(m[1]), std::stoull(m[2]), std::stod(m[3])});
    }
  }
  return rows;
}

class TwoHostsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(have_program(lib_dir() + "/libibverbs.so.1")) << "build uroce_ibverbs first";
    if (const std::string skip = hosts_.create("h", 78); !skip.empty()) GTEST_SKIP() << skip;
    ASSERT_FALSE(HasFailure());
    ns_a_ = hosts_.ns_a;
    ns_b_ = hosts_.ns_b;
    va_ = hosts_.va;
    vb_ = hosts_.vb;
    addr_a_ = hosts_.addr_a;
    addr_b_ = hosts_.addr_b;
    tcp_ = hosts_.tcp;
    env_a_ = hosts_.env_a;
    env_b_ = hosts_.env_b;
  }

  std::vector<std::string> in(const std::string& ns, std::vector<std::string> argv) {
    return NetnsPair::in(ns, std::move(argv));
  }

  // The server in A, the client in B (or, `same_host`, also in A) towards A's veth address.
  std::pair<ProcResult, ProcResult> run(const std::vector<std::string>& server_argv,
                                        std::chrono::milliseconds timeout, bool same_host = false) {
    return rerun_if_perftest_uncalibrated(
        [&] { return run_once(server_argv, timeout, same_host); });
  }

  std::pair<ProcResult, ProcResult> run_once(const std::vector<std::string>& server_argv,
                                             std::chrono::milliseconds timeout, bool same_host) {
    Process server(in(ns_a_, server_argv), env_a_);
    const auto deadline = Clock::now() + 15s;
    while (!listening_in(server.pid(), tcp_) && Clock::now() < deadline) {
      if (waitpid(server.pid(), nullptr, WNOHANG) == server.pid()) break;
      std::this_thread::sleep_for(20ms);
    }
    if (!listening_in(server.pid(), tcp_)) {
      ProcResult none;
      none.output = "server never listened on TCP port " + std::to_string(tcp_);
      return {server.wait(1s), none};
    }
    std::vector<std::string> client_argv = server_argv;
    client_argv.push_back(addr_a_);
    Process client(in(same_host ? ns_a_ : ns_b_, client_argv), same_host ? env_a_ : env_b_);
    ProcResult c = client.wait(timeout);
    ProcResult s = server.wait(c.timed_out ? 1s : 15s);
    return {s, c};
  }

  NetnsPair hosts_;
  std::string ns_a_, ns_b_, va_, vb_, addr_a_, addr_b_;
  uint16_t tcp_ = 0;
  ToolEnv env_a_, env_b_;
};

TEST_F(TwoHostsTest, IbvRcPingpongWithGidIndexOne) {
  if (!have_program("/usr/bin/ibv_rc_pingpong")) GTEST_SKIP() << "ibverbs-utils not installed";
  auto [s, c] = run({"ibv_rc_pingpong", "-g", "1", "-n", "500", "-p", std::to_string(tcp_)}, 60s);
  ASSERT_FALSE(c.timed_out) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(c.exit_code, 0) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  // Each side sends from its veth address (GID index 1 of the first device), not 127.0.0.1.
  for (const auto& [r, local, remote] :
       {std::tuple{&s, addr_a_, addr_b_}, std::tuple{&c, addr_b_, addr_a_}}) {
    EXPECT_EQ(count_lines_with(r->output, "  local address:  LID 0x0000, QPN 0x"), 1) << r->output;
    EXPECT_NE(r->output.find(", GID ::ffff:" + local + "\n"), std::string::npos) << r->output;
    EXPECT_NE(r->output.find("  remote address: LID 0x0000, QPN 0x"), std::string::npos);
    EXPECT_NE(r->output.find(", GID ::ffff:" + remote + "\n"), std::string::npos) << r->output;
    // 500 round trips of 4096 bytes each way.
    EXPECT_EQ(count_lines_with(r->output, "4096000 bytes in "), 1) << r->output;
    EXPECT_EQ(count_lines_with(r->output, "500 iters in "), 1) << r->output;
    EXPECT_EQ(count_lines_with(r->output, "127.0.0.1"), 0) << r->output;
  }
}

TEST_F(TwoHostsTest, IbWriteBwWithGidIndexOne) {
  if (!have_program("/usr/bin/ib_write_bw")) GTEST_SKIP() << "perftest not installed";
  auto [s, c] = run({"ib_write_bw", "-x", "1", "-n", "1000", "-p", std::to_string(tcp_)}, 120s);
  ASSERT_FALSE(c.timed_out) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(c.exit_code, 0) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(count_lines_with(c.output, "Device         : uroce_" + vb_), 1) << c.output;
  EXPECT_EQ(count_lines_with(s.output, "Device         : uroce_" + va_), 1) << s.output;
  EXPECT_EQ(count_lines_with(c.output, " GID index       : 1"), 1) << c.output;
  EXPECT_NE(c.output.find("GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:78:"), std::string::npos)
      << c.output;
  for (const ProcResult* r : {&s, &c}) {
    const auto rows = result_rows(r->output);
    ASSERT_EQ(rows.size(), 1u) << r->output;
    EXPECT_EQ(rows[0].bytes, 65536u);
    EXPECT_EQ(rows[0].iters, 1000u);
    EXPECT_GT(rows[0].first, 0.0) << r->output;
  }
}

TEST_F(TwoHostsTest, IbReadLatWithGidIndexOne) {
  if (!have_program("/usr/bin/ib_read_lat")) GTEST_SKIP() << "perftest not installed";
  auto [s, c] = run({"ib_read_lat", "-x", "1", "-n", "500", "-p", std::to_string(tcp_)}, 120s);
  ASSERT_FALSE(c.timed_out) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(c.exit_code, 0) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(count_lines_with(c.output, "Device         : uroce_" + vb_), 1) << c.output;
  EXPECT_EQ(count_lines_with(c.output, " GID index       : 1"), 1) << c.output;
  const auto rows = result_rows(c.output);  // latency tests report on the client
  ASSERT_EQ(rows.size(), 1u) << c.output;
  EXPECT_EQ(rows[0].bytes, 2u);
  EXPECT_EQ(rows[0].iters, 500u);
  EXPECT_GT(rows[0].first, 0.0) << c.output;
}

TEST_F(TwoHostsTest, UrocePerfWriteBwWithGidIndexOne) {
  const std::string uroce = std::string(UROCE_BINARY_DIR) + "/bin/uroce";
  auto [s, c] = run(
      {uroce, "perf", "write_bw", "-x", "1", "-n", "1000", "--verify", "-p", std::to_string(tcp_)},
      120s);
  ASSERT_FALSE(c.timed_out) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(c.exit_code, 0) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(count_lines_with(c.output, "Device         : uroce_" + vb_), 1) << c.output;
  EXPECT_EQ(count_lines_with(s.output, "Device         : uroce_" + va_), 1) << s.output;
  const auto rows = result_rows(c.output);
  ASSERT_EQ(rows.size(), 1u) << c.output;
  EXPECT_EQ(rows[0].bytes, 65536u);
  EXPECT_EQ(rows[0].iters, 1000u);
  EXPECT_GT(rows[0].first, 0.0) << c.output;
  EXPECT_NE(c.output.find(" Data verification passed: "), std::string::npos) << c.output;
}

// Two processes on one host over the host's own (non-loopback) address: both open the first
// device, uroce_<veth>, bind the same address and port 4791 and share it (reuseport); the
// kernel delivers the datagrams over lo. Over the drop-in and over `uroce pingpong`.
TEST_F(TwoHostsTest, SameHostOverItsOwnAddress) {
  const std::string uroce = std::string(UROCE_BINARY_DIR) + "/bin/uroce";
  if (have_program("/usr/bin/ibv_rc_pingpong")) {
    auto [s, c] =
        run({"ibv_rc_pingpong", "-g", "1", "-n", "300", "-p", std::to_string(tcp_)}, 60s, true);
    ASSERT_FALSE(c.timed_out) << c.output << "\n--- server:\n" << s.output;
    EXPECT_EQ(c.exit_code, 0) << c.output << "\n--- server:\n" << s.output;
    EXPECT_EQ(s.exit_code, 0) << s.output;
    for (const ProcResult* r : {&s, &c}) {
      EXPECT_EQ(count_lines_with(r->output, ", GID ::ffff:" + addr_a_), 2) << r->output;
      EXPECT_EQ(count_lines_with(r->output, "300 iters in "), 1) << r->output;
    }
  }
  auto [s, c] = run({uroce, "pingpong", "-n", "300", "-c", "-p", std::to_string(tcp_)}, 60s, true);
  ASSERT_FALSE(c.timed_out) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(c.exit_code, 0) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  for (const ProcResult* r : {&s, &c}) {
    EXPECT_EQ(count_lines_with(r->output, ", GID ::ffff:" + addr_a_), 2) << r->output;
    EXPECT_EQ(count_lines_with(r->output, "300 iters in "), 1) << r->output;
  }
}

// The namespace's own view: `uroce gids` lists the veth's device first with rxe's layout.
TEST_F(TwoHostsTest, GidsListTheVethDeviceFirstAndLoopbackLast) {
  const std::string uroce = std::string(UROCE_BINARY_DIR) + "/bin/uroce";
  Process p(in(ns_a_, {uroce, "gids"}), env_a_);
  ProcResult r = p.wait(20s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string dev = "uroce_" + va_;
  std::istringstream lines(r.output);
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(line);
  ASSERT_GE(rows.size(), 7u) << r.output;
  EXPECT_TRUE(rows[2].starts_with(dev + "\t1\t0\tfe80:")) << r.output;
  char v4[64];
  std::snprintf(v4, sizeof v4, "%s\t1\t1\t0000:0000:0000:0000:0000:ffff:0a4e:%02x01\t", dev.c_str(),
                (getpid() % 100000) % 250);
  EXPECT_TRUE(rows[3].starts_with(v4)) << r.output;
  EXPECT_NE(r.output.find("uroce_lo\t1\t1\t0000:0000:0000:0000:0000:ffff:7f00:0001\t127.0.0.1"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(rows[rows.size() - 2].starts_with("uroce_lo\t1\t1\t")) << r.output;
}

}  // namespace
}  // namespace uroce::ibtest
