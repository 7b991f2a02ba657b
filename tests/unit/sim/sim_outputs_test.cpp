// What the output files say about a run: summary.json echoes every scenario key (and the
// echo parses back as the same scenario), goodput of long-lived flows, the ideal FCT of
// window-limited flows, hosts.csv's adaptive-retransmission columns.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include <set>
#include <sstream>

#include "sim/scenario_echo.hpp"
#include "sim_test_util.hpp"

namespace uroce::sim {
namespace {

using test::run_scenario;

// Every key the reader knows, each set to a value other than its default (the host count
// key of the kind is the only one of the three).
constexpr const char* kEveryKey = R"(
name = "every-key"
description = "sets every key"
seed = 9
duration_us = 123.5
sample_us = 7.25
message_bytes = 65536
host_buffer_bytes = 1048576
[topology]
kind = "leaf_spine"
hosts_per_leaf = 3
leaves = 3
spines = 2
link_gbps = 25
fabric_gbps = 50
delay_ns = 700
[link]
impair = "loss=0.1%,corrupt=0.01%,ce=1%,seed=4"
[switch]
buffer_mode = "lossless"
buffer_bytes = 3000000
port_buffer_bytes = 900000
threshold = "dynamic"
alpha = 0.5
queue_packets = 4000
priorities = 4
ecn = true
kmin_bytes = 10000
kmax_bytes = 90000
pmax = 0.05
mark_at = "enqueue"
xoff_bytes = 100000
xon_bytes = 50000
headroom_bytes = 70000
pause_quanta = 4000
pause_refresh_quanta = 1000
lossless_priorities = [1, 3]
scheduler = "strict"
dwrr_weights = [2, 3, 4, 5]
[transport]
cc = "dcqcn"
recovery = "sr"
adaptive_retrans = false
min_rto_us = 350.5
timeout = 9
retry_cnt = 5
mtu = 2048
window = 3
dcqcn = "rpg_ai_rate=7,min_time_between_cnps=9"
[[workload]]
kind = "flow"
op = "read"
bytes = 200000
priority = 3
start_us = 2.5
start_jitter_us = 1.5
count = 2
src = "h1"
dst = "h4"
message_bytes = 32768
window = 2
[[workload]]
kind = "incast"
op = "send"
dst = "h0"
senders = ["h2", "h5"]
bytes = 50000
[[workload]]
kind = "cdf"
cdf = "small.cdf"
load = 0.3
flows = 4
[[storm]]
host = "h7"
start_us = 10
end_us = 40.5
priority = 1
refresh = false
)";

std::set<std::string> key_set(std::string_view list) {
  std::set<std::string> out;
  std::istringstream in{std::string(list)};
  std::string k;
  while (std::getline(in, k, ',')) {
    k.erase(0, k.find_first_not_of(' '));
    if (k.front() != '[') out.insert(k);  // tables are checked on their own
  }
  return out;
}

std::set<std::string> json_keys(const nlohmann::json& o) {
  std::set<std::string> out;
  for (auto it = o.begin(); it != o.end(); ++it) out.insert(it.key());
  return out;
}

// The value as TOML text (the echo uses the scenario file's names and units).
std::string toml_value(const nlohmann::json& v) {
  if (v.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i != 0 ? ", " : "") + toml_value(v[i]);
    return s + "]";
  }
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump();  // strings: JSON escapes are TOML basic-string escapes; numbers as written
}

std::string to_toml(const nlohmann::json& in) {
  std::string top;
  std::string tables;
  for (auto it = in.begin(); it != in.end(); ++it) {
    if (it->is_object()) {
      tables += "[" + it.key() + "]\n";
      for (auto kv = it->begin(); kv != it->end(); ++kv)
        tables += kv.key() + " = " + toml_value(*kv) + "\n";
    } else if (it->is_array() && (it->empty() || (*it)[0].is_object())) {
      for (const auto& t : *it) {
        tables += "[[" + it.key() + "]]\n";
        for (auto kv = t.begin(); kv != t.end(); ++kv)
          tables += kv.key() + " = " + toml_value(*kv) + "\n";
      }
    } else {
      top += it.key() + " = " + toml_value(*it) + "\n";
    }
  }
  return top + tables;
}

