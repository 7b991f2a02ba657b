// bench/baselines/udp_pingpong, the busy-polling UDP ping-pong whose timed calls
// docs/performance.md sets beside uroce's steps: it completes round trips, reports every
// figure, leaves no echo process spinning, and refuses a port with no room for its echo's.
// Release only (no_sanitize, no_tsan): a baseline tool, not uroce's code. The figures are
// not asserted: this is a 2-core shared machine.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "shell_run.hpp"
#include "test_port.hpp"

namespace uroce::test {
namespace {

const std::string kPingPong = std::string(UROCE_BINARY_DIR) + "/bin/udp_pingpong";

TEST(UdpPingPong, TimesRoundTripsAndLeavesNoEchoBehind) {
  const std::string port = std::to_string(reserve_port());
  // A count, not a time: with the cores busy (ctest -j2), two spinning processes may make a
  // few dozen round trips in 0.3 s, as a CI dry run found. --seconds only bounds the run.
  const std::string args = " --round-trips 500 --seconds 60 --port " + port;
  const auto [status, out] = run_shell(kPingPong + args + " 2>&1");
  ASSERT_EQ(status, 0) << out;
  const auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j.at("round_trips").get<double>(), 500);
  EXPECT_GT(j.at("one_way_median_us").get<double>(), 0);
  EXPECT_LE(j.at("one_way_median_us").get<double>(), j.at("one_way_p99_us").get<double>());
  EXPECT_GT(j.at("sendmmsg_ns").get<double>(), 0);
  EXPECT_GT(j.at("recvmmsg_data_ns").get<double>(), 0);
  // The echo was killed and reaped before the line was printed.
  const auto [left, procs] = run_shell("pgrep -f '" + kPingPong + args + "$' || true");
  EXPECT_EQ(procs, "") << procs;
  (void)left;
}

TEST(UdpPingPong, APortWithoutRoomForTheEchoIsRefused) {
  const auto [status, out] = run_shell(kPingPong + " --port 65535 2>&1");
  EXPECT_EQ(status, 2);
  EXPECT_NE(out.find("--port must leave room for the echo's port after it"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace uroce::test
