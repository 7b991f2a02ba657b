// libibverbs.so.1 drop-in: Debian's pyverbs (python3-pyverbs, unmodified) opens uroce_lo,
// registers memory, connects two RC QPs and checks an RDMA WRITE and both atomics byte for
// byte, then answers a UD request through ibv_create_ah_from_wc (ibverbs_pyverbs.py says
// how).
#include <gtest/gtest.h>

#include "ibverbs_test_util.hpp"

namespace uroce::ibtest {
namespace {

TEST(IbverbsPyverbs, RdmaWriteAndAtomicsBetweenTwoContexts) {
  ASSERT_TRUE(have_program(lib_dir() + "/libibverbs.so.1")) << "build uroce_ibverbs first";
  if (access("/usr/lib/python3/dist-packages/pyverbs", R_OK) != 0) {
    GTEST_SKIP() << "python3-pyverbs not installed";
  }
  ToolEnv env;
  env.vars["UROCE_NETDEVS"] = "lo";
  const std::string script =
      std::string(UROCE_SOURCE_DIR) + "/tests/integration/ibverbs_pyverbs.py";
  Process p({"/usr/bin/python3", script}, env);
  ProcResult r = p.wait(60s);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output,
            "ok: RDMA WRITE of 1024 bytes\n"
            "ok: FETCH_AND_ADD 1000 + 234 = 1234, returned 1000\n"
            "ok: CMP_AND_SWP swaps only on a match\n"
            "ok: UD reply addressed from the request's completion and GRH\n");
}

}  // namespace
}  // namespace uroce::ibtest
