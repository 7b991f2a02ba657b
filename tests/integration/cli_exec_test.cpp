// `uroce exec -- PROGRAM` as a user runs it on this host (--netdev lo): the program sees
// uroce's devices in /sys/class/infiniband and /dev/infiniband and gets the drop-in, the host
// sees nothing change, exit statuses come back as a shell reports them, wrong input gets one
// line, and the hw_counters files count what the program's devices did.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>

#include "ibverbs_test_util.hpp"
#include "shell_run.hpp"

namespace {

using namespace uroce::ibtest;

using uroce::test::uroce_binary;

// Runs `uroce exec --netdev lo -- sh -c SCRIPT` with the drop-in test environment (in network
// namespace `netns` when given).
ProcResult exec_sh(const std::string& script, const std::string& netns = "",
                   std::chrono::seconds limit = 60s) {
  std::vector<std::string> argv = {uroce_binary(), "exec", "--netdev", "lo"};
  if (!netns.empty()) argv.insert(argv.begin(), {"ip", "netns", "exec", netns});
  argv.insert(argv.end(), {"--", "sh", "-c", script});
  ToolEnv env;
  Process p(argv, env);
  return p.wait(limit);
}

// The scratch directory of the `uroce exec` whose program printed its mounts (the overlay
// over /sys/class has its upper layer there); empty if none was printed. Other tests' exec
// runs have scratch directories of their own in /tmp at the same time (ctest -j).
std::string exec_scratch(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(R"(upperdir=(/tmp/uroce-exec-[A-Za-z0-9]+))"))) {
    return "";
  }
  return m[1].str();
}

class CliExecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0 && !std::filesystem::exists("/proc/self/ns/user")) {
      GTEST_SKIP() << "needs root or user namespaces";
    }
  }
};

TEST_F(CliExecTest, ProgramSeesUroceDevicesAndTheHostDoesNot) {
  const bool host_had_ib = std::filesystem::exists("/sys/class/infiniband");
  const std::string ib = "/sys/class/infiniband/uroce_lo";
  const ProcResult r =
      exec_sh("cat " + ib + "/node_type " + ib + "/ports/1/state " + ib + "/ports/1/link_layer " +
              ib + "/ports/1/gid_attrs/types/0 " + ib + "/ports/1/gid_attrs/ndevs/0 " + ib +
              "/device/net/lo/mtu /sys/class/infiniband_verbs/uverbs0/ibdev; stat -c '%F %t:%T' "
              "/dev/infiniband/uverbs0; echo ok > /dev/null && echo devnull-ok; ls /sys/class/net; "
              "grep -o 'upperdir=[^,]*' /proc/self/mountinfo");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1: CA\n4: ACTIVE\nEthernet\nRoCE v2\nlo\n65536\nuroce_lo\n"),
            std::string::npos)
      << r.output;
  // 231:192 in hex, as stat prints major and minor.
  EXPECT_NE(r.output.find("character special file e7:c0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("devnull-ok"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("lo"), std::string::npos) << r.output;  // the real classes are there
  EXPECT_EQ(std::filesystem::exists("/sys/class/infiniband"), host_had_ib);
  EXPECT_FALSE(std::filesystem::exists("/dev/infiniband/uverbs0") && !host_had_ib);
  // The scratch directory behind the view is gone once the program has exited.
  const std::string scratch = exec_scratch(r.output);
  ASSERT_FALSE(scratch.empty()) << r.output;
  EXPECT_FALSE(std::filesystem::exists(scratch)) << scratch;
}

// The GID table in the files is the one `uroce gids` prints, and `uroce gids` inside the
// view lists uroce_lo once (the view's devices are not taken for kernel devices).
TEST_F(CliExecTest, FilesAgreeWithUroceGids) {
  const ProcResult r = exec_sh(
      "for g in /sys/class/infiniband/uroce_lo/ports/1/gids/*; do "
      "echo gid $(cat $g); done; " +
      uroce_binary() + " gids --netdev lo");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto [rc, outside] = uroce::test::run_shell(uroce_binary() + " gids --netdev lo");
  ASSERT_EQ(rc, 0) << outside;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(outside, m, std::regex(R"(n_gids_found=(\d+))")));
  EXPECT_NE(r.output.find("n_gids_found=" + m[1].str()), std::string::npos) << r.output;
  // Every GID file's value appears in show_gids' table (same eight-group spelling).
  const std::regex gid_line(R"(gid ([0-9a-f:]{39}))");
  int gids = 0;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), gid_line);
       it != std::sregex_iterator(); ++it, ++gids) {
    EXPECT_NE(outside.find((*it)[1].str()), std::string::npos) << (*it)[1] << "\n" << outside;
  }
  EXPECT_EQ(std::to_string(gids), m[1].str());
}

