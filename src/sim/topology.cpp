#include "sim/topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <limits>

namespace uroce::sim {

namespace {
constexpr uint32_t kFar = std::numeric_limits<uint32_t>::max();
}

uint32_t Topology::add_node(bool host, std::string name) {
  nodes_.push_back(Node{host, std::move(name), {}});
  return static_cast<uint32_t>(nodes_.size() - 1);
}

void Topology::connect(uint32_t a, uint32_t b, uint64_t bps, uint64_t delay_ns) {
  const auto pa = static_cast<uint32_t>(nodes_[a].ports.size());
  const auto pb = static_cast<uint32_t>(nodes_[b].ports.size());
  nodes_[a].ports.push_back(PortLink{b, pb, bps, delay_ns, channels_++});
  nodes_[b].ports.push_back(PortLink{a, pa, bps, delay_ns, channels_++});
}

Topology Topology::build(const TopologySpec& s) {
  Topology t;
  const uint64_t d = s.delay_ns;
  switch (s.kind) {
    case TopologyKind::kBackToBack: {
      t.hosts_ = 2;
      t.add_node(true, "h0");
      t.add_node(true, "h1");
      t.connect(0, 1, s.link_bps, d);
      break;
    }
    case TopologyKind::kStar: {
      t.hosts_ = s.hosts;
      for (uint32_t h = 0; h < s.hosts; ++h) t.add_node(true, fmt::format("h{}", h));
      const uint32_t sw = t.add_node(false, "sw0");
      for (uint32_t h = 0; h < s.hosts; ++h) t.connect(sw, h, s.link_bps, d);
      break;
    }
    case TopologyKind::kDumbbell: {
      t.hosts_ = 2 * s.hosts;
      for (uint32_t h = 0; h < t.hosts_; ++h) t.add_node(true, fmt::format("h{}", h));
      const uint32_t left = t.add_node(false, "sw0");
      const uint32_t right = t.add_node(false, "sw1");
      for (uint32_t h = 0; h < s.hosts; ++h) t.connect(left, h, s.link_bps, d);
      for (uint32_t h = s.hosts; h < t.hosts_; ++h) t.connect(right, h, s.link_bps, d);
      t.connect(left, right, s.fabric_bps, d);
      break;
    }
    case TopologyKind::kLeafSpine: {
      t.hosts_ = s.leaves * s.hosts;
      for (uint32_t h = 0; h < t.hosts_; ++h) t.add_node(true, fmt::format("h{}", h));
      std::vector<uint32_t> leaves;
      for (uint32_t l = 0; l < s.leaves; ++l)
        leaves.push_back(t.add_node(false, fmt::format("leaf{}", l)));
      std::vector<uint32_t> spines;
      for (uint32_t p = 0; p < s.spines; ++p)
        spines.push_back(t.add_node(false, fmt::format("spine{}", p)));
      for (uint32_t l = 0; l < s.leaves; ++l) {
        for (uint32_t h = 0; h < s.hosts; ++h) t.connect(leaves[l], l * s.hosts + h, s.link_bps, d);
        for (uint32_t p : spines) t.connect(leaves[l], p, s.fabric_bps, d);
      }
      break;
    }
  }
  t.route();
  return t;
}

void Topology::route() {
  const auto n = static_cast<uint32_t>(nodes_.size());
  dist_.assign(static_cast<size_t>(hosts_) * n, kFar);
  for (uint32_t dst = 0; dst < hosts_; ++dst) {
    uint32_t* dist = &dist_[static_cast<size_t>(dst) * n];
    std::deque<uint32_t> q{dst};
    dist[dst] = 0;
    while (!q.empty()) {
      const uint32_t u = q.front();
      q.pop_front();
      if (nodes_[u].host && u != dst) continue;  // hosts do not forward
      for (const PortLink& l : nodes_[u].ports) {
        if (dist[l.peer] == kFar) {
          dist[l.peer] = dist[u] + 1;
          q.push_back(l.peer);
        }
      }
    }
  }
  hop_off_.assign(static_cast<size_t>(n) * hosts_, 0);
  hop_count_.assign(static_cast<size_t>(n) * hosts_, 0);
  for (uint32_t u = hosts_; u < n; ++u) {
    for (uint32_t dst = 0; dst < hosts_; ++dst) {
      const size_t k = static_cast<size_t>(u) * hosts_ + dst;
      hop_off_[k] = static_cast<uint32_t>(hop_ports_.size());
      const uint32_t* dist = &dist_[static_cast<size_t>(dst) * n];
      for (uint32_t p = 0; p < nodes_[u].ports.size(); ++p) {
        const uint32_t peer = nodes_[u].ports[p].peer;
        if (dist[u] != kFar && dist[peer] + 1 == dist[u]) hop_ports_.push_back(p);
      }
      hop_count_[k] = static_cast<uint32_t>(hop_ports_.size()) - hop_off_[k];
    }
  }
}

std::span<const uint32_t> Topology::next_hops(uint32_t sw, uint32_t dst) const {
  const size_t k = static_cast<size_t>(sw) * hosts_ + dst;
  return {hop_ports_.data() + hop_off_[k], hop_count_[k]};
}

PathInfo Topology::path(uint32_t src, uint32_t dst) const {
  PathInfo p;
  p.min_bps = std::numeric_limits<uint64_t>::max();
  uint32_t u = src;
  const PortLink* l = &nodes_[u].ports[0];
  for (;;) {
    ++p.hops;
    p.min_bps = std::min(p.min_bps, l->bps);
    p.delay_ns += l->delay_ns;
    u = l->peer;
    if (u == dst || nodes_[u].host) break;
    const auto hops = next_hops(u, dst);
    if (hops.empty()) break;
    l = &nodes_[u].ports[hops[0]];
  }
  return p;
}

int Topology::host_by_name(const std::string& name) const {
  for (uint32_t h = 0; h < hosts_; ++h) {
    if (nodes_[h].name == name) return static_cast<int>(h);
  }
  return -1;
}

}  // namespace uroce::sim
