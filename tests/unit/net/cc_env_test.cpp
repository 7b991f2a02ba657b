// UROCE_CC / UROCE_DCQCN read into a device's CcConfig; a bad value is the parser's error.
#include "net/cc_env.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace uroce::net {
namespace {

struct EnvGuard {
  EnvGuard() {
    unsetenv("UROCE_CC");
    unsetenv("UROCE_DCQCN");
  }
  ~EnvGuard() {
    unsetenv("UROCE_CC");
    unsetenv("UROCE_DCQCN");
  }
};

TEST(CcEnv, UnsetLeavesTheDefaults) {
  EnvGuard g;
  transport::CcConfig cc;
  EXPECT_EQ(cc_config_from_env(cc), "");
  EXPECT_EQ(cc.algorithm, transport::CcAlgorithm::kNone);
  EXPECT_EQ(cc.dcqcn.rpg_time_reset, transport::DcqcnParams{}.rpg_time_reset);
}

TEST(CcEnv, ReadsAlgorithmAndParameters) {
  EnvGuard g;
  setenv("UROCE_CC", "dcqcn", 1);
  setenv("UROCE_DCQCN", "rpg_ai_rate=40,min_time_between_cnps=50", 1);
  transport::CcConfig cc;
  EXPECT_EQ(cc_config_from_env(cc), "");
  EXPECT_EQ(cc.algorithm, transport::CcAlgorithm::kDcqcn);
  EXPECT_EQ(cc.dcqcn.rpg_ai_rate, 40u);
  EXPECT_EQ(cc.dcqcn.min_time_between_cnps, 50u);
}

TEST(CcEnv, BadValuesAreOneLineErrors) {
  EnvGuard g;
  setenv("UROCE_CC", "reno", 1);
  transport::CcConfig cc;
  EXPECT_EQ(cc_config_from_env(cc),
            "UROCE_CC: unknown congestion control 'reno'; use none or dcqcn");
  setenv("UROCE_CC", "dcqcn", 1);
  setenv("UROCE_DCQCN", "rpg_gd=99", 1);
  EXPECT_EQ(cc_config_from_env(cc), "UROCE_DCQCN: rpg_gd=99 is out of range; use 0..30");
}

}  // namespace
}  // namespace uroce::net
