// `uroce pingpong`: rc, uc, ud and srq variants between two processes, with rdma-core's
// output lines.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "cli_process.hpp"

namespace uroce::test {
namespace {

using std::chrono::seconds;

struct PingpongCase {
  std::string name;
  std::vector<std::string> flags;
  std::string iters;
  int local_lines;  // "local address" lines per side (srq: one per QP)
};

class CliPingpongTest : public ::testing::TestWithParam<PingpongCase> {};

TEST_P(CliPingpongTest, TwoProcesses) {
  const PingpongCase& c = GetParam();
  const uint16_t tcp = next_port();
  const uint16_t udp = next_port();
  std::vector<std::string> server = {"pingpong",  "-p", std::to_string(tcp), "-n", c.iters,
                                     "--timeout", "60"};
  server.insert(server.end(), c.flags.begin(), c.flags.end());
  std::vector<std::string> client = server;
  client.push_back("127.0.0.1");
  Process srv(server, udp);
  Process cli(client, udp);
  const int cli_rc = cli.wait(seconds(90));
  const int srv_rc = srv.wait(seconds(30));
  ASSERT_EQ(cli_rc, 0) << cli.out() << cli.err();
  ASSERT_EQ(srv_rc, 0) << srv.out() << srv.err();
  for (const Process* p : {&cli, &srv}) {
    const std::string out = p->out();
    const std::regex local(
        "  local address:  LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID "
        "::ffff:127\\.0\\.0\\.1\\n");
    const std::regex remote(
        "  remote address: LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID "
        "::ffff:127\\.0\\.0\\.1\\n");
    const auto count = [&](const std::regex& re) {
      return std::distance(std::sregex_iterator(out.begin(), out.end(), re),
                           std::sregex_iterator());
    };
    EXPECT_EQ(count(local), c.local_lines) << out;
    EXPECT_EQ(count(remote), c.local_lines) << out;
    EXPECT_TRUE(std::regex_search(
        out, std::regex("\\n[0-9]+ bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec\\n")))
        << out;
    EXPECT_TRUE(std::regex_search(
        out, std::regex("\\n" + c.iters + " iters in [0-9.]+ seconds = [0-9.]+ usec/iter\\n")))
        << out;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CliPingpongTest,
    ::testing::Values(PingpongCase{"rc", {"--transport", "rc", "-s", "4096"}, "50", 1},
                      PingpongCase{"uc", {"--transport", "uc", "-s", "1024"}, "20", 1},
                      PingpongCase{"ud", {"--transport", "ud", "-s", "512"}, "50", 1},
                      PingpongCase{"srq", {"--srq", "-q", "4", "-s", "1024"}, "40", 4},
                      PingpongCase{"rc_events", {"-e", "-s", "64", "-c"}, "50", 1}),
    [](const ::testing::TestParamInfo<PingpongCase>& info) { return info.param.name; });

// Larger than any port's MTU: refused at once, before waiting for a peer (there is none).
TEST(CliPingpong, UdTooLargeIsOneLine) {
  for (const bool server : {false, true}) {
    SCOPED_TRACE(server ? "server" : "client");
    std::vector<std::string> args = {
        "pingpong",  "--transport", "ud", "-s", "8192", "-p", std::to_string(next_port()),
        "--timeout", "20"};
    if (!server) args.push_back("127.0.0.1");
    Process p(args, next_port());
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(p.wait(seconds(30)), 1);
    EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(10)) << "it waited for a peer";
    EXPECT_EQ(p.err(),
              "uroce pingpong: Requested size larger than the largest port MTU (4096); a UD "
              "message is one packet: use -s 4096 or less\n");
    EXPECT_EQ(p.out(), "");
  }
}

}  // namespace
}  // namespace uroce::test
