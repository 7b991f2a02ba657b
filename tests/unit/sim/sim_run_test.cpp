// Whole runs: line rate back to back, the three operations, byte-identical outputs for a
// seed, packet conservation on every link, switch and NIC.
#include <gtest/gtest.h>

#include "sim_test_util.hpp"

namespace uroce::sim {
namespace {

using test::run_scenario;

constexpr const char* kBackToBack = R"(
duration_us = 2000
[topology]
kind = "back_to_back"
link_gbps = 100
delay_ns = 1000
[[workload]]
kind = "flow"
src = "h0"
dst = "h1"
bytes = 4194304
)";

TEST(SimRun, BackToBackFlowRunsAtLineRate) {
  auto sim = run_scenario(kBackToBack);
  ASSERT_EQ(sim->flows().size(), 1u);
  const FlowState& f = sim->flows()[0];
  ASSERT_TRUE(f.completed);
  const auto fct = static_cast<uint64_t>((f.end - f.start).count());
  // 1024 packets of 4096 B payload + 16 B BTH/ICRC + 66 B wire overhead at 100 Gb/s
  // (342261 ns), plus the base RTT: 2 x 1000 ns propagation and one 86-byte ACK (6 ns). The
  // flow is within 1% of it (the engine keeps the link busy).
  EXPECT_EQ(f.ideal_ns, 342261u + 2000 + 6);
  EXPECT_LE(fct, f.ideal_ns * 101 / 100);
  EXPECT_GE(fct, f.ideal_ns);
  const double gbps = 4194304.0 * 8 / static_cast<double>(fct);
  EXPECT_GT(gbps, 0.97 * 100 * 4096 / (4096 + 16 + 66));
  EXPECT_EQ(sim->host_stats(0).tx_packets, 1024u);  // no retransmission on a clean link
}

std::string all(const OutputFiles& o) {
  return o.summary_json + o.flows_csv + o.queues_csv + o.ports_csv + o.hosts_csv + o.rates_csv +
         o.goodput_csv;
}

constexpr const char* kLossyStar = R"(
duration_us = 3000
sample_us = 20
[topology]
kind = "star"
hosts = 4
[link]
impair = "loss=0.5%,corrupt=0.2%"
[switch]
ecn = true
kmin_bytes = 20000
kmax_bytes = 100000
[transport]
cc = "dcqcn"
recovery = "sr"
[[workload]]
kind = "permutation"
bytes = 300000
[[workload]]
kind = "flow"
src = "h0"
dst = "h1"
op = "read"
bytes = 200000
[[workload]]
kind = "flow"
src = "h2"
dst = "h1"
op = "send"
bytes = 200000
)";

TEST(SimRun, SameSeedSameBytesOtherSeedOtherBytes) {
  const std::string a = all(render_outputs(*run_scenario(kLossyStar, 5)));
  const std::string b = all(render_outputs(*run_scenario(kLossyStar, 5)));
  const std::string c = all(render_outputs(*run_scenario(kLossyStar, 6)));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a.find("\"seed\": 5"), std::string::npos);
}

TEST(SimRun, WriteSendAndReadCompleteOverALossyLink) {
  auto sim = run_scenario(kLossyStar, 5);
  uint64_t lost = 0;
  uint64_t corrupted = 0;
  for (const ChannelStats& c : sim->channels()) {
    lost += c.lost;
    corrupted += c.corrupted;
  }
  EXPECT_GT(lost, 0u);
  EXPECT_GT(corrupted, 0u);
  uint64_t icrc = 0;
  for (uint32_t h = 0; h < 4; ++h)
    icrc += sim->host_counters(h).get(transport::Counter::kIcrcErrors);
  EXPECT_EQ(icrc, corrupted);  // every corrupted packet fails the receiver's ICRC check
  for (const FlowState& f : sim->flows()) {
    EXPECT_TRUE(f.completed) << "flow " << f.spec.id;
    EXPECT_EQ(f.done, f.spec.bytes);
  }
  EXPECT_EQ(sim->flows().size(), 6u);
}

