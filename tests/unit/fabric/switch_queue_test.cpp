// The switch queue model in virtual time: serialization times to the nanosecond, tail drop at
// the exact byte limits (static, shared, dynamic), the RED marking probability and the marks
// it gives over many packets with a fixed seed, and the lossless mode's XOFF/XON/headroom
// transitions and paused time.
#include <gtest/gtest.h>

#include <cmath>

#include "fabric/switch_queue.hpp"

namespace uroce::fabric {
namespace {

using namespace std::chrono_literals;

Packet pkt(uint32_t bytes, uint32_t ingress = 0, bool ect = false, uint64_t cookie = 0) {
  return Packet{.bytes = bytes, .ingress = ingress, .cookie = cookie, .ect = ect};
}

SwitchQueueConfig lossy(uint64_t rate, uint64_t port_buffer) {
  SwitchQueueConfig c;
  c.line_rate_bytes_per_sec = rate;
  c.port_buffer_bytes = port_buffer;
  return c;
}

TEST(SwitchQueueConfig, ValidateNamesTheBadField) {
  SwitchQueueConfig c;
  EXPECT_EQ(validate(c), "");
  c.line_rate_bytes_per_sec = 0;
  EXPECT_EQ(validate(c), "the line rate must be above 0 bytes/s");
  c = {};
  c.red = {.enabled = true, .kmin_bytes = 200, .kmax_bytes = 100, .pmax = 0.1};
  EXPECT_EQ(validate(c), "ECN kmax (100 B) must be above kmin (200 B)");
  c.red = {.enabled = true, .kmin_bytes = 100, .kmax_bytes = 200, .pmax = 1.5};
  EXPECT_EQ(validate(c), "ECN pmax must be in (0, 1]");
  c = {};
  c.mode = BufferMode::kLossless;
  EXPECT_EQ(validate(c), "lossless mode needs an XOFF threshold above 0");
  c.pfc = {.xoff_bytes = 100, .xon_bytes = 200, .headroom_bytes = 0};
  EXPECT_EQ(validate(c), "XON (200 B) must not be above XOFF (100 B)");
  c = {};
  c.threshold = ThresholdMode::kDynamic;
  EXPECT_EQ(validate(c), "dynamic thresholds need a shared buffer above 0");
}

// 1 Gbit/s = 125e6 B/s: a 1500-byte frame takes exactly 12 us; back-to-back frames follow
// each other, the link is busy in between, and an idle link starts at the arrival.
TEST(SwitchQueue, DequeueTimingFollowsTheLineRate) {
  SwitchQueues q(lossy(125'000'000, 0));
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_EQ(q.enqueue(0, pkt(1500, 0, false, i), 0ns).verdict, EnqueueVerdict::kQueued);
  }
  EXPECT_EQ(q.next_dequeue(0), 0ns);
  auto d = q.dequeue(0, 0ns);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->packet.cookie, 0u);
  EXPECT_EQ(d->tx_start, 0ns);
  EXPECT_EQ(d->tx_end, 12000ns);
  EXPECT_EQ(q.next_dequeue(0), 12000ns);
  EXPECT_FALSE(q.dequeue(0, 11999ns));  // link still busy
  d = q.dequeue(0, 12000ns);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->packet.cookie, 1u);
  EXPECT_EQ(d->tx_end, 24000ns);
  // A caller that is late gets the packet with its on-time start: the rate stays exact.
  d = q.dequeue(0, 30000ns);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->tx_start, 24000ns);
  EXPECT_EQ(d->tx_end, 36000ns);
  EXPECT_EQ(q.next_dequeue(0), kNever);
  EXPECT_FALSE(q.dequeue(0, 1s));
  // Idle link: the next packet starts when it arrives.
  ASSERT_EQ(q.enqueue(0, pkt(125), 100000ns).verdict, EnqueueVerdict::kQueued);
  EXPECT_EQ(q.next_dequeue(0), 100000ns);
  d = q.dequeue(0, 200000ns);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->tx_start, 100000ns);
  EXPECT_EQ(d->tx_end, 101000ns);
  EXPECT_EQ(q.port(0).dequeued, 4u);
  EXPECT_EQ(q.port(0).dequeued_bytes, 4625u);
  EXPECT_EQ(q.port(0).max_depth_bytes, 4500u);
  EXPECT_EQ(q.port(0).depth_bytes, 0u);
}

