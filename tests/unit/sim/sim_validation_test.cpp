// The simulator's validation checks that need no real processes (docs/simulator-validation.md):
// RED marking at the formula's rate on a bottleneck queue a whole scenario holds at known
// depths, and the validation scenarios' own exact properties (determinism, the bottleneck's
// packet rate that makes them comparable with the real runs).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <string>

#include "sim/output.hpp"
#include "sim_test_util.hpp"

namespace uroce::sim {
namespace {

using test::run_scenario;

constexpr double kKmin = 20480, kKmax = 204800, kPmax = 0.2;

// docs/simulator-scenarios.md: p = pmax (q - Kmin)/(Kmax - Kmin) between, 1 above Kmax.
double red_p(double q) {
  if (q <= kKmin) return 0;
  if (q > kKmax) return 1;
  return kPmax * (q - kKmin) / (kKmax - kKmin);
}

// One long-lived flow per sender through a dumbbell's 1 Gb/s middle link, cc=dcqcn only so the
// packets are ECN-capable: rpg_min_rate = the 10 Gb/s line rate, so no CNP slows a sender. Each
// WR is one packet and a flow keeps `window` of them outstanding, so the bottleneck queue holds
// senders x window packets minus the few in flight: a standing queue at a depth set by the window.
std::string held_queue(uint32_t senders, uint32_t window, uint32_t duration_us) {
  std::string flows;
  for (uint32_t i = 0; i < senders; ++i) {
    flows += fmt::format("[[workload]]\nkind = \"flow\"\nsrc = \"h{}\"\ndst = \"h{}\"\nbytes = 0\n",
                         i, senders + i);
  }
  return fmt::format(R"(duration_us = {}
sample_us = 1
message_bytes = 1024
host_buffer_bytes = 1048576
[topology]
kind = "dumbbell"
hosts_per_side = {}
link_gbps = 10
fabric_gbps = 1
delay_ns = 1000
[switch]
buffer_mode = "lossy"
ecn = true
kmin_bytes = 20480
kmax_bytes = 204800
pmax = 0.2
mark_at = "dequeue"
[transport]
cc = "dcqcn"
dcqcn = "rpg_min_rate=10000"
mtu = 1024
window = {}
{})",
                     duration_us, senders, window, flows);
}

struct Held {
  uint64_t enqueued = 0, dequeued = 0, marked = 0, dropped = 0;
  uint64_t qmin = UINT64_MAX, qmax = 0;  // sampled depth after the first millisecond
};

Held run_held(uint32_t senders, uint32_t window, uint32_t duration_us = 100'000) {
  auto sim = run_scenario(held_queue(senders, window, duration_us));
  const Topology& topo = sim->topology();
  const Node& sw0 = topo.node(topo.hosts());
  uint32_t port = 0;
  while (topo.node(sw0.ports[port].peer).name != "sw1") ++port;
  const EgressStats e = sim->switch_node(0).stats(port, 0, sim->now());
  Held h{.enqueued = e.enqueued,
         .dequeued = e.dequeued,
         .marked = e.ecn_marked,
         .dropped = e.dropped_tail};
  for (const QueueSample& q : sim->queue_samples()) {
    if (q.sw != 0 || q.port != port || q.priority != 0 || q.time_ns < 1'000'000) continue;
    h.qmin = std::min(h.qmin, q.depth);
    h.qmax = std::max(h.qmax, q.depth);
  }
  return h;
}

// A one-packet WRITE (BTH 12 + RETH 16 + 1024 + ICRC 4) and its 66 bytes of frame.
constexpr uint64_t kFrame = 1056 + 66;
// Packets the bottleneck sends in the first millisecond (the queue building up): 1 Gb/s.
constexpr uint64_t kWarmPackets = 1'000'000 / (kFrame * 8) + 1;

TEST(SimValidation, RedMarksNothingBelowKmin) {
  const Held h = run_held(1, 16);
  ASSERT_GT(h.qmin, 0u);
  ASSERT_LE(h.qmax, static_cast<uint64_t>(kKmin));
  EXPECT_GT(h.enqueued, 10'000u);
  EXPECT_EQ(h.marked, 0u);
  EXPECT_EQ(h.dropped, 0u);
}

TEST(SimValidation, RedMarksAtTheFormulasRateBetweenKminAndKmax) {
  for (const uint32_t window : {48u, 96u, 128u}) {
    // 400 ms: ~44 600 packets, so 5 standard deviations are ~6 % of p at the deepest point and
    // a Pmax off by a quarter fails.
    const Held h = run_held(1, window, 400'000);
    // The scenario holds the queue: its depth moves by at most two packets.
    ASSERT_GT(h.qmin, static_cast<uint64_t>(kKmin) + kFrame) << window;
    ASSERT_LT(h.qmax, static_cast<uint64_t>(kKmax)) << window;
    ASSERT_LE(h.qmax - h.qmin, 2 * kFrame) << window;
    // Marked at dequeue on the bytes left behind: one frame less than a sample may show.
    const double lo = red_p(static_cast<double>(h.qmin - kFrame));
    const double hi = red_p(static_cast<double>(h.qmax));
    const auto n = static_cast<double>(h.dequeued);
    const double got = static_cast<double>(h.marked) / n;
    // 5 binomial standard deviations beyond the band; below it also the warm-up's packets,
    // which met a shallower queue (marked with at least probability 0).
    const double slack_lo = 5 * std::sqrt(lo * (1 - lo) / n) + kWarmPackets * hi / n;
    const double slack_hi = 5 * std::sqrt(hi * (1 - hi) / n);
    EXPECT_GE(got, lo - slack_lo) << "window " << window << " depth " << h.qmin << ".." << h.qmax;
    EXPECT_LE(got, hi + slack_hi) << "window " << window << " depth " << h.qmin << ".." << h.qmax;
    // The band is narrow: this tells p = 0.2 (q - Kmin)/(Kmax - Kmin) from, e.g., no 0.2 at all.
    EXPECT_LT(hi - lo, 0.25 * hi) << window;
    EXPECT_EQ(h.dropped, 0u);
  }
}

TEST(SimValidation, RedMarksEveryPacketAboveKmax) {
  const Held h = run_held(2, 128);  // 256 packets outstanding: ~280 KB standing
  ASSERT_GT(h.qmin, static_cast<uint64_t>(kKmax) + kFrame);
  EXPECT_EQ(h.dropped, 0u);
  // Only packets sent while the queue was still building can leave unmarked.
  EXPECT_LE(h.dequeued - h.marked, kWarmPackets);
  EXPECT_GT(h.marked, 10'000u);
}

Scenario shipped(const std::string& name) {
  return load_scenario(std::string(UROCE_SOURCE_DIR) + "/scenarios/" + name + ".toml");
}

std::string all_outputs(const Simulator& sim) {
  const OutputFiles o = render_outputs(sim);
  return o.summary_json + o.flows_csv + o.ports_csv + o.hosts_csv + o.queues_csv + o.goodput_csv;
}

TEST(SimValidation, ValidationScenariosAreDeterministic) {
  for (const char* name : {"validate-loss-1-gbn", "validate-ecn-2"}) {
    Scenario sc = shipped(name);
    sc.seed = 7;
    Simulator a(sc, name);
    a.run();
    Simulator b(sc, name);
    b.run();
    EXPECT_EQ(all_outputs(a), all_outputs(b)) << name;
    for (const FlowState& f : a.flows()) EXPECT_TRUE(f.completed) << name;
  }
}

TEST(SimValidation, LosslessValidationFlowRunsAtTheRealBottlenecksPayloadRate) {
  // validate-loss-0-gbn's middle link is 100 Mb/s scaled by (L + 66)/(L + 42): a packet takes
  // as long as a frame of L + 42 bytes at 100 Mbit/s, as the real bottleneck charges it. So the
  // lone flow's goodput is 100 Mbit/s x 1024 / (L + 42), L = 1040.25 RoCE bytes per packet.
  const Scenario sc = shipped("validate-loss-0-gbn");
  Simulator sim(sc, "validate-loss-0-gbn");
  sim.run();
  ASSERT_EQ(sim.flows().size(), 1u);
  const FlowState& f = sim.flows()[0];
  ASSERT_TRUE(f.completed);
  const double gbps =
      static_cast<double>(f.spec.bytes) * 8 / static_cast<double>((f.end - f.start).count());
  const double cap = 0.1 * 1024 / (1040.25 + 42);  // the real bottleneck's payload rate
  // The sim's own bound: the scenario's rounded fabric_gbps carrying L + 66 bytes per packet.
  EXPECT_LE(gbps, 0.102218 * 1024 / (1040.25 + 66));
  EXPECT_GT(gbps, 0.995 * cap);  // 300 WRs: the first packet's path and the last ACK are < 0.5 %
  EXPECT_EQ(sim.host_counters(0).get(transport::Counter::kRetransmittedPkts), 0u);
}

}  // namespace
}  // namespace uroce::sim
