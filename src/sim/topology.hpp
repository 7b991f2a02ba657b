// The fabric's graph: hosts (one port each) and switches, joined by full-duplex links, and
// the routing every switch uses: for each destination host, the set of its ports on a
// shortest path (BFS hop count), among which ECMP picks by a hash of the flow's
// (source IP, destination IP, UDP source port). Hosts are leaves: no path runs through one.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/scenario.hpp"

namespace uroce::sim {

struct PortLink {
  uint32_t peer = 0;       // node index at the other end
  uint32_t peer_port = 0;  // its port number there
  uint64_t bps = 0;        // line rate, bit/s
  uint64_t delay_ns = 0;   // propagation delay
  uint32_t channel = 0;    // this direction's index (counters, impairment)
};

struct Node {
  bool host = false;
  std::string name;  // h0.., sw0.., leaf0.., spine0..
  std::vector<PortLink> ports;
};

struct PathInfo {
  uint32_t hops = 0;      // links from source to destination host
  uint64_t min_bps = 0;   // slowest link on the path
  uint64_t delay_ns = 0;  // propagation delay, one way
};

class Topology {
 public:
  static Topology build(const TopologySpec& spec);

  // Nodes [0, hosts()) are the hosts h0..hN-1, then the switches.
  [[nodiscard]] uint32_t hosts() const { return hosts_; }
  [[nodiscard]] uint32_t switches() const { return static_cast<uint32_t>(nodes_.size()) - hosts_; }
  [[nodiscard]] const std::vector<Node>& nodes() const { return nodes_; }
  [[nodiscard]] const Node& node(uint32_t i) const { return nodes_[i]; }
  [[nodiscard]] uint32_t channels() const { return channels_; }
  // Equal-cost egress ports of switch node `sw` toward host `dst`.
  [[nodiscard]] std::span<const uint32_t> next_hops(uint32_t sw, uint32_t dst) const;
  [[nodiscard]] PathInfo path(uint32_t src, uint32_t dst) const;
  // The host index named like "h3", or -1.
  [[nodiscard]] int host_by_name(const std::string& name) const;

 private:
  uint32_t add_node(bool host, std::string name);
  void connect(uint32_t a, uint32_t b, uint64_t bps, uint64_t delay_ns);
  void route();

  uint32_t hosts_ = 0;
  uint32_t channels_ = 0;
  std::vector<Node> nodes_;
  std::vector<uint32_t> dist_;  // dist_[dst * nodes + n]: hops from n to host dst
  std::vector<uint32_t> hop_off_;
  std::vector<uint32_t> hop_count_;
  std::vector<uint32_t> hop_ports_;
};

}  // namespace uroce::sim
