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
// devices in the window: data, ACKs and READ responses), allocations, mutex_locks. The
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
#include "device_integration_util.hpp"
#include "uroce/connect.hpp"
#include "uroce/verbs.hpp"

namespace {

using namespace uroce;
using Clock = std::chrono::steady_clock;

using itest::Side;

struct Scenario {
  const char* name;
  WrOpcode opcode;
  uint32_t size;
  int qps;
  int depth;     // messages outstanding per QP
  int messages;  // in the counted window (as many again before it, to warm up)
};

uint64_t sent_packets(const Side& side) {
  return side.dev.counters()[transport::Counter::kSentPkts];
}

[[noreturn]] void die(const std::string& why) {
  fmt::print(stderr, "data_path_counts: {}\n", why);
  std::exit(1);
}

class Run {
 public:
  Run(Side& a, Side& b, const Scenario& s) : a_(a), b_(b), s_(s) {
    QpInitAttr init;
    init.qp_type = QpType::kRc;
    init.cap =
        QpCap{static_cast<uint32_t>(s.depth) + 1, static_cast<uint32_t>(s.depth) + 1, 1, 1, 0};
    for (int q = 0; q < s.qps; ++q) {
      init.send_cq = a.cq.id();
      init.recv_cq = a.cq.id();
      auto qa = a.pd.create_qp(init);
      init.send_cq = b.cq.id();
      init.recv_cq = b.cq.id();
      auto qb = b.pd.create_qp(init);
      if (!qa || !qb) die("can't create QPs");
      qa_.push_back(std::move(qa.value()));
      qb_.push_back(std::move(qb.value()));
      QueuePair& x = qa_.back();
      QueuePair& y = qb_.back();
      const uint32_t psn_a = 1000u + static_cast<uint32_t>(q);
      const uint32_t psn_b = 5000u + static_cast<uint32_t>(q);
      ConnectOptions o;
      o.path_mtu = Mtu::k4096;  // lo's active MTU, as `uroce perf` connects
      if (!connect_qp(x, psn_a, QpEndpoint{y.qp_num(), psn_b, b.gid()}, o) ||
          !connect_qp(y, psn_b, QpEndpoint{x.qp_num(), psn_a, a.gid()}, o)) {
        die("can't connect QPs");
      }
    }
  }

  // Moves `count` messages, keeping `depth` outstanding on every QP.
  void move(int count) {
    posted_ = 0;
    completed_ = 0;
    total_ = count;
    for (int q = 0; q < s_.qps; ++q) {
      for (int k = 0; k < s_.depth && posted_ < total_; ++k) post(q);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    Wc wc[32];
    while (completed_ < total_) {
      const int n = a_.cq.poll(std::span<Wc>(wc, 32));
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != WcStatus::kSuccess) die(fmt::format("{}: completion error", s_.name));
        ++completed_;
        if (posted_ < total_) post(static_cast<int>(wc[i].wr_id));
      }
      if (s_.opcode == WrOpcode::kSend) take_receives();
      if (Clock::now() > deadline) die(fmt::format("{}: no progress for 60 s", s_.name));
    }
  }

  // The receiver's side of SENDs: a receive for every message, taken back as it completes.
  void post_receives() {
    for (int q = 0; q < s_.qps; ++q) {
      for (int k = 0; k < s_.depth; ++k) post_recv(q);
    }
  }

 private:
  void post(int q) {
    const Sge sge = a_.mr.sge(static_cast<uint64_t>(q) * s_.size, s_.size);
    SendWr wr;
    wr.wr_id = static_cast<uint64_t>(q);
    wr.opcode = s_.opcode;
    wr.send_flags = kSendSignaled;
    wr.sg_list = std::span<const Sge>(&sge, 1);
    wr.rdma.remote_addr =
        reinterpret_cast<uint64_t>(b_.mr.addr()) + static_cast<uint64_t>(q) * s_.size;
    wr.rdma.rkey = b_.mr.rkey();
    if (!qa_[static_cast<size_t>(q)].post_send(wr))
      die(fmt::format("{}: post_send failed", s_.name));
    ++posted_;
  }

  void post_recv(int q) {
    const Sge sge = b_.mr.sge(static_cast<uint64_t>(q) * s_.size, s_.size);
    if (!qb_[static_cast<size_t>(q)].post_recv(
            RecvWr{static_cast<uint64_t>(q), std::span<const Sge>(&sge, 1)})) {
      die(fmt::format("{}: post_recv failed", s_.name));
    }
  }

  void take_receives() {
    Wc wc[32];
    const int n = b_.cq.poll(std::span<Wc>(wc, 32));
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != WcStatus::kSuccess) die(fmt::format("{}: receive error", s_.name));
      post_recv(static_cast<int>(wc[i].wr_id));
    }
  }

  Side& a_;
  Side& b_;
  const Scenario& s_;
  std::vector<QueuePair> qa_;
  std::vector<QueuePair> qb_;
  int posted_ = 0;
  int completed_ = 0;
  int total_ = 0;
};

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
      Run run(a, b, s);
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
      uroce::bench::start_counting();
      run.move(count);
      const uroce::bench::CallCounts c = uroce::bench::stop_counting();
      const uint64_t packets = sent_packets(a) + sent_packets(b) - sent_before;
      fmt::print(
          "{{\"name\": \"{}\", \"messages\": {}, \"packets\": {}, \"allocations\": {}, "
          "\"mutex_locks\": {}}}\n",
          s.name, count, packets, c.allocations, c.mutex_locks);
      std::fflush(stdout);
    }
  }
  return 0;
}