// Each key `original` sets has the same value in `echo` (numbers compared as numbers).
void expect_same_values(const toml::table& original, const nlohmann::json& echo,
                        const std::string& where) {
  for (auto&& [k, v] : original) {
    const std::string key(k.str());
    if (v.is_table() || v.is_array_of_tables()) continue;
    ASSERT_TRUE(echo.contains(key)) << where << key;
    const nlohmann::json& e = echo[key];
    if (key == "dcqcn") {
      // The echo lists every parameter; the ones the scenario set have its values.
      const std::string all = "," + e.get<std::string>() + ",";
      std::istringstream in(*v.value<std::string>());
      std::string item;
      while (std::getline(in, item, ','))
        EXPECT_NE(all.find("," + item + ","), std::string::npos) << item;
    } else if (v.is_string()) {
      EXPECT_EQ(e.get<std::string>(), *v.value<std::string>()) << where << key;
    } else if (v.is_boolean()) {
      EXPECT_EQ(e.get<bool>(), *v.value<bool>()) << where << key;
    } else if (v.is_array()) {
      const toml::array& a = *v.as_array();
      ASSERT_EQ(e.size(), a.size()) << where << key;
      for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].is_string()) {
          EXPECT_EQ(e[i].get<std::string>(), *a[i].value<std::string>()) << where << key;
        } else {
          EXPECT_EQ(e[i].get<int64_t>(), *a[i].value<int64_t>()) << where << key;
        }
      }
    } else {
      EXPECT_EQ(e.get<double>(), *v.value<double>()) << where << key;
    }
  }
}

TEST(SimOutputs, SummaryEchoesEveryScenarioKeyAndParsesBack) {
  const std::string path = std::string(UROCE_SOURCE_DIR) + "/tests/unit/sim/test.toml";
  const Scenario sc = parse_scenario(kEveryKey, path);
  Simulator sim(sc, "test.toml");
  sim.run();
  const nlohmann::json summary = nlohmann::json::parse(render_outputs(sim).summary_json);
  const nlohmann::json& in = summary.at("input");

  // Every known key is in the echo, in every table (the host count: the kind's one).
  std::set<std::string> top = key_set(kTopKeys);
  for (const char* t : {"topology", "link", "switch", "transport", "workload", "storm"})
    top.insert(t);
  EXPECT_EQ(json_keys(in), top);
  std::set<std::string> topo = key_set(kTopologyKeys);
  topo.erase("hosts");
  topo.erase("hosts_per_side");
  EXPECT_EQ(json_keys(in["topology"]), topo);
  EXPECT_EQ(json_keys(in["link"]), key_set(kLinkKeys));
  EXPECT_EQ(json_keys(in["switch"]), key_set(kSwitchKeys));
  EXPECT_EQ(json_keys(in["transport"]), key_set(kTransportKeys));
  ASSERT_EQ(in["workload"].size(), 3u);
  for (const auto& w : in["workload"]) EXPECT_EQ(json_keys(w), key_set(kWorkloadKeys));
  ASSERT_EQ(in["storm"].size(), 1u);
  EXPECT_EQ(json_keys(in["storm"][0]), key_set(kStormKeys));

  // The scenario above sets every key, and each has the value it set.
  const toml::table original = toml::parse(kEveryKey);
  std::set<std::string> set_top;
  for (auto&& [k, v] : original) set_top.insert(std::string(k.str()));
  EXPECT_EQ(set_top, top);
  expect_same_values(original, in, "");
  for (const char* t : {"topology", "link", "switch", "transport"}) {
    const toml::table& sub = *original[t].as_table();
    std::set<std::string> keys;
    for (auto&& [k, v] : sub) keys.insert(std::string(k.str()));
    EXPECT_EQ(keys, json_keys(in[t])) << t;
    expect_same_values(sub, in[t], std::string(t) + ".");
  }
  std::set<std::string> workload_keys;
  for (size_t i = 0; i < 3; ++i) {
    const toml::table& w = *original["workload"][i].as_table();
    for (auto&& [k, v] : w) workload_keys.insert(std::string(k.str()));
    expect_same_values(w, in["workload"][i], "workload.");
  }
  EXPECT_EQ(workload_keys, key_set(kWorkloadKeys));
  expect_same_values(*original["storm"][0].as_table(), in["storm"][0], "storm.");

  // Written back as TOML, the echo is the same scenario: it echoes the same and runs the same.
  const Scenario back = parse_scenario(to_toml(in), path);
  EXPECT_EQ(scenario_echo_json(back, 2), scenario_echo_json(sc, 2));
  Simulator again(back, "test.toml");
  again.run();
  const OutputFiles a = render_outputs(sim);
  const OutputFiles b = render_outputs(again);
  EXPECT_EQ(a.summary_json, b.summary_json);
  EXPECT_EQ(a.flows_csv + a.ports_csv + a.hosts_csv + a.queues_csv,
            b.flows_csv + b.ports_csv + b.hosts_csv + b.queues_csv);
}

