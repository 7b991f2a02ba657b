// `uroce doctor`'s parsers and verdicts on exact inputs: nft and iptables-save listings,
// memlock limits, socket buffers (sysctls and what a socket is granted), governors,
// /proc/meminfo, the tcp_ecn line.
#include "cli/doctor_checks.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

namespace uroce::cli {
namespace {

constexpr const char* kNftRuleset = R"(table inet filter { # handle 7
	chain input { # handle 1
		type filter hook input priority filter; policy accept;
		tcp dport 4791 drop # handle 2
		udp dport 53 accept # handle 3
		udp dport 4791 counter packets 12 bytes 1200 drop # handle 4
	}
	chain output { # handle 5
		type filter hook output priority filter; policy accept;
		udp dport { 80, 4791 } reject # handle 6
		udp dport 4000-4790 drop # handle 8
	}
}
table ip nat { # handle 9
	chain pre { # handle 10
		udp dport 4791 accept # handle 11
	}
}
)";

TEST(DoctorChecksTest, NftDropRulesOnUdp4791AndTheirFix) {
  auto drops = parse_nft_drops(kNftRuleset, 4791);
  ASSERT_EQ(drops.size(), 2u);
  EXPECT_EQ(drops[0].rule, "udp dport 4791 counter packets 12 bytes 1200 drop # handle 4");
  EXPECT_EQ(drops[0].fix, "nft delete rule inet filter input handle 4");
  EXPECT_EQ(drops[1].fix, "nft delete rule inet filter output handle 6");
  EXPECT_TRUE(parse_nft_drops(kNftRuleset, 4792).empty());
}

TEST(DoctorChecksTest, IptablesSaveDropRulesAndTheirFix) {
  const std::string save =
      "*raw\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -p udp -m udp --dport 4791 -j DROP\nCOMMIT\n"
      "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp -m tcp --dport 4791 -j DROP\n"
      "-A INPUT -p udp -m multiport --dports 80,4700:4800 -j REJECT --reject-with "
      "icmp-port-unreachable\n-A INPUT -p udp -m udp --dport 4791 -j ACCEPT\nCOMMIT\n";
  auto drops = parse_iptables_drops(save, 4791, "iptables");
  ASSERT_EQ(drops.size(), 2u);
  EXPECT_EQ(drops[0].fix, "iptables -t raw -D PREROUTING -p udp -m udp --dport 4791 -j DROP");
  EXPECT_EQ(drops[1].fix,
            "iptables -D INPUT -p udp -m multiport --dports 80,4700:4800 -j REJECT --reject-with "
            "icmp-port-unreachable");
}

// uroce pins nothing unless a C++ API program asks (reg_mr with pin = true): whatever the
// limit, memlock is a PASS that says so, never a WARN or FAIL with a fix to apply.
TEST(DoctorChecksTest, MemlockIsNeverAWarningBecauseNothingIsPinned) {
  for (uint64_t limit : {uint64_t{RLIM_INFINITY}, uint64_t{128} << 20, uint64_t{8} << 20,
                         uint64_t{64} << 10, uint64_t{0}}) {
    const CheckResult r = check_memlock_value(limit);
    EXPECT_EQ(r.level, CheckLevel::kPass) << limit;
    EXPECT_TRUE(r.fix.empty()) << limit;
  }
  EXPECT_EQ(format_check(check_memlock_value(64 << 10)),
            "PASS memlock: ulimit -l 64 KiB: not needed, uroce pins no memory (ibv_reg_mr on the "
            "drop-in and the uroce commands do not mlock); only C++ API programs that call reg_mr "
            "with pin = true are limited to it\n");
  EXPECT_EQ(check_memlock_value(RLIM_INFINITY).detail.rfind("ulimit -l unlimited: not needed", 0),
            0u);
}

TEST(DoctorChecksTest, SocketBuffersWarnOnlyWhenASocketGetsLessThanUroceAsks) {
  // Limits high enough: granted without force.
  const CheckResult ok = check_socket_buffers(64 << 20, 4 << 20, {64 << 20, 4 << 20});
  EXPECT_EQ(ok.level, CheckLevel::kPass);
  EXPECT_EQ(ok.detail,
            "a uroce socket gets SO_RCVBUF 67108864 (asks 67108864) and SO_SNDBUF 4194304 (asks "
            "4194304); net.core.rmem_max=67108864, net.core.wmem_max=4194304");
  // Root: the limits are low but SO_RCVBUFFORCE/SO_SNDBUFFORCE got the full size.
  const CheckResult root = check_socket_buffers(212992, 212992, {64 << 20, 4 << 20});
  EXPECT_EQ(root.level, CheckLevel::kPass);
  EXPECT_TRUE(root.fix.empty());
  EXPECT_EQ(root.detail,
            "a uroce socket gets SO_RCVBUF 67108864 (asks 67108864) and SO_SNDBUF 4194304 (asks "
            "4194304); net.core.rmem_max=212992, net.core.wmem_max=212992 (above the limits "
            "through SO_RCVBUFFORCE/SO_SNDBUFFORCE: CAP_NET_ADMIN)");
  // Unprivileged: capped at the limits.
  const CheckResult user = check_socket_buffers(212992, 212992, {212992, 212992});
  EXPECT_EQ(user.level, CheckLevel::kWarn);
  EXPECT_EQ(user.fix,
            "sysctl -w net.core.rmem_max=67108864 && sysctl -w net.core.wmem_max=4194304");
  const CheckResult rcv_only = check_socket_buffers(4 << 20, 4 << 20, {4 << 20, 4 << 20});
  EXPECT_EQ(rcv_only.level, CheckLevel::kWarn);
  EXPECT_EQ(rcv_only.fix, "sysctl -w net.core.rmem_max=67108864");
}