// 1000 B at 3e8 B/s is 3333.33 ns: the remainder carries, so three frames end at exactly
// 10000 ns instead of drifting to 9999.
TEST(SwitchQueue, SerializationRemainderCarriesOver) {
  SwitchQueues q(lossy(300'000'000, 0));
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(q.enqueue(0, pkt(1000), 0ns).verdict, EnqueueVerdict::kQueued);
  std::vector<int64_t> ends;
  while (auto d = q.dequeue(0, 1s)) ends.push_back(d->tx_end.count());
  EXPECT_EQ(ends, (std::vector<int64_t>{3333, 6666, 10000}));
}

TEST(SwitchQueue, TailDropAtTheExactPortLimit) {
  SwitchQueues q(lossy(125'000'000, 10000));
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(q.enqueue(0, pkt(1000), 0ns).verdict, EnqueueVerdict::kQueued) << i;
  }
  EXPECT_EQ(q.port(0).depth_bytes, 10000u);
  EXPECT_EQ(q.enqueue(0, pkt(1), 0ns).verdict, EnqueueVerdict::kDroppedTail);
  // ECN-capable or not, no room means a drop.
  EXPECT_EQ(q.enqueue(0, pkt(1, 0, true), 0ns).verdict, EnqueueVerdict::kDroppedTail);
  ASSERT_TRUE(q.dequeue(0, 0ns));
  EXPECT_EQ(q.enqueue(0, pkt(1001), 0ns).verdict, EnqueueVerdict::kDroppedTail);
  EXPECT_EQ(q.enqueue(0, pkt(1000), 0ns).verdict, EnqueueVerdict::kQueued);
  EXPECT_EQ(q.port(0).enqueued, 11u);
  EXPECT_EQ(q.port(0).dropped_tail, 3u);
  EXPECT_EQ(q.port(0).max_depth_bytes, 10000u);
}

TEST(SwitchQueue, DescriptorRingFullIsATailDrop) {
  SwitchQueueConfig c = lossy(125'000'000, 0);
  c.queue_packets = 4;
  SwitchQueues q(c);
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(q.enqueue(0, pkt(64), 0ns).verdict, EnqueueVerdict::kQueued);
  EXPECT_EQ(q.enqueue(0, pkt(64), 0ns).verdict, EnqueueVerdict::kDroppedTail);
  EXPECT_EQ(q.port(0).depth_packets, 4u);
  EXPECT_EQ(q.shared_used_bytes(), 256u);
}

// Static thresholds with a shared pool: each port up to 8000 B, both together up to 12000 B.
TEST(SwitchQueue, SharedPoolLimitsAllPortsTogether) {
  SwitchQueueConfig c = lossy(125'000'000, 8000);
  c.egress_ports = 2;
  c.shared_buffer_bytes = 12000;
  SwitchQueues q(c);
  int queued0 = 0, queued1 = 0;
  for (int i = 0; i < 20; ++i)
    queued0 += q.enqueue(0, pkt(1000), 0ns).verdict == EnqueueVerdict::kQueued;
  for (int i = 0; i < 20; ++i)
    queued1 += q.enqueue(1, pkt(1000), 0ns).verdict == EnqueueVerdict::kQueued;
  EXPECT_EQ(queued0, 8);
  EXPECT_EQ(queued1, 4);
  EXPECT_EQ(q.shared_used_bytes(), 12000u);
  EXPECT_EQ(q.port(0).dropped_tail, 12u);
  EXPECT_EQ(q.port(1).dropped_tail, 16u);
}

