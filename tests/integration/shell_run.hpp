// Runs a shell command and returns its exit status and standard output, for the tests that
// drive scripts and the built binaries as a user would (callers add "2>&1" to see stderr);
// run_shell_split keeps stderr apart (tests that check an error line alone), run_quiet and
// shell_ok drop both (setup and teardown: ip, nft), and slurp/spit read and write the files
// such scripts take and produce.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace uroce::test {

// The `uroce` CLI of this build tree.
inline std::string uroce_binary() {
  return std::string(UROCE_BINARY_DIR) + "/bin/uroce";
}

inline std::pair<int, std::string> run_shell(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, ""};
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

// The exit status of cmd with its output discarded (-1 when it did not exit).
inline int run_quiet(const std::string& cmd) {
  return run_shell(cmd + " >/dev/null 2>&1").first;
}

// Whether cmd, its output discarded, exits 0.
inline bool shell_ok(const std::string& cmd) {
  return run_quiet(cmd) == 0;
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void spit(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

struct ShellResult {
  int rc = -1;
  std::string out;
  std::string err;
};

// Runs cmd with sh, its stderr into a file under `work` (removed afterwards).
inline ShellResult run_shell_split(const std::string& cmd, const std::filesystem::path& work) {
  const std::filesystem::path err = work / "stderr.txt";
  ShellResult r;
  auto [rc, out] = run_shell(cmd + " 2>" + err.string());
  r.rc = rc;
  r.out = std::move(out);
  r.err = slurp(err);
  std::filesystem::remove(err);
  return r;
}

}  // namespace uroce::test