TEST(SimOutputs, DefaultsAreEchoedToo) {
  auto sim = run_scenario(R"(
duration_us = 20
[[workload]]
kind = "flow"
src = "h0"
dst = "h1"
)");
  const nlohmann::json in = nlohmann::json::parse(render_outputs(*sim).summary_json).at("input");
  EXPECT_EQ(in["message_bytes"], 1048576);
  EXPECT_EQ(in["transport"]["window"], 8);
  EXPECT_EQ(in["transport"]["mtu"], 4096);
  EXPECT_EQ(in["switch"]["pause_quanta"], 65535);
  EXPECT_EQ(in["switch"]["pause_refresh_quanta"], 32767);
  EXPECT_EQ(in["topology"]["hosts"], 2);
  EXPECT_EQ(in["link"]["impair"], "");
  EXPECT_EQ(in["storm"], nlohmann::json::array());
  EXPECT_EQ(in["workload"][0]["bytes"], 1048576);
}

// flows.csv's row of flow `id`, split at the commas.
std::vector<std::string> flow_row(const std::string& csv, uint32_t id) {
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);  // header
  for (uint32_t i = 0; i <= id; ++i) std::getline(in, line);
  std::vector<std::string> cells;
  std::istringstream row(line);
  std::string c;
  while (std::getline(row, c, ',')) cells.push_back(c);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}
constexpr size_t kGoodputCol = 11;
constexpr size_t kCompletedCol = 13;

TEST(SimOutputs, LongLivedFlowsReportGoodputOverTheirActiveInterval) {
  // Two long-lived flows share a 100 Gb/s link for 600 us in 16 MiB WRs (1.37 ms each
  // alone), so no WR completes: the goodput counts the bytes the receiver acknowledged in
  // order (the engine acknowledges every few packets and at each WR's end).
  for (const char* op : {"write", "read", "send"}) {
    const std::string src = std::string(op) == "read" ? "h0" : "h1";
    const std::string dst = std::string(op) == "read" ? "h1" : "h0";
    auto sim = run_scenario(std::string(R"(
duration_us = 600
message_bytes = 16777216
host_buffer_bytes = 67108864
[topology]
kind = "back_to_back"
[[workload]]
kind = "flow"
count = 2
bytes = 0
op = ")") + op + "\"\nsrc = \"" +
                            src + "\"\ndst = \"" + dst + "\"\n");
    const OutputFiles o = render_outputs(*sim);
    double sum = 0;
    for (uint32_t id = 0; id < 2; ++id) {
      const auto row = flow_row(o.flows_csv, id);
      ASSERT_EQ(row.size(), 14u) << op;
      EXPECT_EQ(row[kCompletedCol], "0");
      const double gbps = std::stod(row[kGoodputCol]);
      // Each about half of the wire's 98.0 Gb/s of payload (4096 in 4178 bytes), less the
      // first round trip; never above the wire.
      EXPECT_GT(gbps, 40.0) << op << " flow " << id;
      sum += gbps;
      const FlowState& f = sim->flows()[id];
      EXPECT_FALSE(f.completed);
      EXPECT_EQ(f.done, 0u);  // no WR completed: completions alone would say 0
      EXPECT_EQ(sim->delivered_bytes(f) % 4096, 0u);
    }
    EXPECT_GT(sum, 90.0) << op;
    EXPECT_LT(sum, 100.0 * 4096 / 4178) << op;
    const nlohmann::json s = nlohmann::json::parse(o.summary_json);
    EXPECT_NEAR(s["totals"]["goodput_gbps"].get<double>(), sum, 0.01 * sum) << op;
  }
}

