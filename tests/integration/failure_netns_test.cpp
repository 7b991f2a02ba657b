// Failures that name their cause, between two network namespaces joined by a veth pair
// (root only; skipped otherwise). Both sides are real `uroce` processes (or Debian's
// ibv_rc_pingpong over the drop-in) started with `ip netns exec`; each case breaks the path
// one way and checks that both sides exit non-zero within a bound, with a message that says
// why (docs/diagnosing.md):
//   (a) nftables drops the UDP port in B         -> "nothing at all came back from B"
//       the client uses another UDP port         -> ICMP port unreachable, named
//   (b) veth MTU 9000 in A, 1500 in B, -m 4096   -> both sides name their path MTUs
//       B drops packets over 1400 B (both 9000)  -> "small packets are answered but
//                                                    full-size ones are not"
//   (c) an IPv6 GID toward an IPv4 peer          -> "GID index 0 is IPv6 ... use GID index 1"
//   (d) the server is killed mid-run             -> the client notices at once
// plus the drop-in's stall warning (and its off switch), and the MTU clamp of `uroce perf`.
// Namespaces, veths, TCP and UDP ports are unique per test process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "ibverbs_test_util.hpp"
#include "shell_run.hpp"

namespace uroce::itest {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using uroce::test::shell_ok;

// Waits up to `limit` for a TCP listener on `port` in namespace `ns`.
bool tcp_listening(const std::string& ns, const std::string& port, Clock::duration limit) {
  const auto deadline = Clock::now() + limit;
  const std::string cmd =
      "ip netns exec " + ns + " ss -Hltn 'sport = :" + port + "' | grep -q LISTEN";
  while (Clock::now() < deadline) {
    if (shell_ok(cmd)) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

using uroce::test::uroce_binary;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// One program in a namespace, stdout/stderr in files, killed (SIGKILL) if still running at
// destruction.
class NsProcess {
 public:
  NsProcess(const std::string& ns, const std::vector<std::pair<std::string, std::string>>& env,
            const std::vector<std::string>& argv) {
    char pattern[] = "/tmp/uroce-fail-it-XXXXXX";
    dir_ = mkdtemp(pattern) != nullptr ? pattern : "/tmp";
    pid_ = fork();
    if (pid_ == 0) {
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      if (!freopen((dir_ + "/out").c_str(), "w", stdout) ||
          !freopen((dir_ + "/err").c_str(), "w", stderr)) {
        _exit(127);
      }
      std::vector<std::string> all = {"ip", "netns", "exec", ns};
      all.insert(all.end(), argv.begin(), argv.end());
      std::vector<char*> args;
      for (std::string& a : all) args.push_back(a.data());
      args.push_back(nullptr);
      execvp("ip", args.data());
      _exit(127);
    }
  }
  ~NsProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  NsProcess(const NsProcess&) = delete;
  NsProcess& operator=(const NsProcess&) = delete;

  // Exit status, or -1 (after SIGKILL) when it ran past `limit`.
  int wait(std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    int status = 0;
    while (Clock::now() < end) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(20ms);
    }
    kill_now();
    return -1;
  }
  void kill_now() {
    if (reaped_) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    reaped_ = true;
  }
  // Waits until stderr contains `text`; false after `limit`.
  bool wait_for_stderr(const std::string& text, std::chrono::milliseconds limit) const {
    const auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      if (err().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }
  [[nodiscard]] std::string out() const { return read_file(dir_ + "/out"); }
  [[nodiscard]] std::string err() const { return read_file(dir_ + "/err"); }
  [[nodiscard]] std::string both() const { return "stdout:\n" + out() + "\nstderr:\n" + err(); }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

class FailureNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    if (!shell_ok("ip -V")) GTEST_SKIP() << "iproute2 (ip) not installed";
    const int id = getpid() % 100000;
    a_ = "urfa-" + std::to_string(id);
    b_ = "urfb-" + std::to_string(id);
    va_ = "urfa" + std::to_string(id);
    vb_ = "urfb" + std::to_string(id);
    const std::string net = "10.79." + std::to_string(id % 250) + ".";
    addr_a_ = net + "1";
    addr_b_ = net + "2";
    tcp_ = std::to_string(30000 + id % 5000);
    udp_ = std::to_string(40000 + id % 5000);
    created_ = true;
    for (const std::string& cmd :
         {"ip netns add " + a_, "ip netns add " + b_,
          "ip link add " + va_ + " type veth peer name " + vb_,
          "ip link set " + va_ + " netns " + a_, "ip link set " + vb_ + " netns " + b_,
          "ip -n " + a_ + " addr add " + addr_a_ + "/24 dev " + va_,
          "ip -n " + b_ + " addr add " + addr_b_ + "/24 dev " + vb_,
          "ip -n " + a_ + " link set " + va_ + " up", "ip -n " + b_ + " link set " + vb_ + " up",
          "ip -n " + a_ + " link set lo up", "ip -n " + b_ + " link set lo up"}) {
      ASSERT_TRUE(shell_ok(cmd)) << cmd;
    }
  }
  void TearDown() override {
    if (created_) {
      shell_ok("ip netns del " + a_);
      shell_ok("ip netns del " + b_);
    }
  }

  // The port and GID of the veth's device uroce_<veth>, which is each namespace's first device
  // (no default route; loopback last), so neither `uroce` (it takes the side channel's
  // device) nor rdma-core's programs (the first device) need -d. GID index 1 is the
  // IPv4-mapped address, 0 the link-local one.
  std::vector<std::string> dev_flags(const std::string& gid_flag, int gid = 1) const {
    return {"-i", "1", gid_flag, std::to_string(gid)};
  }
  std::vector<std::pair<std::string, std::string>> env() const {
    return {{"UROCE_UDP_PORT", udp_}, {"UROCE_PORT", udp_}};
  }
  std::vector<std::string> uroce(std::vector<std::string> args) const {
    args.insert(args.begin(), uroce_binary());
    return args;
  }
  std::vector<std::string> perf(const std::string& test, const std::string& host,
                                std::vector<std::string> extra, int gid = 1) const {
    std::vector<std::string> a = {uroce_binary(), "perf", test};
    if (!host.empty()) a.push_back(host);
    for (const std::string& f : dev_flags("-x", gid)) a.push_back(f);
    a.insert(a.end(), {"-p", tcp_, "--timeout", "40"});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  // Drops what the nft expression `match` selects on its way into namespace b (table
  // urfail, which goes with the namespace).
  void drop_in_b(const std::string& match) {
    ASSERT_TRUE(shell_ok("ip netns exec " + b_ + " nft add table inet urfail"));
    ASSERT_TRUE(
        shell_ok("ip netns exec " + b_ +
                 " nft add chain inet urfail input '{ type filter hook input priority 0; }'"));
    ASSERT_TRUE(
        shell_ok("ip netns exec " + b_ + " nft add rule inet urfail input " + match + " drop"));
  }
  void drop_udp_in_b() {
    if (!shell_ok("command -v nft")) GTEST_SKIP() << "nft not installed";
    drop_in_b("udp dport " + udp_);
  }

  std::string a_, b_, va_, vb_, addr_a_, addr_b_, tcp_, udp_;
  bool created_ = false;
};

// (a): the client's QP gets nothing back; the watchdog warns at 5 s, the client fails at
// 10 s naming UDP <port> and `uroce doctor --peer`, and the server fails because the client
// reported the failed transfer.
TEST_F(FailureNetnsTest, FirewallDropOfTheUdpPortIsNamedOnBothSides) {
  drop_udp_in_b();
  NsProcess srv(b_, env(), perf("write_bw", "", {}));
  std::this_thread::sleep_for(300ms);
  const auto t0 = Clock::now();
  NsProcess cli(a_, env(), perf("write_bw", addr_b_, {"-s", "65536", "-n", "100"}));
  const int cli_rc = cli.wait(25s);
  const auto took = Clock::now() - t0;
  const int srv_rc = srv.wait(10s);
  const std::string why = "nothing at all came back from " + addr_b_ + ": UDP " + udp_ +
                          " is dropped on the way (a firewall: nft list ruleset | grep " + udp_ +
                          "), the peer uses another UDP port, or there is no route — run uroce "
                          "doctor --peer " +
                          addr_b_;
  EXPECT_EQ(cli_rc, 1) << cli.both();
  EXPECT_LT(took, 15s);
  EXPECT_NE(cli.err().find("no response for 5 s — " + why), std::string::npos) << cli.both();
  EXPECT_NE(cli.err().find("no completion for 10 s: " + why), std::string::npos) << cli.both();
  EXPECT_EQ(srv_rc, 1) << srv.both();
  EXPECT_NE(srv.err().find("client: no completion for 10 s: " + why), std::string::npos)
      << srv.both();
}

// The side channel itself: an address on the subnet that nobody answers (ARP fails after
// about 3 s) and a firewall in B that drops the TCP port. Each is named in the command's
// own words within --timeout, not only "timed out" when the watchdog ends the wait.
TEST_F(FailureNetnsTest, ASideChannelNobodyAnswersIsNamedBeforeTheTimeout) {
  if (!shell_ok("command -v nft")) GTEST_SKIP() << "nft not installed";
  const std::string nobody = addr_b_.substr(0, addr_b_.rfind('.')) + ".77";
  {
    const auto t0 = Clock::now();
    NsProcess cli(a_, env(), uroce({"perf", "write_bw", nobody, "-p", tcp_, "--timeout", "8"}));
    EXPECT_EQ(cli.wait(20s), 1) << cli.both();
    EXPECT_LT(Clock::now() - t0, 7s);
    EXPECT_EQ(cli.err(), "uroce perf: cannot reach " + nobody +
                             " (No route to host): is the host up and the address right? (`ip "
                             "neigh show " +
                             nobody +
                             "` says whether it answered ARP, `ip route "
                             "get " +
                             nobody + "` which way it goes)\n")
        << cli.both();
  }
  ASSERT_NO_FATAL_FAILURE(drop_in_b("tcp dport " + tcp_));
  NsProcess srv(b_, env(), uroce({"pingpong", "-p", tcp_, "--timeout", "20"}));
  // The watchdog would print "uroce pingpong: timed out after 3 s" instead.
  NsProcess cli(a_, env(), uroce({"pingpong", addr_b_, "-p", tcp_, "--timeout", "3"}));
  EXPECT_EQ(cli.wait(20s), 1) << cli.both();
  EXPECT_EQ(cli.err(), "uroce pingpong: no answer from " + addr_b_ + ":" + tcp_ +
                           " (TCP connect timed out): the host is down or a firewall drops TCP " +
                           tcp_ + "\n")
      << cli.both();
}

// (b), MTU mismatch between the ends: B's veth takes 1500-byte frames, A's 9000. `uroce
// pingpong -m 4096` (rdma-core's exchange carries no MTU) clamps to B's active MTU 1024
// there and says so; A keeps 4096, so A's QP rejects B's 1024-byte packets of a 4096-byte
// message (a FIRST packet must be path-MTU long) and both sides fail at once naming the MTUs.
TEST_F(FailureNetnsTest, MtuMismatchBetweenTheEndsFailsAtOnceNamingBothMtus) {
  ASSERT_TRUE(shell_ok("ip -n " + a_ + " link set " + va_ + " mtu 9000"));
  ASSERT_TRUE(shell_ok("ip -n " + b_ + " link set " + vb_ + " mtu 1500"));
  std::vector<std::string> common = {"pingpong", "-p", tcp_, "-m",        "4096", "-s",
                                     "4096",     "-n", "20", "--timeout", "40"};
  for (const std::string& f : dev_flags("-g")) common.push_back(f);
  NsProcess srv(a_, env(), uroce(common));
  std::this_thread::sleep_for(300ms);
  std::vector<std::string> client = common;
  client.push_back(addr_a_);
  const auto t0 = Clock::now();
  NsProcess cli(b_, env(), uroce(client));
  const int cli_rc = cli.wait(20s);
  const int srv_rc = srv.wait(10s);
  EXPECT_LT(Clock::now() - t0, 5s);
  const std::string hint =
      "a QP rejects the packets of a multi-packet message that are not its "
      "own path MTU long — use the same -m on both sides, at most the smaller "
      "active MTU";
  EXPECT_EQ(cli_rc, 1) << cli.both();
  EXPECT_NE(cli.err().find("-m 4096 is larger than the active MTU 1024: using 1024"),
            std::string::npos)
      << cli.both();
  EXPECT_NE(cli.err().find("or the two sides use different path MTUs (ours is 1024): " + hint),
            std::string::npos)
      << cli.both();
  EXPECT_EQ(srv_rc, 1) << srv.both();
  EXPECT_NE(srv.err().find("or the two sides use different path MTUs (ours is 4096): " + hint),
            std::string::npos)
      << srv.both();
}

// (b), a path narrower than both ends: both veths carry 9000, but B drops every IP packet
// over 1400 bytes (as a tunnel or a 1500-MTU hop that sends no ICMP would). `uroce perf -a`
// gets its small sizes through and stalls at the first size whose packets exceed 1400 B:
// small packets are answered, full-size ones are not.
TEST_F(FailureNetnsTest, PathNarrowerThanBothEndsSaysSmallPacketsAreAnsweredButFullSizeOnesAreNot) {
  ASSERT_TRUE(shell_ok("ip -n " + a_ + " link set " + va_ + " mtu 9000"));
  ASSERT_TRUE(shell_ok("ip -n " + b_ + " link set " + vb_ + " mtu 9000"));
  if (!shell_ok("command -v nft")) GTEST_SKIP() << "nft not installed";
  ASSERT_NO_FATAL_FAILURE(drop_in_b("udp dport " + udp_ + " ip length '>' 1400"));
  // The rule stands for a narrow link, which sees packets; a UDP GSO message crosses the veth
  // as one skb that the rule would judge by the whole message's length.
  auto one_datagram_per_packet = env();
  one_datagram_per_packet.emplace_back("UROCE_GSO", "0");
  NsProcess srv(b_, one_datagram_per_packet, perf("write_bw", "", {}));
  std::this_thread::sleep_for(300ms);
  const auto t0 = Clock::now();
  NsProcess cli(a_, one_datagram_per_packet,
                perf("write_bw", addr_b_, {"-a", "-m", "4096", "-n", "20"}));
  const int cli_rc = cli.wait(30s);
  const auto took = Clock::now() - t0;
  const int srv_rc = srv.wait(10s);
  EXPECT_EQ(cli_rc, 1) << cli.both();
  EXPECT_LT(took, 20s);
  // 2048-byte WRITE ONLY: 2048 + RETH 16 + BTH 12 + ICRC 4 + UDP 8 + IPv4 20 = 2108 bytes;
  // the largest answered, the 1024-byte one, is 1084.
  const std::string why =
      "small packets are answered but full-size ones are not: path MTU 4096 (2108-byte packets) "
      "but packets over ~1084 B get no answer (netdev MTU here 9000) — use -m 1024 or raise the "
      "MTU on the path; run uroce doctor --peer " +
      addr_b_;
  EXPECT_NE(cli.err().find("no response for 5 s — " + why), std::string::npos) << cli.both();
  EXPECT_NE(cli.err().find("2048 bytes: no completion for 10 s: " + why), std::string::npos)
      << cli.both();
  EXPECT_EQ(srv_rc, 1) << srv.both();
  EXPECT_NE(srv.err().find("client: no completion for 10 s: " + why), std::string::npos)
      << srv.both();
}

// (b), this host's route narrower than the interface: both veths carry 9000, but A's route to
// B says MTU 1400 (as a tunnel's or a VPN's route does), so the local stack refuses every
// full-size packet (EMSGSIZE) and nothing leaves. The cause is certain from the first refused
// retry: the device warns at once, long before the 5 s watchdog, and only once.
TEST_F(FailureNetnsTest, ARouteNarrowerThanThePathMtuIsNamedAtOnce) {
  ASSERT_TRUE(shell_ok("ip -n " + a_ + " link set " + va_ + " mtu 9000"));
  ASSERT_TRUE(shell_ok("ip -n " + b_ + " link set " + vb_ + " mtu 9000"));
  ASSERT_TRUE(
      shell_ok("ip -n " + a_ + " route replace " + addr_b_ + "/32 dev " + va_ + " mtu 1400"));
  NsProcess srv(b_, env(), perf("write_bw", "", {}));
  std::this_thread::sleep_for(300ms);
  NsProcess cli(a_, env(), perf("write_bw", addr_b_, {"-s", "65536", "-m", "4096", "-n", "20"}));
  const std::string warning =
      "uroce: QP 0x11 to " + addr_b_ + ": no response — the network refused ";
  const auto t0 = Clock::now();
  EXPECT_TRUE(cli.wait_for_stderr(warning, 4s)) << cli.both();
  EXPECT_LT(Clock::now() - t0, 4s);
  EXPECT_EQ(cli.wait(30s), 1) << cli.both();
  const std::string err = cli.err();
  const size_t at = err.find(warning);
  ASSERT_NE(at, std::string::npos) << cli.both();
  EXPECT_NE(err.find(" as too big (ICMP fragmentation needed or EMSGSIZE, MTU 1400): path MTU "
                     "4096 does not fit this path — use -m 1024 or raise the MTU on the path",
                     at),
            std::string::npos)
      << cli.both();
  EXPECT_EQ(err.find(warning, at + 1), std::string::npos) << "warned twice:\n" << cli.both();
  EXPECT_EQ(err.find("no response for 5 s"), std::string::npos) << cli.both();
  EXPECT_NE(err.find("65536 bytes: no completion for 10 s: the network refused "),
            std::string::npos)
      << cli.both();
  EXPECT_EQ(srv.wait(10s), 1) << srv.both();
}

// `uroce perf` exchanges the MTU: the same 9000/1500 pair with -m 4096 runs at 1024, and
// both sides say so.
TEST_F(FailureNetnsTest, PerfClampsTheMtuToTheSmallerActiveMtuAndSaysSo) {
  ASSERT_TRUE(shell_ok("ip -n " + a_ + " link set " + va_ + " mtu 9000"));
  ASSERT_TRUE(shell_ok("ip -n " + b_ + " link set " + vb_ + " mtu 1500"));
  NsProcess srv(b_, env(), perf("write_bw", "", {}));
  std::this_thread::sleep_for(300ms);
  NsProcess cli(a_, env(),
                perf("write_bw", addr_b_, {"-m", "4096", "-s", "65536", "-n", "200", "--verify"}));
  EXPECT_EQ(cli.wait(30s), 0) << cli.both();
  EXPECT_EQ(srv.wait(10s), 0) << srv.both();
  EXPECT_NE(cli.err().find("the server's active MTU is 1024: using 1024 instead of 4096"),
            std::string::npos)
      << cli.both();
  EXPECT_NE(srv.err().find("the client's -m 4096 is larger than the active MTU 1024: using 1024"),
            std::string::npos)
      << srv.both();
  EXPECT_NE(cli.out().find(" Mtu             : 1024[B]"), std::string::npos) << cli.both();
}

// (c): the client gives the link-local IPv6 GID (index 0) toward an IPv4 server: both sides
// refuse at once, naming the families and the GID index that works.
TEST_F(FailureNetnsTest, Ipv6GidTowardAnIpv4PeerIsRefusedAtOnceOnBothSides) {
  NsProcess srv(b_, env(), perf("write_bw", "", {}));
  std::this_thread::sleep_for(300ms);
  const auto t0 = Clock::now();
  NsProcess cli(a_, env(), perf("write_bw", addr_b_, {"-n", "10"}, /*gid=*/0));
  const int cli_rc = cli.wait(10s);
  const auto took = Clock::now() - t0;
  const int srv_rc = srv.wait(5s);
  EXPECT_EQ(cli_rc, 1) << cli.both();
  EXPECT_LT(took, 3s);
  const std::string why = "GID index 0 is IPv6 (fe80::";
  const std::string rest = ") but the peer's GID is IPv4 (" + addr_b_ +
                           "): RoCE packets cannot cross IP families — use GID index 1 (" +
                           addr_a_ + ") with -g/-x 1";
  EXPECT_NE(cli.err().find(why), std::string::npos) << cli.both();
  EXPECT_NE(cli.err().find(rest), std::string::npos) << cli.both();
  // The server sees the same mismatch from its side and names its own IPv6 GID.
  EXPECT_EQ(srv_rc, 1) << srv.both();
  EXPECT_NE(srv.err().find("uroce perf: GID index 1 is IPv4 (" + addr_b_ +
                           ") but the peer's GID is IPv6 (fe80::"),
            std::string::npos)
      << srv.both();
  EXPECT_NE(srv.err().find("): RoCE packets cannot cross IP families — use GID index 0 (fe80::"),
            std::string::npos)
      << srv.both();
}

// (a), the wrong UDP port: the client's device uses another port than the server's, so B's
// kernel answers ICMP port unreachable, which IP_RECVERR reports to the client's sockets.
TEST_F(FailureNetnsTest, WrongUdpPortIsNamedFromIcmpPortUnreachable) {
  NsProcess srv(b_, env(), perf("write_bw", "", {}));
  std::this_thread::sleep_for(300ms);
  const std::string other = std::to_string(std::stoi(udp_) + 1);
  NsProcess cli(a_, {{"UROCE_UDP_PORT", other}},
                perf("write_bw", addr_b_, {"-s", "4096", "-n", "100"}));
  const int cli_rc = cli.wait(25s);
  const int srv_rc = srv.wait(10s);
  const std::string why = addr_b_ + " reports that nothing listens on UDP " + other +
                          " (ICMP port unreachable): the peer is not running, uses another UDP "
                          "port (UROCE_UDP_PORT), or a firewall rejects UDP " +
                          other + " — run uroce doctor --peer " + addr_b_;
  EXPECT_EQ(cli_rc, 1) << cli.both();
  EXPECT_NE(cli.err().find("no response for 5 s — " + why), std::string::npos) << cli.both();
  EXPECT_NE(cli.err().find("no completion for 10 s: " + why), std::string::npos) << cli.both();
  EXPECT_EQ(srv_rc, 1) << srv.both();
}

// (c) with `uroce pingpong` (rdma-core's exchange): the server still sends its address when
// it refuses, so both sides name the mismatch.
TEST_F(FailureNetnsTest, PingpongIpv6GidTowardAnIpv4PeerFailsAtOnceOnBothSides) {
  std::vector<std::string> server = {"pingpong", "-p", tcp_, "-n", "5", "--timeout", "20"};
  for (const std::string& f : dev_flags("-g")) server.push_back(f);
  std::vector<std::string> client = {"pingpong", "-p", tcp_, "-n", "5", "--timeout", "20"};
  for (const std::string& f : dev_flags("-g", 0)) client.push_back(f);
  client.push_back(addr_b_);
  NsProcess srv(b_, env(), uroce(server));
  std::this_thread::sleep_for(300ms);
  const auto t0 = Clock::now();
  NsProcess cli(a_, env(), uroce(client));
  EXPECT_EQ(cli.wait(10s), 1) << cli.both();
  EXPECT_EQ(srv.wait(10s), 1) << srv.both();
  EXPECT_LT(Clock::now() - t0, 3s);
  EXPECT_NE(cli.err().find("uroce pingpong: GID index 0 is IPv6 (fe80::"), std::string::npos)
      << cli.both();
  EXPECT_NE(cli.err().find(") but the peer's GID is IPv4 (" + addr_b_ +
                           "): RoCE packets cannot cross IP families — use GID index 1 (" +
                           addr_a_ + ") with -g/-x 1"),
            std::string::npos)
      << cli.both();
  EXPECT_NE(srv.err().find("uroce pingpong: GID index 1 is IPv4 (" + addr_b_ +
                           ") but the peer's GID is IPv6 (fe80::"),
            std::string::npos)
      << srv.both();
}

// (d): the server is killed mid-run; the client notices through the side channel at once.
TEST_F(FailureNetnsTest, KilledServerIsNoticedAtOnce) {
  NsProcess srv(b_, env(), perf("write_bw", "", {}));
  std::this_thread::sleep_for(300ms);
  NsProcess cli(a_, env(), perf("write_bw", addr_b_, {"-s", "65536", "-D", "30"}));
  std::this_thread::sleep_for(2s);
  srv.kill_now();
  const auto t0 = Clock::now();
  const int cli_rc = cli.wait(10s);
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_EQ(cli_rc, 1) << cli.both();
  EXPECT_NE(cli.err().find("the server closed the side channel during the run: its process is "
                           "gone (killed or crashed)"),
            std::string::npos)
      << cli.both();
}

// The drop-in: Debian's ibv_rc_pingpong retries forever (retry_cnt 7); with B's UDP port
// dropped, A gets one explained warning after 5 s, and none with UROCE_WATCHDOG=0.
TEST_F(FailureNetnsTest, DropInWarnsOnceAboutAStalledQpUnlessSwitchedOff) {
  const std::string tool = "/usr/bin/ibv_rc_pingpong";
  if (!std::filesystem::exists(tool)) GTEST_SKIP() << "ibv_rc_pingpong not installed";
  drop_udp_in_b();
  const std::string lib = std::string(UROCE_BINARY_DIR) + "/lib";
  for (const bool on : {true, false}) {
    auto e = env();
    e.emplace_back("LD_LIBRARY_PATH", lib);
    // Under ASan/UBSan the drop-in is instrumented: Debian's program needs the runtimes first.
    if (const std::string preload = ibtest::sanitizer_preload(); !preload.empty()) {
      e.emplace_back("LD_PRELOAD", preload);
      e.emplace_back("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1");
    }
    if (!on) e.emplace_back("UROCE_WATCHDOG", "0");
    std::vector<std::string> args = {tool, "-p", tcp_};
    for (const std::string& f : dev_flags("-g")) args.push_back(f);
    NsProcess srv(b_, e, args);
    // Under a sanitizer on a loaded machine the server can take seconds to listen; a client
    // that finds no listener exits at once ("Couldn't connect") and the test would wait for a
    // warning that can never come.
    ASSERT_TRUE(tcp_listening(b_, tcp_, 20s)) << srv.both();
    args.push_back(addr_b_);
    NsProcess cli(a_, e, args);
    const std::string warning = " to " + addr_b_ +
                                ": no response for 5 s — nothing at all came back from " + addr_b_ +
                                ": UDP " + udp_ + " is dropped on the way";
    if (on) {
      EXPECT_TRUE(cli.wait_for_stderr(warning, 12s)) << cli.both();
      std::this_thread::sleep_for(1s);
      const std::string err = cli.err();
      EXPECT_EQ(err.find("uroce: QP 0x"), err.rfind("uroce: QP 0x")) << "warned twice:\n" << err;
    } else {
      std::this_thread::sleep_for(8s);
      EXPECT_EQ(cli.err().find("no response for"), std::string::npos) << cli.both();
    }
    cli.kill_now();
    srv.kill_now();
  }
}

}  // namespace
}  // namespace uroce::itest
