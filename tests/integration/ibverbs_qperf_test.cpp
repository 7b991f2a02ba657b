// libibverbs.so.1 drop-in: Debian's unmodified qperf, one server and one client run per
// test on 127.0.0.1. qperf addresses its peer by LID only (no GRH), which RoCE cannot route;
// UROCE_PEER=127.0.0.1 supplies the address (docs/ibverbs.md).
#include <gtest/gtest.h>

#include "ibverbs_test_util.hpp"

namespace uroce::ibtest {
namespace {

struct QperfCase {
  const char* test;
  std::vector<std::string> extra;
  const char* expect;  // the result line qperf prints
};

class IbverbsQperf : public ::testing::TestWithParam<QperfCase> {};

TEST_P(IbverbsQperf, ReportsAResult) {
  const QperfCase& c = GetParam();
  ASSERT_TRUE(have_program(lib_dir() + "/libibverbs.so.1")) << "build uroce_ibverbs first";
  if (!have_program("/usr/bin/qperf")) GTEST_SKIP() << "qperf not installed";
  ToolEnv env;
  env.vars["UROCE_NETDEVS"] = "lo";
  env.vars["UROCE_PEER"] = "127.0.0.1";
  const uint16_t tcp = test::reserve_port();
  Process server({"qperf", "-lp", std::to_string(tcp)}, env);
  ASSERT_TRUE(wait_listening(tcp, server, 15s)) << server.read_output();
  std::vector<std::string> client = {"qperf", "127.0.0.1", "-lp", std::to_string(tcp), "-t", "1"};
  client.insert(client.end(), c.extra.begin(), c.extra.end());
  client.push_back(c.test);
  Process cl(client, env);
  ProcResult r = cl.wait(60s);
  ASSERT_FALSE(r.timed_out) << r.output << "\n--- server:\n" << server.read_output();
  EXPECT_EQ(r.exit_code, 0) << r.output << "\n--- server:\n" << server.read_output();
  EXPECT_EQ(count_lines_with(r.output, std::string(c.test) + ":"), 1) << r.output;
  EXPECT_GE(count_lines_with(r.output, c.expect), 1) << r.output;
  server.kill_group();
}

INSTANTIATE_TEST_SUITE_P(
    Debian, IbverbsQperf,
    ::testing::Values(QperfCase{"rc_bw", {}, "    bw  =  "},
                      QperfCase{"rc_lat", {}, "    latency  =  "},
                      QperfCase{"rc_rdma_write_bw", {}, "    bw  =  "},
                      QperfCase{"rc_rdma_read_bw", {}, "    bw  =  "},
                      QperfCase{"rc_compare_swap_mr", {}, "    msg_rate  =  "},
                      // UD messages must fit one MTU with the 40-byte GRH in front of the
                      // receive buffer; qperf's default (64 KiB) does not.
                      QperfCase{"ud_bw", {"-m", "1024"}, "    send_bw  =  "}),
    [](const ::testing::TestParamInfo<QperfCase>& i) { return std::string(i.param.test); });

}  // namespace
}  // namespace uroce::ibtest
