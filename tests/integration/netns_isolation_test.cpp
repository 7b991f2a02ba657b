// Network namespaces never interfere (root only; skipped otherwise). Three namespaces, the
// same UDP port in each: an idle pingpong server (rdma-core's, over the drop-in) sits in B
// and in C while a pingpong pair runs over lo in A. Before the registry was keyed by namespace, the
// idle process in the other namespace shared A's registry file, shifted the reuseport
// positions A computed, and the pair stalled ("no completion for 10 s", exit 1) or ran
// many times slower. Now each namespace has its own registry (checked in the files) and
// `uroce stat` in a namespace lists only that namespace's processes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ibverbs_test_util.hpp"
#include "net/reuseport_registry.hpp"
#include "shell_run.hpp"

namespace uroce::itest {
namespace {

using Clock = std::chrono::steady_clock;

const std::string kUroce = uroce::test::uroce_binary();

using uroce::test::shell_ok;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

const std::string kDropInDir = std::string(UROCE_BINARY_DIR) + "/lib";

// `ip netns exec NS PROGRAM ARGS` with the test's own UDP port, registry and stat directories;
// stdout and stderr in files. ip execs the program, so the pid is its own. PROGRAM is the
// `uroce` CLI unless args[0] names one of rdma-core's programs (ibv_*), which then runs over
// the drop-in libibverbs.
class NsProcess {
 public:
  NsProcess(const std::string& ns, const std::vector<std::string>& args, const std::string& env_dir,
            uint16_t udp_port, const std::string& name)
      : out_(env_dir + "/" + name + ".out") {
    const bool rdma_core = !args.empty() && args[0].rfind("ibv_", 0) == 0;
    const std::string preload = ibtest::sanitizer_preload();
    std::cout.flush();  // or the child's freopen writes our buffered output a second time
    std::fflush(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      setenv("UROCE_UDP_PORT", std::to_string(udp_port).c_str(), 1);
      setenv("XDG_RUNTIME_DIR", env_dir.c_str(), 1);
      setenv("UROCE_STAT_DIR", env_dir.c_str(), 1);
      if (rdma_core) {
        setenv("LD_LIBRARY_PATH", kDropInDir.c_str(), 1);
        // Under ASan/UBSan the drop-in is instrumented: rdma-core's program needs the runtimes.
        if (!preload.empty()) {
          setenv("LD_PRELOAD", preload.c_str(), 1);
          setenv("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1", 1);
        }
      }
      if (!freopen(out_.c_str(), "w", stdout) || dup2(fileno(stdout), 2) < 0) _exit(127);
      std::vector<std::string> all = {"ip", "netns", "exec", ns};
      if (!rdma_core) all.push_back(kUroce);
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (std::string& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp("ip", argv.data());
      _exit(127);
    }
  }
  ~NsProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  NsProcess(const NsProcess&) = delete;
  NsProcess& operator=(const NsProcess&) = delete;

  // Exit status, or -1 (after SIGKILL) when it runs longer than `limit`.
  int wait(std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    int status = 0;
    while (Clock::now() < end) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    reaped_ = true;
    return -1;
  }
  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] std::string output() const { return slurp(out_); }

