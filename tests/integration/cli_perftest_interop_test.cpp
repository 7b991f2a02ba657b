// `uroce perf` against Debian's unmodified perftest (4.5, "6.06") over our libibverbs.so.1
// drop-in, on 127.0.0.1 (perftest with -x 1, GID ::ffff:127.0.0.1): every one of the eight
// tests with perftest as the server and `uroce perf` as the client, and the reverse. Each run
// must end with exit 0 on both sides and print the results table with a row of the exact
// size and iteration count and a nonzero bandwidth or latency. Where perftest's server prints
// the report its client sent (write/read/atomic BW), both sides' rows are byte-identical.
//
// Two network namespaces joined by a veth pair (root only) run perftest in one and
// `uroce perf` in the other across a real L2 link with a 1500-byte MTU.
//
// The mismatch cases check that a combination that cannot work ends at once with one line
// naming both values, on the uroce side, and that both processes exit quickly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include "ibverbs_test_util.hpp"
#include "shell_run.hpp"

namespace uroce::ibtest {
namespace {

using uroce::test::uroce_binary;

// The drop-in reads UROCE_PORT, the CLI UROCE_UDP_PORT: one private port for both.
ToolEnv interop_env() {
  ToolEnv env;
  env.vars["UROCE_NETDEVS"] = "lo";
  env.vars["UROCE_UDP_PORT"] = env.vars["UROCE_PORT"];
  return env;
}

// Result rows of perftest's tables: " 65536      200   ..." (BW) or " 2       100   ..." (lat).
std::vector<std::vector<std::string>> result_rows(const std::string& out) {
  static const std::regex kRow(R"(^ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+.*$)");
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (!std::regex_match(line, kRow)) continue;
    std::istringstream f(line);
    std::vector<std::string> cols;
    std::string c;
    while (f >> c) cols.push_back(c);
    rows.push_back(cols);
  }
  return rows;
}

std::vector<std::string> result_lines(const std::string& out) {
  static const std::regex kRow(R"(^ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+.*$)");
  std::vector<std::string> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (std::regex_match(line, kRow)) lines.push_back(line);
  }
  return lines;
}

struct InteropCase {
  std::string test;  // uroce perf name; perftest is ib_<test>
  bool perftest_server;
  std::vector<std::string> args;  // given to both sides
  uint64_t size;
  uint64_t iterations;  // the #iterations column (perftest: iters x QPs for BW)
  std::string name;
};

// gtest prints the case by name, not as bytes.
void PrintTo(const InteropCase& c, std::ostream* os) {
  *os << c.name;
}

bool is_bw(const std::string& test) {
  return test.ends_with("_bw");
}

// Which sides print a row: every BW side, and both sides of write_lat and send_lat; the
// server of read_lat / atomic_lat prints none (perftest's does not either).
bool server_prints(const std::string& test) {
  return is_bw(test) || test == "write_lat" || test == "send_lat";
}

void expect_row(const std::string& who, const std::string& out, const InteropCase& c) {
  const auto rows = result_rows(out);
  ASSERT_EQ(rows.size(), 1u) << who << ":\n" << out;
  const auto& r = rows[0];
  EXPECT_EQ(r[0], std::to_string(c.size)) << who << ":\n" << out;
  EXPECT_EQ(r[1], std::to_string(c.iterations)) << who << ":\n" << out;
  // BW: column 3 is the average; latency: column 5 is t_typical (columns 2..8 are times).
  const double value = std::stod(r[is_bw(c.test) ? 3 : 4]);
  EXPECT_GT(value, 0.0) << who << ":\n" << out;
}

class CliPerftestInterop : public ::testing::TestWithParam<InteropCase> {};