TEST(SimOutputs, LongLivedGoodputMatchesTheDeliveredBytes) {
  // 64 KiB WRs for 1.9 ms at 100 Gb/s: most WRs completed, the last ones in flight. The
  // flows.csv figure is delivered_bytes over the active time, at most the window's WRs
  // beyond the completed ones.
  auto sim = run_scenario(R"(
duration_us = 2000
message_bytes = 65536
[topology]
kind = "back_to_back"
[[workload]]
kind = "flow"
src = "h0"
dst = "h1"
bytes = 0
start_us = 100
)");
  const FlowState& f = sim->flows()[0];
  const uint64_t bytes = sim->delivered_bytes(f);
  EXPECT_GT(f.done, 0u);
  EXPECT_GE(bytes, f.done);
  EXPECT_LE(bytes, f.done + 8 * 65536);
  const double expect = static_cast<double>(bytes) * 8 / 1'900'000.0;
  EXPECT_EQ(flow_row(render_outputs(*sim).flows_csv, 0)[kGoodputCol],
            fmt::format("{:.6g}", expect));
  EXPECT_GT(expect, 0.97 * 100 * 4096 / 4178);
  EXPECT_LT(expect, 100.0 * 4096 / 4178);
}

constexpr const char* kIdleStar = R"(
[topology]
kind = "star"
hosts = 3
link_gbps = 100
delay_ns = 1000
)";

TEST(SimOutputs, IdealFctOfAWindowOneFlowIsOneRoundTripPerMessage) {
  // 1000 WRITEs of 4 bytes, one outstanding: each costs a round trip. Per message the ideal
  // is 2 x 2 us propagation + the 86-byte packet at two links and the 86-byte ACK at two
  // links (6 ns each at 100 Gb/s): 4024 ns.
  auto sim =
      run_scenario("message_bytes = 4\nhost_buffer_bytes = 4096\n" + std::string(kIdleStar) + R"(
[transport]
window = 1
[[workload]]
kind = "flow"
src = "h1"
dst = "h0"
bytes = 4000
)");
  const FlowState& f = sim->flows()[0];
  ASSERT_TRUE(f.completed);
  EXPECT_EQ(f.ideal_ns, 1000u * 4024);
  const double slowdown =
      static_cast<double>((f.end - f.start).count()) / static_cast<double>(f.ideal_ns);
  EXPECT_GE(slowdown, 1.0);
  EXPECT_LE(slowdown, 1.05);
}

TEST(SimOutputs, IdealFctOfABulkFlowIsOneTrain) {
  // 16 MiB in 1 MiB WRs, 8 outstanding: the WRs keep the link busy, so the ideal is the
  // one-train figure: 4096 packets of 4178 wire bytes at 100 Gb/s (1369047 ns), one full
  // packet at the switch's egress (334 ns), two 86-byte ACKs (12 ns), 2 x 2 us propagation.
  auto sim = run_scenario(std::string(kIdleStar) + R"(
[[workload]]
kind = "flow"
src = "h1"
dst = "h0"
bytes = 16777216
)");
  const FlowState& f = sim->flows()[0];
  ASSERT_TRUE(f.completed);
  EXPECT_EQ(f.ideal_ns, 1369047u + 334 + 12 + 4000);
  const double slowdown =
      static_cast<double>((f.end - f.start).count()) / static_cast<double>(f.ideal_ns);
  EXPECT_GE(slowdown, 1.0);
  EXPECT_LE(slowdown, 1.02);
}