// Dynamic thresholds (alpha = 1, 16000 B shared): a port may hold at most the free pool, so
// the first port takes 8 packets (8000 = 16000 - 8000) and the second then 4
// (4000 <= 8000 - 4000).
TEST(SwitchQueue, DynamicThresholdIsAlphaTimesTheFreePool) {
  SwitchQueueConfig c = lossy(125'000'000, 0);
  c.egress_ports = 2;
  c.shared_buffer_bytes = 16000;
  c.threshold = ThresholdMode::kDynamic;
  c.alpha = 1.0;
  SwitchQueues q(c);
  int queued0 = 0, queued1 = 0;
  for (int i = 0; i < 20; ++i)
    queued0 += q.enqueue(0, pkt(1000), 0ns).verdict == EnqueueVerdict::kQueued;
  for (int i = 0; i < 20; ++i)
    queued1 += q.enqueue(1, pkt(1000), 0ns).verdict == EnqueueVerdict::kQueued;
  EXPECT_EQ(queued0, 8);
  EXPECT_EQ(queued1, 4);
  // alpha = 0.5: d + 1000 <= (16000 - d) / 2 holds for d <= 4666, so 5 packets
  // (d = 0, 1000, ..., 4000).
  c.alpha = 0.5;
  SwitchQueues h(c);
  int queued = 0;
  for (int i = 0; i < 20; ++i)
    queued += h.enqueue(0, pkt(1000), 0ns).verdict == EnqueueVerdict::kQueued;
  EXPECT_EQ(queued, 5);
}

TEST(SwitchQueue, RedProbabilityIsLinearFromKminToPmaxAtKmax) {
  SwitchQueueConfig c = lossy(125'000'000, 0);
  c.red = {.enabled = true, .kmin_bytes = 20000, .kmax_bytes = 200000, .pmax = 0.2};
  SwitchQueues q(c);
  EXPECT_EQ(q.mark_probability(0), 0.0);
  EXPECT_EQ(q.mark_probability(20000), 0.0);
  EXPECT_DOUBLE_EQ(q.mark_probability(110000), 0.1);
  EXPECT_DOUBLE_EQ(q.mark_probability(65000), 0.05);
  EXPECT_DOUBLE_EQ(q.mark_probability(200000), 0.2);
  EXPECT_EQ(q.mark_probability(200001), 1.0);
}

// Holds the queue at `depth` bytes (1000-byte packets) and offers `n` ECT packets one at a
// time, each followed by one dequeue; returns the number marked.
uint64_t marks_at_depth(SwitchQueueConfig c, uint64_t depth, int n, bool ect = true) {
  c.line_rate_bytes_per_sec = 1'000'000'000;  // 1 ns per byte
  SwitchQueues q(c);
  for (uint64_t d = 0; d < depth; d += 1000) {
    EXPECT_EQ(q.enqueue(0, pkt(1000), 0ns).verdict, EnqueueVerdict::kQueued);
  }
  uint64_t marked = 0;
  TimePoint now{};
  for (int i = 0; i < n; ++i) {
    const EnqueueResult r = q.enqueue(0, pkt(1000, 0, ect), now);
    EXPECT_EQ(r.verdict, EnqueueVerdict::kQueued);
    marked += r.marked;
    now = q.next_dequeue(0);
    auto d = q.dequeue(0, now);
    EXPECT_TRUE(d);
    if (c.red.at == MarkPoint::kDequeue) marked += d->marked;
  }
  EXPECT_EQ(q.port(0).ecn_marked, marked);
  return marked;
}