TEST_P(CliPerftestInterop, BothSidesCompleteAndReport) {
  const InteropCase& c = GetParam();
  ASSERT_TRUE(have_program(lib_dir() + "/libibverbs.so.1")) << "build uroce_ibverbs first";
  const std::string program = "/usr/bin/ib_" + c.test;
  if (!have_program(program)) GTEST_SKIP() << program << " not installed (perftest)";
  const ToolEnv env = interop_env();
  const uint16_t tcp = test::reserve_port();
  std::vector<std::string> perftest = {program, "-x", "1", "-p", std::to_string(tcp)};
  std::vector<std::string> uroce = {uroce_binary(),      "perf",      c.test, "-p",
                                    std::to_string(tcp), "--timeout", "120"};
  perftest.insert(perftest.end(), c.args.begin(), c.args.end());
  uroce.insert(uroce.end(), c.args.begin(), c.args.end());
  auto& client = c.perftest_server ? uroce : perftest;
  client.push_back("127.0.0.1");
  auto [s, cl] = c.perftest_server ? run_pair(perftest, uroce, env, tcp, 150s)
                                   : run_pair(uroce, perftest, env, tcp, 150s);
  ASSERT_FALSE(cl.timed_out) << cl.output << "\n--- server:\n" << s.output;
  ASSERT_EQ(cl.exit_code, 0) << cl.output << "\n--- server:\n" << s.output;
  ASSERT_EQ(s.exit_code, 0) << s.output << "\n--- client:\n" << cl.output;
  const std::string& uroce_out = c.perftest_server ? cl.output : s.output;
  const std::string& perftest_out = c.perftest_server ? s.output : cl.output;
  // Our side prints perftest's banner and table.
  EXPECT_EQ(count_lines_with(uroce_out, " Link type       : Ethernet"), 1) << uroce_out;
  EXPECT_EQ(count_lines_with(uroce_out, " remote address: LID 0000 QPN 0x"),
            count_lines_with(perftest_out, " local address: LID 0000 QPN 0x"))
      << uroce_out << "\n---\n"
      << perftest_out;
  expect_row("client", cl.output, c);
  if (server_prints(c.test)) {
    expect_row("server", s.output, c);
  } else {
    EXPECT_EQ(result_rows(s.output).size(), 0u) << s.output;
  }
  if (c.test == "write_bw" || c.test == "read_bw" || c.test == "atomic_bw") {
    // The server prints the report its client sent over the exchange.
    EXPECT_EQ(result_lines(s.output), result_lines(cl.output)) << s.output << "\n---\n"
                                                               << cl.output;
  }
}

std::vector<InteropCase> all_cases() {
  const std::vector<std::string> kBw = {"-n", "200"};
  const std::vector<std::string> kLat = {"-n", "100"};
  std::vector<InteropCase> out;
  for (const bool perftest_server : {true, false}) {
    const char* dir = perftest_server ? "perftest_server" : "uroce_server";
    auto add = [&](std::string test, std::vector<std::string> args, uint64_t size, uint64_t it) {
      std::string name = test + "_" + dir + "_" + std::to_string(out.size());
      out.push_back({test, perftest_server, args, size, it, name});
    };
    add("write_bw", kBw, 65536, 200);
    add("read_bw", kBw, 65536, 200);
    add("send_bw", kBw, 65536, 200);
    add("atomic_bw", kBw, 8, 200);
    add("write_lat", kLat, 2, 100);
    add("read_lat", kLat, 2, 100);
    add("send_lat", kLat, 2, 100);
    add("atomic_lat", kLat, 8, 100);
    // Several QPs, other sizes and perftest's atomic variant.
    add("write_bw", {"-q", "3", "-s", "4096", "-n", "100"}, 4096, 300);
    add("send_bw", {"-q", "2", "-s", "1024", "-n", "100"}, 1024, 200);
    add("atomic_bw", {"-A", "CMP_AND_SWAP", "-n", "100"}, 8, 100);
    add("write_lat", {"-s", "64", "-n", "100"}, 64, 100);
    add("send_lat", {"-s", "300", "-n", "100"}, 300, 100);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Debian, CliPerftestInterop, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<InteropCase>& i) {
                           return i.param.name;
                         });

// -a: both sides sweep 2 B .. 8 MiB (23 rows). perftest's write_bw server prints only the
// last report its client sent; the other tests print a row per size on both sides.
struct SweepCase {
  std::string test;
  bool perftest_server;
  const char* name;
};

void PrintTo(const SweepCase& c, std::ostream* os) {
  *os << c.name;
}

class CliPerftestSweep : public ::testing::TestWithParam<SweepCase> {};

