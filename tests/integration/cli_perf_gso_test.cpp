// `uroce perf write_bw --verify` between two processes on loopback with UDP GSO on
// (UROCE_GSO=1, docs/performance.md "UDP GSO and GRO"): every byte checked, the run completes
// and the receiver saw every WRITE packet the sender built.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <nlohmann/json.hpp>

#include <string>

#include "cli_process.hpp"

namespace uroce::test {
namespace {

using std::chrono::seconds;

TEST(CliPerfGso, WriteBwVerifiesWithGsoOn) {
  setenv("UROCE_GSO", "1", 1);
  const uint16_t tcp = next_port();
  const uint16_t udp = next_port();
  Process srv({"perf", "write_bw", "-p", std::to_string(tcp), "--timeout", "60"}, udp);
  Process cli({"perf", "write_bw", "127.0.0.1", "-p", std::to_string(tcp), "-s", "65536", "-n",
               "300", "--verify", "--json", "--timeout", "60"},
              udp);
  const int cli_rc = cli.wait(seconds(90));
  const int srv_rc = srv.wait(seconds(30));
  unsetenv("UROCE_GSO");
  ASSERT_EQ(cli_rc, 0) << cli.err();
  ASSERT_EQ(srv_rc, 0) << srv.err();
  const auto j = nlohmann::json::parse(cli.out());
  ASSERT_EQ(j["ok"], true);
  ASSERT_TRUE(j.contains("verify"));
  EXPECT_EQ(j["verify"]["passed"], true);
  EXPECT_EQ(j["verify"]["checked_bytes"], 300u * 65536u);
  const auto& lc = j["local"]["counters"];
  const auto& rc = j["remote"]["counters"];
  EXPECT_EQ(rc["rx_write_requests"], 300);
  EXPECT_EQ(rc["rcvd_pkts"], lc["sent_pkts"]);
  EXPECT_EQ(rc["icrc_errors"], 0);
}

}  // namespace
}  // namespace uroce::test
