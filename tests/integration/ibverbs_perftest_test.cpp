// libibverbs.so.1 drop-in: Debian's unmodified perftest (ib_{write,read,send,atomic}_{bw,lat})
// between two processes on 127.0.0.1 with -x 1 (GID ::ffff:127.0.0.1), each with a size
// sweep (-a) and, where perftest allows it, 4 QPs (-q 4); atomics with both operations.
// perftest links libmlx5.so.1 and libefa.so.1 too: uroce's stand-ins answer "not supported".
#include <gtest/gtest.h>

#include <regex>

#include "ibverbs_test_util.hpp"

namespace uroce::ibtest {
namespace {

struct PerftestCase {
  const char* program;
  std::vector<std::string> extra;
  int result_rows;  // one per message size: -a sweeps 2 B .. 8 MiB, 23 sizes
  const char* name;
};

int result_rows(const std::string& out) {
  static const std::regex kRow(R"(^ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+.*$)");
  int n = 0;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) n += std::regex_match(line, kRow) ? 1 : 0;
  return n;
}

class IbverbsPerftest : public ::testing::TestWithParam<PerftestCase> {};

TEST_P(IbverbsPerftest, ClientAndServerReport) {
  const PerftestCase& c = GetParam();
  ASSERT_TRUE(have_program(lib_dir() + "/libibverbs.so.1")) << "build uroce_ibverbs first";
  ASSERT_TRUE(have_program(lib_dir() + "/libmlx5.so.1")) << "build uroce_mlx5_standin first";
  ASSERT_TRUE(have_program(lib_dir() + "/libefa.so.1")) << "build uroce_efa_standin first";
  if (!have_program(std::string("/usr/bin/") + c.program)) {
    GTEST_SKIP() << c.program << " not installed (perftest)";
  }
  ToolEnv env;
  env.vars["UROCE_NETDEVS"] = "lo";
  const uint16_t tcp = test::reserve_port();
  std::vector<std::string> server = {c.program, "-x", "1", "-p", std::to_string(tcp)};
  server.insert(server.end(), c.extra.begin(), c.extra.end());
  std::vector<std::string> client = server;
  client.push_back("127.0.0.1");
  // A latency sweep is 23 ping-pong runs, each with perftest's own setup and CPU-clock
  // calibration; on two busy cores that takes minutes, so the deadline is generous.
  auto [s, cl] = run_pair(server, client, env, tcp, 400s);
  ASSERT_FALSE(cl.timed_out) << cl.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(cl.exit_code, 0) << cl.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(count_lines_with(cl.output, "Device         : uroce_lo"), 1) << cl.output;
  EXPECT_EQ(count_lines_with(cl.output, " Link type       : Ethernet"), 1) << cl.output;
  EXPECT_EQ(count_lines_with(cl.output, " GID index       : 1"), 1) << cl.output;
  // The latency tests report on the client only; bandwidth tests on both sides, except
  // that send_bw's server counts what it received.
  EXPECT_EQ(result_rows(cl.output), c.result_rows) << cl.output;
}

const std::vector<std::string> kSweep = {"-a", "-n", "5"};
const std::vector<std::string> kFourQps = {"-q", "4", "-n", "100"};

INSTANTIATE_TEST_SUITE_P(
    Debian, IbverbsPerftest,
    ::testing::Values(
        PerftestCase{"ib_write_bw", kSweep, 23, "write_bw_sweep"},
        PerftestCase{"ib_write_bw", kFourQps, 1, "write_bw_4qp"},
        PerftestCase{"ib_read_bw", kSweep, 23, "read_bw_sweep"},
        PerftestCase{"ib_read_bw", kFourQps, 1, "read_bw_4qp"},
        PerftestCase{"ib_send_bw", kSweep, 23, "send_bw_sweep"},
        PerftestCase{"ib_send_bw", kFourQps, 1, "send_bw_4qp"},
        PerftestCase{
            "ib_atomic_bw", {"-A", "CMP_AND_SWAP", "-q", "4", "-n", "100"}, 1, "atomic_bw_cas_4qp"},
        PerftestCase{"ib_atomic_bw",
                     {"-A", "FETCH_AND_ADD", "-q", "4", "-n", "100"},
                     1,
                     "atomic_bw_faa_4qp"},
        PerftestCase{"ib_write_lat", kSweep, 23, "write_lat_sweep"},
        PerftestCase{"ib_read_lat", kSweep, 23, "read_lat_sweep"},
        PerftestCase{"ib_send_lat", kSweep, 23, "send_lat_sweep"},
        PerftestCase{"ib_atomic_lat", {"-A", "CMP_AND_SWAP", "-n", "100"}, 1, "atomic_lat_cas"},
        PerftestCase{"ib_atomic_lat", {"-A", "FETCH_AND_ADD", "-n", "100"}, 1, "atomic_lat_faa"}),
    [](const ::testing::TestParamInfo<PerftestCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace uroce::ibtest