TEST(SimOutputs, IdealFctOfAWindowLimitedBulkFlowPaysTheRoundTrips) {
  // 64 KiB WRs, 2 outstanding, across a 50 us link each way: 128 KiB per 100 us round trip
  // is far below 100 Gb/s, so the flow is window-limited and the ideal says so.
  auto sim = run_scenario(R"(
duration_us = 20000
message_bytes = 65536
[topology]
kind = "back_to_back"
delay_ns = 50000
[transport]
window = 2
[[workload]]
kind = "flow"
src = "h0"
dst = "h1"
bytes = 2097152
)");
  const FlowState& f = sim->flows()[0];
  ASSERT_TRUE(f.completed);
  // 32 WRs in 16 round trips of 100 us plus the WRs' serialisation.
  EXPECT_GT(f.ideal_ns, 16u * 100'000);
  const double slowdown =
      static_cast<double>((f.end - f.start).count()) / static_cast<double>(f.ideal_ns);
  EXPECT_GE(slowdown, 1.0);
  EXPECT_LE(slowdown, 1.02);
}

TEST(SimOutputs, HostsCsvCountsAdaptiveRetransmissions) {
  // A storm from the sender h1 holds the ACKs coming to it for 400 us, longer than the
  // adaptive RTO's 200 us floor: the early RTO fires after its AckReq packets left, and the
  // go-back is found spurious (nothing was lost). (A storm from the receiver pauses the
  // sender before its message ends leave: no ACK is late then, and no timer fires.)
  auto sim = run_scenario(R"(
duration_us = 900
[topology]
kind = "star"
hosts = 3
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
host = "h1"
start_us = 100
end_us = 500
)");
  const OutputFiles o = render_outputs(*sim);
  EXPECT_EQ(o.hosts_csv.substr(0, o.hosts_csv.find('\n')),
            "host,tx_packets,rx_packets,tx_bytes,rx_bytes,retransmitted_packets,timeouts,"
            "cnps_sent,cnps_received,ecn_ce_received,pause_frames_received,paused_ns,"
            "adaptive_retrans,adaptive_retrans_spurious");
  const transport::Counters& c = sim->host_counters(1);
  const uint64_t adp = c.get(transport::Counter::kRoceAdpRetrans);
  const uint64_t spurious = c.get(transport::Counter::kAdpRetransSpurious);
  EXPECT_GT(adp, 0u);
  EXPECT_GT(spurious, 0u);
  EXPECT_EQ(c.get(transport::Counter::kLocalAckTimeoutErr), 0u);
  const std::string row = o.hosts_csv.substr(o.hosts_csv.find("\nh1,") + 1);
  const std::string tail = fmt::format(",{},{}\n", adp, spurious);
  EXPECT_EQ(row.substr(0, row.find('\n') + 1).substr(row.find('\n') + 1 - tail.size()), tail);
  const nlohmann::json s = nlohmann::json::parse(o.summary_json);
  EXPECT_EQ(s["totals"]["adaptive_retrans"].get<uint64_t>(), adp);
  EXPECT_EQ(s["totals"]["adaptive_retrans_spurious"].get<uint64_t>(), spurious);
}

TEST(SimOutputs, PfcFramesRunsAreDeterministic) {
  // The PFC frame model's refresh and expiry events, a storm without refresh and one with:
  // the same seed gives the same bytes in every file.
  const std::string sc = R"(
duration_us = 700
[topology]
kind = "dumbbell"
hosts_per_side = 3
[switch]
buffer_mode = "lossless"
buffer_bytes = 4000000
xoff_bytes = 65536
xon_bytes = 32768
headroom_bytes = 65536
pause_quanta = 3000
pause_refresh_quanta = 1000
[[workload]]
kind = "incast"
dst = "h3"
bytes = 0
start_jitter_us = 5
[[storm]]
host = "h4"
start_us = 50
end_us = 300
[[storm]]
host = "h3"
start_us = 400
refresh = false
)";
  const auto all = [](const OutputFiles& o) {
    return o.summary_json + o.flows_csv + o.queues_csv + o.ports_csv + o.hosts_csv + o.goodput_csv;
  };
  const std::string a = all(render_outputs(*run_scenario(sc, 3)));
  EXPECT_EQ(a, all(render_outputs(*run_scenario(sc, 3))));
  EXPECT_NE(a, all(render_outputs(*run_scenario(sc, 4))));
}

TEST(SimOutputs, PerWorkloadWindowAndMessageSize) {
  // A bulk flow with the defaults (1 MiB WRs, 8 outstanding) beside a latency probe of
  // 500 WRITEs of 4 bytes one at a time on another pair of hosts: each flow's ideal is its
  // own pattern's, and both run at it.
  auto sim = run_scenario(R"(
duration_us = 20000
[topology]
kind = "star"
hosts = 4
[[workload]]
kind = "flow"
src = "h1"
dst = "h0"
bytes = 4194304
[[workload]]
kind = "flow"
src = "h2"
dst = "h3"
bytes = 2000
message_bytes = 4
window = 1
)");
  ASSERT_EQ(sim->flows().size(), 2u);
  for (const FlowState& f : sim->flows()) {
    ASSERT_TRUE(f.completed) << f.spec.id;
    const double slowdown =
        static_cast<double>((f.end - f.start).count()) / static_cast<double>(f.ideal_ns);
    EXPECT_GE(slowdown, 1.0) << f.spec.id;
    EXPECT_LE(slowdown, 1.05) << f.spec.id;
  }
  const FlowState& probe = sim->flows()[1];
  EXPECT_EQ(probe.spec.window, 1u);
  EXPECT_EQ(probe.spec.message_bytes, 4u);
  EXPECT_EQ(probe.messages, 500u);  // 500 WRs were posted
  EXPECT_EQ(probe.ideal_ns, 500u * 4024);
  EXPECT_EQ(sim->flows()[0].messages, 4u);
}

}  // namespace
}  // namespace uroce::sim
