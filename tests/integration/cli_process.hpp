// Runs the built `uroce` binary as real processes for the CLI integration tests: a server in
// the background and a client in the foreground, each with its stdout/stderr in a file, both
// with UROCE_UDP_PORT set to a port of the test's own so no other device on the host meets
// them, and with a hard timeout so a broken peer fails the test instead of hanging it.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "shell_run.hpp"
#include "test_port.hpp"

namespace uroce::test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// TCP and UDP ports of one test: distinct per call and from every other test's
// (test_port.hpp says why pid-derived numbers were not enough).
inline uint16_t next_port() {
  return reserve_port();
}

class Process {
 public:
  // in_child: runs in the child before exec (CPU affinity, nice: what its threads inherit).
  Process(const std::vector<std::string>& args, uint16_t udp_port,
          const std::function<void()>& in_child = {}) {
    char pattern[] = "/tmp/uroce-cli-it-XXXXXX";
    dir_ = mkdtemp(pattern) != nullptr ? pattern : "/tmp";
    pid_ = fork();
    if (pid_ == 0) {
      setenv("UROCE_UDP_PORT", std::to_string(udp_port).c_str(), 1);
      if (!freopen((dir_ + "/out").c_str(), "w", stdout) ||
          !freopen((dir_ + "/err").c_str(), "w", stderr)) {
        _exit(127);
      }
      if (in_child) in_child();
      std::vector<char*> argv;
      std::string bin = uroce_binary();
      argv.push_back(bin.data());
      std::vector<std::string> copy = args;
      for (std::string& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
  }
  ~Process() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // The exit status, or -1 after killing it when it ran longer than `limit`.
  int wait(std::chrono::seconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (std::chrono::steady_clock::now() < end) {
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    reaped_ = true;
    return -1;
  }
  [[nodiscard]] std::string out() const { return read_file(dir_ + "/out"); }
  [[nodiscard]] std::string err() const { return read_file(dir_ + "/err"); }
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

}  // namespace uroce::test
