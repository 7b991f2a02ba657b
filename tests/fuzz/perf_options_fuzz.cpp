// Fuzzes `uroce perf`'s option parsing (cli::add_perf_options on a CLI11 parser, then
// cli::finish_perf_options) with invariants. The input is up to 24 NUL-separated arguments
// after "perf". CLI11 may reject them (a ParseError, as on the command line); otherwise
// finish_perf_options returns "" or one line (no newline). When it accepts:
//   - there is at least one size, every size is 1 .. 2 GiB (atomics: exactly 8), UD sizes fit
//     the MTU; iterations 5 .. 10^8 unless a duration (0 .. 3600 s] replaces them;
//   - 1 <= cq_mod <= tx_depth; several QPs only in a bandwidth test.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/perf_options.hpp"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "perf_options_fuzz invariant violated: %s (%s)\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args = {"uroce", "perf"};
  std::string cur;
  for (size_t i = 0; i < size && args.size() < 26; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  if (!cur.empty() && args.size() < 26) args.push_back(cur);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());

  using namespace uroce::cli;
  CLI::App app("uroce");
  PerfOptions o;
  CLI::App* sub = app.add_subcommand("perf");
  add_perf_options(*sub, o);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    return 0;
  }
  const std::string msg = finish_perf_options(o);
  if (!msg.empty()) {
    if (msg.find('\n') != std::string::npos) fail("message of several lines", msg);
    return 0;
  }
  if (o.sizes.empty()) fail("accepted without a size", "");
  for (uint64_t s : o.sizes) {
    if (s < 1 || s > kPerfMaxSize) fail("size out of range", std::to_string(s));
    if (o.test.verb == PerfVerb::kAtomic && s != 8) fail("atomic size not 8", std::to_string(s));
    if (o.conn == PerfConnection::kUd && s > o.mtu.value_or(4096)) fail("UD size > MTU", "");
  }
  if (o.duration) {
    if (*o.duration <= 0 || *o.duration > 3600) fail("duration out of range", "");
  } else if (!o.iters || *o.iters < 5 || *o.iters > 100'000'000) {
    fail("iterations out of range", "");
  }
  if (!o.cq_mod || !o.tx_depth || *o.cq_mod < 1 || *o.cq_mod > *o.tx_depth) {
    fail("cq_mod not within 1 .. tx_depth", "");
  }
  if (o.num_qps > 1 && o.test.kind != PerfKind::kBandwidth)
    fail("several QPs in a latency test", "");
  return 0;
}
