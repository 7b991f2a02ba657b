// UROCE_CC / UROCE_DCQCN read into a device's CcConfig; a bad value is the parser's error.
#include "net/cc_env.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace uroce::net {
namespace {

struct CcEnvGuard {
  CcEnvGuard() {
    unsetenv("UROCE_CC");
    unsetenv("UROCE_DCQCN");
  }
  ~CcEnvGuard() {
    unsetenv("UROCE_CC");
    unsetenv("UROCE_DCQCN");
  }
};

TEST(CcEnv, UnsetLeavesTheDefaults) {
  CcEnvGuard g;
  transport::CcConfig cc;
  EXPECT_EQ(cc_config_from_env(cc), "");
  EXPECT_EQ(cc.algorithm, transport::CcAlgorithm::kNone);
  EXPECT_EQ(cc.dcqcn.rpg_time_reset, transport::DcqcnParams{}.rpg_time_reset);
}

TEST(CcEnv, ReadsAlgorithmAndParameters) {
  CcEnvGuard g;
  setenv("UROCE_CC", "dcqcn", 1);
  setenv("UROCE_DCQCN", "rpg_ai_rate=40,min_time_between_cnps=50", 1);
  transport::CcConfig cc;
  EXPECT_EQ(cc_config_from_env(cc), "");
  EXPECT_EQ(cc.algorithm, transport::CcAlgorithm::kDcqcn);
  EXPECT_EQ(cc.dcqcn.rpg_ai_rate, 40u);
  EXPECT_EQ(cc.dcqcn.min_time_between_cnps, 50u);
}

TEST(CcEnv, BadValuesAreOneLineErrors) {
  CcEnvGuard g;
  setenv("UROCE_CC", "reno", 1);
  transport::CcConfig cc;
  EXPECT_EQ(cc_config_from_env(cc),
            "UROCE_CC: unknown congestion control 'reno'; use none or dcqcn");
  setenv("UROCE_CC", "dcqcn", 1);
  setenv("UROCE_DCQCN", "rpg_gd=99", 1);
  EXPECT_EQ(cc_config_from_env(cc), "UROCE_DCQCN: rpg_gd=99 is out of range; use 0..30");
}

// The command line after the environment: --cc replaces UROCE_CC, a --dcqcn name replaces
// UROCE_DCQCN's value of it and the variable's other names stay.
TEST(CcEnv, CommandLineWinsNameByName) {
  CcEnvGuard g;
  setenv("UROCE_CC", "dcqcn", 1);
  setenv("UROCE_DCQCN", "rpg_ai_rate=40,rpg_time_reset=100", 1);
  transport::CcConfig cc;
  ASSERT_EQ(cc_config_from_env(cc), "");
  CcOverride o;
  o.algorithm = transport::CcAlgorithm::kNone;
  o.dcqcn = "rpg_time_reset=55";
  EXPECT_EQ(apply_cc_override(o, cc), "");
  EXPECT_EQ(cc.algorithm, transport::CcAlgorithm::kNone);
  EXPECT_EQ(cc.dcqcn.rpg_ai_rate, 40u);
  EXPECT_EQ(cc.dcqcn.rpg_time_reset, 55u);
  EXPECT_EQ(apply_cc_override(CcOverride{.algorithm = {}, .dcqcn = "rpg_gd=31"}, cc),
            "--dcqcn: rpg_gd=31 is out of range; use 0..30");
  EXPECT_EQ(cc.dcqcn.rpg_gd, 11u);  // a failed list changes nothing
  EXPECT_EQ(apply_cc_override(CcOverride{}, cc), "");
  EXPECT_EQ(cc.algorithm, transport::CcAlgorithm::kNone);
}

// DCQCN's line rate: the netdev's speed, 10 Gb/s when the driver does not know it.
TEST(CcEnv, LineRateFromTheNetdevSpeed) {
  EXPECT_EQ(line_rate_from_speed(-1), 10000u);  // lo, virtio without a speed
  EXPECT_EQ(line_rate_from_speed(0), 10000u);
  EXPECT_EQ(line_rate_from_speed(10000), 10000u);  // veth
  EXPECT_EQ(line_rate_from_speed(1000), 1000u);
  EXPECT_EQ(line_rate_from_speed(400000), 400000u);
}

}  // namespace
}  // namespace uroce::net
