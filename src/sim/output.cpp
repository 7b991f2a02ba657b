#include "sim/output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "sim/json_text.hpp"
#include "sim/scenario_echo.hpp"

namespace uroce::sim {

namespace {

std::string g(double v) {
  return fmt::format("{:.6g}", v);
}

constexpr std::array<uint64_t, 4> kBucketEdges = {10 * 1024, 100 * 1024, 1024 * 1024,
                                                  10 * 1024 * 1024};

struct Totals {
  uint64_t drops_tail = 0, drops_headroom = 0, drops_link = 0, ecn_marks = 0, cnps = 0;
  uint64_t pause_frames = 0, pause_events = 0, xon_frames = 0, paused_ns = 0;
  uint64_t retransmitted = 0, timeouts = 0, adaptive_retrans = 0, adaptive_spurious = 0;
};

uint64_t flow_retransmits(const Simulator& sim, const FlowState& f) {
  const transport::Counters* c = sim.qp_counters(f.req_host, f.req_qpn);
  return c != nullptr ? c->get(transport::Counter::kRetransmittedPkts) : 0;
}

}  // namespace

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

OutputFiles render_outputs(const Simulator& sim) {
  using transport::Counter;
  const Scenario& sc = sim.scenario();
  const Topology& topo = sim.topology();
  const TimePoint now = sim.now();
  OutputFiles out;

  // flows.csv
  out.flows_csv =
      "flow_id,src,dst,op,bytes,priority,start_ns,end_ns,fct_ns,ideal_fct_ns,slowdown,goodput_gbps,"
      "retransmitted_packets,completed\n";
  uint64_t completed = 0;
  uint64_t delivered_bytes = 0;
  uint64_t first_start = UINT64_MAX;
  std::array<std::vector<double>, kBucketEdges.size() + 1> slow;
  std::array<std::vector<double>, kBucketEdges.size() + 1> fct;
  for (const FlowState& f : sim.flows()) {
    const FlowSpec& s = f.spec;
    first_start = std::min(first_start, s.start_ns);
    const uint64_t delivered = f.started ? sim.delivered_bytes(f) : 0;
    delivered_bytes += delivered;
    std::string tail;
    if (f.completed) {
      const auto fct_ns = static_cast<uint64_t>((f.end - f.start).count());
      const double sd =
          f.ideal_ns != 0 ? static_cast<double>(fct_ns) / static_cast<double>(f.ideal_ns) : 0;
      const double gp =
          fct_ns != 0 ? static_cast<double>(s.bytes) * 8.0 / static_cast<double>(fct_ns) : 0;
      tail = fmt::format("{},{},{},{},{}", f.end.count(), fct_ns, f.ideal_ns, g(sd), g(gp));
      ++completed;
      size_t b = 0;
      while (b < kBucketEdges.size() && s.bytes > kBucketEdges[b]) ++b;
      slow[b].push_back(sd);
      fct[b].push_back(static_cast<double>(fct_ns));
    } else {
      // Still running (or failed) at the end: goodput over its active interval so far, the
      // bytes delivered in order by the end of the run (docs/simulator.md "Output files").
      const int64_t active = f.started ? (now - f.start).count() : 0;
      const std::string gp =
          active > 0 ? g(static_cast<double>(delivered) * 8.0 / static_cast<double>(active)) : "";
      tail = fmt::format(",,{},,{}", f.ideal_ns, gp);
    }
    out.flows_csv += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", s.id, topo.node(s.src).name,
                                 topo.node(s.dst).name, op_name(s.op), s.bytes, s.priority,
                                 f.started ? f.start.count() : static_cast<int64_t>(s.start_ns),
                                 tail, flow_retransmits(sim, f), f.completed ? 1 : 0);
  }