TEST_P(CliPerftestSweep, AllSizes) {
  const SweepCase& c = GetParam();
  const std::string program = "/usr/bin/ib_" + c.test;
  if (!have_program(program)) GTEST_SKIP() << program << " not installed (perftest)";
  const ToolEnv env = interop_env();
  const uint16_t tcp = test::reserve_port();
  std::vector<std::string> perftest = {program, "-x", "1", "-p", std::to_string(tcp),
                                       "-a",    "-n", "5"};
  std::vector<std::string> uroce = {uroce_binary(),      "perf", c.test, "-p",
                                    std::to_string(tcp), "-a",   "-n",   "5",
                                    "--timeout",         "300"};
  (c.perftest_server ? uroce : perftest).push_back("127.0.0.1");
  // perftest calibrates its CPU clock for every size of a latency sweep: minutes on two
  // busy cores.
  auto [s, cl] = c.perftest_server ? run_pair(perftest, uroce, env, tcp, 400s)
                                   : run_pair(uroce, perftest, env, tcp, 400s);
  ASSERT_EQ(cl.exit_code, 0) << cl.output << "\n--- server:\n" << s.output;
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const auto rows = result_rows(cl.output);
  ASSERT_EQ(rows.size(), 23u) << cl.output;
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i][0], std::to_string(2ull << i));
  if (c.test == "write_bw") {
    EXPECT_EQ(result_lines(s.output), std::vector<std::string>{result_lines(cl.output).back()})
        << s.output;
  } else {
    EXPECT_EQ(result_rows(s.output).size(), 23u) << s.output;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Debian, CliPerftestSweep,
    ::testing::Values(SweepCase{"write_bw", true, "write_bw_perftest_server"},
                      SweepCase{"send_bw", false, "send_bw_uroce_server"},
                      SweepCase{"write_lat", true, "write_lat_perftest_server"},
                      SweepCase{"send_lat", false, "send_lat_uroce_server"}),
    [](const ::testing::TestParamInfo<SweepCase>& i) { return std::string(i.param.name); });

// --- two network namespaces ----------------------------------------------------------------

using uroce::test::run_quiet;

class CliPerftestNetns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    if (run_quiet("ip -V") != 0) GTEST_SKIP() << "iproute2 (ip) not installed";
    if (!have_program("/usr/bin/ib_write_bw")) GTEST_SKIP() << "perftest not installed";
    const int id = getpid() % 100000;
    ns_a_ = "urpt-a-" + std::to_string(id);
    ns_b_ = "urpt-b-" + std::to_string(id);
    veth_a_ = "urpa" + std::to_string(id);
    veth_b_ = "urpb" + std::to_string(id);
    const std::string net = "10.78." + std::to_string(id % 250) + ".";
    addr_a_ = net + "1";
    addr_b_ = net + "2";
    created_ = true;
    for (const std::string& cmd :
         {"ip netns add " + ns_a_, "ip netns add " + ns_b_,
          "ip link add " + veth_a_ + " type veth peer name " + veth_b_,
          "ip link set " + veth_a_ + " netns " + ns_a_,
          "ip link set " + veth_b_ + " netns " + ns_b_,
          "ip -n " + ns_a_ + " addr add " + addr_a_ + "/24 dev " + veth_a_,
          "ip -n " + ns_b_ + " addr add " + addr_b_ + "/24 dev " + veth_b_,
          "ip -n " + ns_a_ + " link set " + veth_a_ + " up",
          "ip -n " + ns_b_ + " link set " + veth_b_ + " up", "ip -n " + ns_a_ + " link set lo up",
          "ip -n " + ns_b_ + " link set lo up"}) {
      ASSERT_EQ(run_quiet(cmd), 0) << cmd;
    }
    // Both sides on one private UDP port (the namespaces have separate port spaces, but
    // uroce's shared-port registry lives in /tmp).
    const std::string udp = std::to_string(30000 + id % 5000);
    env_.vars["UROCE_PORT"] = udp;
    env_.vars["UROCE_UDP_PORT"] = udp;
    uroce_env_ = env_;
    env_.vars["UROCE_NETDEVS"] = veth_b_;  // perftest (namespace B) over the veth only
    uroce_env_.vars["UROCE_NETDEVS"] = veth_a_;
  }
  void TearDown() override {
    if (!created_) return;
    run_quiet("ip netns del " + ns_a_);
    run_quiet("ip netns del " + ns_b_);
  }

  std::vector<std::string> in(const std::string& ns, std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {"ip", "netns", "exec", ns});
    return argv;
  }

  // Server in its namespace, then the client once the server listens; again while perftest
  // could not calibrate its clock.
  std::pair<ProcResult, ProcResult> pair(const std::vector<std::string>& server,
                                         const std::vector<std::string>& client, uint16_t tcp) {
    auto env_of = [&](const std::vector<std::string>& argv) {
      return argv[4].ends_with("/uroce") ? uroce_env_ : env_;
    };
    return rerun_if_perftest_uncalibrated([&]() -> std::pair<ProcResult, ProcResult> {
      Process srv(server, env_of(server));
      const auto deadline = Clock::now() + 15s;
      while (!listening_in(srv.pid(), tcp) && Clock::now() < deadline) {
        std::this_thread::sleep_for(20ms);
      }
      Process cli(client, env_of(client));
      ProcResult c = cli.wait(120s);
      ProcResult s = srv.wait(c.timed_out ? 1s : 10s);
      return {s, c};
    });
  }

  ToolEnv env_;        // perftest over the drop-in
  ToolEnv uroce_env_;  // uroce perf
  bool created_ = false;
  std::string ns_a_, ns_b_, veth_a_, veth_b_, addr_a_, addr_b_;
};

