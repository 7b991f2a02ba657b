// How long a post takes while the progress threads move the packets: two devices in this
// process over real UDP on 127.0.0.1 stream RC WRITEs and SENDs, and every post_send call of
// the sending side and post_recv call of the receiving side is timed. The application only
// posts and polls (ProgressOptions::app_calls_drive off, as with a NIC): every packet is the
// progress threads' work, so a post that needs the engine's lock waits for whatever pass its
// device's progress thread is in.
//
//   post_call_time [--port N] [--seconds S]
//
// --port: the UDP port both devices share (default: one the tests' port locks hand out);
// --seconds: how long each scenario is timed (default 2), after half a second of warm-up.
//
// Prints one JSON object per line and scenario: name, the bandwidth in MB/s, posts and the
// post_send call's median, 99th and 99.9th percentile and maximum in nanoseconds
// (post_ns_median ...), and for SENDs recvs and the same of post_recv (recv_ns_median ...).
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

// Keeps every post's duration, sends and receives apart; the vectors are sized before the
// window, so timing allocates nothing while it runs.
class PostTimes final : public bench::PostHook {
 public:
  explicit PostTimes(size_t capacity) {
    sends_.reserve(capacity);
    recvs_.reserve(capacity);
  }
  void before_post() override { start_ = Clock::now(); }
  void after_post(bool receive) override {
    std::vector<int64_t>& v = receive ? recvs_ : sends_;
    if (v.size() < v.capacity()) v.push_back((Clock::now() - start_).count());
  }
  void clear() {
    sends_.clear();
    recvs_.clear();
  }
  std::vector<int64_t>& sends() { return sends_; }
  std::vector<int64_t>& recvs() { return recvs_; }

 private:
  Clock::time_point start_;
  std::vector<int64_t> sends_;
  std::vector<int64_t> recvs_;
};

// Bad input: one line naming the problem and the fix, exit 2.
[[noreturn]] void usage_error(const std::string& what) {
  bench::die(kProgram, what, 2);
}

int64_t percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto i = static_cast<size_t>(p * static_cast<double>(sorted.size() - 1));
  return sorted[i];
}

// `, "<count_key>": N, "<key>_ns_median": ..., ..._p99, ..._p999, ..._max` of one call's times.
std::string distribution(const char* count_key, const char* key, std::vector<int64_t>& ns) {
  std::sort(ns.begin(), ns.end());
  return fmt::format(
      ", \"{}\": {}, \"{}_ns_median\": {}, \"{}_ns_p99\": {}, \"{}_ns_p999\": {}, "
      "\"{}_ns_max\": {}",
      count_key, ns.size(), key, percentile(ns, 0.5), key, percentile(ns, 0.99), key,
      percentile(ns, 0.999), key, ns.empty() ? 0 : ns.back());
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
      {"send_4096", WrOpcode::kSend, 4096, 1, 32, 2000},
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
    if (s.opcode == WrOpcode::kSend) run.post_receives();
    const auto warm_until = Clock::now() + std::chrono::milliseconds(500);
    do {
      run.move(s.messages);
    } while (Clock::now() < warm_until);
    times.clear();
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(seconds);
    uint64_t messages = 0;
    do {
      run.move(s.messages);
      messages += static_cast<uint64_t>(s.messages);
    } while (Clock::now() < end);
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    std::string line = fmt::format("{{\"name\": \"{}\", \"mbps\": {:.1f}", s.name,
                                   static_cast<double>(messages) * s.size / elapsed / 1e6);
    line += distribution("posts", "post", times.sends());
    if (s.opcode == WrOpcode::kSend) line += distribution("recvs", "recv", times.recvs());
    fmt::print("{}}}\n", line);
    std::fflush(stdout);
  }
  return 0;
}
