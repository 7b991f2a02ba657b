#include "sim/workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/cdf.hpp"
#include "sim/rng.hpp"
#include "sim/scenario_toml.hpp"

namespace uroce::sim {

namespace {

uint32_t host_index(const Topology& topo, const std::string& name, const WorkloadSpec& w,
                    const std::string& file, std::string_view key) {
  const int h = topo.host_by_name(name);
  if (h < 0) {
    throw ScenarioError(fmt::format("{}:{}: workload.{}: no host '{}' (hosts are h0..h{})", file,
                                    w.line, key, name, topo.hosts() - 1));
  }
  return static_cast<uint32_t>(h);
}

}  // namespace

std::vector<FlowSpec> expand_workloads(const Scenario& sc, const Topology& topo,
                                       const std::string& file) {
  std::vector<FlowSpec> flows;
  const uint32_t n = topo.hosts();
  Rng jitter(sc.seed, 99);
  auto add = [&](const WorkloadSpec& w, uint32_t s, uint32_t d, uint64_t bytes, uint64_t start) {
    // Hosts that all start at the same nanosecond run in lockstep; real ones never do.
    if (w.start_jitter_ns != 0) start += jitter.below(w.start_jitter_ns + 1);
    FlowSpec f;
    f.src = s;
    f.dst = d;
    f.op = w.op;
    f.bytes = bytes;
    f.priority = w.priority;
    f.start_ns = start;
    f.message_bytes = w.message_bytes;
    f.window = w.window;
    flows.push_back(f);
  };
  for (size_t wi = 0; wi < sc.workloads.size(); ++wi) {
    const WorkloadSpec& w = sc.workloads[wi];
    if (n < 2)
      throw ScenarioError(fmt::format("{}:{}: workload: the topology has one host", file, w.line));
    Rng rng(sc.seed, 100 + wi);
    switch (w.kind) {
      case WorkloadKind::kFlow: {
        const uint32_t s = host_index(topo, w.src, w, file, "src");
        const uint32_t d = host_index(topo, w.dst, w, file, "dst");
        if (s == d)
          throw ScenarioError(
              fmt::format("{}:{}: workload.dst: must differ from src", file, w.line));
        for (uint32_t i = 0; i < w.count; ++i) add(w, s, d, w.bytes, w.start_ns);
        break;
      }
      case WorkloadKind::kIncast: {
        const uint32_t d = w.dst.empty() ? 0 : host_index(topo, w.dst, w, file, "dst");
        if (w.senders.empty()) {
          for (uint32_t s = 0; s < n; ++s) {
            if (s != d) add(w, s, d, w.bytes, w.start_ns);
          }
        } else {
          for (const std::string& name : w.senders) {
            const uint32_t s = host_index(topo, name, w, file, "senders");
            if (s == d)
              throw ScenarioError(
                  fmt::format("{}:{}: workload.senders: '{}' is the receiver", file, w.line, name));
            add(w, s, d, w.bytes, w.start_ns);
          }
        }
        break;
      }
      case WorkloadKind::kPermutation: {
        // A random derangement (Sattolo's algorithm gives one cycle: nobody sends to itself).
        std::vector<uint32_t> to(n);
        for (uint32_t i = 0; i < n; ++i) to[i] = i;
        for (uint32_t i = n - 1; i > 0; --i) std::swap(to[i], to[rng.below(i)]);
        for (uint32_t s = 0; s < n; ++s) add(w, s, to[s], w.bytes, w.start_ns);
        break;
      }
      case WorkloadKind::kAllToAll: {
        for (uint32_t s = 0; s < n; ++s) {
          for (uint32_t d = 0; d < n; ++d) {
            if (s != d) add(w, s, d, w.bytes, w.start_ns);
          }
        }
        break;
      }
      case WorkloadKind::kCdf: {
        FlowSizeCdf cdf;
        try {
          cdf = FlowSizeCdf::load(w.cdf);
        } catch (const std::exception& e) {
          throw ScenarioError(fmt::format("{}:{}: workload.cdf: {}", file, w.line, e.what()));
        }
        // Poisson arrivals over the whole fabric: each host link offered `load` of its rate,
        // so flows arrive at n * load * rate / mean_size per second.
        const double rate_Bps = static_cast<double>(sc.topology.link_bps) / 8.0;
        const double per_ns = static_cast<double>(n) * w.load * rate_Bps / cdf.mean() / 1e9;
        double t = static_cast<double>(w.start_ns);
        for (uint32_t i = 0; i < w.flows; ++i) {
          t += -std::log(1.0 - rng.uniform()) / per_ns;
          const auto s = static_cast<uint32_t>(rng.below(n));
          auto d = static_cast<uint32_t>(rng.below(n - 1));
          if (d >= s) ++d;
          add(w, s, d, cdf.sample(rng.uniform()), static_cast<uint64_t>(std::llround(t)));
        }
        break;
      }
    }
  }
  std::stable_sort(flows.begin(), flows.end(),
                   [](const FlowSpec& a, const FlowSpec& b) { return a.start_ns < b.start_ns; });
  for (size_t i = 0; i < flows.size(); ++i) flows[i].id = static_cast<uint32_t>(i);
  return flows;
}

}  // namespace uroce::sim