// The probe asks like UdpPort does; as root SO_RCVBUFFORCE gets the full size whatever
// net.core.rmem_max says, unprivileged it gets at most the limit.
TEST(DoctorChecksTest, SocketBufferProbeGetsWhatAUroceSocketGets) {
  const SocketBuffers b = probe_socket_buffers();
  const uint64_t rmem_max = std::stoull(trim(read_text_file("/proc/sys/net/core/rmem_max")));
  if (geteuid() == 0) {
    EXPECT_EQ(b.rcvbuf, uint64_t{64} << 20);
    EXPECT_EQ(b.sndbuf, uint64_t{4} << 20);
    EXPECT_EQ(check_socket_buffers(rmem_max, 0, b).level, CheckLevel::kPass);
  } else {
    EXPECT_EQ(b.rcvbuf, std::min<uint64_t>(rmem_max, uint64_t{64} << 20));
  }
}

TEST(DoctorChecksTest, TrimDropsTheNewlineOfProcFiles) {
  EXPECT_EQ(trim("2\n"), "2");
  EXPECT_EQ(trim("  performance\r\n"), "performance");
  EXPECT_EQ(trim("\n"), "");
}

// net.ipv4.tcp_ecn is read with its newline; the line names what the value means for TCP and
// that RoCE's ECN is not governed by it.
TEST(DoctorChecksTest, TcpEcnLineSaysWhatTheValueMeansAndThatRoceIgnoresIt) {
  EXPECT_EQ(tcp_ecn_meaning("0"), "TCP never negotiates ECN");
  EXPECT_EQ(tcp_ecn_meaning("1"),
            "TCP requests ECN on outgoing connections and accepts it on incoming ones");
  EXPECT_EQ(tcp_ecn_meaning("2"),
            "TCP accepts ECN when an incoming connection asks and never requests it, the kernel "
            "default");
  EXPECT_EQ(tcp_ecn_meaning("3"), "TCP requests and accepts Accurate ECN");
  EXPECT_EQ(tcp_ecn_meaning("7"), "a value this uroce does not know");
  const CheckResult r = check_dscp_ecn("2\n");
  EXPECT_EQ(r.level, CheckLevel::kPass);
  EXPECT_EQ(r.detail.find('\n'), std::string::npos) << r.detail;
  const std::string tail =
      ". RoCE's ECN is those ECN bits, marked CE by switches and counted as "
      "np_ecn_marked_roce_packets; net.ipv4.tcp_ecn=2 (TCP accepts ECN when an incoming "
      "connection asks and never requests it, the kernel default) is TCP's setting and changes "
      "nothing for RoCE";
  ASSERT_GE(r.detail.size(), tail.size());
  EXPECT_EQ(r.detail.substr(r.detail.size() - tail.size()), tail) << r.detail;
  EXPECT_EQ(check_dscp_ecn("").detail.find("tcp_ecn"), std::string::npos);
  EXPECT_NE(check_dscp_ecn("0\n").detail.find("net.ipv4.tcp_ecn=0 (TCP never negotiates ECN)"),
            std::string::npos);
}

TEST(DoctorChecksTest, GovernorAndHugepages) {
  EXPECT_EQ(check_governor({}).level, CheckLevel::kPass);
  EXPECT_EQ(check_governor({"performance", "performance"}).level, CheckLevel::kPass);
  const CheckResult g = check_governor({"powersave", "performance"});
  EXPECT_EQ(g.level, CheckLevel::kWarn);
  EXPECT_EQ(g.fix, "cpupower frequency-set -g performance");
  const CheckResult h = check_hugepages(
      "HugePages_Total:      16\nHugePages_Free:        8\n"
      "Hugepagesize:       2048 kB\n");
  EXPECT_EQ(h.level, CheckLevel::kPass);
  EXPECT_NE(h.detail.find("8 of 16 huge pages of 2048 kB free"), std::string::npos);
}

TEST(DoctorChecksTest, JsonCarriesLevelAndFix) {
  const nlohmann::json j = check_json(check_socket_buffers(212992, 212992, {212992, 212992}));
  EXPECT_EQ(j["check"], "socket_buffers");
  EXPECT_EQ(j["level"], "WARN");
  EXPECT_EQ(j["fix"],
            "sysctl -w net.core.rmem_max=67108864 && sysctl -w net.core.wmem_max=4194304");
  EXPECT_FALSE(check_json(check_memlock_value(64 << 10)).contains("fix"));
}

}  // namespace
}  // namespace uroce::cli
