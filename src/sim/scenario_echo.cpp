#include "sim/scenario_echo.hpp"

#include <fmt/format.h>

#include <vector>

#include "sim/json_text.hpp"
#include "transport/cc/cc_config.hpp"

namespace uroce::sim {

std::string_view op_name(FlowOp op) {
  switch (op) {
    case FlowOp::kWrite:
      return "write";
    case FlowOp::kSend:
      return "send";
    case FlowOp::kRead:
      return "read";
  }
  return "?";
}

std::string_view topology_name(TopologyKind k) {
  switch (k) {
    case TopologyKind::kBackToBack:
      return "back_to_back";
    case TopologyKind::kStar:
      return "star";
    case TopologyKind::kDumbbell:
      return "dumbbell";
    case TopologyKind::kLeafSpine:
      return "leaf_spine";
  }
  return "?";
}

std::string_view workload_kind_name(WorkloadKind k) {
  switch (k) {
    case WorkloadKind::kFlow:
      return "flow";
    case WorkloadKind::kIncast:
      return "incast";
    case WorkloadKind::kPermutation:
      return "permutation";
    case WorkloadKind::kAllToAll:
      return "all_to_all";
    case WorkloadKind::kCdf:
      return "cdf";
  }
  return "?";
}

namespace {

// One JSON object of "key": value pairs, in the order added.
class Obj {
 public:
  Obj& raw(std::string_view k, const std::string& v) {
    items_.push_back(fmt::format("\"{}\": {}", k, v));
    return *this;
  }
  Obj& str(std::string_view k, std::string_view v) { return raw(k, json_string(std::string(v))); }
  Obj& num(std::string_view k, uint64_t v) { return raw(k, fmt::format("{}", v)); }
  Obj& num(std::string_view k, double v) { return raw(k, json_number(v)); }
  Obj& flag(std::string_view k, bool v) { return raw(k, v ? "true" : "false"); }
  // Nanoseconds as the file's microseconds (exact: shortest double form of ns / 1000).
  Obj& us(std::string_view k, uint64_t ns) { return num(k, static_cast<double>(ns) / 1000.0); }
  Obj& gbps(std::string_view k, uint64_t bps) { return num(k, static_cast<double>(bps) / 1e9); }
  [[nodiscard]] std::string text() const {
    std::string s = "{ ";
    for (size_t i = 0; i < items_.size(); ++i) s += (i != 0 ? ", " : "") + items_[i];
    return s + " }";
  }

