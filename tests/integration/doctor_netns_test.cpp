// `uroce doctor` names each classic misconfiguration with a FAIL line and the fix: created
// for real in two network namespaces joined by a veth pair (root; skipped otherwise) — an
// MTU mismatch, an nftables rule dropping UDP 4791 — the IPv6 probe exchange, socket buffers
// as root and unprivileged, and a low memlock limit (prlimit on the doctor process; not a
// warning since uroce pins nothing).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "device_integration_util.hpp"
#include "shell_run.hpp"

namespace uroce::itest {
namespace {

using uroce::test::uroce_binary;

std::pair<int, std::string> run(const std::string& cmd) {
  return uroce::test::run_shell(cmd);
}

std::string read_proc(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string trim_copy(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

using uroce::test::shell_ok;

const nlohmann::json* find_check(const nlohmann::json& checks, const std::string& name) {
  for (const auto& c : checks) {
    if (c["check"] == name) return &c;
  }
  return nullptr;
}

class DoctorNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for network namespaces";
    const std::string id = std::to_string(getpid() % 100000);
    a_ = "urdoc-a-" + id;
    b_ = "urdoc-b-" + id;
    va_ = "urda" + id;
    vb_ = "urdb" + id;
    if (!shell_ok("ip netns add " + a_) || !shell_ok("ip netns add " + b_)) {
      GTEST_SKIP() << "cannot create network namespaces here";
    }
    ASSERT_TRUE(shell_ok("ip link add " + va_ + " netns " + a_ + " type veth peer name " + vb_ +
                         " netns " + b_));
    ASSERT_TRUE(shell_ok("ip -n " + a_ + " addr add 10.231.0.1/24 dev " + va_));
    ASSERT_TRUE(shell_ok("ip -n " + b_ + " addr add 10.231.0.2/24 dev " + vb_));
    ASSERT_TRUE(shell_ok("ip -n " + a_ + " addr add fd00:231::1/64 dev " + va_ + " nodad"));
    ASSERT_TRUE(shell_ok("ip -n " + b_ + " addr add fd00:231::2/64 dev " + vb_ + " nodad"));
    for (const auto& [ns, dev] : {std::pair{a_, va_}, std::pair{b_, vb_}}) {
      ASSERT_TRUE(shell_ok("ip -n " + ns + " link set " + dev + " up"));
      ASSERT_TRUE(shell_ok("ip -n " + ns + " link set lo up"));
    }
  }
  void TearDown() override {
    if (!a_.empty()) shell_ok("ip netns del " + a_);
    if (!b_.empty()) shell_ok("ip netns del " + b_);
  }

  // Starts `uroce doctor --listen` in B (default bind: every address, IPv4 and IPv6), then
  // runs `uroce doctor --peer PEER` in A.
  nlohmann::json doctor_from_a(const std::string& peer = "10.231.0.2") {
    const pid_t listener = fork();
    if (listener == 0) {
      const std::string cmd = "exec ip netns exec " + b_ + " " + uroce_binary() +
                              " doctor --listen --count 20 --timeout 15 >/dev/null 2>&1";
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto [st, out] =
        run("ip netns exec " + a_ + " " + uroce_binary() + " doctor --peer " + peer + " --json");
    kill(listener, SIGTERM);
    int ws = 0;
    waitpid(listener, &ws, 0);
    last_status_ = st;
    return nlohmann::json::parse(out, nullptr, false);
  }

  std::string a_, b_, va_, vb_;
  int last_status_ = -1;
};

TEST_F(DoctorNetnsTest, HealthyPathPasses) {
  const nlohmann::json j = doctor_from_a();
  ASSERT_FALSE(j.is_discarded());
  for (const char* name : {"udp_reachability", "mtu_path", "mtu_peer", "tos"}) {
    const auto* c = find_check(j, name);
    ASSERT_NE(c, nullptr) << name;
    EXPECT_EQ((*c)["level"], "PASS") << j.dump(2);
  }
  const auto* gid = find_check(j, "gid");
  ASSERT_NE(gid, nullptr);
  // The advice names the device (one per netdev): index 1 of uroce_<veth> is its IPv4 GID,
  // and the veth is the first device of the namespace (lo is last).
  const std::string dev = "uroce_" + va_;
  EXPECT_NE((*gid)["detail"].get<std::string>().find(
                "to reach the peer use device " + dev + " GID index 1 (10.231.0.1 on " + va_ +
                "), e.g. -d " + dev + " -g 1 / -d " + dev +
                " -x 1 (it is the first device, so -d may be left out)"),
            std::string::npos)
      << (*gid)["detail"];
}

// The listener answers IPv6 probes, and --peer sends them: reachability, the full-size probe
// (IPv6 headers are 20 bytes longer) and the TOS all pass, and the GID advice names the
// IPv6 address the route leaves from.
TEST_F(DoctorNetnsTest, Ipv6PeerIsProbedAndAnswered) {
  const nlohmann::json j = doctor_from_a("fd00:231::2");
  ASSERT_FALSE(j.is_discarded());
  for (const char* name : {"udp_reachability", "mtu_path", "mtu_peer", "tos"}) {
    const auto* c = find_check(j, name);
    ASSERT_NE(c, nullptr) << name << "\n" << j.dump(2);
    EXPECT_EQ((*c)["level"], "PASS") << j.dump(2);
  }
  EXPECT_EQ((*find_check(j, "udp_reachability"))["detail"], "fd00:231::2 answers on UDP 4791");
  EXPECT_EQ((*find_check(j, "mtu_path"))["detail"],
            "1056-byte probes (largest RoCE packet at active_mtu 1024) reach fd00:231::2");
  EXPECT_EQ((*find_check(j, "tos"))["detail"],
            "sent TOS 0x6a (DSCP 26, ECN 2), fd00:231::2 received 0x6a (DSCP 26, ECN 2)");
  const auto* gid = find_check(j, "gid");
  ASSERT_NE(gid, nullptr);
  EXPECT_EQ((*gid)["level"], "PASS") << (*gid)["detail"];
  EXPECT_NE((*gid)["detail"].get<std::string>().find("(fd00:231::1 on " + va_ + ")"),
            std::string::npos)
      << (*gid)["detail"];
}

// Root gets uroce's full socket buffers through SO_RCVBUFFORCE whatever net.core.rmem_max
// says, so there is nothing to warn about; without CAP_NET_ADMIN a low limit is a WARN.
TEST_F(DoctorNetnsTest, NoSocketBufferWarningAsRoot) {
  auto [st, out] = run("ip netns exec " + a_ + " " + uroce_binary() + " doctor --json");
  const auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  const auto* sb = find_check(j, "socket_buffers");
  ASSERT_NE(sb, nullptr);
  EXPECT_EQ((*sb)["level"], "PASS") << (*sb)["detail"];
  EXPECT_NE((*sb)["detail"].get<std::string>().find(
                "a uroce socket gets SO_RCVBUF 67108864 (asks 67108864) and SO_SNDBUF 4194304"),
            std::string::npos)
      << (*sb)["detail"];
  if (!shell_ok("command -v setpriv")) GTEST_SKIP() << "setpriv not installed";
  const std::string rmem = trim_copy(read_proc("/proc/sys/net/core/rmem_max"));
  if (std::stoull(rmem) >= (64u << 20)) GTEST_SKIP() << "rmem_max is already 64 MiB";
  auto [ust, uout] =
      run("setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all "
          "--bounding-set=-all " +
          uroce_binary() + " doctor --json");
  const auto uj = nlohmann::json::parse(uout, nullptr, false);
  ASSERT_FALSE(uj.is_discarded()) << uout;
  const auto* usb = find_check(uj, "socket_buffers");
  ASSERT_NE(usb, nullptr);
  EXPECT_EQ((*usb)["level"], "WARN") << (*usb)["detail"];
  EXPECT_EQ((*usb)["fix"].get<std::string>().rfind("sysctl -w net.core.rmem_max=67108864", 0), 0u);
}

TEST_F(DoctorNetnsTest, MtuMismatchOnTheVethPairIsAFail) {
  ASSERT_TRUE(shell_ok("ip -n " + a_ + " link set " + va_ + " mtu 9000"));
  ASSERT_TRUE(shell_ok("ip -n " + b_ + " link set " + vb_ + " mtu 1500"));
  const nlohmann::json j = doctor_from_a();
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(last_status_, 1);
  const auto* path = find_check(j, "mtu_path");
  ASSERT_NE(path, nullptr) << j.dump(2);
  EXPECT_EQ((*path)["level"], "FAIL");
  EXPECT_NE(
      (*path)["detail"].get<std::string>().find("the peer's netdev MTU is 1500 (active_mtu 1024)"),
      std::string::npos)
      << (*path)["detail"];
  EXPECT_EQ((*path)["fix"].get<std::string>().rfind("ip link set dev " + va_ + " mtu 1500", 0), 0u)
      << (*path)["fix"];
}

TEST_F(DoctorNetnsTest, NftablesDropOfUdp4791IsAFailOnBothSides) {
  if (!shell_ok("command -v nft")) GTEST_SKIP() << "nft not installed";
  ASSERT_TRUE(shell_ok("ip netns exec " + b_ + " nft add table inet urtest"));
  ASSERT_TRUE(
      shell_ok("ip netns exec " + b_ +
               " nft add chain inet urtest input '{ type filter hook input priority 0; }'"));
  ASSERT_TRUE(
      shell_ok("ip netns exec " + b_ + " nft add rule inet urtest input udp dport 4791 drop"));

  const nlohmann::json j = doctor_from_a();
  ASSERT_FALSE(j.is_discarded());
  const auto* reach = find_check(j, "udp_reachability");
  ASSERT_NE(reach, nullptr);
  EXPECT_EQ((*reach)["level"], "FAIL");
  EXPECT_NE((*reach)["fix"].get<std::string>().find("nft list ruleset | grep 4791"),
            std::string::npos);

  // On B itself the local firewall check names the rule and the command that deletes it.
  auto [st, out] = run("ip netns exec " + b_ + " " + uroce_binary() + " doctor");
  EXPECT_EQ(st, 1);
  auto [hst, handles] = run("ip netns exec " + b_ + " nft -a list chain inet urtest input");
  const size_t at = handles.find("drop # handle ");
  ASSERT_NE(at, std::string::npos) << handles;
  const std::string handle = handles.substr(at + 14, handles.find('\n', at) - at - 14);
  EXPECT_NE(
      out.find("FAIL firewall: 1 rule(s) drop UDP port 4791 (RoCE v2): nft: udp dport 4791 drop"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("     fix: nft delete rule inet urtest input handle " + handle + "\n"),
            std::string::npos)
      << out;
}

// uroce pins nothing (ibv_reg_mr and the commands do not mlock): a 64 KiB memlock limit, which
// would stop kernel RDMA, is reported as not needed rather than as a failure to fix.
TEST(DoctorMemlockTest, LowMemlockLimitIsNotAWarningSinceNothingIsPinned) {
  if (!std::filesystem::exists("/usr/bin/prlimit")) GTEST_SKIP() << "prlimit not installed";
  auto [st, out] = run("/usr/bin/prlimit --memlock=65536:65536 " + uroce_binary() + " doctor");
  EXPECT_NE(out.find("PASS memlock: ulimit -l 64 KiB: not needed, uroce pins no memory "
                     "(ibv_reg_mr on the drop-in and the uroce commands do not mlock)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("memlock: ulimit -l 64 KiB: not needed, uroce pins no memory (ibv_reg_mr on "
                     "the drop-in and the uroce commands do not mlock); only C++ API programs "
                     "that call reg_mr with pin = true are limited to it\n     fix:"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace uroce::itest