TEST_F(CliPerftestNetns, PerftestServerUroceClientWriteBw) {
  const uint16_t tcp = 18515;  // each namespace has its own TCP ports
  auto [s, cl] = pair(
      in(ns_b_, {"/usr/bin/ib_write_bw", "-x", "1", "-n", "200"}),
      in(ns_a_, {uroce_binary(), "perf", "write_bw", addr_b_, "-n", "200", "--timeout", "100"}),
      tcp);
  ASSERT_EQ(cl.exit_code, 0) << cl.output << "\n--- server:\n" << s.output;
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const InteropCase c{"write_bw", true, {}, 65536, 200, ""};
  expect_row("client", cl.output, c);
  EXPECT_EQ(result_lines(s.output), result_lines(cl.output)) << s.output;
  // The path MTU both agreed on: the veth's 1500 bytes leave 1024 for RoCE.
  EXPECT_EQ(count_lines_with(cl.output, " Mtu             : 1024[B]"), 1) << cl.output;
}

TEST_F(CliPerftestNetns, UroceServerPerftestClientSendLat) {
  const uint16_t tcp = 18515;
  auto [s, cl] =
      pair(in(ns_a_, {uroce_binary(), "perf", "send_lat", "-n", "100", "--timeout", "100"}),
           in(ns_b_, {"/usr/bin/ib_send_lat", "-x", "1", "-n", "100", addr_a_}), tcp);
  ASSERT_EQ(cl.exit_code, 0) << cl.output << "\n--- server:\n" << s.output;
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const InteropCase c{"send_lat", false, {}, 2, 100, ""};
  expect_row("client", cl.output, c);
  expect_row("server", s.output, c);
}

struct MismatchCase {
  std::vector<std::string> server;  // "ib_..." or "perf ..." (host and port are added)
  std::vector<std::string> client;
  std::string error;  // the uroce side's one line, exactly
  int perftest_exit;  // 0: perftest completed; 1: it failed (any non-zero); -1: either
  const char* name;
};

void PrintTo(const MismatchCase& c, std::ostream* os) {
  *os << c.name;
}

class CliPerftestMismatch : public ::testing::TestWithParam<MismatchCase> {};

std::vector<std::string> command(const std::vector<std::string>& spec, uint16_t tcp, bool client) {
  std::vector<std::string> argv;
  if (spec[0].starts_with("ib_")) {
    argv = {"/usr/bin/" + spec[0], "-x", "1"};
  } else {
    argv = {uroce_binary(), "perf"};
    argv.push_back(spec[0].substr(5));
  }
  argv.insert(argv.end(), spec.begin() + 1, spec.end());
  argv.push_back("-p");
  argv.push_back(std::to_string(tcp));
  if (client) argv.push_back("127.0.0.1");
  return argv;
}