 private:
  std::vector<std::string> items_;
};

template <typename T>
std::string int_array(const std::vector<T>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{}", i != 0 ? ", " : "", v[i]);
  return s + "]";
}

std::string dcqcn_text(const transport::DcqcnParams& p) {
  std::string s;
  for (const transport::DcqcnParamInfo& i : transport::dcqcn_param_table()) {
    s += fmt::format("{}{}={}", s.empty() ? "" : ",", i.name, p.*(i.member));
  }
  return s;
}

std::string switch_obj(const SwitchSpec& w) {
  const fabric::SwitchQueueConfig& q = w.queues;
  std::vector<uint32_t> lossless;
  for (uint32_t p = 0; p < 8; ++p) {
    if (((w.lossless_priorities >> p) & 1u) != 0) lossless.push_back(p);
  }
  std::vector<uint32_t> weights = w.dwrr_weights;
  Obj o;
  o.str("buffer_mode", q.mode == fabric::BufferMode::kLossless ? "lossless" : "lossy")
      .num("buffer_bytes", q.shared_buffer_bytes)
      .num("port_buffer_bytes", q.port_buffer_bytes)
      .str("threshold", q.threshold == fabric::ThresholdMode::kDynamic ? "dynamic" : "static")
      .num("alpha", q.alpha)
      .num("queue_packets", uint64_t{q.queue_packets})
      .num("priorities", uint64_t{q.priorities})
      .flag("ecn", q.red.enabled)
      .num("kmin_bytes", q.red.kmin_bytes)
      .num("kmax_bytes", q.red.kmax_bytes)
      .num("pmax", q.red.pmax)
      .str("mark_at", q.red.at == fabric::MarkPoint::kEnqueue ? "enqueue" : "dequeue")
      .num("xoff_bytes", q.pfc.xoff_bytes)
      .num("xon_bytes", q.pfc.xon_bytes)
      .num("headroom_bytes", q.pfc.headroom_bytes)
      .num("pause_quanta", uint64_t{w.pause_quanta})
      .num("pause_refresh_quanta", uint64_t{w.pause_refresh_quanta})
      .raw("lossless_priorities", int_array(lossless))
      .str("scheduler", w.strict ? "strict" : "dwrr")
      .raw("dwrr_weights", int_array(weights));
  return o.text();
}

std::string workload_obj(const WorkloadSpec& w) {
  std::string senders = "[";
  for (size_t i = 0; i < w.senders.size(); ++i)
    senders += (i != 0 ? ", " : "") + json_string(w.senders[i]);
  senders += "]";
  Obj o;
  o.str("kind", workload_kind_name(w.kind))
      .str("op", op_name(w.op))
      .num("bytes", w.bytes)
      .num("priority", uint64_t{w.priority})
      .us("start_us", w.start_ns)
      .us("start_jitter_us", w.start_jitter_ns)
      .num("count", uint64_t{w.count})
      .str("src", w.src)
      .str("dst", w.dst)
      .raw("senders", senders)
      .str("cdf", w.cdf_name)
      .num("load", w.load)
      .num("flows", uint64_t{w.flows})
      .num("message_bytes", w.message_bytes)
      .num("window", uint64_t{w.window});
  return o.text();
}

}  // namespace

std::string scenario_echo_json(const Scenario& sc, int indent) {
  const std::string in(static_cast<size_t>(indent) + 2, ' ');
  const TopologySpec& t = sc.topology;
  Obj topo;
  topo.str("kind", topology_name(t.kind));
  // The one host-count key of the kind (the reader refuses the others; back_to_back has none).
  if (t.kind == TopologyKind::kStar) topo.num("hosts", uint64_t{t.hosts});
  if (t.kind == TopologyKind::kDumbbell) topo.num("hosts_per_side", uint64_t{t.hosts});
  if (t.kind == TopologyKind::kLeafSpine) topo.num("hosts_per_leaf", uint64_t{t.hosts});
  topo.num("leaves", uint64_t{t.leaves})
      .num("spines", uint64_t{t.spines})
      .gbps("link_gbps", t.link_bps)
      .gbps("fabric_gbps", t.fabric_bps)
      .num("delay_ns", t.delay_ns);
  const TransportSpec& x = sc.transport;
  Obj tr;
  tr.str("cc", x.cc == transport::CcAlgorithm::kDcqcn ? "dcqcn" : "none")
      .str("recovery", x.recovery == transport::Recovery::kSelectiveRepeat ? "sr" : "gbn")
      .flag("adaptive_retrans", x.adaptive)
      .us("min_rto_us", x.min_rto_ns)
      .num("timeout", uint64_t{x.timeout})
      .num("retry_cnt", uint64_t{x.retry_cnt})
      .num("mtu", uint64_t{transport::mtu_bytes(x.mtu)})
      .num("window", uint64_t{x.window})
      .str("dcqcn", dcqcn_text(x.dcqcn));
  std::string s = "{\n";
  s += fmt::format(
      "{}\"name\": {}, \"description\": {}, \"seed\": {}, \"duration_us\": {}, "
      "\"sample_us\": {}, \"message_bytes\": {}, \"host_buffer_bytes\": {},\n",
      in, json_string(sc.name), json_string(sc.description), sc.seed,
      json_number(static_cast<double>(sc.duration_ns) / 1000.0),
      json_number(static_cast<double>(sc.sample_ns) / 1000.0), sc.message_bytes,
      sc.host_buffer_bytes);
  s += fmt::format("{}\"topology\": {},\n", in, topo.text());
  s += fmt::format("{}\"link\": {{ \"impair\": {} }},\n", in,
                   json_string(fault::format_impair_spec(sc.impair)));
  s += fmt::format("{}\"switch\": {},\n", in, switch_obj(sc.sw));
  s += fmt::format("{}\"transport\": {},\n", in, tr.text());
  s += in + "\"workload\": [";
  for (size_t i = 0; i < sc.workloads.size(); ++i)
    s += fmt::format("{}\n{}  {}", i != 0 ? "," : "", in, workload_obj(sc.workloads[i]));
  s += "\n" + in + "],\n" + in + "\"storm\": [";
  for (size_t i = 0; i < sc.storms.size(); ++i) {
    const StormSpec& st = sc.storms[i];
    Obj o;
    o.str("host", st.host)
        .us("start_us", st.start_ns)
        .us("end_us", st.end_ns)
        .num("priority", uint64_t{st.priority})
        .flag("refresh", st.refresh);
    s += fmt::format("{}\n{}  {}", i != 0 ? "," : "", in, o.text());
  }
  s += sc.storms.empty() ? "]\n" : "\n" + in + "]\n";
  return s + std::string(static_cast<size_t>(indent), ' ') + "}";
}

}  // namespace uroce::sim
