// Loss recovery with real processes (docs/congestion.md "Loss recovery"): two network
// namespaces joined by a veth pair, nftables dropping 5 % of the RoCE v2 packets on input in
// each namespace (`udp dport 4791 numgen random mod 100 < 5 drop`, so 5 % each direction), and
// `uroce perf write_bw -s 65536 --verify --json` with --recovery gbn and sr. Asserts
// correctness, not speed: every byte checked, the run completes, and the recovery the two sides
// agreed on is what they offered (sr only when both offer it).
//
// Root only (skipped otherwise; also skipped without nft). Names, addresses and the TCP port
// come from the pid so parallel runs never meet; each namespace has its own UDP port 4791.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>

#include "ibverbs_test_util.hpp"
#include "shell_run.hpp"

extern char** environ;

namespace uroce::ibtest {
namespace {

using uroce::test::run_quiet;

class LossRecoveryNetns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    if (run_quiet("ip -V") != 0) GTEST_SKIP() << "iproute2 (ip) not installed";
    if (run_quiet("nft --version") != 0) GTEST_SKIP() << "nftables (nft) not installed";
    std::vector<std::string> uroce_vars;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      if (entry.starts_with("UROCE_")) uroce_vars.push_back(entry.substr(0, entry.find('=')));
    }
    for (const std::string& v : uroce_vars) unsetenv(v.c_str());

