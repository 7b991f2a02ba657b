// Workload expansion: flow lists per kind, ids by start time, CDF sizes and Poisson arrivals.
#include "sim/workload.hpp"

#include <gtest/gtest.h>

#include <set>

#include "sim/cdf.hpp"
#include "sim/scenario_toml.hpp"

namespace uroce::sim {
namespace {

std::vector<FlowSpec> expand(const std::string& toml, Topology* topo_out = nullptr) {
  const std::string path = std::string(UROCE_SOURCE_DIR) + "/tests/unit/sim/w.toml";
  const Scenario sc = parse_scenario(toml, path);
  const Topology t = Topology::build(sc.topology);
  if (topo_out != nullptr) *topo_out = t;
  return expand_workloads(sc, t, "w.toml");
}

TEST(Workload, IncastPermutationAllToAll) {
  const auto in = expand("[topology]\nhosts = 5\n[[workload]]\nkind = \"incast\"\ndst = \"h2\"\n");
  ASSERT_EQ(in.size(), 4u);
  for (const FlowSpec& f : in) EXPECT_EQ(f.dst, 2u);
  const auto perm = expand("[topology]\nhosts = 7\n[[workload]]\nkind = \"permutation\"\n");
  ASSERT_EQ(perm.size(), 7u);
  std::set<uint32_t> dsts;
  for (const FlowSpec& f : perm) {
    EXPECT_NE(f.src, f.dst);
    dsts.insert(f.dst);
  }
  EXPECT_EQ(dsts.size(), 7u);  // every host receives exactly once
  const auto a2a =
      expand("[topology]\nhosts = 4\n[[workload]]\nkind = \"all_to_all\"\nop = \"send\"\n");
  EXPECT_EQ(a2a.size(), 12u);
  for (const FlowSpec& f : a2a) EXPECT_EQ(f.op, FlowOp::kSend);
}

TEST(Workload, IdsFollowStartTimeAndHostNamesAreChecked) {
  const auto f = expand(
      "[[workload]]\nkind = \"flow\"\nsrc = \"h0\"\ndst = \"h1\"\nstart_us = 5\n"
      "[[workload]]\nkind = \"flow\"\nsrc = \"h1\"\ndst = \"h0\"\ncount = 2\n");
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].src, 1u);
  EXPECT_EQ(f[1].src, 1u);
  EXPECT_EQ(f[2].start_ns, 5000u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(f[i].id, i);
  try {
    (void)expand("[[workload]]\nkind = \"flow\"\nsrc = \"h0\"\ndst = \"h9\"\n");
    FAIL();
  } catch (const ScenarioError& e) {
    EXPECT_STREQ(e.what(), "w.toml:1: workload.dst: no host 'h9' (hosts are h0..h1)");
  }
}

TEST(Workload, CdfSizesAndPoissonArrivalsAtTheLoad) {
  const auto f = expand(
      "[topology]\nhosts = 8\nlink_gbps = 100\n[[workload]]\nkind = \"cdf\"\ncdf = "
      "\"small.cdf\"\nload = 0.5\nflows = 20000\n");
  ASSERT_EQ(f.size(), 20000u);
  const FlowSizeCdf cdf =
      FlowSizeCdf::load(std::string(UROCE_SOURCE_DIR) + "/tests/unit/sim/small.cdf");
  double bytes = 0;
  for (const FlowSpec& x : f) {
    EXPECT_NE(x.src, x.dst);
    EXPECT_GE(x.bytes, 2048u);
    EXPECT_LE(x.bytes, 262144u);
    bytes += static_cast<double>(x.bytes);
  }
  const double mean = bytes / static_cast<double>(f.size());
  EXPECT_NEAR(mean, cdf.mean(), cdf.mean() * 0.03);
  // 8 hosts x 0.5 x 12.5 GB/s / mean bytes = flows per second.
  const double expected_gap_ns = cdf.mean() / (8 * 0.5 * 12.5e9) * 1e9;
  const double gap = static_cast<double>(f.back().start_ns) / static_cast<double>(f.size());
  EXPECT_NEAR(gap, expected_gap_ns, expected_gap_ns * 0.03);
}

}  // namespace
}  // namespace uroce::sim
