// Installing uroce as a user would and building against it (issue: an installable package):
// `cmake --install` into a staging prefix, the installed headers compile on their own (the
// public API never reaches into src/), examples/ builds out of tree with find_package(uroce)
// and runs, a program builds with `pkg-config uroce`, the installed `uroce exec` finds the
// installed drop-in, and `cpack` makes a .deb holding the same files with its dependencies.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "shell_run.hpp"

namespace {

namespace fs = std::filesystem;
using uroce::test::run_shell;

class InstallTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/uroce-install-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    stage_ = dir_ + "/stage";
    const auto [rc, out] = run_shell("cmake --install " + std::string(UROCE_BINARY_DIR) +
                                     " --prefix " + stage_ + " 2>&1");
    ASSERT_EQ(rc, 0) << out;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_, stage_;
};

TEST_F(InstallTreeTest, PrefixHoldsTheCommandTheLibraryTheHeadersAndTheDropIns) {
  for (const char* f :
       {"bin/uroce", "lib/liburoce.so.0", "lib/liburoce.so", "include/uroce/verbs.hpp",
        "include/uroce/connect.hpp", "include/uroce/vocab/verbs_types.hpp",
        "lib/cmake/uroce/uroceConfig.cmake", "lib/cmake/uroce/uroceConfigVersion.cmake",
        "lib/pkgconfig/uroce.pc", "lib/uroce/libibverbs.so.1", "lib/uroce/libmlx5.so.1",
        "lib/uroce/libefa.so.1"}) {
    EXPECT_TRUE(fs::exists(stage_ + "/" + f)) << f;
  }
  // Not beside the system's libibverbs: the drop-in must be chosen, never shadow rdma-core.
  EXPECT_FALSE(fs::exists(stage_ + "/lib/libibverbs.so.1"));
}

// Each installed header compiles alone with only the staged include directory: none includes
// a file of src/ (or one it does not include itself).
TEST_F(InstallTreeTest, EveryInstalledHeaderCompilesOnItsOwn) {
  int headers = 0;
  for (const auto& e : fs::recursive_directory_iterator(stage_ + "/include/uroce")) {
    if (e.path().extension() != ".hpp") continue;
    ++headers;
    const std::string name = fs::relative(e.path(), stage_ + "/include").string();
    const auto [rc, out] = run_shell("echo '#include \"" + name +
                                     "\"' | g++ -std=c++20 -fsyntax-only -Wall -Werror -I " +
                                     stage_ + "/include -x c++ - 2>&1");
    EXPECT_EQ(rc, 0) << e.path() << "\n" << out;
  }
  EXPECT_EQ(headers, 10);
}

TEST_F(InstallTreeTest, ExamplesBuildOutOfTreeWithFindPackageAndRun) {
  const std::string build = dir_ + "/examples";
  auto [rc, out] =
      run_shell("cmake -S " + std::string(UROCE_SOURCE_DIR) + "/examples -B " + build +
                " -DCMAKE_PREFIX_PATH=" + stage_ + " 2>&1 && cmake --build " + build + " 2>&1");
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = run_shell(build + "/rc_write --size 65536 --iters 3 2>&1");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("3 x 65536 bytes written and verified"), std::string::npos) << out;
  std::tie(rc, out) = run_shell("ldd " + build + "/rc_write");
  EXPECT_NE(out.find(stage_ + "/lib/liburoce.so.0"), std::string::npos) << out;
}

TEST_F(InstallTreeTest, AProgramBuildsWithPkgConfig) {
  const std::string pc = "PKG_CONFIG_PATH=" + stage_ + "/lib/pkgconfig pkg-config";
  auto [rc, out] = run_shell(pc + " --modversion uroce");
  EXPECT_EQ(out, "0.1.0\n");
  std::tie(rc, out) =
      run_shell("g++ -o " + dir_ + "/rc_write " + std::string(UROCE_SOURCE_DIR) +
                "/examples/rc_write.cpp $(" + pc + " --cflags --libs uroce) -Wl,-rpath," + stage_ +
                "/lib 2>&1 && " + dir_ + "/rc_write --size 4096 --iters 2 2>&1");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("2 x 4096 bytes written and verified"), std::string::npos) << out;
}

// The installed `uroce exec` finds PREFIX/lib/uroce from PREFIX/bin/uroce.
TEST_F(InstallTreeTest, InstalledExecUsesTheInstalledDropIn) {
  if (geteuid() != 0 && !fs::exists("/proc/self/ns/user")) {
    GTEST_SKIP() << "uroce exec needs root or user namespaces";
  }
  const auto [rc, out] = run_shell(stage_ +
                                   "/bin/uroce exec --netdev lo -- sh -c 'echo $LD_LIBRARY_PATH; "
                                   "ibv_devices' 2>&1");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out.rfind(stage_ + "/lib/uroce", 0), 0u) << out;
  EXPECT_NE(out.find("uroce_lo"), std::string::npos) << out;
}

TEST_F(InstallTreeTest, CpackMakesADebWithTheSameFilesAndItsDependencies) {
  const std::string pkg = dir_ + "/pkg";
  auto [rc, out] = run_shell("cpack -G DEB -B " + pkg + " --config " +
                             std::string(UROCE_BINARY_DIR) + "/CPackConfig.cmake 2>&1");
  ASSERT_EQ(rc, 0) << out;
  const std::string deb = pkg + "/uroce_0.1.0_amd64.deb";
  ASSERT_TRUE(fs::exists(deb)) << out;
  std::tie(rc, out) = run_shell("dpkg-deb -c " + deb);
  for (const char* f :
       {"./usr/bin/uroce", "./usr/lib/liburoce.so.0.1.0", "./usr/include/uroce/verbs.hpp",
        "./usr/lib/uroce/libibverbs.so.1", "./usr/lib/pkgconfig/uroce.pc",
        "./usr/lib/cmake/uroce/uroceConfig.cmake"}) {
    EXPECT_NE(out.find(f), std::string::npos) << f << "\n" << out;
  }
  std::tie(rc, out) = run_shell("dpkg-deb -f " + deb + " Depends");
  EXPECT_NE(out.find("libisal2"), std::string::npos) << out;
  EXPECT_NE(out.find("libfmt9"), std::string::npos) << out;
}

}  // namespace