// The unprivileged path: as user nobody, `uroce exec` makes a user namespace first; there it
// cannot create device nodes, so /dev/null stands in for uverbs0 (UCX wants a character device
// it may open read-write), and the real /dev's nodes are bound in and still work.
TEST_F(CliExecTest, WorksForAnUnprivilegedUserThroughAUserNamespace) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to become another user (setpriv)";
  const std::string as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  if (uroce::test::run_shell(as_nobody + "test -x " + uroce_binary()).first != 0) {
    GTEST_SKIP() << "user nobody cannot run " << uroce_binary() << " (directory permissions)";
  }
  if (uroce::test::run_shell("test \"$(cat /proc/sys/user/max_user_namespaces)\" -gt 0").first !=
      0) {
    GTEST_SKIP() << "user namespaces are disabled on this host";
  }
  const std::string ucx =
      have_program("/usr/bin/ucx_info") ? "ucx_info -d | grep 'Memory domain: uroce_lo'; " : "";
  // A sanitizer tree's drop-in needs its runtime preloaded into Debian's programs (ToolEnv).
  const ToolEnv tools;
  std::string env = "env";
  for (const char* var : {"LD_PRELOAD", "ASAN_OPTIONS"}) {
    if (auto it = tools.vars.find(var); it != tools.vars.end()) {
      env += std::string(" ") + var + "=" + it->second;
    }
  }
  const auto [rc, out] = uroce::test::run_shell(
      as_nobody + env + " " + uroce_binary() +
      " exec --netdev lo -- sh -c 'id -u; cat /sys/class/infiniband/uroce_lo/node_type; stat -c "
      "%F /dev/infiniband/uverbs0; echo x > /dev/null && echo devnull-ok; " +
      ucx + "' 2>&1");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("65534\n1: CA\ncharacter special file\ndevnull-ok\n"), std::string::npos)
      << out;
  if (!ucx.empty()) {
    EXPECT_NE(out.find("# Memory domain: uroce_lo"), std::string::npos) << out;
  }
}

// --write-view DIR: the same files for a container to bind-mount, written without running
// anything or mounting anything.
TEST_F(CliExecTest, WriteViewWritesTheFilesForAContainer) {
  char tmpl[] = "/tmp/uroce-view-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ToolEnv env;
  Process p({uroce_binary(), "exec", "--netdev", "lo", "--write-view", dir}, env);
  const ProcResult r = p.wait(30s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "uroce exec: wrote the view of uroce_lo under " + dir + "\n");
  const auto [rc, out] = uroce::test::run_shell(
      "cat " + dir + "/sys/class/infiniband/uroce_lo/node_type " + dir +
      "/sys/class/infiniband/uroce_lo/ports/1/gid_attrs/ndevs/0 " + dir +
      "/sys/class/infiniband_verbs/uverbs0/ibdev; ls " + dir + "/dev/infiniband");
  EXPECT_EQ(out, "1: CA\nlo\nuroce_lo\nuverbs0\n");
  std::filesystem::remove_all(dir);
}

TEST_F(CliExecTest, ExitStatusesAreTheProgramsAsAShellReportsThem) {
  EXPECT_EQ(exec_sh("exit 7").exit_code, 7);
  EXPECT_EQ(exec_sh("kill -TERM $$").exit_code, 128 + SIGTERM);
  ToolEnv env;
  Process missing({uroce_binary(), "exec", "--", "uroce-no-such-program"}, env);
  const ProcResult m = missing.wait(30s);
  EXPECT_EQ(m.exit_code, 127);
  EXPECT_EQ(m.output, "uroce exec: cannot run uroce-no-such-program: No such file or directory\n");
}

TEST_F(CliExecTest, WrongInputGetsOneLine) {
  ToolEnv env;
  Process none({uroce_binary(), "exec"}, env);
  ProcResult r = none.wait(30s);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output,
            "uroce exec: no program given; usage: uroce exec [--netdev IF] -- PROGRAM "
            "[ARGS...]\n");
  Process bad({uroce_binary(), "exec", "--netdev", "uroce-nosuchif", "--", "true"}, env);
  r = bad.wait(30s);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines_with(r.output, "uroce exec: "), 1) << r.output;
  EXPECT_NE(r.output.find("uroce-nosuchif"), std::string::npos) << r.output;
}

// rdma-core's ibv_rc_pingpong, server and client, inside one `uroce exec`: 5,000 round trips
// of 64 bytes, then the device's counters in the view count both processes' packets, every
// one: `uroce exec` holds each process's counter segment open, so the last counts a process
// published before it exited stay in the files. In a network namespace of its own, because
// the files count every process using the device in the namespace (other tests use lo's).
// 5,000, not more: both programs and both progress threads spin, so beside another test on
// two cores a round trip in the ASan+UBSan tree took 3.5 ms (50,000 took 178 s of CI).
TEST_F(CliExecTest, HwCountersCountTheProgramsPackets) {
  if (!have_program("/usr/bin/ibv_rc_pingpong")) GTEST_SKIP() << "ibverbs-utils not installed";
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create a network namespace";
  const std::string ns = "urexec-" + std::to_string(getpid());
  ASSERT_EQ(
      uroce::test::run_shell("ip netns add " + ns + " && ip -n " + ns + " link set lo up").first,
      0);
  const std::string port = std::to_string(uroce::test::reserve_port());
  const std::string c = "/sys/class/infiniband/uroce_lo/ports/1/hw_counters/";
  const std::string pingpong = "ibv_rc_pingpong -g 1 -s 64 -n 5000 -p " + port;
  const ProcResult r = exec_sh(
      "echo before=$(cat " + c + "rdma_sends); " + pingpong + " >/dev/null 2>&1 & sleep 1; " +
          pingpong + " 127.0.0.1 >/dev/null 2>&1; rc=$?; wait; sleep 0.5; echo sent=$(cat " + c +
          "sent_pkts) rcvd=$(cat " + c + "rcvd_pkts) rdma_sends=$(cat " + c +
          "rdma_sends); exit $rc",
      ns, 180s);
  uroce::test::run_shell("ip netns del " + ns);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("before=0\n"), std::string::npos) << r.output;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(r.output, m, std::regex(R"(sent=(\d+) rcvd=(\d+) rdma_sends=(\d+))")))
      << r.output;
  const uint64_t sent = std::stoull(m[1]), rcvd = std::stoull(m[2]), sends = std::stoull(m[3]);
  EXPECT_EQ(sends, 10000u) << r.output;
  EXPECT_GE(sent, sends) << r.output;  // SENDs and the ACKs
  EXPECT_GE(rcvd, sends) << r.output;
}

}  // namespace
