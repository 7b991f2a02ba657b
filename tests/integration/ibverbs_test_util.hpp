// Helpers of the libibverbs drop-in tests: run Debian's unmodified RDMA programs
// (ibverbs-utils, perftest, qperf, pyverbs) against build/lib/libibverbs.so.1 as a server and
// a client process on 127.0.0.1, each with a deadline, and collect exit codes and output.
//
//   ToolEnv env;                                   // LD_LIBRARY_PATH + a private UROCE_PORT
//   auto [srv, cli] = run_pair({"ibv_rc_pingpong", "-g", "1"}, {..., "127.0.0.1"}, env, port);
//   EXPECT_EQ(cli.exit_code, 0) << cli.output;
//
// Sanitizer builds (UROCE_SANITIZE): libibverbs.so.1 is instrumented and needs the ASan
// runtime loaded first, which Debian's programs do not do; ToolEnv preloads the runtimes this
// test binary runs with, and turns leak detection off for the programs (their own leaks are
// not ours to report).
//
// Every child runs in its own process group, which is killed on timeout and when the
// Process object goes away, so no program outlives its test (qperf's server forks).
#pragma once

#include <fcntl.h>
#include <link.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_port.hpp"

namespace uroce::ibtest {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

inline std::string lib_dir() {
  return std::string(UROCE_BINARY_DIR) + "/lib";
}

inline bool have_program(const std::string& path) {
  return access(path.c_str(), X_OK) == 0;
}

// Paths of the sanitizer runtimes loaded into this process ("" when none): the preload list
// for a child that loads an instrumented library.
inline std::string sanitizer_preload() {
  std::string out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const std::string path = info->dlpi_name != nullptr ? info->dlpi_name : "";
        const std::string base = path.substr(path.rfind('/') + 1);
        if (base.rfind("libasan.so", 0) == 0 || base.rfind("libubsan.so", 0) == 0) {
          auto& list = *static_cast<std::string*>(data);
          list += (list.empty() ? "" : ":") + path;
        }
        return 0;
      },
      &out);
  return out;
}

// The environment every program gets: uroce's libibverbs first, and a UDP port of its own
// so parallel tests (and a real rxe on 4791) never meet.
struct ToolEnv {
  std::map<std::string, std::string> vars;
  ToolEnv() {
    vars["LD_LIBRARY_PATH"] = lib_dir();
    vars["UROCE_PORT"] = std::to_string(test::reserve_port());
    if (const std::string preload = sanitizer_preload(); !preload.empty()) {
      vars["LD_PRELOAD"] = preload;
      vars["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1";
    }
  }
};

struct ProcResult {
  int exit_code = -1;  // -1: killed by a signal or by the deadline
  bool timed_out = false;
  std::string output;  // stdout and stderr, interleaved
};

class Process {
 public:
  Process(const std::vector<std::string>& argv, const ToolEnv& env) {
    char tmpl[] = "/tmp/uroce-ibverbs-out-XXXXXX";
    const int out = mkstemp(tmpl);
    out_path_ = tmpl;
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      dup2(out, STDOUT_FILENO);
      dup2(out, STDERR_FILENO);
      const int devnull = open("/dev/null", O_RDONLY);
      dup2(devnull, STDIN_FILENO);
      for (const auto& [k, v] : env.vars) setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      std::fprintf(stderr, "exec %s failed\n", args[0]);
      _exit(127);
    }
    if (pid_ > 0) setpgid(pid_, pid_);
    close(out);
  }
  ~Process() {
    kill_group();
    unlink(out_path_.c_str());
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }

  // Waits up to `timeout` for the exit; past it the group is killed and timed_out set.
  ProcResult wait(std::chrono::milliseconds timeout) {
    ProcResult r;
    const auto deadline = Clock::now() + timeout;
    while (!reaped_) {
      int status = 0;
      const pid_t w = waitpid(pid_, &status, WNOHANG);
      if (w == pid_) {
        reaped_ = true;
        if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
        break;
      }
      if (Clock::now() >= deadline) {
        r.timed_out = true;
        kill_group();
        break;
      }
      std::this_thread::sleep_for(10ms);
    }
    r.output = read_output();
    return r;
  }

  void kill_group() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    if (!reaped_) {
      waitpid(pid_, nullptr, 0);
      reaped_ = true;
    }
  }

  [[nodiscard]] std::string read_output() const {
    std::ifstream in(out_path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string out_path_;
};

// True once a socket listens on `port` (any local address) in the TCP tables under
// `net_dir`: "/proc/net" for this network namespace, "/proc/<pid>/net" for the namespace
// process <pid> runs in. Read from the tables because a probing connect() would be taken for
// the client by one-shot servers.
inline bool tcp_listening_in(const std::string& net_dir, uint16_t port) {
  char want[8];
  std::snprintf(want, sizeof want, ":%04X", port);
  for (const char* file : {"/tcp", "/tcp6"}) {
    std::ifstream in(net_dir + file);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, state;
      f >> sl >> local >> remote >> state;
      if (state == "0A" && local.size() > 5 && local.ends_with(want)) return true;
    }
  }
  return false;
}

