// Whether the data path allocates or takes locks per packet: two devices in this process
// over real UDP on 127.0.0.1 (the reuseport steering hands each datagram to the device that
// owns its QPN), each with the telemetry `uroce perf` runs with, stream RC operations in
// steady state, and call_counter counts every heap allocation and every mutex lock or
// trylock made by any thread (the application's busy polls and posts, both progress
// threads, telemetry) while a window of messages moves.
//
//   data_path_counts [--port N] [--scale N] [--trace]
//
// --port: the UDP port both devices share (default: one the tests' port locks hand out,
// tests/integration/test_port.hpp); --scale: N times the messages per window; --trace: the
// stack of every counted call on stderr.
//
// Prints one JSON object per line and scenario: name, messages, packets (sent by both
// devices in the window: data, ACKs and READ responses), allocations, mutex_locks, and
// post_locks: the posts' own locks, a spinlock per queue (transport/post_lock.hpp) that the
// counter cannot see, one per post_send or post_recv the window made. The
// issue-12 floor "no allocation and no lock on the per-packet path" reads: allocations 0,
// and mutex locks below one per packet where a message is many packets (a lock per post,
// per poll and per pass of up to 64 packets; none per packet).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "call_counter.hpp"
#include "rc_stream.hpp"

namespace {

using namespace uroce;
using Clock = std::chrono::steady_clock;

using bench::Run;
using bench::Scenario;
using bench::sent_packets;
using itest::Side;

[[noreturn]] void die(const std::string& why) {
  bench::die("data_path_counts", why);
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<uint16_t> port;
  int scale = 1;
  bool tracing = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--port" && i + 1 < argc) {
      port = static_cast<uint16_t>(std::atoi(argv[++i]));
    } else if (arg == "--trace") {
      tracing = true;
      uroce::bench::set_tracing(true);
    } else if (arg == "--scale" && i + 1 < argc) {
      scale = std::max(1, std::atoi(argv[++i]));
    } else {
      die(fmt::format(
          "unknown argument {}; usage: data_path_counts [--port N] [--scale N] [--trace]", arg));
    }
  }
  if (!port) port = test::reserve_port();
  const itest::TempDir registry;

  const std::vector<Scenario> scenarios = {
      {"write_65536", WrOpcode::kRdmaWrite, 65536, 1, 16, 1000},
      {"write_65536_q8", WrOpcode::kRdmaWrite, 65536, 8, 4, 1000},
      {"write_1048576", WrOpcode::kRdmaWrite, 1 << 20, 1, 4, 100},
      {"write_64_q8", WrOpcode::kRdmaWrite, 64, 8, 32, 20000},
      // One WRITE at a time: every post is the lone WR of an idle QP, sent at once (a
      // latency test's post).
      {"write_64_lone", WrOpcode::kRdmaWrite, 64, 1, 1, 5000},
      {"send_4096", WrOpcode::kSend, 4096, 1, 32, 5000},
      {"read_65536", WrOpcode::kRdmaRead, 65536, 1, 8, 1000},
  };
  size_t bytes = 0;
  for (const Scenario& s : scenarios) bytes = std::max(bytes, static_cast<size_t>(s.size) * s.qps);
  {
    auto da = Device::open(itest::loopback_options(*port, registry.path()));
    auto db = Device::open(itest::loopback_options(*port, registry.path()));
    if (!da || !db) die(fmt::format("can't open two devices on lo port {}", *port));
    Side a(std::move(da.value()), bytes);
    Side b(std::move(db.value()), bytes);
    for (const Scenario& s : scenarios) {
      Run run(a, b, s, "data_path_counts");
      if (s.opcode == WrOpcode::kSend) run.post_receives();
      const int count = s.messages * scale;
      // Warm-up: every queue, ring and map at its steady size, telemetry's two snapshots
      // built with these QPs (it publishes every 5-50 ms; a loaded machine's threads may
      // wait for a core, so ten intervals of the longest).
      const auto warm_until = Clock::now() + std::chrono::milliseconds(500);
      do {
        run.move(count);
      } while (Clock::now() < warm_until);
      const uint64_t sent_before = sent_packets(a) + sent_packets(b);
      if (tracing) fmt::print(stderr, "-- window {}\n", s.name);
      const uint64_t posts_before = run.post_calls();
      uroce::bench::start_counting();
      run.move(count);
      const uroce::bench::CallCounts c = uroce::bench::stop_counting();
      const uint64_t post_locks = run.post_calls() - posts_before;
      const uint64_t packets = sent_packets(a) + sent_packets(b) - sent_before;
      fmt::print(
          "{{\"name\": \"{}\", \"messages\": {}, \"packets\": {}, \"allocations\": {}, "
          "\"mutex_locks\": {}, \"post_locks\": {}}}\n",
          s.name, count, packets, c.allocations, c.mutex_locks, post_locks);
      std::fflush(stdout);
    }
  }
  return 0;
}
