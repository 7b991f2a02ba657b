// `uroce doctor`'s parsers and verdicts on exact inputs: nft and iptables-save listings,
// memlock limits, socket buffer sysctls, governors, /proc/meminfo.
#include "cli/doctor_checks.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

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

TEST(DoctorChecksTest, MemlockLevels) {
  EXPECT_EQ(check_memlock_value(RLIM_INFINITY).level, CheckLevel::kPass);
  EXPECT_EQ(check_memlock_value(128ull << 20).level, CheckLevel::kPass);
  EXPECT_EQ(check_memlock_value(8ull << 20).level, CheckLevel::kWarn);
  const CheckResult low = check_memlock_value(64 << 10);
  EXPECT_EQ(low.level, CheckLevel::kFail);
  EXPECT_EQ(format_check(low),
            "FAIL memlock: ulimit -l 64 KiB: pinned (mlock'd) memory regions are limited to that; "
            "registering a pinned MR of 1 MiB fails with ENOMEM\n"
            "     fix: ulimit -l unlimited (or in /etc/security/limits.conf: '* - memlock "
            "unlimited', or LimitMEMLOCK=infinity in the systemd unit)\n");
}

TEST(DoctorChecksTest, SocketBuffersAgainstWhatUroceAsks) {
  EXPECT_EQ(check_socket_buffers(16 << 20, 4 << 20).level, CheckLevel::kPass);
  const CheckResult r = check_socket_buffers(212992, 212992);
  EXPECT_EQ(r.level, CheckLevel::kWarn);
  EXPECT_EQ(r.fix, "sysctl -w net.core.rmem_max=16777216 && sysctl -w net.core.wmem_max=4194304");
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
  const nlohmann::json j = check_json(check_memlock_value(64 << 10));
  EXPECT_EQ(j["check"], "memlock");
  EXPECT_EQ(j["level"], "FAIL");
  EXPECT_TRUE(j.contains("fix"));
}

}  // namespace
}  // namespace uroce::cli
