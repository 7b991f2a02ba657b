// The scenario reader: defaults, values, and one-line errors naming file, line and key.
#include "sim/scenario_toml.hpp"

#include <gtest/gtest.h>

#include "sim_test_util.hpp"

namespace uroce::sim {
namespace {

using test::scenario_error;

constexpr const char* kWorkload = "\n[[workload]]\nkind = \"incast\"\n";

TEST(ScenarioToml, ReadsEverySection) {
  const Scenario sc = parse_scenario(R"(name = "t"
description = "d"
seed = 9
duration_us = 250.5
sample_us = 5
message_bytes = 65536
[topology]
kind = "leaf_spine"
hosts_per_leaf = 3
leaves = 4
spines = 2
link_gbps = 25
fabric_gbps = 100
delay_ns = 500
[link]
impair = "loss=1%,corrupt=0.5%"
[switch]
buffer_mode = "lossless"
buffer_bytes = 1000000
ecn = true
kmin_bytes = 1000
kmax_bytes = 5000
pmax = 0.5
mark_at = "enqueue"
xoff_bytes = 20000
xon_bytes = 10000
headroom_bytes = 30000
priorities = 4
lossless_priorities = [3]
scheduler = "strict"
[transport]
cc = "dcqcn"
recovery = "sr"
mtu = 1024
window = 4
dcqcn = "rpg_ai_rate=10"
[[workload]]
kind = "flow"
src = "h1"
dst = "h2"
op = "read"
bytes = 4096
priority = 3
start_us = 1.5
[[storm]]
host = "h0"
start_us = 10
end_us = 20
)",
                                     "/dir/t.toml");
  EXPECT_EQ(sc.name, "t");
  EXPECT_EQ(sc.seed, 9u);
  EXPECT_EQ(sc.duration_ns, 250'500u);
  EXPECT_EQ(sc.sample_ns, 5000u);
  EXPECT_EQ(sc.topology.kind, TopologyKind::kLeafSpine);
  EXPECT_EQ(sc.topology.link_bps, 25'000'000'000u);
  EXPECT_EQ(sc.topology.fabric_bps, 100'000'000'000u);
  EXPECT_EQ(sc.impair.loss, 10'000'000u);
  EXPECT_EQ(sc.impair.corrupt, 5'000'000u);
  EXPECT_EQ(sc.sw.queues.mode, fabric::BufferMode::kLossless);
  EXPECT_EQ(sc.sw.queues.red.at, fabric::MarkPoint::kEnqueue);
  EXPECT_EQ(sc.sw.queues.pfc.headroom_bytes, 30000u);
  EXPECT_EQ(sc.sw.queues.priorities, 4u);
  EXPECT_EQ(sc.sw.lossless_priorities, 0x08);
  EXPECT_TRUE(sc.sw.strict);
  EXPECT_EQ(sc.transport.cc, transport::CcAlgorithm::kDcqcn);
  EXPECT_EQ(sc.transport.recovery, transport::Recovery::kSelectiveRepeat);
  EXPECT_EQ(sc.transport.mtu, transport::Mtu::k1024);
  EXPECT_EQ(sc.transport.dcqcn.rpg_ai_rate, 10u);
  ASSERT_EQ(sc.workloads.size(), 1u);
  EXPECT_EQ(sc.workloads[0].op, FlowOp::kRead);
  EXPECT_EQ(sc.workloads[0].start_ns, 1500u);
  EXPECT_EQ(sc.workloads[0].priority, 3);
  ASSERT_EQ(sc.storms.size(), 1u);
  EXPECT_EQ(sc.storms[0].end_ns, 20'000u);
}

TEST(ScenarioToml, DefaultsAndCdfPaths) {
  const Scenario sc = parse_scenario(
      "[[workload]]\nkind = \"cdf\"\ncdf = \"websearch\"\n"
      "[[workload]]\nkind = \"cdf\"\ncdf = \"../x/my.txt\"\n",
      "/s/scen/a.toml");
  EXPECT_EQ(sc.name, "a");
  EXPECT_EQ(sc.topology.kind, TopologyKind::kStar);
  EXPECT_EQ(sc.sw.queues.mode, fabric::BufferMode::kLossy);
  EXPECT_EQ(sc.transport.cc, transport::CcAlgorithm::kNone);
  EXPECT_EQ(sc.workloads[0].cdf, "/s/scen/cdf/websearch.txt");
  EXPECT_EQ(sc.workloads[1].cdf, "/s/scen/../x/my.txt");
}

TEST(ScenarioToml, UnknownKeysNameKeyAndLine) {
  EXPECT_EQ(scenario_error(std::string("seed = 1\nspeed = 2\n") + kWorkload),
            "bad.toml:2: speed: unknown key (known: name, description, seed, duration_us, "
            "sample_us, message_bytes, host_buffer_bytes, [topology], [link], [switch], "
            "[transport], [[workload]], [[storm]])");
  EXPECT_EQ(scenario_error(std::string("[topology]\nkind = \"star\"\nhost = 4\n") + kWorkload),
            "bad.toml:3: topology.host: unknown key (known: kind, hosts, hosts_per_side, "
            "hosts_per_leaf, leaves, spines, link_gbps, fabric_gbps, delay_ns)");
  EXPECT_EQ(scenario_error(std::string("[topology]\nkind = \"dumbbell\"\nhosts = 4\n") + kWorkload),
            "bad.toml:3: topology.hosts: not for this kind; the host count here is hosts_per_side");
  const std::string e = scenario_error(
      "[[workload]]\nkind = \"incast\"\n\n[[workload]]\nkind = \"incast\"\nsize = 4\n");
  EXPECT_EQ(e.substr(0, 39), "bad.toml:6: workload[1].size: unknown k");
}

TEST(ScenarioToml, BadValuesNameKeyLineAndForm) {
  EXPECT_EQ(scenario_error(std::string("[topology]\nhosts = 1\n") + kWorkload),
            "bad.toml:2: topology.hosts: must be an integer from 2 to 1024 (got 1)");
  EXPECT_EQ(scenario_error(std::string("[topology]\nkind = \"ring\"\n") + kWorkload),
            "bad.toml:2: topology.kind: must be one of back_to_back, star, dumbbell, leaf_spine "
            "(got 'ring')");
  EXPECT_EQ(scenario_error(std::string("[switch]\necn = 1\n") + kWorkload),
            "bad.toml:2: switch.ecn: must be true or false (got 1)");
  EXPECT_EQ(scenario_error(std::string("[switch]\npmax = 2\n") + kWorkload),
            "bad.toml:2: switch.pmax: must be a number from 1e-06 to 1 (got 2)");
  EXPECT_EQ(scenario_error(std::string("[transport]\nmtu = 1500\n") + kWorkload),
            "bad.toml:2: transport.mtu: must be 256, 512, 1024, 2048 or 4096");
  EXPECT_EQ(scenario_error("[[workload]]\nkind = \"flow\"\nsrc = \"h1\"\n"),
            "bad.toml:1: workload[0].dst: kind = \"flow\" needs src and dst (e.g. src = \"h1\")");
  EXPECT_EQ(scenario_error("topology = 3\n[[workload]]\n"),
            "bad.toml:1: topology: must be a table ([topology])");
  EXPECT_EQ(scenario_error("seed = 1\n"),
            "bad.toml:1: workload: a scenario needs at least one [[workload]]");
  const std::string impair =
      scenario_error(std::string("[link]\nimpair = \"loss=5\"\n") + kWorkload);
  EXPECT_EQ(impair.substr(0, 30), "bad.toml:2: link.impair: impai");
  EXPECT_EQ(scenario_error(std::string("[link]\nimpair = \"delay=1ms\"\n") + kWorkload),
            "bad.toml:2: link.impair: the simulator's links take loss, ge_*, corrupt and ce only "
            "(delay is topology.delay_ns, queues are [switch])");
}

TEST(ScenarioToml, SyntaxErrorsGiveTheLine) {
  const std::string e = scenario_error("seed = 1\nname = \"unterminated\n");
  EXPECT_EQ(e.substr(0, 11), "bad.toml:2:");
}

TEST(ScenarioToml, PauseQuantaAreCheckedWithKeyAndLine) {
  const std::string head = "[switch]\nbuffer_mode = \"lossless\"\n";
  const std::string tail = "[[workload]]\nkind = \"flow\"\nsrc = \"h0\"\ndst = \"h1\"\n";
  EXPECT_EQ(test::scenario_error(head + "pause_quanta = 0\n" + tail),
            "bad.toml:3: switch.pause_quanta: must be an integer from 2 to 65535 (got 0)");
  EXPECT_EQ(test::scenario_error(head + "pause_quanta = 65536\n" + tail),
            "bad.toml:3: switch.pause_quanta: must be an integer from 2 to 65535 (got 65536)");
  EXPECT_EQ(test::scenario_error(head + "pause_quanta = 400\npause_refresh_quanta = 400\n" + tail),
            "bad.toml:4: switch.pause_refresh_quanta: must be below pause_quanta (400) so the "
            "pause is refreshed before it expires (got 400)");
  EXPECT_EQ(test::scenario_error(head + "pause_refresh_quanta = 0\n" + tail),
            "bad.toml:3: switch.pause_refresh_quanta: must be an integer from 1 to 65534 (got 0)");
  EXPECT_EQ(test::scenario_error(head + "pause_quanta = \"fast\"\n" + tail),
            "bad.toml:3: switch.pause_quanta: must be an integer from 2 to 65535 (got 'fast')");
  const Scenario sc = parse_scenario(head + "pause_quanta = 3000\n" + tail, "/x/ok.toml");
  EXPECT_EQ(sc.sw.pause_quanta, 3000u);
  EXPECT_EQ(sc.sw.pause_refresh_quanta, 1500u);  // default: half the pause time
  EXPECT_EQ(test::scenario_error("[[storm]]\nhost = \"h0\"\nrefresh = 1\n" + tail),
            "bad.toml:3: storm[0].refresh: must be true or false (got 1)");
}

TEST(ScenarioToml, WorkloadWindowAndMessageSizeDefaultAndAreChecked) {
  const std::string flow = "[[workload]]\nkind = \"flow\"\nsrc = \"h0\"\ndst = \"h1\"\n";
  const Scenario sc = parse_scenario("message_bytes = 8192\n[transport]\nwindow = 3\n" + flow +
                                         flow + "window = 1\n" + "message_bytes = 4\n",
                                     "/x/ok.toml");
  ASSERT_EQ(sc.workloads.size(), 2u);
  EXPECT_EQ(sc.workloads[0].message_bytes, 8192u);
  EXPECT_EQ(sc.workloads[0].window, 3u);
  EXPECT_EQ(sc.workloads[1].message_bytes, 4u);
  EXPECT_EQ(sc.workloads[1].window, 1u);
  EXPECT_EQ(test::scenario_error(flow + "window = 0\n"),
            "bad.toml:5: workload[0].window: must be an integer from 1 to 128 (got 0)");
  // At most half of host_buffer_bytes (4 MiB by default), as the top-level key.
  EXPECT_EQ(test::scenario_error(flow + "message_bytes = 4194304\n"),
            "bad.toml:5: workload[0].message_bytes: must be an integer from 1 to 2097152 (got "
            "4194304)");
}

}  // namespace
}  // namespace uroce::sim