// At q = 110000 B (p = 0.1) with seed 1, 10000 packets give exactly 1073 marks: the number of
// the first 10000 SplitMix64(1) outputs x with (x >> 11) * 2^-53 < 0.1 (checked with an
// independent Python SplitMix64). The count also lies within 4 standard deviations (4 * 30)
// of the expected 1000.
TEST(SwitchQueue, RedMarksAtEnqueueWithAFixedSeed) {
  SwitchQueueConfig c = lossy(0, 0);
  c.red = {.enabled = true,
           .kmin_bytes = 20000,
           .kmax_bytes = 200000,
           .pmax = 0.2,
           .at = MarkPoint::kEnqueue};
  c.seed = 1;
  const uint64_t marked = marks_at_depth(c, 110000, 10000);
  EXPECT_EQ(marked, 1073u);
  EXPECT_NEAR(static_cast<double>(marked), 1000.0, 120.0);
  // Same seed, same marks; another seed, another sequence.
  EXPECT_EQ(marks_at_depth(c, 110000, 10000), marked);
  c.seed = 2;
  EXPECT_NE(marks_at_depth(c, 110000, 10000), marked);
  // Not ECN-capable: never marked. Below Kmin: none; above Kmax: all.
  c.seed = 1;
  EXPECT_EQ(marks_at_depth(c, 110000, 1000, false), 0u);
  EXPECT_EQ(marks_at_depth(c, 20000, 1000), 0u);
  EXPECT_EQ(marks_at_depth(c, 201000, 1000), 1000u);
}

// At dequeue q is what stays behind: with 110000 B queued ahead of each offered packet, the
// queue after it leaves holds 110000 B again, so the same p = 0.1 applies. The first 110
// departures are the non-ECT filler (no draw), so 9890 ECT packets leave: 947 of the first
// 9890 SplitMix64(7) draws are below 0.1 (independent Python check).
TEST(SwitchQueue, RedMarksAtDequeueWithAFixedSeed) {
  SwitchQueueConfig c = lossy(0, 0);
  c.red = {.enabled = true,
           .kmin_bytes = 20000,
           .kmax_bytes = 200000,
           .pmax = 0.2,
           .at = MarkPoint::kDequeue};
  c.seed = 7;
  const uint64_t marked = marks_at_depth(c, 110000, 10000);
  EXPECT_EQ(marked, 947u);
  EXPECT_NEAR(static_cast<double>(marked), 989.0, 120.0);
}

