// `uroce switch`'s value parsing: rates and sizes in tc's units, --ecn and --pfc lists.
#include "cli/switch_options.hpp"

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

}  // namespace
}  // namespace uroce::cli
