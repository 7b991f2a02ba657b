// Topologies and routing: node and link counts, BFS next hops, ECMP sets, path figures.
#include "sim/topology.hpp"

#include <gtest/gtest.h>

namespace uroce::sim {
namespace {

TEST(Topology, StarRoutesEveryHostThroughItsPort) {
  TopologySpec s;
  s.kind = TopologyKind::kStar;
  s.hosts = 5;
  const Topology t = Topology::build(s);
  EXPECT_EQ(t.hosts(), 5u);
  EXPECT_EQ(t.switches(), 1u);
  EXPECT_EQ(t.channels(), 10u);
  for (uint32_t d = 0; d < 5; ++d) {
    const auto hops = t.next_hops(5, d);
    ASSERT_EQ(hops.size(), 1u);
    EXPECT_EQ(t.node(5).ports[hops[0]].peer, d);
  }
  const PathInfo p = t.path(1, 3);
  EXPECT_EQ(p.hops, 2u);
  EXPECT_EQ(p.delay_ns, 2000u);
  EXPECT_EQ(t.host_by_name("h4"), 4);
  EXPECT_EQ(t.host_by_name("h5"), -1);
}

TEST(Topology, LeafSpineHasOneEcmpNextHopPerSpine) {
  TopologySpec s;
  s.kind = TopologyKind::kLeafSpine;
  s.leaves = 3;
  s.spines = 4;
  s.hosts = 2;
  s.link_bps = 25'000'000'000;
  s.fabric_bps = 10'000'000'000;
  const Topology t = Topology::build(s);
  EXPECT_EQ(t.hosts(), 6u);
  EXPECT_EQ(t.switches(), 7u);
  const uint32_t leaf0 = 6;
  EXPECT_EQ(t.next_hops(leaf0, 1).size(), 1u);  // own host: down
  const auto up = t.next_hops(leaf0, 5);        // a host under leaf2: any spine
  ASSERT_EQ(up.size(), 4u);
  for (uint32_t p : up) EXPECT_EQ(t.node(t.node(leaf0).ports[p].peer).name.substr(0, 5), "spine");
  const uint32_t spine0 = 9;
  EXPECT_EQ(t.next_hops(spine0, 5).size(), 1u);
  const PathInfo p = t.path(0, 5);
  EXPECT_EQ(p.hops, 4u);
  EXPECT_EQ(p.min_bps, 10'000'000'000u);
}

TEST(Topology, DumbbellAndBackToBack) {
  TopologySpec s;
  s.kind = TopologyKind::kDumbbell;
  s.hosts = 3;
  const Topology t = Topology::build(s);
  EXPECT_EQ(t.hosts(), 6u);
  EXPECT_EQ(t.switches(), 2u);
  EXPECT_EQ(t.path(0, 4).hops, 3u);
  EXPECT_EQ(t.path(0, 1).hops, 2u);
  s.kind = TopologyKind::kBackToBack;
  const Topology b = Topology::build(s);
  EXPECT_EQ(b.hosts(), 2u);
  EXPECT_EQ(b.switches(), 0u);
  EXPECT_EQ(b.path(0, 1).hops, 1u);
}

}  // namespace
}  // namespace uroce::sim
