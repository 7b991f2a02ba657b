// `uroce sim` end to end: a shipped scenario writes every result file, byte-identical on a
// second run; a bad scenario is one line naming the key and the line, exit status 2.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

int run(const std::string& args, std::string& err) {
  const std::string log = fmt::format("/tmp/uroce-sim-cli-{}.log", getpid());
  const int rc =
      std::system(fmt::format("{}/bin/uroce sim {} 2>{}", UROCE_BINARY_DIR, args, log).c_str());
  err = slurp(log);
  std::filesystem::remove(log);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(SimCli, ShippedScenarioWritesTheContractFilesDeterministically) {
  const std::string base = fmt::format("/tmp/uroce-sim-cli-{}", getpid());
  const std::string scen = std::string(UROCE_SOURCE_DIR) + "/scenarios/incast-lossless.toml";
  std::string err;
  ASSERT_EQ(run(fmt::format("{} --out {}/a --no-report", scen, base), err), 0) << err;
  ASSERT_EQ(run(fmt::format("{} --out {}/b --no-report", scen, base), err), 0) << err;
  EXPECT_NE(err.find("packet-hops/s"), std::string::npos) << err;
  for (const char* f : {"summary.json", "flows.csv", "queues.csv", "ports.csv", "hosts.csv",
                        "rates.csv", "goodput.csv"}) {
    const std::string a = slurp(fmt::format("{}/a/{}", base, f));
    EXPECT_FALSE(a.empty()) << f;
    EXPECT_EQ(a, slurp(fmt::format("{}/b/{}", base, f))) << f;
  }
  EXPECT_NE(slurp(base + "/a/summary.json").find("\"scenario\": \"incast-lossless\""),
            std::string::npos);
  EXPECT_NE(slurp(base + "/a/run.json").find("\"packet_hops_per_s\""), std::string::npos);
  ASSERT_EQ(run(fmt::format("{} --out {}/c --no-report --seed 2", scen, base), err), 0) << err;
  EXPECT_NE(slurp(base + "/c/summary.json").find("\"seed\": 2,"), std::string::npos);
  std::filesystem::remove_all(base);
}

TEST(SimCli, BadScenarioIsOneLineNamingKeyAndLine) {
  const std::string path = fmt::format("/tmp/uroce-sim-cli-bad-{}.toml", getpid());
  std::ofstream(path) << "name = \"x\"\n[topology]\nkind = \"star\"\nhots = 3\n";
  std::string err;
  EXPECT_EQ(run(path + " --no-report", err), 2);
  EXPECT_EQ(
      err,
      fmt::format("uroce sim: uroce-sim-cli-bad-{}.toml:4: topology.hots: unknown key "
                  "(known: kind, hosts, hosts_per_side, hosts_per_leaf, leaves, spines, link_gbps, "
                  "fabric_gbps, delay_ns)\n",
                  getpid()));
  std::filesystem::remove(path);
  EXPECT_EQ(run("/nonexistent/s.toml --no-report", err), 2);
  EXPECT_EQ(err, "uroce sim: /nonexistent/s.toml: cannot open the scenario file\n");
}

}  // namespace
