// The strict TOML reader behind scenario_toml.hpp: a small Section helper records which keys
// were read, so whatever is left over in a table is an unknown key, reported with its line.
#include "sim/scenario_toml.hpp"

#include <fmt/format.h>

#include <toml++/toml.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "transport/cc/cc_config.hpp"

namespace uroce::sim {
namespace {

class Section {
 public:
  Section(const toml::table& t, std::string prefix, const std::string& file)
      : t_(t), prefix_(std::move(prefix)), file_(file) {}

  [[noreturn]] void fail(const toml::node* n, std::string_view key, std::string_view what) const {
    const auto line = n != nullptr ? n->source().begin.line : t_.source().begin.line;
    throw ScenarioError(fmt::format("{}:{}: {}{}: {}", file_, line, prefix_, key, what));
  }
  const toml::node* find(std::string_view key) {
    used_.insert(std::string(key));
    return t_.get(key);
  }

  uint64_t integer(std::string_view key, uint64_t def, uint64_t lo, uint64_t hi) {
    const toml::node* n = find(key);
    if (n == nullptr) return def;
    const auto v = n->value_exact<int64_t>();
    if (!v || *v < 0 || static_cast<uint64_t>(*v) < lo || static_cast<uint64_t>(*v) > hi) {
      fail(n, key, fmt::format("must be an integer from {} to {}{}", lo, hi, got(*n)));
    }
    return static_cast<uint64_t>(*v);
  }
  double number(std::string_view key, double def, double lo, double hi) {
    const toml::node* n = find(key);
    if (n == nullptr) return def;
    const auto v = n->value<double>();  // integers convert
    if (!v || !(*v >= lo && *v <= hi) || !(n->is_integer() || n->is_floating_point())) {
      fail(n, key, fmt::format("must be a number from {} to {}{}", lo, hi, got(*n)));
    }
    return *v;
  }
  // A time given in microseconds (integer or fraction), returned in nanoseconds.
  uint64_t micros(std::string_view key, uint64_t def_ns, double lo_us, double hi_us) {
    const double us = number(key, static_cast<double>(def_ns) / 1000.0, lo_us, hi_us);
    return static_cast<uint64_t>(std::llround(us * 1000.0));
  }
  uint64_t gbps(std::string_view key, uint64_t def_bps) {
    const double g = number(key, static_cast<double>(def_bps) / 1e9, 0.001, 1600);
    return static_cast<uint64_t>(std::llround(g * 1e9));
  }
  bool boolean(std::string_view key, bool def) {
    const toml::node* n = find(key);
    if (n == nullptr) return def;
    if (!n->is_boolean()) fail(n, key, "must be true or false" + got(*n));
    return n->value<bool>().value();
  }
  std::string string(std::string_view key, std::string def) {
    const toml::node* n = find(key);
    if (n == nullptr) return def;
    if (!n->is_string()) fail(n, key, "must be a string" + got(*n));
    return n->value<std::string>().value();
  }
  // One of `choices` (their index).
  size_t choice(std::string_view key, size_t def, std::initializer_list<std::string_view> choices) {
    const toml::node* n = find(key);
    if (n == nullptr) return def;
    const auto v = n->value<std::string>();
    size_t i = 0;
    for (std::string_view c : choices) {
      if (v && *v == c) return i;
      ++i;
    }
    std::string list;
    for (std::string_view c : choices) list += (list.empty() ? "" : ", ") + std::string(c);
    fail(n, key, fmt::format("must be one of {}{}", list, got(*n)));
  }
  std::vector<std::string> strings(std::string_view key) {
    std::vector<std::string> out;
    const toml::node* n = find(key);
    if (n == nullptr) return out;
    const toml::array* a = n->as_array();
    if (a == nullptr) fail(n, key, "must be an array of strings" + got(*n));
    for (const toml::node& e : *a) {
      if (!e.is_string()) fail(&e, key, "must be an array of strings" + got(e));
      out.push_back(e.value<std::string>().value());
    }
    return out;
  }
  std::vector<uint64_t> integers(std::string_view key, uint64_t lo, uint64_t hi) {
    std::vector<uint64_t> out;
    const toml::node* n = find(key);
    if (n == nullptr) return out;
    const toml::array* a = n->as_array();
    if (a == nullptr) fail(n, key, fmt::format("must be an array of integers {}..{}", lo, hi));
    for (const toml::node& e : *a) {
      const auto v = e.value_exact<int64_t>();
      if (!v || *v < static_cast<int64_t>(lo) || *v > static_cast<int64_t>(hi)) {
        fail(&e, key, fmt::format("must be an array of integers {}..{}{}", lo, hi, got(e)));
      }
      out.push_back(static_cast<uint64_t>(*v));
    }
    return out;
  }
  const toml::node* node(std::string_view key) { return find(key); }

