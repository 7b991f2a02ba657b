// Switch behaviour in whole runs: PFC with enough headroom never drops where a lossy switch
// does, RED marks at the formula's rate, a stuck receiver's pause storm spreads, priorities
// keep a victim flow out of head-of-line blocking, ECMP uses every spine.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/switch_node.hpp"
#include "sim_test_util.hpp"

namespace uroce::sim {
namespace {

using test::run_scenario;

struct Totals {
  uint64_t tail = 0, headroom = 0, marks = 0, pauses = 0;
};
Totals switch_totals(const Simulator& sim) {
  Totals t;
  for (uint32_t s = 0; s < sim.switch_count(); ++s) {
    const SwitchNode& m = sim.switch_node(s);
    for (uint32_t p = 0; p < m.ports(); ++p) {
      for (uint32_t pr = 0; pr < m.priorities(); ++pr) {
        const EgressStats e = m.stats(p, static_cast<uint8_t>(pr), sim.now());
        t.tail += e.dropped_tail;
        t.headroom += e.dropped_headroom;
        t.marks += e.ecn_marked;
        t.pauses += e.pause_events;
      }
    }
  }
  return t;
}

std::string incast(const char* switch_section) {
  return std::string(R"(
duration_us = 20000
[topology]
kind = "star"
hosts = 9
link_gbps = 100
delay_ns = 1000
[transport]
timeout = 8
[switch]
)") + switch_section +
         R"(
[[workload]]
kind = "incast"
dst = "h0"
bytes = 1048576
)";
}

TEST(SimFabric, LosslessWithHeadroomNeverDropsUnderIncastWhereNakedDoes) {
  // Headroom 64 KiB > what arrives after a pause: 2 x 1 us x 12.5 GB/s = 25 KB on the wire
  // plus the packet being sent at each end.
  auto lossless = run_scenario(incast(R"(buffer_mode = "lossless"
buffer_bytes = 4000000
xoff_bytes = 65536
xon_bytes = 32768
headroom_bytes = 65536)"));
  const Totals a = switch_totals(*lossless);
  EXPECT_EQ(a.tail, 0u);
  EXPECT_EQ(a.headroom, 0u);
  EXPECT_GT(a.pauses, 8u);  // every sender was paused
  for (const FlowState& f : lossless->flows()) EXPECT_TRUE(f.completed);

  // The same incast into a 1 MB lossy buffer: 8 MiB arriving at 8x the drain rate overflows.
  auto naked = run_scenario(incast(R"(buffer_mode = "lossy"
buffer_bytes = 1000000)"));
  const Totals b = switch_totals(*naked);
  EXPECT_GT(b.tail, 0u);
  EXPECT_EQ(b.pauses, 0u);
  uint64_t retrans = 0;
  for (uint32_t h = 1; h < 9; ++h)
    retrans += naked->host_counters(h).get(transport::Counter::kRetransmittedPkts);
  EXPECT_GT(retrans, 0u);  // go-back-N recovered what was dropped
  for (const FlowState& f : naked->flows()) EXPECT_TRUE(f.completed);
}

TEST(SimFabric, TooLittleHeadroomDropsInHeadroom) {
  auto sim = run_scenario(incast(R"(buffer_mode = "lossless"
buffer_bytes = 4000000
xoff_bytes = 65536
xon_bytes = 32768
headroom_bytes = 4000)"));
  EXPECT_GT(switch_totals(*sim).headroom, 0u);
}

TEST(SimFabric, RedMarksAtTheFormulasRateOnAFixedDepthQueue) {
  fabric::SwitchQueueConfig c;
  c.port_buffer_bytes = 0;
  c.shared_buffer_bytes = 0;
  c.red.enabled = true;
  c.red.kmin_bytes = 10'000;
  c.red.kmax_bytes = 50'000;
  c.red.pmax = 0.4;
  c.red.at = fabric::MarkPoint::kEnqueue;
  c.priorities = 1;
  for (const uint64_t depth : {5'000u, 10'000u, 20'000u, 30'000u, 45'000u, 50'000u, 60'000u}) {
    SwitchNode sw(c, {100'000'000'000, 100'000'000'000}, 0xFF, false, {}, 42);
    TimePoint now{0};
    // Build the standing queue while the egress is held paused by its peer.
    sw.set_downstream_paused(0, 0, true, now);
    for (uint64_t q = 0; q < depth; q += 1000) (void)sw.enqueue(0, 1, 1000, 0, true, 0, now);
    sw.set_downstream_paused(0, 0, false, now);
    // Then one in, one out: every arrival sees exactly `depth` bytes queued.
    const int n = 40000;
    int marked = 0;
    for (int i = 0; i < n; ++i) {
      now += Nanos(1000);
      ASSERT_EQ(sw.depth_bytes(0, 0), depth);
      marked += sw.enqueue(0, 1, 1000, 0, true, 0, now).marked ? 1 : 0;
      ASSERT_TRUE(sw.transmit(0, now).has_value());
    }
    const double p = depth <= 10'000  ? 0.0
                     : depth > 50'000 ? 1.0
                                      : 0.4 * static_cast<double>(depth - 10'000) / 40'000.0;
    EXPECT_DOUBLE_EQ(sw.mark_probability(depth), p);
    const double got = static_cast<double>(marked) / n;
    if (p == 0.0 || p == 1.0) {
      EXPECT_EQ(got, p) << depth;  // exact at the ends: no random draw
    } else {
      // 5 standard deviations of a binomial proportion.
      EXPECT_NEAR(got, p, 5 * std::sqrt(p * (1 - p) / n)) << depth;
    }
  }
}

TEST(SimFabric, StuckReceiverPausesItsPortAndSpreadsToTheSender) {
  auto sim = run_scenario(R"(
duration_us = 600
[topology]
kind = "star"
hosts = 3
delay_ns = 1000
[switch]
buffer_mode = "lossless"
buffer_bytes = 4000000
xoff_bytes = 65536
xon_bytes = 32768
headroom_bytes = 65536
[[workload]]
kind = "flow"
src = "h1"
dst = "h0"
bytes = 0
[[storm]]
host = "h0"
start_us = 100
end_us = 300
)");
  const SwitchNode& sw = sim->switch_node(0);
  // The pause holds sw0 -> h0 from 101 us to 301 us (1 us link delay each way).
  EXPECT_EQ(sw.stats(0, 0, sim->now()).paused_ns, 200'000u);
  EXPECT_GE(sim->host_stats(1).pause_frames_received, 1u);  // spread back to h1
  EXPECT_GT(sim->host_stats(1).paused_ns, 150'000u);
  EXPECT_EQ(switch_totals(*sim).tail + switch_totals(*sim).headroom, 0u);
  // 802.1Qbb frames from h0: a PAUSE of 0xFFFF quanta (335.54 us at 100 Gb/s) at 100 us, its
  // refresh after 0x7FFF quanta (167.768 us) at 267.768 us, the XON at 300 us.
  const PfcTxStats& st = sim->pfc_tx_stats(0, 0, 0);
  EXPECT_EQ(st.pause_frames, 2u);
  EXPECT_EQ(st.xon_frames, 1u);
  EXPECT_EQ(st.pause_events, 1u);
  // sw0's frames to h1 (port 1): at least one per pause decision, each received one delay
  // later (one may still be on the wire at the end).
  const PfcTxStats& up = sim->pfc_tx_stats(sim->topology().hosts(), 1, 0);
  EXPECT_GE(up.pause_frames, sw.stats(1, 0, sim->now()).pause_events);
  EXPECT_LE(sim->host_stats(1).pause_frames_received, up.pause_frames);
  EXPECT_GE(sim->host_stats(1).pause_frames_received + 1, up.pause_frames);
}

std::string storm_scenario(const std::string& storm_keys, const std::string& switch_keys) {
  return R"(
duration_us = 400
[topology]
kind = "star"
hosts = 3
delay_ns = 1000
[switch]
buffer_mode = "lossless"
buffer_bytes = 4000000
xoff_bytes = 65536
xon_bytes = 32768
headroom_bytes = 65536
)" + switch_keys +
         R"(
[[workload]]
kind = "flow"
src = "h1"
dst = "h0"
bytes = 0
[[storm]]
host = "h0"
start_us = 100
)" + storm_keys +
         "\n";
}

TEST(SimFabric, PauseWithoutRefreshHoldsForItsQuantaOnly) {
  // One PAUSE of 10000 quanta at 100 Gb/s: 10000 x 512 bit / 100 Gb/s = 51.2 us, then the
  // switch's egress resumes by itself (no XON: the storm has no end).
  auto sim = run_scenario(storm_scenario("refresh = false", "pause_quanta = 10000"));
  EXPECT_EQ(sim->switch_node(0).stats(0, 0, sim->now()).paused_ns, 51'200u);
  const PfcTxStats& st = sim->pfc_tx_stats(0, 0, 0);
  EXPECT_EQ(st.pause_frames, 1u);
  EXPECT_EQ(st.xon_frames, 0u);
}

TEST(SimFabric, RefreshedPauseHoldsUntilTheStormEnds) {
  // Refreshed every 4000 quanta (20.48 us) with 10000-quanta pauses: held from 101 us to the
  // end of the run (a storm without end), 299 us; frames at 100 + 20.48 k us, k = 0..14.
  auto sim = run_scenario(storm_scenario("", "pause_quanta = 10000\npause_refresh_quanta = 4000"));
  EXPECT_EQ(sim->switch_node(0).stats(0, 0, sim->now()).paused_ns, 299'000u);
  EXPECT_EQ(sim->pfc_tx_stats(0, 0, 0).pause_frames, 15u);
  EXPECT_EQ(sim->pfc_tx_stats(0, 0, 0).xon_frames, 0u);
}

TEST(SimFabric, ShortPauseQuantaStillNeverDropUnderIncast) {
  // Pauses of 100 quanta (512 ns) refreshed every 50 (256 ns): the refresh keeps the
  // senders held while the port is above XON, so lossless stays lossless.
  auto sim = run_scenario(incast(R"(buffer_mode = "lossless"
buffer_bytes = 4000000
xoff_bytes = 131072
xon_bytes = 65536
headroom_bytes = 65536
pause_quanta = 100
pause_refresh_quanta = 50)"));
  const Totals t = switch_totals(*sim);
  EXPECT_EQ(t.tail + t.headroom, 0u);
  EXPECT_GT(t.pauses, 8u);
  uint64_t frames = 0;
  uint64_t xon = 0;
  for (uint32_t p = 0; p < 9; ++p) {
    frames += sim->pfc_tx_stats(sim->topology().hosts(), p, 0).pause_frames;
    xon += sim->pfc_tx_stats(sim->topology().hosts(), p, 0).xon_frames;
  }
  EXPECT_GT(frames, t.pauses);  // refreshes
  EXPECT_LE(xon, t.pauses);
  EXPECT_GE(xon + 8, t.pauses);  // every pause but those still on at the end resumed
  for (const FlowState& f : sim->flows()) EXPECT_TRUE(f.completed);
}

// h1..h4 send to h0 (4:1, so each sender's class-0 ingress is paused about 3/4 of the time);
// h4 also sends a victim flow to the idle h5. On the same priority the victim waits behind
// those pauses (head-of-line blocking, congestion spreading to an uncongested path); on its
// own lossless priority it gets the rest of h4's link.
uint64_t victim_fct(uint8_t victim_priority) {
  auto sim = run_scenario(std::string(R"(
duration_us = 5000
[topology]
kind = "star"
hosts = 6
[switch]
buffer_mode = "lossless"
buffer_bytes = 4000000
xoff_bytes = 65536
xon_bytes = 32768
headroom_bytes = 65536
[[workload]]
kind = "incast"
dst = "h0"
senders = ["h1", "h2", "h3", "h4"]
bytes = 3000000
[[workload]]
kind = "flow"
src = "h4"
dst = "h5"
bytes = 1000000
start_us = 20
priority = )") + std::to_string(victim_priority) +
                          "\n");
  const FlowState& v = sim->flows()[4];
  EXPECT_EQ(v.spec.dst, 5u);
  EXPECT_TRUE(v.completed);
  return static_cast<uint64_t>((v.end - v.start).count());
}

TEST(SimFabric, OwnPriorityAvoidsHeadOfLineBlocking) {
  const uint64_t shared = victim_fct(0);
  const uint64_t own = victim_fct(3);
  EXPECT_LT(own * 2, shared) << own << " vs " << shared;
}

TEST(SimFabric, EcmpSpreadsFlowsOverEverySpine) {
  auto sim = run_scenario(R"(
duration_us = 3000
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 4
[[workload]]
kind = "all_to_all"
bytes = 20000
)");
  for (const FlowState& f : sim->flows()) EXPECT_TRUE(f.completed);
  const Topology& t = sim->topology();
  for (uint32_t s = 0; s < sim->switch_count(); ++s) {
    const Node& n = t.node(t.hosts() + s);
    if (n.name.substr(0, 5) != "spine") continue;
    uint64_t enq = 0;
    for (uint32_t p = 0; p < n.ports.size(); ++p)
      enq += sim->switch_node(s).stats(p, 0, sim->now()).enqueued;
    EXPECT_GT(enq, 40u) << n.name;
  }
}

}  // namespace
}  // namespace uroce::sim

namespace uroce::sim {
namespace {

// A leaf's uplinks serialise at fabric_gbps although its host ports run at link_gbps: a
// flow across the spine runs at the uplink's rate, within 2% of the ideal at that rate.
TEST(SimFabric, SlowerUplinksSerialiseAtTheirOwnRate) {
  auto sim = run_scenario(R"(
duration_us = 2000
[topology]
kind = "leaf_spine"
leaves = 2
spines = 1
hosts_per_leaf = 1
link_gbps = 100
fabric_gbps = 25
[[workload]]
kind = "flow"
src = "h0"
dst = "h1"
bytes = 1048576
)");
  const FlowState& f = sim->flows()[0];
  ASSERT_TRUE(f.completed);
  const auto fct = static_cast<uint64_t>((f.end - f.start).count());
  // 256 packets x (4096 + 82) B at 25 Gb/s (342 261 ns), one such packet at each other link
  // (334 ns at 100 Gb/s twice, 1336 ns at 25 Gb/s), 4 x 1000 ns propagation both ways, and an
  // 86-byte ACK per link (6 + 27 + 27 + 6).
  EXPECT_EQ(f.ideal_ns, 342'261u + 334 + 1336 + 334 + 8000 + 66);
  EXPECT_GE(fct, f.ideal_ns);
  EXPECT_LE(fct, f.ideal_ns * 102 / 100);
}

TEST(SimFabric, DcqcnRatesAreSampledPerActiveFlow) {
  auto sim = run_scenario(R"(
duration_us = 400
sample_us = 50
[topology]
kind = "star"
hosts = 3
[switch]
ecn = true
kmin_bytes = 10000
kmax_bytes = 50000
[transport]
cc = "dcqcn"
[[workload]]
kind = "incast"
dst = "h0"
bytes = 0
)");
  const auto& r = sim->rate_samples();
  ASSERT_EQ(r.size(), 2u * 8);  // two long-lived flows, samples at 50..400 us
  EXPECT_EQ(r[0].time_ns, 50'000u);
  EXPECT_EQ(r.back().time_ns, 400'000u);
  for (const FlowSample& s : r) {
    EXPECT_GT(s.gbps, 0.0);
    EXPECT_LE(s.gbps, 100.0);
  }
  EXPECT_LT(r.back().gbps, 100.0);  // marks and CNPs cut the rate of both
  const OutputFiles o = render_outputs(*sim);
  EXPECT_EQ(o.rates_csv.substr(0, 32), "time_ns,flow_id,rate_gbps\n50000,");
}

}  // namespace
}  // namespace uroce::sim