// sent = delivered + lost + in flight, per link direction and in total; a switch queues or
// drops every packet it receives and sends every packet it dequeues.
void expect_conserved(const Simulator& sim) {
  const Topology& t = sim.topology();
  uint64_t sent = 0;
  uint64_t delivered = 0;
  uint64_t lost = 0;
  for (const ChannelStats& c : sim.channels()) {
    sent += c.sent;
    delivered += c.delivered;
    lost += c.lost;
    EXPECT_GE(c.sent, c.delivered + c.lost);
  }
  EXPECT_EQ(sent, delivered + lost + sim.link_in_flight());
  uint64_t queued = 0;
  for (uint32_t s = 0; s < sim.switch_count(); ++s) {
    const Node& node = t.node(t.hosts() + s);
    const SwitchNode& m = sim.switch_node(s);
    uint64_t in = 0;
    uint64_t out = 0;
    uint64_t enq = 0;
    uint64_t deq = 0;
    uint64_t dropped = 0;
    for (uint32_t p = 0; p < node.ports.size(); ++p) {
      const PortLink& l = node.ports[p];
      out += sim.channels()[l.channel].sent;
      in += sim.channels()[t.node(l.peer).ports[l.peer_port].channel].delivered;
      for (uint32_t pr = 0; pr < m.priorities(); ++pr) {
        const EgressStats e = m.stats(p, static_cast<uint8_t>(pr), sim.now());
        enq += e.enqueued;
        deq += e.dequeued;
        dropped += e.dropped_tail + e.dropped_headroom;
      }
    }
    EXPECT_EQ(in, enq + dropped) << node.name;
    EXPECT_EQ(enq, deq + m.queued_packets()) << node.name;
    EXPECT_EQ(deq, out) << node.name;
    queued += m.queued_packets();
  }
  for (uint32_t h = 0; h < t.hosts(); ++h) {
    const PortLink& l = t.node(h).ports[0];
    EXPECT_EQ(sim.host_stats(h).tx_packets, sim.channels()[l.channel].sent);
    EXPECT_EQ(sim.host_stats(h).rx_packets,
              sim.channels()[t.node(l.peer).ports[l.peer_port].channel].delivered);
  }
  // Every pool packet is on a link, in a switch queue or held by a paused NIC.
  EXPECT_GE(sim.packets_in_flight(), sim.link_in_flight() + queued);
}

// Go-back-N through a tail-drop port that holds 16 packets, 100:1 below the sender's line
// rate: of every resend burst only the head fits, short of the message's last (AckReq)
// PSN. Resends ask for an ACK, so the head's arrival is acknowledged and the next burst
// starts after it; without that the responder stayed silent (no AckReq, no gap seen) and
// every ACK timeout resent the same head: 33 timeouts and the flow unfinished after 3 s.
constexpr const char* kSmallTailDropPort = R"(
duration_us = 3000000
message_bytes = 65536
[topology]
kind = "dumbbell"
hosts_per_side = 1
link_gbps = 10
fabric_gbps = 0.1
delay_ns = 10000
[switch]
buffer_mode = "lossy"
port_buffer_bytes = 16384
[transport]
cc = "none"
recovery = "gbn"
mtu = 1024
window = 8
[[workload]]
kind = "flow"
src = "h0"
dst = "h1"
bytes = 6553600
)";

TEST(SimRun, GoBackNThroughASmallTailDropPortKeepsMakingProgress) {
  auto sim = run_scenario(kSmallTailDropPort, 1);
  ASSERT_EQ(sim->flows().size(), 1u);
  const FlowState& f = sim->flows()[0];
  EXPECT_TRUE(f.completed);
  const transport::Counters& c = sim->host_counters(0);
  EXPECT_GT(c.get(transport::Counter::kRetransmittedPkts), 0u);  // the port did drop
  EXPECT_LT(c.get(transport::Counter::kLocalAckTimeoutErr), 5u);
}

TEST(SimRun, PacketsAreConservedAtTheEndAndMidRun) {
  expect_conserved(*run_scenario(kLossyStar, 5));
  // Cut short mid-transfer: packets are still on links and in queues.
  std::string shortened = kLossyStar;
  shortened.replace(shortened.find("duration_us = 3000"), 18, "duration_us = 40");
  auto sim = run_scenario(shortened, 5);
  EXPECT_GT(sim->link_in_flight(), 0u);
  expect_conserved(*sim);
}

TEST(SimRun, OutputsFollowTheContract) {
  const OutputFiles o = render_outputs(*run_scenario(kBackToBack));
  EXPECT_EQ(o.flows_csv.substr(0, o.flows_csv.find('\n')),
            "flow_id,src,dst,op,bytes,priority,start_ns,end_ns,fct_ns,ideal_fct_ns,slowdown,"
            "goodput_gbps,retransmitted_packets,completed");
  EXPECT_EQ(o.flows_csv.substr(o.flows_csv.find('\n') + 1, 30), "0,h0,h1,write,4194304,0,0,3442");
  EXPECT_NE(o.summary_json.find("\"config\": { \"topology\": \"back_to_back\", \"hosts\": 2, "
                                "\"switches\": 0, \"link_gbps\": 100, \"buffer_mode\": \"lossy\", "
                                "\"cc\": \"none\", \"recovery\": \"gbn\", \"ecn\": false, "
                                "\"pfc\": false }"),
            std::string::npos);
  EXPECT_NE(o.summary_json.find("{ \"max_bytes\": 10485760, \"count\": 1,"), std::string::npos);
  EXPECT_TRUE(o.rates_csv.empty());  // no DCQCN
  EXPECT_EQ(o.hosts_csv.substr(0, 5), "host,");
  EXPECT_EQ(percentile({5, 1, 4, 2, 3}, 0.5), 3);
  EXPECT_EQ(percentile({5, 1, 4, 2, 3}, 0.99), 5);
}

}  // namespace
}  // namespace uroce::sim