inline bool tcp_listening(uint16_t port) {
  return tcp_listening_in("/proc/net", port);
}

// The same in the network namespace of process `pid` (a server started by `ip netns exec`).
inline bool listening_in(pid_t pid, uint16_t port) {
  return tcp_listening_in("/proc/" + std::to_string(pid) + "/net", port);
}

inline bool wait_listening(uint16_t port, Process& server, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (tcp_listening(port)) return true;
    if (waitpid(server.pid(), nullptr, WNOHANG) == server.pid()) return false;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// perftest calibrates its cycle counter against gettimeofday() before every report
// (get_cpu_mhz: a linear regression over 200 busy waits of 0.1 to 2 ms). When the machine
// preempts it during those waits, r^2 falls below 0.9: perftest prints "Correlation
// coefficient r^2: ... < 0.9" and drops that report (a latency sweep loses the size's row, a
// bandwidth test says "Can't produce a report" and exits 1). The transfer was fine; perftest's
// stopwatch was not. On two cores shared by ctest -j2 this happens about once a full run.
inline bool perftest_clock_uncalibrated(const std::pair<ProcResult, ProcResult>& run) {
  for (const ProcResult* r : {&run.first, &run.second}) {
    if (r->output.find("Correlation coefficient r^2") != std::string::npos) return true;
  }
  return false;
}

// Runs one server/client exchange (`run_once` returns {server, client}) again while perftest
// could not calibrate its clock, three runs at most. The last run's result stands, so a run
// that fails for any other reason fails the test as it is.
template <class RunOnce>
std::pair<ProcResult, ProcResult> rerun_if_perftest_uncalibrated(RunOnce run_once) {
  for (int run = 1;; ++run) {
    std::pair<ProcResult, ProcResult> result = run_once();
    if (run == 3 || !perftest_clock_uncalibrated(result)) return result;
    std::fprintf(stderr, "perftest could not calibrate its clock (r^2 < 0.9): run %d of 3\n",
                 run + 1);
  }
}

// Starts the server, waits for its TCP side channel on `tcp_port`, runs the client, then
// collects both. The client's deadline is `timeout`; the server gets a few seconds more to
// print its report.
inline std::pair<ProcResult, ProcResult> run_pair_once(const std::vector<std::string>& server_argv,
                                                       const std::vector<std::string>& client_argv,
                                                       const ToolEnv& env, uint16_t tcp_port,
                                                       std::chrono::milliseconds timeout) {
  Process server(server_argv, env);
  if (!wait_listening(tcp_port, server, 15s)) {
    ProcResult none;
    none.output = "server never listened on TCP port " + std::to_string(tcp_port);
    return {server.wait(1s), none};
  }
  Process client(client_argv, env);
  ProcResult c = client.wait(timeout);
  ProcResult s = server.wait(c.timed_out ? 1s : 10s);
  return {s, c};
}

// run_pair_once, again while perftest could not calibrate its clock (see above).
inline std::pair<ProcResult, ProcResult> run_pair(const std::vector<std::string>& server_argv,
                                                  const std::vector<std::string>& client_argv,
                                                  const ToolEnv& env, uint16_t tcp_port,
                                                  std::chrono::milliseconds timeout) {
  return rerun_if_perftest_uncalibrated(
      [&] { return run_pair_once(server_argv, client_argv, env, tcp_port, timeout); });
}

// "<version> <name>" of every function `lib` defines with a default version (compat versions
// print in parentheses) whose version starts with `version_prefix` (objdump -T).
inline std::set<std::string> default_exports(const std::string& lib,
                                             const std::string& version_prefix) {
  std::set<std::string> out;
  FILE* f = popen(("objdump -T " + lib + " 2>/dev/null").c_str(), "r");
  if (f == nullptr) return out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f) != nullptr) {
    std::istringstream line(buf);
    std::vector<std::string> cols;
    for (std::string c; line >> c;) cols.push_back(c);
    // "<addr> g DF .text <size> <version> <name>"
    if (cols.size() < 7 || cols[1] != "g" || cols[3] == "*UND*") continue;
    const std::string& ver = cols[cols.size() - 2];
    if (ver.rfind(version_prefix, 0) != 0) continue;
    out.insert(ver + " " + cols.back());
  }
  pclose(f);
  return out;
}

inline int count_lines_with(const std::string& text, const std::string& needle) {
  int n = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) n += line.find(needle) != std::string::npos ? 1 : 0;
  return n;
}

}  // namespace uroce::ibtest
