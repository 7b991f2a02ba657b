// The libmlx5.so.1 / libefa.so.1 stand-ins (src/ibverbs/standins/, generated from Debian's
// libraries): every (symbol, version) Debian's library exports is exported by ours, so that
// anything linked against the real one (UCX's libuct_ib, pyverbs) loads; and a program
// linked against them gets each family's "not supported" answer (docs/ibverbs.md).
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>

#include "ibverbs_test_util.hpp"
#include "shell_run.hpp"

namespace uroce::ibtest {
namespace {

// "symbol@VERSION" or "symbol@@VERSION" of every function `lib` defines.
std::set<std::string> exported(const std::string& lib) {
  const auto [status, out] = uroce::test::run_shell(
      "readelf --dyn-syms -W " + lib +
      " | awk '$4==\"FUNC\" && $7!=\"UND\" && ($5==\"GLOBAL\" || $5==\"WEAK\") "
      "{print $8}'");
  EXPECT_EQ(status, 0) << "readelf failed on " << lib;
  std::set<std::string> s;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) s.insert(line);
  }
  return s;
}

void expect_same_abi(const std::string& name) {
  const std::string real = "/usr/lib/x86_64-linux-gnu/" + name;
  if (access(real.c_str(), R_OK) != 0) GTEST_SKIP() << real << " not installed (ibverbs-providers)";
  const std::set<std::string> want = exported(real);
  const std::set<std::string> have = exported(lib_dir() + "/" + name);
  ASSERT_GT(want.size(), 0U);
  for (const std::string& s : want) EXPECT_TRUE(have.count(s) == 1) << name << " lacks " << s;
  // Nothing beyond Debian's: the stand-in is that library's ABI, no more.
  for (const std::string& s : have) EXPECT_TRUE(want.count(s) == 1) << name << " adds " << s;
}

TEST(IbverbsStandins, Mlx5ExportsEverySymbolAndVersionOfDebians) {
  expect_same_abi("libmlx5.so.1");
}

TEST(IbverbsStandins, EfaExportsEverySymbolAndVersionOfDebians) {
  expect_same_abi("libefa.so.1");
}

// The checked-in lists (the fallback when ibverbs-providers is not installed) are what the
// installed libraries say: regenerate them with the command in docs/ibverbs.md if not.
TEST(IbverbsStandins, CheckedInSymbolListsMatchTheInstalledLibraries) {
  for (const std::string name : {"mlx5", "efa"}) {
    const std::string real = "/usr/lib/x86_64-linux-gnu/lib" + name + ".so.1";
    if (access(real.c_str(), R_OK) != 0) GTEST_SKIP() << real << " not installed";
    const std::string dir = std::string(UROCE_SOURCE_DIR) + "/src/ibverbs/standins/";
    const auto [status, diff] =
        uroce::test::run_shell("/usr/bin/python3 " + dir + "gen_standin.py --lib " + real +
                               " --dump | diff " + dir + "lib" + name + ".symbols - 2>&1");
    EXPECT_EQ(status, 0) << diff;
    EXPECT_EQ(diff, "");
  }
}

TEST(IbverbsStandins, ALinkedProgramGetsNotSupported) {
  ToolEnv env;
  Process p({std::string(UROCE_BINARY_DIR) + "/bin/uroce_ibverbs_standins_prog"}, env);
  ProcResult r = p.wait(30s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output,
            "mlx5dv_is_supported: 0\n"
            "mlx5dv_devx_destroy_event_channel: returned\n"
            "efadv_create_driver_qp: NULL errno EOPNOTSUPP\n"
            "mlx5dv_devx_create_event_channel: NULL errno EOPNOTSUPP\n"
            "mlx5dv_query_device: EOPNOTSUPP errno EOPNOTSUPP\n"
            "efadv_query_ah: EOPNOTSUPP errno EOPNOTSUPP\n"
            "mlx5dv_devx_get_event: -1 errno EOPNOTSUPP\n"
            "mlx5dv_vfio_get_events_fd: -1 errno EOPNOTSUPP\n"
            "mlx5dv_init_obj: EOPNOTSUPP errno EOPNOTSUPP\n"
            "mlx5dv_open_device: NULL errno EOPNOTSUPP\n");
}

}  // namespace
}  // namespace uroce::ibtest