TEST_P(CliPerftestMismatch, UroceSaysWhyAndBothExitQuickly) {
  const MismatchCase& c = GetParam();
  if (!have_program("/usr/bin/ib_write_bw")) GTEST_SKIP() << "perftest not installed";
  const ToolEnv env = interop_env();
  const uint16_t tcp = test::reserve_port();
  Clock::time_point start;  // of the run whose result stands
  auto [s, cl] = rerun_if_perftest_uncalibrated([&] {
    start = Clock::now();
    return run_pair_once(command(c.server, tcp, false), command(c.client, tcp, true), env, tcp,
                         20s);
  });
  const auto elapsed = Clock::now() - start;
  ASSERT_FALSE(cl.timed_out) << cl.output << "\n--- server:\n" << s.output;
  ASSERT_FALSE(s.timed_out) << s.output;
  // perftest's sleep(1) before its first message, plus slack for loaded (sanitizer) runs.
  EXPECT_LT(elapsed, 8s) << cl.output << "\n--- server:\n" << s.output;
  const bool uroce_server = c.server[0].starts_with("perf");
  const ProcResult& u = uroce_server ? s : cl;
  const ProcResult& p = uroce_server ? cl : s;
  EXPECT_EQ(u.exit_code, 1) << u.output;
  std::vector<std::string> lines;
  std::istringstream in(u.output);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("uroce perf:")) lines.push_back(line);
  }
  EXPECT_EQ(lines, std::vector<std::string>{"uroce perf: " + c.error}) << u.output;
  if (c.perftest_exit == 0) {
    EXPECT_EQ(p.exit_code, 0) << p.output;
  } else if (c.perftest_exit == 1) {
    EXPECT_GT(p.exit_code, 0) << p.output;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Debian, CliPerftestMismatch,
    ::testing::Values(
        MismatchCase{{"ib_write_bw"},
                     {"perf write_bw", "--verify"},
                     "--verify needs uroce perf on both sides; the peer is perftest 6.06 server: "
                     "drop --verify",
                     1,
                     "verify_against_perftest_server"},
        MismatchCase{{"perf write_bw", "-q", "2"},
                     {"ib_write_bw"},
                     "the perftest 6.06 client has 1 QP (-q 1), this side 2 (-q 2): give both "
                     "sides the same -q",
                     1,
                     "fewer_qps_on_perftest_client"},
        MismatchCase{{"ib_write_bw", "-q", "2"},
                     {"perf write_bw"},
                     "the perftest 6.06 server has more QPs than this side's 1 (-q 1): give both "
                     "sides the same -q",
                     1,
                     "more_qps_on_perftest_server"},
        MismatchCase{{"perf read_bw"},
                     {"ib_write_bw"},
                     "the perftest 6.06 client runs a write or send test (it allows 1 "
                     "outstanding reads), this side runs read_bw: run the same test on both sides",
                     1,
                     "write_client_read_server"},
        MismatchCase{{"ib_read_bw"},
                     {"perf write_bw"},
                     "the perftest 6.06 server runs a READ or atomic test (it allows 128 "
                     "outstanding reads), this side runs write_bw: run the same test on both "
                     "sides",
                     1,
                     "read_server_write_client"},
        MismatchCase{{"perf write_bw", "-s", "4096"},
                     {"ib_write_bw", "-s", "1024", "-n", "100"},
                     "the perftest 6.06 client ran 1024-byte messages, this server -s 4096: give "
                     "both sides the same -s",
                     0,
                     "write_bw_size_reported_by_client"},
        MismatchCase{{"perf write_bw", "-s", "4096"},
                     {"ib_write_bw", "-s", "65536", "-n", "100"},
                     "this side refused an RDMA access of the perftest 6.06 client (its messages "
                     "are larger than this side's -s 4096, or it runs another test than "
                     "write_bw): run the same test and -s on both sides",
                     1,
                     "write_bw_client_larger_than_server_buffer"},
        MismatchCase{{"perf write_bw", "-n", "300"},
                     {"ib_write_bw", "-n", "100"},
                     "the perftest 6.06 client ran 100 iterations, this server expects 300 (-n "
                     "300 x 1 QPs): give both sides the same -n",
                     0,
                     "write_bw_iterations_reported_by_client"},
        MismatchCase{{"perf send_bw", "-s", "4096"},
                     {"ib_send_bw", "-s", "1024", "-n", "100"},
                     "the client sends 1024-byte messages, this server runs -s 4096: give both "
                     "sides the same -s",
                     0,
                     "send_bw_size_seen_by_receiver"},
        MismatchCase{{"perf send_bw", "-n", "200"},
                     {"ib_send_bw", "-n", "100"},
                     "the client finished after 100 SENDs per QP, this server expects 200 (-n): "
                     "give both sides the same -n",
                     0,
                     "send_bw_fewer_iterations"},
        MismatchCase{{"perf write_bw"},
                     {"ib_send_bw", "-n", "100"},
                     "the perftest 6.06 client sends SENDs: it runs send_bw or send_lat, this "
                     "side runs write_bw",
                     -1,
                     "send_client_write_server"}),
    [](const ::testing::TestParamInfo<MismatchCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace uroce::ibtest
