// DCQCN reaction point and pacer in virtual time: every rate is checked to the bit/s against
// values computed by hand from the rules in src/transport/cc/dcqcn.hpp.
#include "transport/cc/dcqcn.hpp"

#include <gtest/gtest.h>

#include <chrono>

#include "transport/cc/pacer.hpp"

namespace uroce::transport {
namespace {

using namespace std::chrono_literals;
using Stage = Dcqcn::Stage;

constexpr uint32_t kLine = 10000;  // Mb/s
constexpr uint64_t kMax = 10'000'000'000;

// alpha fixed at 0.5 (g = 0), so each cut keeps 75 % of RC (rpg_gd 11: RC * (1 - alpha/2)).
DcqcnParams fixed_alpha() {
  DcqcnParams p;
  p.initial_alpha_value = 512;
  p.dce_tcp_g = 1024;
  p.dce_tcp_rtt = 1000;
  p.rpg_time_reset = 100;
  p.rpg_byte_reset = 0;
  p.rpg_threshold = 2;
  p.rpg_ai_rate = 100;
  p.rpg_hai_rate = 1000;
  return p;
}

TEST(Dcqcn, StartsAtLineRateWithNoTimer) {
  Dcqcn d(DcqcnParams{}, kLine);
  EXPECT_EQ(d.rate_bps(), kMax);
  EXPECT_EQ(d.target_bps(), kMax);
  EXPECT_EQ(d.rate_bytes_per_sec(), kMax / 8);
  EXPECT_EQ(d.next_timer(), kNever);
  EXPECT_EQ(d.stage(), Stage::kIdle);
  EXPECT_TRUE(d.uses_ecn());
}

TEST(Dcqcn, FirstCnpCutsAtOnceWithInitialAlpha) {
  Dcqcn d(DcqcnParams{}, kLine);  // mlx5 defaults: alpha 1023/1024, rpg_gd 11
  d.on_cnp(TimePoint(0));
  // 1 - (1023/1024) * 1024/2048 = 1025/2048 of 10 Gb/s.
  EXPECT_EQ(d.rate_bps(), 5'004'882'812u);
  EXPECT_EQ(d.target_bps(), kMax);
  EXPECT_EQ(d.state().alpha, 1023u);
  EXPECT_EQ(d.state().rate_bps, 5'004'882'812u);
  EXPECT_EQ(d.stage(), Stage::kFastRecovery);
  EXPECT_EQ(d.next_timer(), TimePoint(300us));  // rpg_time_reset
}

TEST(Dcqcn, MinimumDecreaseFactorBoundsOneCut) {
  DcqcnParams p;
  p.rpg_gd = 10;  // would cut by alpha (~100 %)
  Dcqcn d(p, kLine);
  d.on_cnp(TimePoint(0));
  EXPECT_EQ(d.rate_bps(), kMax / 2);  // rpg_min_dec_fac 50 %
}

TEST(Dcqcn, NeverBelowMinimumRate) {
  DcqcnParams p = fixed_alpha();
  p.initial_alpha_value = 1023;
  p.rpg_gd = 10;
  p.rpg_min_dec_fac = 1;
  p.rpg_min_rate = 1000;
  Dcqcn d(p, kLine);
  d.on_cnp(TimePoint(0));
  EXPECT_EQ(d.rate_bps(), 1'000'000'000u);  // 1 % of 10 Gb/s is below the 1 Gb/s floor
  d.on_cnp(TimePoint(10us));
  EXPECT_EQ(d.rate_bps(), 1'000'000'000u);
  EXPECT_EQ(d.cuts(), 2u);
}

TEST(Dcqcn, CutsAtMostOncePerMonitorPeriod) {
  Dcqcn d(fixed_alpha(), kLine);
  d.on_cnp(TimePoint(0));
  EXPECT_EQ(d.rate_bps(), 7'500'000'000u);
  d.on_cnp(TimePoint(2us));  // inside rate_reduce_monitor_period (4 µs): deferred
  EXPECT_EQ(d.rate_bps(), 7'500'000'000u);
  EXPECT_EQ(d.cuts(), 1u);
  EXPECT_EQ(d.next_timer(), TimePoint(4us));
  d.on_timer(TimePoint(4us));
  EXPECT_EQ(d.cuts(), 2u);
  EXPECT_EQ(d.rate_bps(), 5'625'000'000u);
  EXPECT_EQ(d.target_bps(), kMax);  // no increase in between: the target stays
  EXPECT_EQ(d.next_timer(), TimePoint(104us));
}

TEST(Dcqcn, AlphaRisesWithCnpsAndDecaysWithout) {
  DcqcnParams p = fixed_alpha();
  p.dce_tcp_g = 768;  // alpha keeps 3/4 per period: g = 1/4
  p.dce_tcp_rtt = 10;
  Dcqcn d(p, kLine);
  d.on_cnp(TimePoint(0));
  EXPECT_EQ(d.alpha(), 0.5);
  EXPECT_EQ(d.rate_bps(), 7'500'000'000u);
  EXPECT_EQ(d.alpha_at(TimePoint(10us)), 0.625);  // the first period saw the CNP
  EXPECT_EQ(d.alpha_at(TimePoint(30us)), 0.625 * 0.75 * 0.75);
  d.on_cnp(TimePoint(35us));                // cut with the decayed alpha
  EXPECT_EQ(d.rate_bps(), 6'181'640'625u);  // 7.5e9 * (1 - 0.3515625 / 2)
  EXPECT_EQ(d.alpha_at(TimePoint(40us)), 0.75 * 0.3515625 + 0.25);
  EXPECT_EQ(d.alpha_at(TimePoint(50us)), 0.513671875 * 0.75);
  EXPECT_EQ(d.state().alpha, 395u);  // 0.38525390625 * 1024 = 394.5, rounded
}

TEST(Dcqcn, TimerDrivesFastRecoveryThenAdditiveThenHyper) {
  Dcqcn d(fixed_alpha(), kLine);
  d.on_cnp(TimePoint(0));
  d.on_timer(TimePoint(100us));
  EXPECT_EQ(d.stage(), Stage::kFastRecovery);
  EXPECT_EQ(d.rate_bps(), 8'750'000'000u);
  // A CNP after a timer increase clamps the target to the current rate.
  d.on_cnp(TimePoint(150us));
  EXPECT_EQ(d.target_bps(), 8'750'000'000u);
  EXPECT_EQ(d.rate_bps(), 6'562'500'000u);
  EXPECT_EQ(d.next_timer(), TimePoint(250us));
  d.on_timer(TimePoint(250us));
  EXPECT_EQ(d.stage(), Stage::kFastRecovery);
  EXPECT_EQ(d.rate_bps(), 7'656'250'000u);
  d.on_timer(TimePoint(350us));
  EXPECT_EQ(d.stage(), Stage::kFastRecovery);
  EXPECT_EQ(d.rate_bps(), 8'203'125'000u);
  EXPECT_EQ(d.target_bps(), 8'750'000'000u);
  d.on_timer(TimePoint(450us));  // F = 2 steps done: additive
  EXPECT_EQ(d.stage(), Stage::kAdditive);
  EXPECT_EQ(d.target_bps(), 8'850'000'000u);
  EXPECT_EQ(d.rate_bps(), 8'526'562'500u);
  d.on_timer(TimePoint(550us));  // hyper, 1 x rpg_hai_rate
  EXPECT_EQ(d.stage(), Stage::kHyper);
  EXPECT_EQ(d.target_bps(), 9'850'000'000u);
  EXPECT_EQ(d.rate_bps(), 9'188'281'250u);
  d.on_timer(TimePoint(650us));  // hyper, 2 x rpg_hai_rate, capped at the line rate
  EXPECT_EQ(d.target_bps(), kMax);
  EXPECT_EQ(d.rate_bps(), 9'594'140'625u);
  // Recovery ends exactly at the line rate, and then no timer runs.
  TimePoint t(650us);
  int steps = 0;
  while (d.next_timer() != kNever && steps < 100) {
    t = d.next_timer();
    d.on_timer(t);
    ++steps;
  }
  EXPECT_EQ(d.stage(), Stage::kIdle);
  EXPECT_EQ(d.rate_bps(), kMax);
  EXPECT_EQ(d.target_bps(), kMax);
  EXPECT_LT(steps, 40);
}

TEST(Dcqcn, ByteCounterDrivesRecovery) {
  DcqcnParams p = fixed_alpha();
  p.rpg_byte_reset = 10000;
  p.rpg_time_reset = 1'000'000;  // 1 s: the timer stays out of the way
  p.rpg_threshold = 1;
  Dcqcn d(p, kLine);
  d.on_cnp(TimePoint(0));
  EXPECT_EQ(d.rate_bps(), 7'500'000'000u);
  d.on_sent(TimePoint(1us), 5000);
  EXPECT_EQ(d.byte_stage(), 0u);
  d.on_sent(TimePoint(2us), 5000);  // B bytes: byte stage 1, fast recovery
  EXPECT_EQ(d.byte_stage(), 1u);
  EXPECT_EQ(d.stage(), Stage::kFastRecovery);
  EXPECT_EQ(d.rate_bps(), 8'750'000'000u);
  d.on_sent(TimePoint(3us), 10000);  // byte stage 2 > F, time stage 0: additive
  EXPECT_EQ(d.stage(), Stage::kAdditive);
  EXPECT_EQ(d.rate_bps(), 9'375'000'000u);
  d.on_timer(TimePoint(1s));  // time stage 1 <= F: still additive
  EXPECT_EQ(d.stage(), Stage::kAdditive);
  EXPECT_EQ(d.rate_bps(), 9'687'500'000u);
  d.on_timer(TimePoint(2s));  // both stages > F: hyper
  EXPECT_EQ(d.stage(), Stage::kHyper);
  EXPECT_EQ(d.rate_bps(), 9'843'750'000u);
}

TEST(Dcqcn, RateOnFirstCnp) {
  DcqcnParams p;
  p.rate_to_set_on_first_cnp = 2000;
  Dcqcn d(p, kLine);
  d.on_cnp(TimePoint(0));
  EXPECT_EQ(d.rate_bps(), 2'000'000'000u);
  EXPECT_EQ(d.target_bps(), kMax);
}

TEST(Pacer, SpacesPacketsByTheirTransmissionTime) {
  Pacer p(0);
  EXPECT_EQ(Pacer::tx_time(1000, 1'000'000'000), Nanos(8000));
  EXPECT_EQ(Pacer::tx_time(1, 3'000'000'000), Nanos(3));  // 2.67 ns rounds up
  EXPECT_LE(p.next_send_time(), TimePoint(0));
  p.on_sent(TimePoint(1000), 1000, 1'000'000'000);
  EXPECT_EQ(p.next_send_time(), TimePoint(9000));
  p.on_sent(TimePoint(9000), 500, 1'000'000'000);
  EXPECT_EQ(p.next_send_time(), TimePoint(13000));
  // Idle time is not banked without a burst allowance.
  p.on_sent(TimePoint(100000), 1000, 1'000'000'000);
  EXPECT_EQ(p.next_send_time(), TimePoint(108000));
}

TEST(Pacer, BurstLetsAnIdleQpSendBackToBack) {
  Pacer p(3000);
  p.on_sent(TimePoint(100000), 1000, 1'000'000'000);  // starts 24 µs back: 76 + 8 µs
  EXPECT_EQ(p.next_send_time(), TimePoint(84000));
  p.on_sent(TimePoint(100000), 1000, 1'000'000'000);
  p.on_sent(TimePoint(100000), 1000, 1'000'000'000);
  EXPECT_EQ(p.next_send_time(), TimePoint(100000));  // still eligible at 100 µs
  p.on_sent(TimePoint(100000), 1000, 1'000'000'000);
  EXPECT_EQ(p.next_send_time(), TimePoint(108000));
}

TEST(Pacer, ARateChangeRescalesThePendingGap) {
  Pacer p(0);
  p.on_sent(TimePoint(0), 1000, 1'000'000);  // 8 ms at 1 Mb/s
  EXPECT_EQ(p.next_send_time(), TimePoint(8'000'000));
  // At 1 ms the rate rises to 1 Gb/s: the 7 ms still owed are 7 µs at the new rate.
  p.on_rate_change(TimePoint(1'000'000), 1'000'000, 1'000'000'000);
  EXPECT_EQ(p.next_send_time(), TimePoint(1'007'000));
  // A cut stretches what is left the same way: 4 µs at 1 Gb/s are 8 µs at 500 Mb/s.
  p.on_rate_change(TimePoint(1'003'000), 1'000'000'000, 500'000'000);
  EXPECT_EQ(p.next_send_time(), TimePoint(1'011'000));
  // Nothing owed, no credit (burst 0): the schedule stays where it is.
  p.on_rate_change(TimePoint(2'000'000), 500'000'000, 1'000'000'000);
  EXPECT_EQ(p.next_send_time(), TimePoint(2'000'000));
}

TEST(Pacer, ARateChangeRescalesABankedBurst) {
  Pacer p(3000);
  p.on_sent(TimePoint(100000), 1000, 1'000'000'000);  // 16 µs of credit left (2000 bytes)
  EXPECT_EQ(p.next_send_time(), TimePoint(84000));
  p.on_rate_change(TimePoint(100000), 1'000'000'000, 2'000'000'000);  // 2000 bytes = 8 µs
  EXPECT_EQ(p.next_send_time(), TimePoint(92000));
}

// The pacer follows RC at once: a packet sent at the 1 Mb/s floor (mlx5's rpg_min_rate)
// owes 32.8 ms; the first increase makes RC 5.0005 Gb/s, and the 32.688 ms still owed
// become 32.688 ms x 1e6 / 5.0005e9 = 6536.9 ns, rounded up: no longer than one packet at
// the new rate (6553 ns), where the old pacer kept the gap of the floor.
TEST(Dcqcn, AnIncreaseShortensThePacingGapAtOnce) {
  DcqcnParams p = fixed_alpha();
  p.rate_to_set_on_first_cnp = 1;
  p.pacer_burst_bytes = 0;
  Dcqcn d(p, kLine);
  d.on_cnp(TimePoint(0));
  ASSERT_EQ(d.rate_bps(), 1'000'000u);
  d.on_sent(TimePoint(20us), 4096);
  EXPECT_EQ(d.next_send_time(), TimePoint(20us) + Nanos(32'768'000));
  d.on_timer(TimePoint(100us));
  EXPECT_EQ(d.rate_bps(), 5'000'500'000u);
  EXPECT_EQ(d.next_send_time(), TimePoint(100us) + Nanos(6537));
  EXPECT_LE(d.next_send_time() - TimePoint(100us), Pacer::tx_time(4096, d.rate_bps()));
  // A cut applies to the pending gap the same way (RC 5.0005 -> 3.750375 Gb/s).
  d.on_cnp(TimePoint(102us));
  EXPECT_EQ(d.rate_bps(), 3'750'375'000u);
  EXPECT_EQ(d.next_send_time(), TimePoint(102us) + Nanos(6050));  // 4537 ns x 4/3, up
}

}  // namespace
}  // namespace uroce::transport