  Totals t;
  // ports.csv and queues.csv
  out.ports_csv =
      "switch,port,peer,priority,enqueued,dequeued_bytes,dropped_tail,dropped_headroom,ecn_marked,"
      "max_depth_bytes,pause_frames_sent,paused_ns,pause_events,xon_frames_sent\n";
  std::vector<std::vector<uint8_t>> used(sim.switch_count());
  for (uint32_t s = 0; s < sim.switch_count(); ++s) {
    const SwitchNode& m = sim.switch_node(s);
    const Node& node = topo.node(topo.hosts() + s);
    used[s].assign(static_cast<size_t>(m.ports()) * kPriorities, 0);
    for (uint32_t p = 0; p < m.ports(); ++p) {
      for (uint32_t pr = 0; pr < m.priorities(); ++pr) {
        const EgressStats e = m.stats(p, static_cast<uint8_t>(pr), now);
        // PFC frames sent upstream from this port's ingress side, refreshes included.
        const PfcTxStats& pf = sim.pfc_tx_stats(topo.hosts() + s, p, static_cast<uint8_t>(pr));
        used[s][p * kPriorities + pr] = e.max_depth_bytes > 0 ? 1 : 0;
        // Priority 0 always; another priority when anything happened in it.
        if (pr != 0 && e.enqueued == 0 && e.dropped_tail == 0 && e.dropped_headroom == 0 &&
            pf.pause_frames == 0 && e.paused_ns == 0) {
          continue;
        }
        out.ports_csv +=
            fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", node.name, p,
                        topo.node(node.ports[p].peer).name, pr, e.enqueued, e.dequeued_bytes,
                        e.dropped_tail, e.dropped_headroom, e.ecn_marked, e.max_depth_bytes,
                        pf.pause_frames, e.paused_ns, pf.pause_events, pf.xon_frames);
        t.drops_tail += e.dropped_tail;
        t.drops_headroom += e.dropped_headroom;
        t.ecn_marks += e.ecn_marked;
        t.pause_frames += pf.pause_frames;
        t.pause_events += pf.pause_events;
        t.xon_frames += pf.xon_frames;
        t.paused_ns += e.paused_ns;
      }
    }
  }
  out.queues_csv = "time_ns,switch,port,priority,depth_bytes\n";
  for (const QueueSample& q : sim.queue_samples()) {
    if (used[q.sw][q.port * kPriorities + q.priority] == 0) continue;
    out.queues_csv += fmt::format("{},{},{},{},{}\n", q.time_ns,
                                  topo.node(topo.hosts() + q.sw).name, q.port, q.priority, q.depth);
  }
  for (const ChannelStats& c : sim.channels()) t.drops_link += c.lost;

  // hosts.csv
  out.hosts_csv =
      "host,tx_packets,rx_packets,tx_bytes,rx_bytes,retransmitted_packets,timeouts,cnps_sent,"
      "cnps_received,ecn_ce_received,pause_frames_received,paused_ns,adaptive_retrans,"
      "adaptive_retrans_spurious\n";
  for (uint32_t h = 0; h < topo.hosts(); ++h) {
    const HostStats& hs = sim.host_stats(h);
    const transport::Counters& c = sim.host_counters(h);
    const uint64_t retrans = c.get(Counter::kRetransmittedPkts);
    // The configured timeout's firings only (local_ack_timeout_err); the adaptive RTO's earlier
    // go-backs show in retransmitted_packets (docs/simulator.md, "Output files").
    const uint64_t timeouts = c.get(Counter::kLocalAckTimeoutErr);
    const uint64_t cnps = c.get(Counter::kNpCnpSent);
    // The adaptive RTO's early go-backs (roce_adp_retrans), and those the ACK of a PSN not yet
    // resent showed were spurious (adp_retrans_spurious): deep or paused queues, not loss.
    const uint64_t adp = c.get(Counter::kRoceAdpRetrans);
    const uint64_t spurious = c.get(Counter::kAdpRetransSpurious);
    out.hosts_csv +=
        fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", topo.node(h).name, hs.tx_packets,
                    hs.rx_packets, hs.tx_bytes, hs.rx_bytes, retrans, timeouts, cnps,
                    c.get(Counter::kRpCnpHandled) + c.get(Counter::kRpCnpIgnored),
                    c.get(Counter::kNpEcnMarkedRocePackets), hs.pause_frames_received, hs.paused_ns,
                    adp, spurious);
    t.retransmitted += retrans;
    t.timeouts += timeouts;
    t.adaptive_retrans += adp;
    t.adaptive_spurious += spurious;
    t.cnps += cnps;
    // A stuck receiver's PFC frames (storms).
    for (uint8_t pr = 0; pr < kPriorities; ++pr) {
      const PfcTxStats& pf = sim.pfc_tx_stats(h, 0, pr);
      t.pause_frames += pf.pause_frames;
      t.pause_events += pf.pause_events;
      t.xon_frames += pf.xon_frames;
    }
    t.paused_ns += hs.paused_ns;
  }

  // rates.csv, goodput.csv
  if (sc.transport.cc == transport::CcAlgorithm::kDcqcn) {
    out.rates_csv = "time_ns,flow_id,rate_gbps\n";
    for (const FlowSample& r : sim.rate_samples())
      out.rates_csv += fmt::format("{},{},{}\n", r.time_ns, r.flow, g(r.gbps));
  }
  out.goodput_csv = "time_ns,flow_id,gbps\n";
  for (const FlowSample& r : sim.goodput_samples())
    out.goodput_csv += fmt::format("{},{},{}\n", r.time_ns, r.flow, g(r.gbps));

  // summary.json
  const bool lossless = sc.sw.queues.mode == fabric::BufferMode::kLossless;
  const bool has_switch = topo.switches() > 0;
  std::string buckets;
  for (size_t b = 0; b < slow.size(); ++b) {
    if (slow[b].empty()) continue;
    // FCTs are whole nanoseconds and a nearest-rank percentile is one of them: an integer.
    buckets += fmt::format(
        "{}    {{ \"max_bytes\": {}, \"count\": {}, \"p50_slowdown\": {}, \"p99_slowdown\": {}, "
        "\"p50_fct_ns\": {}, \"p99_fct_ns\": {} }}",
        buckets.empty() ? "" : ",\n", b < kBucketEdges.size() ? kBucketEdges[b] : 0, slow[b].size(),
        g(percentile(slow[b], 0.5)), g(percentile(slow[b], 0.99)),
        static_cast<uint64_t>(percentile(fct[b], 0.5)),
        static_cast<uint64_t>(percentile(fct[b], 0.99)));
  }
  const uint64_t end_ns = static_cast<uint64_t>(now.count());
  const uint64_t span =
      first_start != UINT64_MAX && end_ns > first_start ? end_ns - first_start : 0;
  // Every flow's bytes delivered by the end (a completed flow's all, a running one's so far)
  // over the span from the first flow's start to the end of the run.
  const double goodput =
      span != 0 ? static_cast<double>(delivered_bytes) * 8.0 / static_cast<double>(span) : 0;
  const uint64_t drops = t.drops_tail + t.drops_headroom + t.drops_link;
  out.summary_json = fmt::format(
      "{{\n  \"scenario\": {},\n  \"description\": {},\n  \"seed\": {},\n  \"sim_time_ns\": {},\n"
      "  \"events\": {},\n  \"packet_hops\": {},\n"
      "  \"config\": {{ \"topology\": \"{}\", \"hosts\": {}, \"switches\": {}, \"link_gbps\": {}, "
      "\"buffer_mode\": \"{}\", \"cc\": \"{}\", \"recovery\": \"{}\", \"ecn\": {}, \"pfc\": {} "
      "}},\n"
      "  \"input\": {},\n"
      "  \"flows\": {{ \"total\": {}, \"completed\": {} }},\n"
      "  \"fct_buckets\": [\n{}{}  ],\n"
      "  \"totals\": {{\n    \"goodput_gbps\": {},\n"
      "    \"drops\": {}, \"drops_tail\": {}, \"drops_headroom\": {}, \"drops_link\": {},\n"
      "    \"ecn_marks\": {}, \"cnps\": {}, \"pause_frames\": {}, \"paused_ns\": {},\n"
      "    \"pause_events\": {}, \"xon_frames\": {},\n"
      "    \"retransmitted_packets\": {}, \"timeouts\": {},\n"
      "    \"adaptive_retrans\": {}, \"adaptive_retrans_spurious\": {}\n  }}\n}}\n",
      json_string(sc.name), json_string(sc.description), sc.seed, end_ns, sim.events(),
      sim.packet_hops(), topology_name(sc.topology.kind), topo.hosts(), topo.switches(),
      g(static_cast<double>(sc.topology.link_bps) / 1e9), lossless ? "lossless" : "lossy",
      sc.transport.cc == transport::CcAlgorithm::kDcqcn ? "dcqcn" : "none",
      sc.transport.recovery == transport::Recovery::kSelectiveRepeat ? "sr" : "gbn",
      has_switch && sc.sw.queues.red.enabled ? "true" : "false",
      has_switch && lossless ? "true" : "false", scenario_echo_json(sc, 2), sim.flows().size(),
      completed, buckets, buckets.empty() ? "" : "\n", g(goodput), drops, t.drops_tail,
      t.drops_headroom, t.drops_link, t.ecn_marks, t.cnps, t.pause_frames, t.paused_ns,
      t.pause_events, t.xon_frames, t.retransmitted, t.timeouts, t.adaptive_retrans,
      t.adaptive_spurious);
  return out;
}

void write_outputs(const OutputFiles& f, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw std::runtime_error(
        fmt::format("{}: cannot create the output directory: {}", dir, ec.message()));
  auto put = [&](const char* name, const std::string& text) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::ofstream o(path, std::ios::binary | std::ios::trunc);
    o << text;
    if (!o) throw std::runtime_error(fmt::format("{}: cannot write", path));
  };
  put("summary.json", f.summary_json);
  put("flows.csv", f.flows_csv);
  put("queues.csv", f.queues_csv);
  put("ports.csv", f.ports_csv);
  put("hosts.csv", f.hosts_csv);
  if (!f.rates_csv.empty()) put("rates.csv", f.rates_csv);
  put("goodput.csv", f.goodput_csv);
}

}  // namespace uroce::sim
