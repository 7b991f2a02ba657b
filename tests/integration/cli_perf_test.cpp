// `uroce perf`: server and client as two processes on loopback for each of the 8 tests with
// --verify (every byte checked where it lands), plus JSON output and the one-line errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "cli_process.hpp"

namespace uroce::test {
namespace {

using std::chrono::seconds;

struct PerfCase {
  std::string test;
  std::vector<std::string> extra;
  std::string header_start;
};

class CliPerfTest : public ::testing::TestWithParam<PerfCase> {};

TEST_P(CliPerfTest, ServerAndClientVerifyEveryByte) {
  const PerfCase& c = GetParam();
  const uint16_t tcp = next_port();
  const uint16_t udp = next_port();
  std::vector<std::string> server = {"perf", c.test, "-p", std::to_string(tcp), "--timeout", "60"};
  std::vector<std::string> client = {"perf", c.test, "127.0.0.1", "-p",        std::to_string(tcp),
                                     "-n",   "20",   "--verify",  "--timeout", "60"};
  client.insert(client.end(), c.extra.begin(), c.extra.end());
  Process srv(server, udp);
  Process cli(client, udp);
  const int cli_rc = cli.wait(seconds(90));
  const int srv_rc = srv.wait(seconds(30));
  ASSERT_EQ(cli_rc, 0) << cli.out() << cli.err();
  ASSERT_EQ(srv_rc, 0) << srv.out() << srv.err();
  const std::string out = cli.out();
  EXPECT_NE(out.find(c.header_start), std::string::npos) << out;
  EXPECT_NE(out.find("Data verification passed"), std::string::npos) << out;
  EXPECT_NE(out.find(" local address: LID 0000 QPN 0x"), std::string::npos) << out;
  EXPECT_NE(srv.out().find(c.header_start), std::string::npos) << srv.out();
  EXPECT_EQ(cli.err(), "");
}

const std::string kBw = " #bytes     #iterations    BW peak[MB/sec]";
const std::string kLat = " #bytes #iterations    t_min[usec]";

INSTANTIATE_TEST_SUITE_P(
    AllTests, CliPerfTest,
    ::testing::Values(PerfCase{"write_bw", {"-s", "8192"}, kBw},
                      PerfCase{"read_bw", {"-s", "8192"}, kBw},
                      PerfCase{"send_bw", {"-s", "8192"}, kBw}, PerfCase{"atomic_bw", {}, kBw},
                      PerfCase{"write_lat", {"-s", "64"}, kLat},
                      PerfCase{"read_lat", {"-s", "64"}, kLat},
                      PerfCase{"send_lat", {"-s", "64"}, kLat},
                      PerfCase{"atomic_lat", {"-A", "CMP_AND_SWAP"}, kLat},
                      PerfCase{"send_bw", {"-c", "UD", "-s", "512", "-q", "2"}, kBw},
                      PerfCase{"write_bw", {"-c", "UC", "-s", "4096", "-q", "2"}, kBw}),
    [](const ::testing::TestParamInfo<PerfCase>& info) {
      return info.param.test + "_" + std::to_string(info.index);
    });

TEST(CliPerf, JsonResult) {
  const uint16_t tcp = next_port();
  const uint16_t udp = next_port();
  Process srv({"perf", "write_bw", "-p", std::to_string(tcp), "--timeout", "60"}, udp);
  Process cli({"perf", "write_bw", "127.0.0.1", "-p", std::to_string(tcp), "-s", "4096", "-n", "50",
               "--json", "--verify", "--timeout", "60"},
              udp);
  ASSERT_EQ(cli.wait(seconds(90)), 0) << cli.err();
  ASSERT_EQ(srv.wait(seconds(30)), 0) << srv.err();
  const auto j = nlohmann::json::parse(cli.out());
  EXPECT_EQ(j["test"], "write_bw");
  EXPECT_EQ(j["connection"], "RC");
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["verify"]["checked_bytes"], 50 * 4096);
  ASSERT_EQ(j["results"].size(), 1u);
  EXPECT_EQ(j["results"][0]["bytes"], 4096);
  EXPECT_EQ(j["results"][0]["iterations"], 50);
  EXPECT_GT(j["results"][0]["bw_average"].get<double>(), 0.0);
}

TEST(CliPerf, ServerRefusesAnotherTest) {
  const uint16_t tcp = next_port();
  const uint16_t udp = next_port();
  Process srv({"perf", "write_bw", "-p", std::to_string(tcp), "--timeout", "60"}, udp);
  Process cli({"perf", "read_bw", "127.0.0.1", "-p", std::to_string(tcp), "--timeout", "60"}, udp);
  EXPECT_EQ(cli.wait(seconds(60)), 1);
  EXPECT_EQ(srv.wait(seconds(30)), 1);
  EXPECT_EQ(cli.err(),
            "uroce perf: server: this server runs write_bw, the client asked for read_bw\n");
}

TEST(CliPerf, BadFlagsGiveOneLineAndStatus2) {
  const std::vector<std::vector<std::string>> cases = {
      {"perf", "write_bw", "-m", "1000"},
      {"perf", "write_bw", "-s", "0"},
      {"perf", "read_bw", "-c", "UD"},
      {"perf", "nosuch_bw"},
      {"perf", "write_bw", "--bogus"},
      {"perf", "atomic_bw", "-s", "64"},
      {"perf"},
  };
  for (const auto& args : cases) {
    Process p(args, next_port());
    EXPECT_EQ(p.wait(seconds(20)), 2) << args.back();
    const std::string err = p.err();
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_EQ(err.rfind("uroce perf: ", 0), 0u) << err;
    EXPECT_EQ(p.out(), "");
  }
}

}  // namespace
}  // namespace uroce::test
