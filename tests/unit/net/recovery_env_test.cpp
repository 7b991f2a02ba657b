// UROCE_RECOVERY / UROCE_ADAPTIVE_RETRANS / UROCE_RTO_MIN_US read into a device's
// RecoveryConfig; a bad value is a one-line error naming the variable and its range.
#include "net/recovery_env.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>

namespace uroce::net {
namespace {

struct RecoveryEnvGuard {
  static void clear() {
    for (const char* n : {"UROCE_RECOVERY", "UROCE_ADAPTIVE_RETRANS", "UROCE_RTO_MIN_US"}) {
      unsetenv(n);
    }
  }
  RecoveryEnvGuard() { clear(); }
  ~RecoveryEnvGuard() { clear(); }
};

TEST(RecoveryEnv, UnsetLeavesTheDefaults) {
  RecoveryEnvGuard g;
  transport::RecoveryConfig rc;
  EXPECT_EQ(recovery_config_from_env(rc), "");
  EXPECT_TRUE(rc.adaptive);
  EXPECT_EQ(rc.min_rto, std::chrono::microseconds(200));
  EXPECT_EQ(rc.offer, transport::Recovery::kGoBackN);
}

TEST(RecoveryEnv, ReadsEveryVariable) {
  RecoveryEnvGuard g;
  setenv("UROCE_RECOVERY", "sr", 1);
  setenv("UROCE_ADAPTIVE_RETRANS", "0", 1);
  setenv("UROCE_RTO_MIN_US", "2500", 1);
  transport::RecoveryConfig rc;
  EXPECT_EQ(recovery_config_from_env(rc), "");
  EXPECT_FALSE(rc.adaptive);
  EXPECT_EQ(rc.min_rto, std::chrono::microseconds(2500));
  EXPECT_EQ(rc.offer, transport::Recovery::kSelectiveRepeat);
}

TEST(RecoveryEnv, BadMinimumRtoIsAOneLineError) {
  RecoveryEnvGuard g;
  for (const char* bad : {"0", "10000001", "1ms", "-5"}) {
    setenv("UROCE_RTO_MIN_US", bad, 1);
    transport::RecoveryConfig rc;
    EXPECT_EQ(recovery_config_from_env(rc), std::string("UROCE_RTO_MIN_US=") + bad +
                                                " is not a number of microseconds (1 .. 10000000)")
        << bad;
    EXPECT_EQ(rc.min_rto, std::chrono::microseconds(200)) << bad;
  }
}

}  // namespace
}  // namespace uroce::net
