// ImpairModel with fixed seeds: each impairment's effect measured over many packets (rate
// within tolerance of the spec, and the exact count the seed gives, so a change in the
// decisions is seen), Gilbert-Elliott burst lengths, delay and jitter bounds, and replay.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "fault/impair_model.hpp"

namespace uroce::fault {
namespace {

using std::chrono::microseconds;

constexpr uint8_t kEct0 = 2;
constexpr int kN = 200'000;

ImpairSpec spec_of(const std::string& text) {
  ImpairSpec s;
  EXPECT_EQ(parse_impair_spec("UROCE_IMPAIR", text, s), "");
  return s;
}

TEST(ImpairModel, RandomLossRateAndExactCountForTheSeed) {
  ImpairModel m(spec_of("loss=5%"), 1, 0);
  int drops = 0;
  for (int i = 0; i < kN; ++i) drops += m.decide(TimePoint(i), kEct0).drop ? 1 : 0;
  EXPECT_NEAR(drops / double(kN), 0.05, 0.002);
  EXPECT_EQ(drops, 10009);
  EXPECT_EQ(m.counters().dropped, uint64_t(drops));
  EXPECT_EQ(m.packets(), uint64_t(kN));
  // Nothing else happened.
  EXPECT_EQ(m.counters().duplicated + m.counters().corrupted + m.counters().ce_marked +
                m.counters().delayed + m.counters().reordered,
            0u);
}

TEST(ImpairModel, NoLossAndCertainLoss) {
  ImpairModel none(spec_of("dup=1%"), 3, 0);
  ImpairModel all(spec_of("loss=100%"), 3, 0);
  for (int i = 0; i < 10000; ++i) {
    EXPECT_FALSE(none.decide(TimePoint(0), 0).drop);
    EXPECT_TRUE(all.decide(TimePoint(0), 0).drop);
  }
}

// Runs of consecutive losses: their count and mean length.
struct Bursts {
  int lost = 0;
  int runs = 0;
  int longest = 0;
};

Bursts measure(ImpairModel& m, int n) {
  Bursts b;
  int run = 0;
  for (int i = 0; i < n; ++i) {
    if (m.decide(TimePoint(i), kEct0).drop) {
      ++b.lost;
      ++run;
    } else if (run > 0) {
      ++b.runs;
      b.longest = std::max(b.longest, run);
      run = 0;
    }
  }
  if (run > 0) ++b.runs;
  return b;
}

TEST(ImpairModel, GilbertElliottBurstsHaveTheModelsLengthAndShare) {
  // Bad state loses everything: loss share p/(p+r) = 1/26, mean burst 1/r = 4 packets.
  ImpairModel m(spec_of("ge_p=1%,ge_r=25%"), 1, 0);
  const Bursts b = measure(m, kN);
  EXPECT_NEAR(b.lost / double(kN), 1.0 / 26, 0.004);
  EXPECT_NEAR(b.lost / double(b.runs), 4.0, 0.3);
  EXPECT_EQ(b.lost, 7585);
  EXPECT_EQ(b.runs, 1892);
  EXPECT_GE(b.longest, 20);  // geometric tails: bursts far longer than random loss makes

  // The same share of random loss has bursts of about 1 / (1 - 1/26) packets.
  ImpairModel r(spec_of("loss=3.8461538%"), 1, 0);
  const Bursts rb = measure(r, kN);
  EXPECT_NEAR(rb.lost / double(rb.runs), 1.04, 0.05);
  EXPECT_LT(rb.longest, 8);
}

TEST(ImpairModel, GilbertElliottLossInsideEachState) {
  // Bad loses half, good loses 1 %: share = (1/26) * 0.5 + (25/26) * 0.01.
  ImpairModel m(spec_of("ge_p=1%,ge_r=25%,ge_bad_loss=50%,ge_good_loss=1%"), 9, 0);
  const Bursts b = measure(m, kN);
  EXPECT_NEAR(b.lost / double(kN), 0.5 / 26 + 0.25 / 26, 0.003);
}

TEST(ImpairModel, DelayAndJitterStayInTheirBounds) {
  ImpairModel m(spec_of("delay=100us,jitter=20us"), 5, 0);
  Nanos lo = Nanos::max();
  Nanos hi = Nanos::min();
  double sum = 0;
  const TimePoint now = microseconds(5000);
  for (int i = 0; i < kN; ++i) {
    const Verdict v = m.decide(now, kEct0);
    ASSERT_FALSE(v.drop);
    const Nanos hold = v.release - now;
    lo = std::min(lo, hold);
    hi = std::max(hi, hold);
    sum += static_cast<double>(hold.count());
  }
  EXPECT_GE(lo, microseconds(80));
  EXPECT_LE(hi, microseconds(120));
  // Uniform: the extremes are nearly reached and the mean is the delay.
  EXPECT_LT(lo, microseconds(81));
  EXPECT_GT(hi, microseconds(119));
  EXPECT_NEAR(sum / kN, 100'000.0, 200.0);
  EXPECT_EQ(m.counters().delayed, uint64_t(kN));

  ImpairModel fixed(spec_of("delay=2ms"), 5, 0);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(fixed.decide(now, 0).release, now + std::chrono::milliseconds(2));
  }
}

TEST(ImpairModel, ReorderedPacketsSkipTheDelay) {
  ImpairModel m(spec_of("delay=1ms,reorder=10%"), 2, 0);
  int skipped = 0;
  for (int i = 0; i < kN; ++i) {
    const TimePoint now = microseconds(i);
    const Verdict v = m.decide(now, kEct0);
    if (v.reordered) {
      ++skipped;
      EXPECT_EQ(v.release, now);
    } else {
      EXPECT_EQ(v.release, now + std::chrono::milliseconds(1));
    }
  }
  EXPECT_NEAR(skipped / double(kN), 0.10, 0.003);
  EXPECT_EQ(skipped, 19870);
  EXPECT_EQ(m.counters().reordered, uint64_t(skipped));
  EXPECT_EQ(m.counters().delayed, uint64_t(kN - skipped));
}

TEST(ImpairModel, DuplicationCorruptionAndCeRates) {
  ImpairModel m(spec_of("dup=3%,corrupt=2%,ce=5%"), 11, 0);
  int dup = 0, corrupt = 0, ce = 0;
  for (int i = 0; i < kN; ++i) {
    const Verdict v = m.decide(TimePoint(i), kEct0);
    dup += v.dup;
    corrupt += v.corrupt;
    ce += v.ce;
    EXPECT_EQ(v.release, TimePoint(i));  // no delay: at once
  }
  EXPECT_NEAR(dup / double(kN), 0.03, 0.002);
  EXPECT_NEAR(corrupt / double(kN), 0.02, 0.002);
  EXPECT_NEAR(ce / double(kN), 0.05, 0.002);
  EXPECT_EQ(dup, 6117);
  EXPECT_EQ(corrupt, 3957);
  EXPECT_EQ(ce, 9980);
  EXPECT_EQ(m.counters().duplicated, uint64_t(dup));
  EXPECT_EQ(m.counters().corrupted, uint64_t(corrupt));
  EXPECT_EQ(m.counters().ce_marked, uint64_t(ce));
}

TEST(ImpairModel, CeMarksOnlyEcnCapablePackets) {
  // RFC 3168: a router marks ECT(0)/ECT(1) packets; Not-ECT ones (congestion control off)
  // are never marked, and one already CE is not counted again.
  ImpairModel m(spec_of("ce=100%"), 1, 0);
  EXPECT_FALSE(m.decide(TimePoint(0), 0).ce);
  EXPECT_TRUE(m.decide(TimePoint(0), 1).ce);
  EXPECT_TRUE(m.decide(TimePoint(0), 2).ce);
  EXPECT_FALSE(m.decide(TimePoint(0), 3).ce);
  EXPECT_EQ(m.counters().ce_marked, 2u);
}

TEST(ImpairModel, ASeedReplaysAndTheNthPacketsFateIgnoresOtherKeys) {
  const ImpairSpec s = spec_of("loss=5%,dup=5%,corrupt=5%,ce=5%,delay=10us,jitter=10us,reorder=5%");
  ImpairModel a(s, 77, 0), b(s, 77, 0), other_seed(s, 78, 0), other_dir(s, 77, 1);
  ImpairModel loss_only(spec_of("loss=5%"), 77, 0);
  int differ_seed = 0, differ_dir = 0;
  for (int i = 0; i < 20000; ++i) {
    const Verdict va = a.decide(TimePoint(0), kEct0);
    const Verdict vb = b.decide(TimePoint(0), kEct0);
    EXPECT_EQ(va.drop, vb.drop);
    EXPECT_EQ(va.dup, vb.dup);
    EXPECT_EQ(va.corrupt, vb.corrupt);
    EXPECT_EQ(va.corrupt_bit, vb.corrupt_bit);
    EXPECT_EQ(va.ce, vb.ce);
    EXPECT_EQ(va.release, vb.release);
    EXPECT_EQ(loss_only.decide(TimePoint(0), kEct0).drop, va.drop) << i;
    differ_seed += other_seed.decide(TimePoint(0), kEct0).drop != va.drop;
    differ_dir += other_dir.decide(TimePoint(0), kEct0).drop != va.drop;
  }
  // Independent streams disagree on about 2 * 5 % * 95 % of the packets.
  EXPECT_NEAR(differ_seed / 20000.0, 0.095, 0.01);
  EXPECT_NEAR(differ_dir / 20000.0, 0.095, 0.01);
}

}  // namespace
}  // namespace uroce::fault
