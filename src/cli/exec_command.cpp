// `uroce exec [--netdev IF]... [--write-view DIR] -- PROGRAM [ARGS...]`: runs an unmodified
// RDMA program on uroce. The program gets uroce's libibverbs drop-in (LD_LIBRARY_PATH) and,
// in a private mount namespace, the kernel files such programs read besides libibverbs:
// /sys/class/infiniband/<dev>/, /sys/class/infiniband_verbs/ and /dev/infiniband/uverbs<N>
// describing uroce's devices (exec_view.hpp, exec_mounts.hpp). The host sees no change.
//
// uroce exec stays as the program's parent: it refreshes each device's hw_counters files
// every kCounterRefreshMs, and as soon as a new one appears, from the counter segments uroce's
// devices publish (the program's and any other process's in this network namespace, held open
// so a process that exits leaves its last counts: telemetry::SegmentFollower), passes SIGTERM
// and SIGHUP on, and exits with the program's status (128 + N when a signal N ended it, as a
// shell reports it).
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "cli/command.hpp"
#include "cli/exec_mounts.hpp"
#include "cli/exec_view.hpp"
#include "cli/verbs_setup.hpp"
#include "telemetry/shm_segment.hpp"

namespace uroce::cli {
namespace {
namespace fs = std::filesystem;

struct ExecOptions {
  std::vector<std::string> netdevs;
  std::string write_view_dir;
  std::vector<std::string> command;
};

constexpr int kExitCannotRun = 127;
// Reading every segment costs a directory scan and a copy per process: at 10 Hz it is noise.
constexpr int kCounterRefreshMs = 100;  // as a shell: the program was not found or not runnable

// The directory of the libibverbs drop-in: lib/ beside the directory of this executable
// (build/bin/uroce -> build/lib, PREFIX/bin/uroce -> PREFIX/lib/uroce), "" when absent.
std::string dropin_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path prefix = exe.parent_path().parent_path();
  for (const fs::path& dir : {prefix / "lib", prefix / "lib" / "uroce"}) {
    if (fs::exists(dir / "libibverbs.so.1", ec)) return dir.string();
  }
  return "";
}

pid_t g_child = 0;

void forward_signal(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

[[noreturn]] void run_program(const ExecOptions& o, const std::string& lib) {
  const char* old = std::getenv("LD_LIBRARY_PATH");
  const std::string path = old != nullptr && *old != '\0' ? lib + ":" + old : lib;
  setenv("LD_LIBRARY_PATH", path.c_str(), 1);
  std::string netdevs;
  for (const std::string& n : o.netdevs) netdevs += (netdevs.empty() ? "" : ",") + n;
  if (!netdevs.empty()) setenv("UROCE_NETDEVS", netdevs.c_str(), 1);
  std::vector<char*> argv;
  for (const std::string& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  const int err = errno;
  fmt::print(stderr, "uroce exec: cannot run {}: {}\n", o.command[0], std::strerror(err));
  _exit(err == ENOENT ? kExitCannotRun : kExitCannotRun - 1);
}

void refresh_counters(const std::vector<net::HostDevice>& devices,
                      telemetry::SegmentFollower& segments) {
  const std::vector<telemetry::DeviceSnapshot> snaps = segments.poll();
  for (const net::HostDevice& d : devices) {
    // A failed refresh leaves the last values; the program is not to be disturbed for it.
    (void)write_view("/sys/class", counter_files(d.name, snaps));
  }
}

int wait_for(pid_t child, const std::vector<net::HostDevice>& devices) {
  telemetry::SegmentFollower segments;
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  auto next_refresh = std::chrono::steady_clock::now();
  for (;;) {
    if (pidfd >= 0) {
      // A new segment is read at once: a process that lives less than a refresh interval
      // (a short ibv_rc_pingpong) is held from its start, and its counts survive its exit.
      std::array<pollfd, 2> p{pollfd{pidfd, POLLIN, 0},
                              pollfd{segments.new_segments_fd(), POLLIN, 0}};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          next_refresh - std::chrono::steady_clock::now());
      const int n = poll(p.data(), p[1].fd >= 0 ? 2 : 1,
                         static_cast<int>(std::clamp<int64_t>(left.count(), 0, kCounterRefreshMs)));
      if (n >= 0 && p[0].revents == 0) {
        const bool created = n > 0 && segments.take_created();
        if (created || std::chrono::steady_clock::now() >= next_refresh) {
          refresh_counters(devices, segments);
          next_refresh =
              std::chrono::steady_clock::now() + std::chrono::milliseconds(kCounterRefreshMs);
        }
        continue;
      }
    }
    int status = 0;
    const pid_t r = waitpid(child, &status, 0);
    if (r < 0 && errno == EINTR) continue;
    if (pidfd >= 0) close(pidfd);
    if (r < 0) return kExitFailure;
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
  }
}

int run_exec(const ExecOptions& o) {
  std::string error;
  auto devices = cli_host_devices(o.netdevs, error);
  if (!devices) {
    fmt::print(stderr, "uroce exec: {}\n", error);
    return kExitUsage;
  }
  if (!o.write_view_dir.empty()) {
    error = write_view(o.write_view_dir + "/sys/class", sysfs_view(*devices));
    if (error.empty()) error = write_dev_view(o.write_view_dir + "/dev", dev_view(*devices), false);
    if (!error.empty()) {
      fmt::print(stderr, "uroce exec: {}\n", error);
      return kExitFailure;
    }
    fmt::print("uroce exec: wrote the view of {} under {}\n", net::device_names(*devices),
               o.write_view_dir);
    return kExitOk;
  }
  if (o.command.empty()) {
    fmt::print(stderr,
               "uroce exec: no program given; usage: uroce exec [--netdev IF] -- PROGRAM "
               "[ARGS...]\n");
    return kExitUsage;
  }
  const std::string lib = dropin_dir();
  if (lib.empty()) {
    fmt::print(stderr,
               "uroce exec: the libibverbs drop-in (libibverbs.so.1) is not in lib/ beside this "
               "uroce's directory; build it with 'cmake --build build' and run build/bin/uroce\n");
    return kExitFailure;
  }
  error = enter_view_namespace();
  if (error.empty()) error = write_view("/sys/class", sysfs_view(*devices));
  if (error.empty()) error = write_dev_view("/dev", dev_view(*devices), true);
  if (!error.empty()) {
    fmt::print(stderr, "uroce exec: {}\n", error);
    return kExitFailure;
  }
  // The terminal's SIGINT and SIGQUIT reach the program directly (same process group); the
  // parent waits for it to act on them, as a shell does.
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  g_child = fork();
  if (g_child < 0) {
    fmt::print(stderr, "uroce exec: fork: {}\n", std::strerror(errno));
    return kExitFailure;
  }
  if (g_child == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    run_program(o, lib);
  }
  signal(SIGTERM, forward_signal);
  signal(SIGHUP, forward_signal);
  return wait_for(g_child, *devices);
}

}  // namespace

Subcommand add_exec_command(CLI::App& app) {
  auto options = std::make_shared<ExecOptions>();
  CLI::App* sub = app.add_subcommand(
      "exec",
      "Run an unmodified RDMA program (UCX, MPI, pyverbs' tests, ...) on uroce: the libibverbs "
      "drop-in, and /sys/class/infiniband and /dev/infiniband describing uroce's devices in a "
      "private mount namespace");
  sub->add_option("--netdev", options->netdevs,
                  "Only these netdevs' devices (sets UROCE_NETDEVS for the program; default: "
                  "UROCE_NETDEVS, else all that are up)");
  sub->add_option("--write-view", options->write_view_dir,
                  "Write the files under DIR (DIR/sys/class/..., DIR/dev/...) and exit, to "
                  "bind-mount into a container instead of running a program");
  sub->add_option("command", options->command, "PROGRAM [ARGS...], after --");
  sub->positionals_at_end();
  return Subcommand{sub, [options] { return run_exec(*options); }};
}

}  // namespace uroce::cli