  // Every key not read is unknown.
  void finish(std::string_view known_hint) const {
    for (auto&& [k, v] : t_) {
      if (used_.count(std::string(k.str())) == 0) {
        const auto line =
            k.source().begin.line != 0 ? k.source().begin.line : v.source().begin.line;
        throw ScenarioError(fmt::format("{}:{}: {}{}: unknown key (known: {})", file_, line,
                                        prefix_, k.str(), known_hint));
      }
    }
  }
  [[nodiscard]] uint32_t line() const { return t_.source().begin.line; }

 private:
  static std::string got(const toml::node& n) {
    std::ostringstream os;
    if (n.is_table()) return " (got a table)";
    if (n.is_array()) return " (got an array)";
    n.visit([&](auto&& x) { os << x; });
    return " (got " + os.str() + ")";
  }

  const toml::table& t_;
  std::string prefix_;
  const std::string& file_;
  std::set<std::string> used_;
};

const toml::table* subtable(Section& top, std::string_view key) {
  const toml::node* n = top.node(key);
  if (n == nullptr) return nullptr;
  if (!n->is_table()) top.fail(n, key, "must be a table ([" + std::string(key) + "])");
  return n->as_table();
}

void read_topology(Section& s, TopologySpec& t) {
  t.kind = static_cast<TopologyKind>(
      s.choice("kind", 1, {"back_to_back", "star", "dumbbell", "leaf_spine"}));
  // One host-count key per kind, named for what it counts; the others are refused.
  const char* key = t.kind == TopologyKind::kDumbbell    ? "hosts_per_side"
                    : t.kind == TopologyKind::kLeafSpine ? "hosts_per_leaf"
                                                         : "hosts";
  for (const char* k : {"hosts", "hosts_per_side", "hosts_per_leaf"}) {
    if (std::string_view(k) == key || t.kind == TopologyKind::kBackToBack) continue;
    if (const toml::node* n = s.node(k)) {
      s.fail(n, k, fmt::format("not for this kind; the host count here is {}", key));
    }
  }
  if (t.kind == TopologyKind::kBackToBack) {
    if (const toml::node* n = s.node("hosts"))
      s.fail(n, "hosts", "back_to_back always has 2 hosts");
  }
  t.hosts = static_cast<uint32_t>(s.integer(key, 2, t.kind == TopologyKind::kStar ? 2 : 1, 1024));
  t.leaves = static_cast<uint32_t>(s.integer("leaves", 2, 1, 64));
  t.spines = static_cast<uint32_t>(s.integer("spines", 1, 1, 64));
  t.link_bps = s.gbps("link_gbps", t.link_bps);
  t.fabric_bps = s.gbps("fabric_gbps", t.link_bps);
  t.delay_ns = s.integer("delay_ns", t.delay_ns, 0, 1'000'000'000);
  if (t.kind == TopologyKind::kBackToBack) t.hosts = 2;
  s.finish(kTopologyKeys);
}

void read_switch(Section& s, SwitchSpec& w) {
  auto& q = w.queues;
  q.mode = s.choice("buffer_mode", 0, {"lossy", "lossless"}) == 1 ? fabric::BufferMode::kLossless
                                                                  : fabric::BufferMode::kLossy;
  q.shared_buffer_bytes = s.integer("buffer_bytes", 12 << 20, 0, 1ull << 34);
  q.port_buffer_bytes = s.integer("port_buffer_bytes", 0, 0, 1ull << 34);
  q.threshold = s.choice("threshold", 0, {"static", "dynamic"}) == 1
                    ? fabric::ThresholdMode::kDynamic
                    : fabric::ThresholdMode::kStatic;
  q.alpha = s.number("alpha", 1.0, 1.0 / 1024, 1024);
  q.queue_packets = static_cast<uint32_t>(s.integer("queue_packets", 8192, 1, 1 << 20));
  q.priorities = static_cast<uint32_t>(s.integer("priorities", 8, 1, 8));
  q.red.enabled = s.boolean("ecn", false);
  q.red.kmin_bytes = s.integer("kmin_bytes", 100 * 1024, 0, 1ull << 34);
  q.red.kmax_bytes = s.integer("kmax_bytes", 400 * 1024, 0, 1ull << 34);
  q.red.pmax = s.number("pmax", 0.2, 0.000001, 1.0);
  q.red.at = s.choice("mark_at", 1, {"enqueue", "dequeue"}) == 0 ? fabric::MarkPoint::kEnqueue
                                                                 : fabric::MarkPoint::kDequeue;
  q.pfc.xoff_bytes = s.integer("xoff_bytes", 256 * 1024, 0, 1ull << 34);
  q.pfc.xon_bytes = s.integer("xon_bytes", 128 * 1024, 0, 1ull << 34);
  q.pfc.headroom_bytes = s.integer("headroom_bytes", 128 * 1024, 0, 1ull << 34);
  const auto lossless = s.integers("lossless_priorities", 0, 7);
  if (!lossless.empty()) {
    w.lossless_priorities = 0;
    for (uint64_t p : lossless) w.lossless_priorities |= static_cast<uint8_t>(1u << p);
  }
  w.strict = s.choice("scheduler", 1, {"strict", "dwrr"}) == 0;
  for (uint64_t v : s.integers("dwrr_weights", 1, 1000))
    w.dwrr_weights.push_back(static_cast<uint32_t>(v));
  // 802.1Qbb: the pause time is a 16-bit count of quanta; the refresh must come before the
  // pause runs out, or the upstream resumes into a queue still above XON.
  w.pause_quanta = static_cast<uint32_t>(s.integer("pause_quanta", 0xFFFF, 2, 0xFFFF));
  const toml::node* refresh = s.node("pause_refresh_quanta");
  w.pause_refresh_quanta =
      static_cast<uint32_t>(s.integer("pause_refresh_quanta", w.pause_quanta / 2, 1, 0xFFFE));
  if (w.pause_refresh_quanta >= w.pause_quanta) {
    s.fail(refresh, "pause_refresh_quanta",
           fmt::format("must be below pause_quanta ({}) so the pause is refreshed before it "
                       "expires (got {})",
                       w.pause_quanta, w.pause_refresh_quanta));
  }
  s.finish(kSwitchKeys);
}

void read_transport(Section& s, TransportSpec& t) {
  t.cc = s.choice("cc", 0, {"none", "dcqcn"}) == 1 ? transport::CcAlgorithm::kDcqcn
                                                   : transport::CcAlgorithm::kNone;
  t.recovery = s.choice("recovery", 0, {"gbn", "sr"}) == 1 ? transport::Recovery::kSelectiveRepeat
                                                           : transport::Recovery::kGoBackN;
  t.adaptive = s.boolean("adaptive_retrans", true);
  t.min_rto_ns = s.micros("min_rto_us", t.min_rto_ns, 1, 10'000'000);
  t.timeout = static_cast<uint8_t>(s.integer("timeout", 14, 1, 31));
  t.retry_cnt = static_cast<uint8_t>(s.integer("retry_cnt", 7, 0, 7));
  const toml::node* mtu_node = s.node("mtu");
  const uint64_t mtu = s.integer("mtu", 4096, 256, 4096);
  if ((mtu & (mtu - 1)) != 0) s.fail(mtu_node, "mtu", "must be 256, 512, 1024, 2048 or 4096");
  t.mtu = static_cast<transport::Mtu>(std::countr_zero(mtu) - 7);
  t.window = static_cast<uint32_t>(s.integer("window", 8, 1, 128));
  const toml::node* d = s.node("dcqcn");
  if (d != nullptr) {
    if (!d->is_string())
      s.fail(d, "dcqcn", "must be a string of name=value pairs (UROCE_DCQCN form)");
    const std::string err =
        transport::parse_dcqcn_params("dcqcn", d->value<std::string>().value(), t.dcqcn);
    if (!err.empty()) s.fail(d, "dcqcn", err);
  }
  s.finish(kTransportKeys);
}

std::string resolve_cdf(const std::string& scenario_path, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(scenario_path).parent_path();
  if (name.find('/') == std::string::npos && fs::path(name).extension().empty()) {
    return (dir / "cdf" / (name + ".txt")).string();
  }
  const fs::path p(name);
  return p.is_absolute() ? p.string() : (dir / p).string();
}

void read_workload(Section& s, WorkloadSpec& w, const std::string& path, uint64_t buffer) {
  w.line = s.line();
  w.kind = static_cast<WorkloadKind>(
      s.choice("kind", 0, {"flow", "incast", "permutation", "all_to_all", "cdf"}));
  w.op = static_cast<FlowOp>(s.choice("op", 0, {"write", "send", "read"}));
  w.bytes = s.integer("bytes", w.bytes, 0, 1ull << 40);
  w.priority = static_cast<uint8_t>(s.integer("priority", 0, 0, 7));
  w.start_ns = s.micros("start_us", 0, 0, 1e9);
  w.start_jitter_ns = s.micros("start_jitter_us", 0, 0, 1e9);
  w.count = static_cast<uint32_t>(s.integer("count", 1, 1, 1024));
  w.src = s.string("src", "");
  w.dst = s.string("dst", "");
  w.senders = s.strings("senders");
  const std::string cdf = s.string("cdf", "");
  if (!cdf.empty()) {
    w.cdf = resolve_cdf(path, cdf);
    w.cdf_name = cdf;
  }
  w.load = s.number("load", 0.5, 0.001, 1.0);
  w.flows = static_cast<uint32_t>(s.integer("flows", 100, 1, 100000));
  // The top level's message_bytes and [transport]'s window unless this workload says.
  w.message_bytes = s.integer("message_bytes", w.message_bytes, 1, buffer / 2);
  w.window = static_cast<uint32_t>(s.integer("window", w.window, 1, 128));
  if (w.kind == WorkloadKind::kFlow && (w.src.empty() || w.dst.empty())) {
    s.fail(nullptr, w.src.empty() ? "src" : "dst",
           "kind = \"flow\" needs src and dst (e.g. src = \"h1\")");
  }
  if (w.kind == WorkloadKind::kCdf && w.cdf.empty()) {
    s.fail(nullptr, "cdf", "kind = \"cdf\" needs cdf = \"websearch\" or a file path");
  }
  s.finish(kWorkloadKeys);
}

template <typename F>
void each_table(Section& top, std::string_view key, const std::string& path, F&& f) {
  const toml::node* n = top.node(key);
  if (n == nullptr) return;
  const toml::array* a = n->as_array();
  if (a == nullptr || !a->is_array_of_tables()) {
    top.fail(n, key, fmt::format("must be an array of tables ([[{}]])", key));
  }
  size_t i = 0;
  for (const toml::node& e : *a) {
    Section s(*e.as_table(), fmt::format("{}[{}].", key, i++), path);
    f(s);
  }
}

}  // namespace

Scenario parse_scenario(std::string_view text, const std::string& path) {
  const std::string file = std::filesystem::path(path).filename().string();
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw ScenarioError(fmt::format("{}:{}: {}", file, e.source().begin.line, e.description()));
  }
  Scenario sc;
  Section top(root, "", file);
  sc.name = top.string("name", std::filesystem::path(path).stem().string());
  sc.description = top.string("description", "");
  sc.seed = top.integer("seed", 1, 0, UINT64_MAX >> 1);
  sc.duration_ns = top.micros("duration_us", sc.duration_ns, 0.001, 10'000'000);
  sc.sample_ns = top.micros("sample_us", sc.sample_ns, 0.1, 1'000'000);
  sc.message_bytes = top.integer("message_bytes", sc.message_bytes, 1, 1ull << 30);
  sc.host_buffer_bytes = top.integer("host_buffer_bytes", sc.host_buffer_bytes, 4096, 1ull << 32);
  if (sc.host_buffer_bytes < 2 * sc.message_bytes) {
    top.fail(top.node("host_buffer_bytes"), "host_buffer_bytes",
             fmt::format("must be at least 2 x message_bytes ({})", 2 * sc.message_bytes));
  }
  if (const toml::table* t = subtable(top, "topology")) {
    Section s(*t, "topology.", file);
    read_topology(s, sc.topology);
  }
  if (const toml::table* t = subtable(top, "link")) {
    Section s(*t, "link.", file);
    const toml::node* n = s.node("impair");
    if (n != nullptr) {
      if (!n->is_string())
        s.fail(n, "impair", "must be a string in the UROCE_IMPAIR form (loss=1%,corrupt=0.1%)");
      const std::string err =
          fault::parse_impair_spec("impair", n->value<std::string>().value(), sc.impair);
      if (!err.empty()) s.fail(n, "impair", err);
      if (sc.impair.delay.count() != 0 || sc.impair.dup != 0 || sc.impair.reorder != 0 ||
          sc.impair.bottleneck) {
        s.fail(n, "impair",
               "the simulator's links take loss, ge_*, corrupt and ce only (delay is "
               "topology.delay_ns, queues are [switch])");
      }
    }
    s.finish(kLinkKeys);
  }
  if (const toml::table* t = subtable(top, "switch")) {
    Section s(*t, "switch.", file);
    read_switch(s, sc.sw);
  }
  if (const toml::table* t = subtable(top, "transport")) {
    Section s(*t, "transport.", file);
    read_transport(s, sc.transport);
  }
  each_table(top, "workload", file, [&](Section& s) {
    WorkloadSpec w;
    w.bytes = sc.message_bytes;
    w.message_bytes = sc.message_bytes;
    w.window = sc.transport.window;
    read_workload(s, w, path, sc.host_buffer_bytes);
    sc.workloads.push_back(std::move(w));
  });
  each_table(top, "storm", file, [&](Section& s) {
    StormSpec st;
    st.host = s.string("host", "");
    if (st.host.empty()) s.fail(nullptr, "host", "a storm needs host = \"hN\"");
    st.start_ns = s.micros("start_us", 0, 0, 1e9);
    st.end_ns = s.micros("end_us", 0, 0, 1e9);
    st.priority = static_cast<uint8_t>(s.integer("priority", 0, 0, 7));
    st.refresh = s.boolean("refresh", true);
    s.finish(kStormKeys);
    sc.storms.push_back(st);
  });
  top.finish(kTopKeys);
  if (sc.workloads.empty()) {
    throw ScenarioError(
        fmt::format("{}:1: workload: a scenario needs at least one [[workload]]", file));
  }
  return sc;
}

Scenario load_scenario(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ScenarioError(fmt::format("{}: cannot open the scenario file", path));
  std::ostringstream os;
  os << in.rdbuf();
  return parse_scenario(os.str(), path);
}

}  // namespace uroce::sim
