// `uroce switch`'s value parsing: rates and sizes in tc's units, --ecn and --pfc lists, and the
// priority options (--pfc PRIO, --strict, --prio-map, --dwrr).
#include "cli/switch_options.hpp"

#include "cli/switch_forwarder.hpp"

#include <gtest/gtest.h>

namespace uroce::cli {
namespace {

TEST(SwitchOptions, RatesInTcUnits) {
  std::string e;
  EXPECT_EQ(parse_rate("1gbit", e), 125'000'000u);
  EXPECT_EQ(parse_rate("1Gbit", e), 125'000'000u);
  EXPECT_EQ(parse_rate("100mbit", e), 12'500'000u);
  EXPECT_EQ(parse_rate("2500kbit", e), 312'500u);
  EXPECT_EQ(parse_rate("1000000", e), 125'000u);      // bare number: bit/s, as tc
  EXPECT_EQ(parse_rate("125mbps", e), 125'000'000u);  // bytes/s, as tc
  EXPECT_EQ(parse_rate("2.5gbit", e), 312'500'000u);
  EXPECT_EQ(parse_rate("unlimited", e), 0u);
  EXPECT_EQ(parse_rate("0", e), 0u);
  EXPECT_FALSE(parse_rate("1gbits", e));
  EXPECT_FALSE(parse_rate("gbit", e));
  EXPECT_FALSE(parse_rate("-1gbit", e));
  EXPECT_FALSE(parse_rate("1bit", e));  // rounds to 0 bytes/s
  EXPECT_EQ(e, "rate '1bit' rounds to 0 bytes/s; use at least 8bit or 'unlimited'");
}

TEST(SwitchOptions, SizesInTcUnits) {
  std::string e;
  EXPECT_EQ(parse_size("1500", e), 1500u);
  EXPECT_EQ(parse_size("512KB", e), 524'288u);
  EXPECT_EQ(parse_size("512k", e), 524'288u);
  EXPECT_EQ(parse_size("2MiB", e), 2'097'152u);
  EXPECT_EQ(parse_size("1.5mb", e), 1'572'864u);
  EXPECT_FALSE(parse_size("12XB", e));
  EXPECT_FALSE(parse_size("", e));
}

TEST(SwitchOptions, EcnList) {
  std::string e;
  fabric::RedParams red;
  ASSERT_TRUE(parse_ecn("kmin=20KB,kmax=200KB,pmax=0.2", red, e)) << e;
  EXPECT_TRUE(red.enabled);
  EXPECT_EQ(red.kmin_bytes, 20480u);
  EXPECT_EQ(red.kmax_bytes, 204800u);
  EXPECT_DOUBLE_EQ(red.pmax, 0.2);
  EXPECT_EQ(red.at, fabric::MarkPoint::kDequeue);
  ASSERT_TRUE(parse_ecn("kmin=5000,kmax=200k,pmax=1,at=enqueue", red, e)) << e;
  EXPECT_EQ(red.kmin_bytes, 5000u);
  EXPECT_EQ(red.at, fabric::MarkPoint::kEnqueue);
  EXPECT_FALSE(parse_ecn("kmin=1k,kmax=2k,pmax=0.1,burst=3", red, e));
  EXPECT_EQ(e, "--ecn: unknown key 'burst'; use kmin, kmax, pmax, at");
  EXPECT_FALSE(parse_ecn("kmin=1k,kmax=2k,pmax=0.1,at=middle", red, e));
  EXPECT_EQ(e, "--ecn at 'middle' is not valid; use enqueue or dequeue");
  EXPECT_FALSE(parse_ecn("kmin", red, e));
  EXPECT_EQ(e, "--ecn: 'kmin' is not key=value");
  EXPECT_FALSE(parse_ecn("kmin=1q,kmax=2k,pmax=0.1", red, e));
  EXPECT_EQ(e,
            "--ecn kmin: size '1q' is not valid; use bytes with an optional unit, e.g. 1500, "
            "512KB, 2MB");
}

TEST(SwitchOptions, PfcList) {
  std::string e;
  fabric::PfcParams pfc;
  ASSERT_TRUE(parse_pfc("xoff=64KB,xon=32KB,headroom=16KB", pfc, e)) << e;
  EXPECT_EQ(pfc.xoff_bytes, 65536u);
  EXPECT_EQ(pfc.xon_bytes, 32768u);
  EXPECT_EQ(pfc.headroom_bytes, 16384u);
  EXPECT_FALSE(parse_pfc("xoff=64KB", pfc, e));
  EXPECT_EQ(e, "--pfc needs xoff and xon, e.g. xoff=64KB,xon=32KB");
  EXPECT_FALSE(parse_pfc("xoff=64KB,xon=1KB,pause=1", pfc, e));
  EXPECT_EQ(e, "--pfc: unknown key 'pause'; use xoff, xon, headroom");
}

// --pfc takes thresholds, lossless priorities, or both in one value.
TEST(SwitchOptions, PfcArgPrioritiesAndThresholds) {
  std::string e;
  fabric::PfcParams pfc{.xoff_bytes = 65536, .xon_bytes = 32768, .headroom_bytes = 0};
  bool thresholds = false;
  PriorityMask lossless = 0;
  ASSERT_TRUE(parse_pfc_arg("3", pfc, thresholds, lossless, e)) << e;
  EXPECT_EQ(lossless, 0x08);
  EXPECT_FALSE(thresholds);
  EXPECT_EQ(pfc.xoff_bytes, 65536u);  // untouched
  ASSERT_TRUE(parse_pfc_arg("0,7,xoff=16KB,xon=8KB", pfc, thresholds, lossless, e)) << e;
  EXPECT_EQ(lossless, 0x89);
  EXPECT_TRUE(thresholds);
  EXPECT_EQ(pfc.xoff_bytes, 16384u);
  EXPECT_EQ(pfc.xon_bytes, 8192u);
  thresholds = false;
  lossless = 0;
  ASSERT_TRUE(parse_pfc_arg("xoff=64KB,xon=32KB", pfc, thresholds, lossless, e)) << e;
  EXPECT_TRUE(thresholds);
  EXPECT_EQ(lossless, 0);
  EXPECT_FALSE(parse_pfc_arg("8", pfc, thresholds, lossless, e));
  EXPECT_EQ(e,
            "--pfc: '8' is neither a priority (0..7) nor key=value; use e.g. 3,4 or "
            "xoff=64KB,xon=32KB");
  EXPECT_FALSE(parse_pfc_arg("3,,4", pfc, thresholds, lossless, e));
  EXPECT_EQ(e,
            "--pfc: '' is neither a priority (0..7) nor key=value; use e.g. 3,4 or "
            "xoff=64KB,xon=32KB");
  EXPECT_FALSE(parse_pfc_arg("3,xoff=64KB", pfc, thresholds, lossless, e));
  EXPECT_EQ(e, "--pfc needs xoff and xon, e.g. xoff=64KB,xon=32KB");
}

TEST(SwitchOptions, StrictPriorities) {
  std::string e;
  PriorityMask m = 0;
  ASSERT_TRUE(parse_priorities("6", "--strict", m, e)) << e;
  EXPECT_EQ(m, 0x40);
  ASSERT_TRUE(parse_priorities("7,5", "--strict", m, e)) << e;
  EXPECT_EQ(m, 0xE0);
  EXPECT_FALSE(parse_priorities("9", "--strict", m, e));
  EXPECT_EQ(e, "--strict: priority '9' is not valid; use 0..7, e.g. 3 or 3,4");
  EXPECT_FALSE(parse_priorities("-1", "--strict", m, e));
  EXPECT_EQ(e, "--strict: priority '-1' is not valid; use 0..7, e.g. 3 or 3,4");
  EXPECT_FALSE(parse_priorities("", "--strict", m, e));
  EXPECT_EQ(e, "--strict: priority '' is not valid; use 0..7, e.g. 3 or 3,4");
}

TEST(SwitchOptions, DscpMapDefaultAndOverrides) {
  std::string e;
  DscpMap m = default_dscp_map();
  EXPECT_EQ(m[0], 0);
  EXPECT_EQ(m[7], 0);
  EXPECT_EQ(m[8], 1);
  EXPECT_EQ(m[26], 3);  // RoCE's usual DSCP
  EXPECT_EQ(m[46], 5);  // EF
  EXPECT_EQ(m[48], 6);  // CS6, the mlx5 CNP DSCP
  EXPECT_EQ(m[63], 7);
  ASSERT_TRUE(parse_prio_map("26=1,48=2", m, e)) << e;
  EXPECT_EQ(m[26], 1);
  EXPECT_EQ(m[48], 2);
  EXPECT_EQ(m[27], 3);  // the rest unchanged
  EXPECT_FALSE(parse_prio_map("26", m, e));
  EXPECT_EQ(e, "--prio-map: '26' is not DSCP=PRIO, e.g. 26=3,48=6");
  EXPECT_FALSE(parse_prio_map("64=1", m, e));
  EXPECT_EQ(e, "--prio-map: DSCP '64' is not valid; use 0..63");
  EXPECT_FALSE(parse_prio_map("26=8", m, e));
  EXPECT_EQ(e, "--prio-map: priority '8' is not valid; use 0..7");
  EXPECT_FALSE(parse_prio_map("x=1", m, e));
  EXPECT_EQ(e, "--prio-map: DSCP 'x' is not valid; use 0..63");
}

TEST(SwitchOptions, DwrrWeights) {
  std::string e;
  DwrrWeights w;
  ASSERT_TRUE(parse_dwrr("1,2,4", w, e)) << e;
  EXPECT_EQ(w.count, 3u);
  EXPECT_EQ(w.weight[0], 1u);
  EXPECT_EQ(w.weight[1], 2u);
  EXPECT_EQ(w.weight[2], 4u);
  ASSERT_TRUE(parse_dwrr("1000,1,1,1,1,1,1,1", w, e)) << e;
  EXPECT_EQ(w.count, 8u);
  EXPECT_FALSE(parse_dwrr("1,0", w, e));
  EXPECT_EQ(e, "--dwrr: weight '0' is not valid; use an integer in 1..1000");
  EXPECT_FALSE(parse_dwrr("1001", w, e));
  EXPECT_EQ(e, "--dwrr: weight '1001' is not valid; use an integer in 1..1000");
  EXPECT_FALSE(parse_dwrr("1.5", w, e));
  EXPECT_EQ(e, "--dwrr: weight '1.5' is not valid; use an integer in 1..1000");
  EXPECT_FALSE(parse_dwrr("1,1,1,1,1,1,1,1,1", w, e));
  EXPECT_EQ(e, "--dwrr: more than 8 weights; give one per priority, e.g. 1,1,1,4");
}

TEST(SwitchOptions, RocePortsAndRanges) {
  UdpPortSet ports;
  std::string error;
  ASSERT_TRUE(parse_udp_ports("4791", "--roce-port", ports, error)) << error;
  EXPECT_EQ(ports.count(), 1u);
  EXPECT_TRUE(ports.test(4791));
  ASSERT_TRUE(parse_udp_ports("4800-4803,1,65535", "--roce-port", ports, error)) << error;
  EXPECT_EQ(ports.count(), 7u);
  EXPECT_TRUE(ports.test(4800) && ports.test(4803) && ports.test(1) && ports.test(65535));
  EXPECT_FALSE(ports.test(4804));
  for (const char* bad : {"", "0", "65536", "4791-", "-4791", "4799-4791", "47a", "4791,,4792"}) {
    UdpPortSet p;
    EXPECT_FALSE(parse_udp_ports(bad, "--roce-port", p, error)) << bad;
  }
  UdpPortSet p;
  EXPECT_FALSE(parse_udp_ports("4799-4791", "--roce-port", p, error));
  EXPECT_EQ(error,
            "--roce-port: '4799-4791' is not a UDP port or range; use e.g. 4791, 4791-4799 or "
            "4791,5000 (ports 1..65535)");
}

// Frame buffers hold the largest port's MTU with vnet, Ethernet and VLAN headers: a buffer
// smaller than a frame would send the frame around the queue model.
TEST(SwitchOptions, FrameSlotsFitTheLargestPortMtu) {
  EXPECT_EQ(frame_slot_bytes(1500), 2048u);  // never below 2 KiB
  EXPECT_EQ(frame_slot_bytes(4096), 4160u);  // 10 + 14 + 4 + 4096 = 4124, in 64-byte lines
  EXPECT_EQ(frame_slot_bytes(9000), 9088u);  // 9028 -> 9088
  EXPECT_EQ(default_frame_slots(2048), 32768u);
  EXPECT_EQ(default_frame_slots(9088), (64u << 20) / 9088u);
}

}  // namespace
}  // namespace uroce::cli