    const int id = getpid() % 100000;
    ns_a_ = "uroce-lra-" + std::to_string(id);
    ns_b_ = "uroce-lrb-" + std::to_string(id);
    const std::string va = "urla" + std::to_string(id);
    const std::string vb = "urlb" + std::to_string(id);
    const std::string net = "10.77." + std::to_string(id % 250) + ".";
    addr_a_ = net + "1";
    tcp_ = static_cast<uint16_t>(20000 + (id + 7) % 20000);
    created_ = true;
    for (const std::string& cmd : {
             "ip netns add " + ns_a_,
             "ip netns add " + ns_b_,
             "ip link add " + va + " type veth peer name " + vb,
             "ip link set " + va + " netns " + ns_a_,
             "ip link set " + vb + " netns " + ns_b_,
             "ip -n " + ns_a_ + " addr add " + addr_a_ + "/24 dev " + va,
             "ip -n " + ns_b_ + " addr add " + net + "2/24 dev " + vb,
             "ip -n " + ns_a_ + " link set " + va + " up",
             "ip -n " + ns_b_ + " link set " + vb + " up",
             "ip -n " + ns_a_ + " link set lo up",
             "ip -n " + ns_b_ + " link set lo up",
         }) {
      ASSERT_EQ(run_quiet(cmd), 0) << cmd;
    }
    for (const std::string& ns : {ns_a_, ns_b_}) {
      const std::string nft = "ip netns exec " + ns + " nft ";
      ASSERT_EQ(run_quiet(nft + "add table inet uroce_loss"), 0);
      ASSERT_EQ(
          run_quiet(nft + "'add chain inet uroce_loss in { type filter hook input priority 0; }'"),
          0);
      ASSERT_EQ(run_quiet(nft + "add rule inet uroce_loss in udp dport 4791 numgen random mod 100 "
                                "'<' 5 counter drop"),
                0);
    }
    for (auto* env : {&env_a_, &env_b_}) {
      env->vars.erase("UROCE_PORT");
      // The rule drops 5 % of skbs, and a UDP GSO message is one skb up to the receiving
      // socket: per-packet loss needs one datagram per packet.
      env->vars["UROCE_GSO"] = "0";
      char tmpl[] = "/tmp/uroce-lossrec-XXXXXX";
      ASSERT_NE(mkdtemp(tmpl), nullptr);
      env->vars["XDG_RUNTIME_DIR"] = tmpl;
      dirs_.push_back(tmpl);
    }
  }

  void TearDown() override {
    if (created_) {
      run_quiet("ip netns del " + ns_a_);
      run_quiet("ip netns del " + ns_b_);
    }
    for (const std::string& d : dirs_) run_quiet("rm -rf " + d);
  }

  std::vector<std::string> perf(const std::string& ns, const std::string& recovery) {
    return {"ip",       "netns",      "exec",   ns,   uroce::test::uroce_binary(), "perf",
            "write_bw", "-s",         "65536",  "-n", std::to_string(kIters),      "--verify",
            "--json",   "--recovery", recovery, "-p", std::to_string(tcp_),        "--timeout",
            "240"};
  }

  // Server in A offering `server_rec`, client in B offering `client_rec`: the client's JSON.
  nlohmann::json run(const std::string& server_rec, const std::string& client_rec) {
    Process server(perf(ns_a_, server_rec), env_a_);
    const auto deadline = Clock::now() + 15s;
    while (!listening_in(server.pid(), tcp_) && Clock::now() < deadline) {
      if (waitpid(server.pid(), nullptr, WNOHANG) == server.pid()) break;
      std::this_thread::sleep_for(20ms);
    }
    EXPECT_TRUE(listening_in(server.pid(), tcp_)) << "server never listened";
    std::vector<std::string> client_argv = perf(ns_b_, client_rec);
    client_argv.push_back(addr_a_);
    Process client(client_argv, env_b_);
    const ProcResult c = client.wait(300s);
    const ProcResult s = server.wait(c.timed_out ? 1s : 30s);
    EXPECT_FALSE(c.timed_out) << c.output << "\n--- server:\n" << s.output;
    EXPECT_EQ(c.exit_code, 0) << c.output << "\n--- server:\n" << s.output;
    EXPECT_EQ(s.exit_code, 0) << s.output;
    const size_t brace = c.output.find('{');
    if (brace == std::string::npos) return {};
    return nlohmann::json::parse(c.output.substr(brace), nullptr, false);
  }

  // Packets nftables dropped on input in `ns` (the rule's counter).
  static uint64_t dropped(const std::string& ns) {
    FILE* f = popen(("ip netns exec " + ns + " nft list table inet uroce_loss").c_str(), "r");
    if (f == nullptr) return 0;
    std::string out;
    char buf[512];
    while (fgets(buf, sizeof buf, f) != nullptr) out += buf;
    pclose(f);
    const size_t at = out.find("packets ");
    return at == std::string::npos ? 0 : std::stoull(out.substr(at + 8));
  }

  void expect_lossy() {
    // The loss was real in both directions (64 KiB x 100 is 6400 data packets at 1 KiB MTU).
    EXPECT_GT(dropped(ns_a_), 100u);
    EXPECT_GT(dropped(ns_b_), 0u);
  }

  static void expect_verified(const nlohmann::json& j, const std::string& recovery) {
    ASSERT_TRUE(j.is_object()) << j.dump();
    EXPECT_EQ(j.value("recovery", std::string()), recovery) << j.dump();
    EXPECT_TRUE(j.value("ok", false)) << j.dump();
    ASSERT_TRUE(j.contains("verify")) << j.dump();
    EXPECT_TRUE(j["verify"].value("passed", false)) << j.dump();
    EXPECT_EQ(j["verify"].value("checked_bytes", uint64_t{0}), kIters * 65536) << j.dump();
    ASSERT_EQ(j["results"].size(), 1u) << j.dump();
    EXPECT_EQ(j["results"][0].value("iterations", uint64_t{0}), kIters) << j.dump();
  }

  static constexpr uint64_t kIters = 100;
  std::string ns_a_, ns_b_, addr_a_;
  uint16_t tcp_ = 0;
  bool created_ = false;
  ToolEnv env_a_, env_b_;
  std::vector<std::string> dirs_;
};

TEST_F(LossRecoveryNetns, GoBackNDeliversEveryByteAtFivePercentLossEachWay) {
  expect_verified(run("gbn", "gbn"), "gbn");
  expect_lossy();
}

TEST_F(LossRecoveryNetns, SelectiveRepeatDeliversEveryByteAtFivePercentLossEachWay) {
  expect_verified(run("sr", "sr"), "sr");
  expect_lossy();
}

// Only one side offers selective repeat: both use go-back-N.
TEST_F(LossRecoveryNetns, AnOfferTheServerDoesNotShareGivesGoBackN) {
  expect_verified(run("gbn", "sr"), "gbn");
  expect_lossy();
}

}  // namespace
}  // namespace uroce::ibtest