 private:
  std::string out_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

class NetnsIsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    if (!shell_ok("ip -V")) GTEST_SKIP() << "iproute2 (ip) not installed";
    if (!shell_ok("command -v ibv_rc_pingpong")) GTEST_SKIP() << "ibverbs-utils not installed";
    const std::string id = std::to_string(getpid() % 100000);
    for (const char* tag : {"a", "b", "c"}) {
      const std::string ns = std::string("urnsi-") + tag + "-" + id;
      ASSERT_TRUE(shell_ok("ip netns add " + ns)) << ns;
      ns_.push_back(ns);
      ASSERT_TRUE(shell_ok("ip -n " + ns + " link set lo up"));
    }
    char tmpl[] = "/tmp/uroce-netns-iso-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    udp_port_ = static_cast<uint16_t>(30000 + (getpid() % 3000) * 5);
    tcp_port_ = static_cast<uint16_t>(udp_port_ + 1);
  }
  void TearDown() override {
    for (const std::string& ns : ns_) shell_ok("ip netns del " + ns);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // The inode of a named namespace (stat follows the /var/run/netns bind mount to nsfs).
  static uint64_t netns_of(const std::string& ns) {
    struct stat st {};
    return stat(("/var/run/netns/" + ns).c_str(), &st) == 0 ? st.st_ino : 0;
  }

  // The pids registered in namespace `ns`'s registry file for our port.
  std::set<pid_t> registered(const std::string& ns) const {
    const std::string path = net::RegistryFile::path_for(dir_ + "/uroce", netns_of(ns), udp_port_);
    std::set<pid_t> pids;
    if (auto s = net::parse_registry(slurp(path))) {
      for (const auto& m : s->members) pids.insert(m.pid);
    }
    return pids;
  }

  // pids `uroce stat --json` lists when run in `ns`.
  std::set<pid_t> stat_pids(const std::string& ns) const {
    NsProcess stat(ns, {"stat", "--json"}, dir_, udp_port_, "stat-" + ns);
    EXPECT_EQ(stat.wait(std::chrono::seconds(10)), 0) << stat.output();
    std::set<pid_t> pids;
    const std::string out = stat.output();
    const auto j = nlohmann::json::parse(out, nullptr, false);
    EXPECT_TRUE(j.is_array()) << out;
    if (!j.is_array()) return pids;
    for (const auto& d : j) pids.insert(d["pid"].get<pid_t>());
    return pids;
  }

  // Waits until `ns`'s registry lists `pid` (its device is up).
  bool wait_registered(const std::string& ns, pid_t pid) const {
    const auto end = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < end) {
      if (registered(ns).count(pid) != 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  std::vector<std::string> ns_;
  std::string dir_;
  uint16_t udp_port_ = 0;
  uint16_t tcp_port_ = 0;
};

TEST_F(NetnsIsolationTest, IdleProcessesInOtherNamespacesOnTheSamePortDoNotSlowAPair) {
  const std::string& a = ns_[0];
  const std::string& b = ns_[1];
  const std::string& c = ns_[2];
  ASSERT_NE(netns_of(a), netns_of(c));
  const std::string tcp = std::to_string(tcp_port_);
  // Idle servers: wait for a client that never comes, on the same UDP and TCP ports. They are
  // rdma-core's ibv_rc_pingpong over the drop-in because it opens its device (and joins the
  // port's reuseport group) before it waits for the client; `uroce pingpong` opens its device
  // only once the side channel is up.
  NsProcess idle_b(b, {"ibv_rc_pingpong", "-g", "1", "-p", tcp}, dir_, udp_port_, "idle-b");
  NsProcess idle_c(c, {"ibv_rc_pingpong", "-g", "1", "-p", tcp}, dir_, udp_port_, "idle-c");
  ASSERT_TRUE(wait_registered(b, idle_b.pid())) << idle_b.output();
  ASSERT_TRUE(wait_registered(c, idle_c.pid())) << idle_c.output();

  // The pair in A: rdma-core's server (its device is up while it waits) and `uroce pingpong`,
  // which speaks rdma-core's exchange, as the client.
  NsProcess server(a, {"ibv_rc_pingpong", "-g", "1", "-p", tcp, "-n", "1000"}, dir_, udp_port_,
                   "server");
  ASSERT_TRUE(wait_registered(a, server.pid())) << server.output();

  // stat in each namespace sees that namespace's processes only.
  EXPECT_EQ(stat_pids(a), std::set<pid_t>{server.pid()});
  EXPECT_EQ(stat_pids(c), std::set<pid_t>{idle_c.pid()});
  {
    const std::string pid_c = std::to_string(idle_c.pid());
    NsProcess by_pid(a, {"stat", "--pid", pid_c}, dir_, udp_port_, "stat-pid");
    EXPECT_EQ(by_pid.wait(std::chrono::seconds(10)), 1);
    EXPECT_EQ(by_pid.output(), "uroce stat: no running uroce process with pid " + pid_c +
                                   " of this network namespace publishes counters in " + dir_ +
                                   "\n");
  }
  // One registry per namespace, each with its own member only.
  EXPECT_EQ(registered(a), std::set<pid_t>{server.pid()});
  EXPECT_EQ(registered(b), std::set<pid_t>{idle_b.pid()});
  EXPECT_EQ(registered(c), std::set<pid_t>{idle_c.pid()});

  // The pair: 1000 round trips of 4 KiB over lo take about a second on a loaded 2-core
  // machine. With the shared registry the client stalled and gave up after 10 s (exit 1);
  // 8 s leaves a margin for load and still fails the old behaviour.
  const auto start = Clock::now();
  NsProcess client(a, {"pingpong", "-p", tcp, "-n", "1000", "--timeout", "30", "127.0.0.1"}, dir_,
                   udp_port_, "client");
  const int client_status = client.wait(std::chrono::seconds(8));
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(client_status, 0) << "after " << elapsed << " s:\n" << client.output();
  EXPECT_EQ(server.wait(std::chrono::seconds(5)), 0) << server.output();
  EXPECT_NE(client.output().find("1000 iters in"), std::string::npos) << client.output();
  std::cout << "pair in namespace A: " << elapsed << " s for 1000 round trips\n";

  // The idle processes were never disturbed: still running, still alone in their registries.
  EXPECT_EQ(waitpid(idle_b.pid(), nullptr, WNOHANG), 0);
  EXPECT_EQ(waitpid(idle_c.pid(), nullptr, WNOHANG), 0);
  EXPECT_EQ(registered(b), std::set<pid_t>{idle_b.pid()});
  EXPECT_EQ(registered(c), std::set<pid_t>{idle_c.pid()});
  EXPECT_EQ(stat_pids(b), std::set<pid_t>{idle_b.pid()});
}

}  // namespace
}  // namespace uroce::itest
