// How long post_send takes while the progress thread moves the packets: two devices in this
// process over real UDP on 127.0.0.1 stream RC WRITEs, and every post_send call of the
// sending application is timed. The application only posts and polls (ProgressOptions::
// app_calls_drive off, as with a NIC): every packet is the progress threads' work, so a post
// that needs the engine's lock waits for whatever pass the sender's progress thread is in.
//
//   post_call_time [--port N] [--seconds S]
//
// --port: the UDP port both devices share (default: one the tests' port locks hand out);
// --seconds: how long each scenario is timed (default 2), after half a second of warm-up.
//
// Prints one JSON object per line and scenario: name, posts, the bandwidth in MB/s, and the
// post_send call's median, 99th and 99.9th percentile and maximum in nanoseconds.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "rc_stream.hpp"

namespace {

using namespace uroce;
using Clock = std::chrono::steady_clock;

constexpr const char* kProgram = "post_call_time";

// Keeps every post's duration; the vector is sized before the window, so timing allocates
// nothing while it runs.
class PostTimes final : public bench::PostHook {
 public:
  explicit PostTimes(size_t capacity) { ns_.reserve(capacity); }
  void before_post() override { start_ = Clock::now(); }
  void after_post() override {
    if (ns_.size() < ns_.capacity()) ns_.push_back((Clock::now() - start_).count());
  }
  std::vector<int64_t>& ns() { return ns_; }

 private:
  Clock::time_point start_;
  std::vector<int64_t> ns_;
};

// Bad input: one line naming the problem and the fix, exit 2.
[[noreturn]] void usage_error(const std::string& what) {
  fmt::print(stderr, "{}: {}\n", kProgram, what);
  std::exit(2);
}

int64_t percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto i = static_cast<size_t>(p * static_cast<double>(sorted.size() - 1));
  return sorted[i];
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<uint16_t> port;
  double seconds = 2.0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--port" && i + 1 < argc) {
      const int p = std::atoi(argv[++i]);
      if (p < 1 || p > 65535) usage_error("--port must be 1 .. 65535");
      port = static_cast<uint16_t>(p);
    } else if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
      if (!(seconds > 0.0 && seconds <= 600.0)) {
        usage_error("--seconds must be above 0 and at most 600");
      }
    } else {
      usage_error(
          fmt::format("unknown argument {}; usage: {} [--port N] [--seconds S]", arg, kProgram));
    }
  }
  if (!port) port = test::reserve_port();
  const itest::TempDir registry;

  const std::vector<bench::Scenario> scenarios = {
      {"write_65536", WrOpcode::kRdmaWrite, 65536, 1, 16, 200},
      {"write_64_q8", WrOpcode::kRdmaWrite, 64, 8, 32, 5000},
  };
  size_t bytes = 0;
  for (const auto& s : scenarios) bytes = std::max(bytes, size_t{s.size} * size_t(s.qps));
  OpenOptions o = itest::loopback_options(*port, registry.path());
  o.progress.app_calls_drive = false;
  auto da = Device::open(o);
  auto db = Device::open(o);
  if (!da || !db) bench::die(kProgram, fmt::format("can't open two devices on lo port {}", *port));
  itest::Side a(std::move(da.value()), bytes);
  itest::Side b(std::move(db.value()), bytes);
  for (const auto& s : scenarios) {
    PostTimes times(size_t{1} << 24);
    bench::Run run(a, b, s, kProgram, &times);
    const auto warm_until = Clock::now() + std::chrono::milliseconds(500);
    do {
      run.move(s.messages);
    } while (Clock::now() < warm_until);
    times.ns().clear();
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(seconds);
    uint64_t messages = 0;
    do {
      run.move(s.messages);
      messages += static_cast<uint64_t>(s.messages);
    } while (Clock::now() < end);
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<int64_t>& ns = times.ns();
    std::sort(ns.begin(), ns.end());
    fmt::print(
        "{{\"name\": \"{}\", \"posts\": {}, \"mbps\": {:.1f}, \"post_ns_median\": {}, "
        "\"post_ns_p99\": {}, \"post_ns_p999\": {}, \"post_ns_max\": {}}}\n",
        s.name, ns.size(), static_cast<double>(messages) * s.size / elapsed / 1e6,
        percentile(ns, 0.5), percentile(ns, 0.99), percentile(ns, 0.999),
        ns.empty() ? 0 : ns.back());
    std::fflush(stdout);
  }
  return 0;
}
