// libibverbs.so.1 drop-in: device listing and attributes through Debian's unmodified
// ibv_devices and ibv_devinfo, and the library's exported ABI against Debian's own
// libibverbs.so.1 (every default-version symbol, with its version node).
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "ibverbs_test_util.hpp"

namespace uroce::ibtest {
namespace {

class IbverbsDevices : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(have_program(lib_dir() + "/libibverbs.so.1")) << "build uroce_ibverbs first";
  }
  ToolEnv env_;
};

// One device per netdev, named like rxe's (uroce_<netdev>), loopback last in the list.
TEST_F(IbverbsDevices, IbvDevicesListsOneDevicePerNetdevLoopbackLast) {
  if (!have_program("/usr/bin/ibv_devices")) GTEST_SKIP() << "ibverbs-utils not installed";
  Process p({"ibv_devices"}, env_);
  ProcResult r = p.wait(20s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("    device          \t   node GUID"), std::string::npos) << r.output;
  EXPECT_EQ(count_lines_with(r.output, "    uroce_lo        \t00007ffffe000001"), 1) << r.output;
  EXPECT_TRUE(r.output.ends_with("    uroce_lo        \t00007ffffe000001\n")) << r.output;
  EXPECT_EQ(count_lines_with(r.output, "uroce0"), 0) << r.output;

  env_.vars["UROCE_NETDEVS"] = "lo";
  Process only_lo({"ibv_devices"}, env_);
  ProcResult lo = only_lo.wait(20s);
  ASSERT_EQ(lo.exit_code, 0) << lo.output;
  EXPECT_EQ(count_lines_with(lo.output, "    uroce_"), 1) << lo.output;
  EXPECT_EQ(count_lines_with(lo.output, "    uroce_lo        \t00007ffffe000001"), 1) << lo.output;
}

TEST_F(IbverbsDevices, IbvDevinfoVerboseShowsRoceV2Port) {
  if (!have_program("/usr/bin/ibv_devinfo")) GTEST_SKIP() << "ibverbs-utils not installed";
  env_.vars["UROCE_NETDEVS"] = "lo";
  Process p({"ibv_devinfo", "-v"}, env_);
  ProcResult r = p.wait(20s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {
           "hca_id:\turoce_lo\n",
           "\ttransport:\t\t\tInfiniBand (0)\n",
           "\tvendor_id:\t\t\t0xffffff\n",
           "\tphys_port_cnt:\t\t\t1\n",
           "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n",
           "\t\t\tmax_mtu:\t\t4096 (5)\n",
           "\t\t\tactive_mtu:\t\t4096 (5)\n",
           "\t\t\tlink_layer:\t\tEthernet\n",
           "\t\t\tgid_tbl_len:\t\t2\n",
           "\t\t\tGID[  0]:\t\t::1, RoCE v2\n",
           "\t\t\tGID[  1]:\t\t::ffff:127.0.0.1, RoCE v2\n",
       }) {
    EXPECT_NE(r.output.find(line), std::string::npos) << "missing: " << line << r.output;
  }
}

TEST_F(IbverbsDevices, BadEnvironmentIsReportedNotCrashed) {
  if (!have_program("/usr/bin/ibv_devinfo")) GTEST_SKIP() << "ibverbs-utils not installed";
  env_.vars["UROCE_PORT"] = "notaport";
  Process p({"ibv_devinfo"}, env_);
  ProcResult r = p.wait(20s);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("uroce: UROCE_PORT=notaport is not a UDP port (1 .. 65535)"),
            std::string::npos)
      << r.output;
}

TEST_F(IbverbsDevices, ExportsEveryPublicSymbolOfRdmaCoreWithItsVersion) {
  const std::string debian = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";
  if (!have_program("/usr/bin/objdump") || access(debian.c_str(), R_OK) != 0) {
    GTEST_SKIP() << "objdump or Debian's libibverbs1 missing";
  }
  // Never the provider-private interface (IBVERBS_PRIVATE_*) nor uroce's own (UROCE_PRIVATE_1).
  const auto want = default_exports(debian, "IBVERBS_1.");
  const auto have = default_exports(lib_dir() + "/libibverbs.so.1", "IBVERBS_1.");
  ASSERT_GT(want.size(), 80u);
  EXPECT_EQ(want, have);
}

}  // namespace
}  // namespace uroce::ibtest
