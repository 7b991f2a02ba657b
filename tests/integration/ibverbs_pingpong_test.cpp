// libibverbs.so.1 drop-in: Debian's unmodified ibv_{rc,uc,ud,srq}_pingpong between two
// processes on 127.0.0.1 (GID index 1 = ::ffff:127.0.0.1 on lo). Both sides must exit 0
// and report the exchange; the rc test also runs with completion events (-e).
#include <gtest/gtest.h>

#include "ibverbs_test_util.hpp"

namespace uroce::ibtest {
namespace {

struct PingpongCase {
  const char* program;
  std::vector<std::string> extra;
  const char* name;
};

class IbverbsPingpong : public ::testing::TestWithParam<PingpongCase> {};

TEST_P(IbverbsPingpong, BothSidesCompleteTheExchange) {
  const PingpongCase& c = GetParam();
  ASSERT_TRUE(have_program(lib_dir() + "/libibverbs.so.1")) << "build uroce_ibverbs first";
  if (!have_program(std::string("/usr/bin/") + c.program)) {
    GTEST_SKIP() << c.program << " not installed (ibverbs-utils)";
  }
  ToolEnv env;
  env.vars["UROCE_NETDEVS"] = "lo";
  const uint16_t tcp = test::reserve_port();
  const std::string iters = "200";
  std::vector<std::string> server = {c.program, "-g", "1", "-n", iters, "-p", std::to_string(tcp)};
  server.insert(server.end(), c.extra.begin(), c.extra.end());
  std::vector<std::string> client = server;
  client.push_back("127.0.0.1");
  auto [s, cl] = run_pair(server, client, env, tcp, 60s);
  ASSERT_FALSE(cl.timed_out) << cl.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(cl.exit_code, 0) << cl.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  for (const ProcResult* r : {&s, &cl}) {
    EXPECT_GE(count_lines_with(r->output, "  local address:  LID 0x0000, QPN 0x"), 1) << r->output;
    EXPECT_GE(count_lines_with(r->output, "GID ::ffff:127.0.0.1"), 2) << r->output;
    EXPECT_EQ(count_lines_with(r->output, iters + " iters in "), 1) << r->output;
  }
}

// A GID index past the table: the program says only "can't read sgid of index 7"; the drop-in
// adds, once, which GIDs there are and which one is IPv4. UROCE_QUIET=1 keeps stderr as is.
TEST(IbverbsGidIndex, AMissingIndexIsExplainedOnceWithTheTable) {
  ASSERT_TRUE(have_program(lib_dir() + "/libibverbs.so.1")) << "build uroce_ibverbs first";
  if (!have_program("/usr/bin/ibv_rc_pingpong")) GTEST_SKIP() << "ibverbs-utils not installed";
  for (const bool quiet : {false, true}) {
    ToolEnv env;
    env.vars["UROCE_NETDEVS"] = "lo";
    if (quiet) env.vars["UROCE_QUIET"] = "1";
    // Client side: the GID is read before any connection, so no server is needed.
    Process p(
        {"ibv_rc_pingpong", "-g", "7", "-p", std::to_string(test::reserve_port()), "127.0.0.1"},
        env);
    const ProcResult r = p.wait(30s);
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(r.exit_code, 1) << r.output;
    const std::string hint =
        "uroce: GID index 7 does not exist on uroce_lo port 1 (its GIDs: 0 = ::1, 1 = "
        "127.0.0.1); RoCE v2 over IPv4 is index 1 (ibv_*_pingpong -g 1, perftest -x 1)\n";
    EXPECT_EQ(r.output, (quiet ? "" : hint) + "can't read sgid of index 7\n");
  }
}

INSTANTIATE_TEST_SUITE_P(Debian, IbverbsPingpong,
                         ::testing::Values(PingpongCase{"ibv_rc_pingpong", {}, "rc"},
                                           PingpongCase{"ibv_rc_pingpong", {"-e"}, "rc_events"},
                                           PingpongCase{"ibv_uc_pingpong", {}, "uc"},
                                           PingpongCase{"ibv_ud_pingpong", {}, "ud"},
                                           PingpongCase{"ibv_srq_pingpong", {}, "srq"}),
                         [](const ::testing::TestParamInfo<PingpongCase>& i) {
                           return std::string(i.param.name);
                         });

}  // namespace
}  // namespace uroce::ibtest