// Lossless: XOFF 5000, XON 2000, headroom 3000, 1000-byte packets at 1e9 B/s (1 us each).
// The 6th packet from ingress 0 (occupancy 6000 > 5000) pauses it; two more fit the
// headroom (8000 = XOFF + headroom); the 9th is a headroom drop. The other ingress is not
// paused. The egress's own limit (1000 B) drops nothing in lossless mode. Dequeuing from
// t = 100 ns: occupancy reaches 2000 after the 6th departure, which starts at 5100 ns and
// resumes ingress 0 after 5000 ns paused.
TEST(SwitchQueue, LosslessPausesAtXoffResumesAtXonAndDropsOnlyBeyondHeadroom) {
  SwitchQueueConfig c = lossy(1'000'000'000, 1000);
  c.ingress_ports = 2;
  c.mode = BufferMode::kLossless;
  c.pfc = {.xoff_bytes = 5000, .xon_bytes = 2000, .headroom_bytes = 3000};
  ASSERT_EQ(validate(c), "");
  SwitchQueues q(c);
  const TimePoint t0 = 100ns;
  for (int i = 1; i <= 5; ++i) {
    const EnqueueResult r = q.enqueue(0, pkt(1000, 0), t0);
    EXPECT_EQ(r.verdict, EnqueueVerdict::kQueued) << i;
    EXPECT_FALSE(r.pause) << i;
  }
  EnqueueResult r = q.enqueue(0, pkt(1000, 0), t0);
  EXPECT_EQ(r.verdict, EnqueueVerdict::kQueued);
  EXPECT_TRUE(r.pause);
  EXPECT_TRUE(q.paused(0));
  for (int i = 7; i <= 8; ++i) {
    r = q.enqueue(0, pkt(1000, 0), t0);
    EXPECT_EQ(r.verdict, EnqueueVerdict::kQueued) << i;
    EXPECT_FALSE(r.pause) << i;  // one pause event per episode
  }
  r = q.enqueue(0, pkt(1000, 0), t0);
  EXPECT_EQ(r.verdict, EnqueueVerdict::kDroppedHeadroom);
  EXPECT_EQ(q.port(0).dropped_headroom, 1u);
  EXPECT_EQ(q.port(0).dropped_tail, 0u);
  EXPECT_EQ(q.ingress(0, t0).occupancy_bytes, 8000u);
  // Ingress 1 has its own occupancy: not paused by ingress 0's.
  r = q.enqueue(0, pkt(1000, 1), t0);
  EXPECT_EQ(r.verdict, EnqueueVerdict::kQueued);
  EXPECT_FALSE(r.pause);
  EXPECT_FALSE(q.paused(1));

  std::vector<int> resumed_at;  // index of the departure that resumed ingress 0
  TimePoint resume_start{};
  for (int k = 0; k < 9; ++k) {
    auto d = q.dequeue(0, q.next_dequeue(0));
    ASSERT_TRUE(d) << k;
    EXPECT_EQ(d->tx_start, t0 + Nanos(1000 * k));
    if (d->resume) {
      resumed_at.push_back(k);
      resume_start = d->tx_start;
      EXPECT_EQ(d->packet.ingress, 0u);
    }
  }
  EXPECT_EQ(resumed_at, std::vector<int>{5});
  EXPECT_EQ(resume_start, 5100ns);
  EXPECT_FALSE(q.paused(0));
  const IngressCounters in = q.ingress(0, 1s);
  EXPECT_EQ(in.pause_events, 1u);
  EXPECT_EQ(in.paused_ns, 5000u);
  EXPECT_EQ(in.occupancy_bytes, 0u);
  EXPECT_EQ(q.ingress(1, 1s).pause_events, 0u);
  EXPECT_EQ(q.port(0).enqueued, 9u);
  EXPECT_EQ(q.port(0).dequeued, 9u);
}

// While paused, ingress() reports the time so far.
TEST(SwitchQueue, PausedTimeIncludesAPauseInProgress) {
  SwitchQueueConfig c = lossy(1'000'000'000, 0);
  c.mode = BufferMode::kLossless;
  c.pfc = {.xoff_bytes = 1000, .xon_bytes = 0, .headroom_bytes = 1000};
  SwitchQueues q(c);
  ASSERT_FALSE(q.enqueue(0, pkt(1000), 10ns).pause);
  ASSERT_TRUE(q.enqueue(0, pkt(1000), 20ns).pause);
  EXPECT_EQ(q.ingress(0, 520ns).paused_ns, 500u);
  EXPECT_TRUE(q.ingress(0, 520ns).paused);
}

// Dynamic XOFF: min(xoff, alpha * free pool). 10000 B pool, alpha 0.25, xoff 5000: after the
// 2nd 1000-byte packet the pool has 8000 free, 0.25 * 8000 = 2000 = occupancy (not above);
// after the 3rd, 0.25 * 7000 = 1750 < 3000: paused.
TEST(SwitchQueue, DynamicXoffShrinksAsThePoolFills) {
  SwitchQueueConfig c = lossy(1'000'000'000, 0);
  c.mode = BufferMode::kLossless;
  c.threshold = ThresholdMode::kDynamic;
  c.shared_buffer_bytes = 10000;
  c.alpha = 0.25;
  c.pfc = {.xoff_bytes = 5000, .xon_bytes = 1000, .headroom_bytes = 4000};
  ASSERT_EQ(validate(c), "");
  SwitchQueues q(c);
  EXPECT_FALSE(q.enqueue(0, pkt(1000), 0ns).pause);
  EXPECT_FALSE(q.enqueue(0, pkt(1000), 0ns).pause);
  EXPECT_TRUE(q.enqueue(0, pkt(1000), 0ns).pause);
}

}  // namespace
}  // namespace uroce::fabric
