// bench/post_call_time, the benchmark bench/compare runs for how long post_send and
// post_recv take while the progress threads move the packets: it streams every scenario,
// reports every figure in order (median <= p99 <= p99.9 <= max), and refuses bad input with
// one line and exit 2. The
// times themselves are not asserted: speed is measured in benchmarks (docs/performance.md).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "shell_run.hpp"
#include "test_port.hpp"

namespace uroce::test {
namespace {

std::string tool() {
  return std::string(UROCE_BINARY_DIR) + "/bin/post_call_time";
}

// A call's times: counted, and median <= p99 <= p99.9 <= max.
void expect_distribution(const nlohmann::json& j, const std::string& count,
                         const std::string& key) {
  SCOPED_TRACE(key);
  EXPECT_GT(j.at(count).get<uint64_t>(), 0u);
  const auto median = j.at(key + "_ns_median").get<int64_t>();
  const auto p99 = j.at(key + "_ns_p99").get<int64_t>();
  const auto p999 = j.at(key + "_ns_p999").get<int64_t>();
  const auto max = j.at(key + "_ns_max").get<int64_t>();
  EXPECT_GT(median, 0);
  EXPECT_LE(median, p99);
  EXPECT_LE(p99, p999);
  EXPECT_LE(p999, max);
}

TEST(PostCallTime, EveryScenarioStreamsAndReportsItsPostTimesInOrder) {
  const uint16_t port = reserve_port();
  const auto [status, out] =
      run_shell(tool() + " --seconds 0.3 --port " + std::to_string(port) + " 2>&1");
  ASSERT_EQ(status, 0) << out;
  std::set<std::string> names;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << "not one JSON object per line: " << line;
    const std::string name = j.at("name").get<std::string>();
    SCOPED_TRACE(name);
    names.insert(name);
    EXPECT_GT(j.at("mbps").get<double>(), 0.0);
    expect_distribution(j, "posts", "post");
    // Receives are posted (and timed) where the stream is SENDs.
    if (name == "send_4096") {
      expect_distribution(j, "recvs", "recv");
    } else {
      EXPECT_FALSE(j.contains("recvs"));
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"write_65536", "write_64_q8", "send_4096"}));
}

TEST(PostCallTime, BadInputIsOneLineNamingTheFixAndExit2) {
  for (const char* args : {"--seconds 0", "--seconds 1000", "--port 70000", "--frobnicate"}) {
    SCOPED_TRACE(args);
    const auto [status, out] = run_shell(tool() + " " + args + " 2>&1");
    EXPECT_EQ(status, 2) << out;
    EXPECT_EQ(out.find("post_call_time: "), 0u) << out;
    EXPECT_EQ(out.find('\n'), out.size() - 1) << "more than one line: " << out;
  }
}

}  // namespace
}  // namespace uroce::test
