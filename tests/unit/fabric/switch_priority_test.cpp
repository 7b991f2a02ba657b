// The switch queue model's priorities in virtual time: serialization on the shared link
// whatever the priority, strict priority and DWRR orders and byte shares (exact counts for
// equal-size packets), admission per priority queue (static port limit shared by the lossy
// queues, dynamic thresholds per queue), PFC per (ingress, priority) with exact XOFF/XON
// hysteresis and headroom, downstream pause per (egress, priority) with exact paused time,
// and mixed lossy/lossless priorities.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "fabric/switch_queue.hpp"

namespace uroce::fabric {
namespace {

using namespace std::chrono_literals;

Packet prio_pkt(uint32_t bytes, uint8_t priority, uint32_t ingress = 0, uint64_t cookie = 0,
                bool ect = false) {
  return Packet{
      .bytes = bytes, .ingress = ingress, .cookie = cookie, .ect = ect, .priority = priority};
}

// 1e9 B/s (1 ns per byte), no buffer limit, `n` priorities, DWRR weight 1 each.
SwitchQueueConfig prio_config(uint32_t n) {
  SwitchQueueConfig c;
  c.line_rate_bytes_per_sec = 1'000'000'000;
  c.port_buffer_bytes = 0;
  c.priorities = n;
  return c;
}

struct Sent {
  uint8_t priority;
  int64_t start;
  int64_t end;
  bool operator==(const Sent&) const = default;
};

// Dequeues everything eligible, each packet as soon as it may start.
std::vector<Sent> drain(SwitchQueues& q, uint32_t egress = 0) {
  std::vector<Sent> out;
  for (TimePoint t = q.next_dequeue(egress); t != kNever; t = q.next_dequeue(egress)) {
    auto d = q.dequeue(egress, t);
    EXPECT_TRUE(d);
    if (!d) break;
    out.push_back({d->packet.priority, d->tx_start.count(), d->tx_end.count()});
  }
  return out;
}

void queue_n(SwitchQueues& q, int n, uint32_t bytes, uint8_t priority, TimePoint at = 0ns,
             uint32_t ingress = 0) {
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(q.enqueue(0, prio_pkt(bytes, priority, ingress), at).verdict, EnqueueVerdict::kQueued)
        << "priority " << int{priority} << " packet " << i;
  }
}

TEST(SwitchPriorityConfig, ValidateNamesTheBadField) {
  SwitchQueueConfig c;
  c.priorities = 0;
  EXPECT_EQ(validate(c), "priorities (0) must be in 1..8");
  c.priorities = 9;
  EXPECT_EQ(validate(c), "priorities (9) must be in 1..8");
  c.priorities = 8;
  EXPECT_EQ(validate(c), "");
  c.prio[5].dwrr_weight = 0;
  EXPECT_EQ(validate(c), "the DWRR weight of priority 5 must be at least 1");
  c.prio[5].strict = true;  // a strict queue has no weight
  EXPECT_EQ(validate(c), "");
  c.prio[2].lossless = true;  // one lossless priority needs the PFC thresholds
  EXPECT_EQ(validate(c), "lossless mode needs an XOFF threshold above 0");
  c.pfc = {.xoff_bytes = 100, .xon_bytes = 200, .headroom_bytes = 0};
  EXPECT_EQ(validate(c), "XON (200 B) must not be above XOFF (100 B)");
  // Priorities beyond `priorities` are not looked at.
  c = {};
  c.priorities = 2;
  c.prio[4].dwrr_weight = 0;
  c.prio[4].lossless = true;
  EXPECT_EQ(validate(c), "");
}

// Equal weights (quantum 1500 B): priority 0 has two 1500 B packets, priority 1 four 500 B.
// Turn 0: 1500 of credit sends one 1500 B packet; turn 1: three 500 B; turn 0 again: the
// second 1500 B (queue empty: its turn ends); turn 1: the last 500 B. Every packet starts when
// the previous one ends, at 1 ns per byte, whatever its priority.
TEST(SwitchPriority, SerializationTimingIsExactAcrossPriorities) {
  SwitchQueues q(prio_config(2));
  queue_n(q, 2, 1500, 0);
  queue_n(q, 4, 500, 1);
  EXPECT_EQ(drain(q), (std::vector<Sent>{{0, 0, 1500},
                                         {1, 1500, 2000},
                                         {1, 2000, 2500},
                                         {1, 2500, 3000},
                                         {0, 3000, 4500},
                                         {1, 4500, 5000}}));
  EXPECT_EQ(q.port(0, 0).dequeued_bytes, 3000u);
  EXPECT_EQ(q.port(0, 1).dequeued_bytes, 2000u);
  EXPECT_EQ(q.port(0).dequeued_bytes, 5000u);
  EXPECT_EQ(q.port(0).dequeued, 6u);
  EXPECT_EQ(q.port(0, 0).max_depth_bytes, 3000u);
  EXPECT_EQ(q.port(0, 1).max_depth_bytes, 2000u);
  EXPECT_EQ(q.port(0).max_depth_bytes, 5000u);

  // The sub-ns remainder belongs to the link, not to a priority: 1000 B at 3e8 B/s from
  // alternating priorities end at 3333, 6666, 10000.
  SwitchQueueConfig c = prio_config(2);
  c.line_rate_bytes_per_sec = 300'000'000;
  SwitchQueues r(c);
  queue_n(r, 1, 1000, 0);
  queue_n(r, 2, 1000, 1);
  std::vector<int64_t> ends;
  for (const Sent& s : drain(r)) ends.push_back(s.end);
  EXPECT_EQ(ends, (std::vector<int64_t>{3333, 6666, 10000}));
}

// A strict packet does not preempt one already on the link; it goes next. And the choice is
// made at the start time, not at the (late) call: a strict packet that arrives after the
// link became free does not overtake the one that started before it arrived.
TEST(SwitchPriority, StrictWaitsForTheLinkAndTheChoiceIsMadeAtTheStartTime) {
  SwitchQueueConfig c = prio_config(2);
  c.prio[1].strict = true;
  SwitchQueues q(c);
  queue_n(q, 2, 1500, 0);
  auto d = q.dequeue(0, 0ns);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->tx_end, 1500ns);
  queue_n(q, 1, 500, 1, 100ns);
  EXPECT_EQ(drain(q), (std::vector<Sent>{{1, 1500, 2000}, {0, 2000, 3500}}));

  SwitchQueues late(c);
  queue_n(late, 2, 1000, 0);
  ASSERT_TRUE(late.dequeue(0, 0ns));  // [0, 1000)
  queue_n(late, 1, 1000, 1, 1500ns);
  // Called at 2000: the next start is 1000, when only priority 0 was there.
  d = late.dequeue(0, 2000ns);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->packet.priority, 0);
  EXPECT_EQ(d->tx_start, 1000ns);
  d = late.dequeue(0, 2000ns);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->packet.priority, 1);
  EXPECT_EQ(d->tx_start, 2000ns);
}

// Strict 2 over strict 1 over DWRR 0: the lower ones get nothing while a higher one has a
// packet; priority 1 arriving while 0 is sending takes the next slot.
TEST(SwitchPriority, StrictPriorityStarvesLowerOnesExactly) {
  SwitchQueueConfig c = prio_config(3);
  c.prio[1].strict = true;
  c.prio[2].strict = true;
  SwitchQueues q(c);
  queue_n(q, 3, 1000, 0);
  queue_n(q, 3, 1000, 1);
  queue_n(q, 2, 1000, 2);
  std::vector<uint8_t> order;
  for (int i = 0; i < 6; ++i) {
    auto d = q.dequeue(0, q.next_dequeue(0));
    ASSERT_TRUE(d);
    order.push_back(d->packet.priority);
    EXPECT_EQ(d->tx_start, Nanos(1000 * i));
  }
  EXPECT_EQ(order, (std::vector<uint8_t>{2, 2, 1, 1, 1, 0}));
  EXPECT_EQ(q.port(0, 0).dequeued, 1u);
  // Priority 0 sends [5000, 6000); priority 1 arrives at 5500 and goes before 0's next.
  queue_n(q, 1, 1000, 1, 5500ns);
  EXPECT_EQ(drain(q), (std::vector<Sent>{{1, 6000, 7000}, {0, 7000, 8000}, {0, 8000, 9000}}));
  EXPECT_EQ(q.port(0, 2).dequeued, 2u);
  EXPECT_EQ(q.port(0, 1).dequeued, 4u);
  EXPECT_EQ(q.port(0, 0).dequeued, 3u);
}

// Weights 1:2:3 (quanta 1500, 3000, 4500 B), 1000 B packets, all backlogged: in every two
// rounds priority 0 sends 1 + 2 packets (1500 and 3000 of credit), priority 1 3 + 3, priority
// 2 4 + 5. After 100 rounds (900 packets): exactly 150, 300, 450 packets, bytes 1:2:3.
TEST(SwitchPriority, DwrrSharesBytesInTheWeightRatio) {
  SwitchQueueConfig c = prio_config(3);
  c.prio[0].dwrr_weight = 1;
  c.prio[1].dwrr_weight = 2;
  c.prio[2].dwrr_weight = 3;
  SwitchQueues q(c);
  for (uint8_t p = 0; p < 3; ++p) queue_n(q, 1000, 1000, p);
  std::vector<uint8_t> first;
  for (int i = 0; i < 900; ++i) {
    auto d = q.dequeue(0, q.next_dequeue(0));
    ASSERT_TRUE(d);
    EXPECT_EQ(d->tx_start, Nanos(1000 * i));
    if (i < 18) first.push_back(d->packet.priority);
  }
  EXPECT_EQ(first, (std::vector<uint8_t>{0, 1, 1, 1, 2, 2, 2, 2,  // round 1
                                         0, 0, 1, 1, 1, 2, 2, 2, 2, 2}));
  EXPECT_EQ(q.port(0, 0).dequeued_bytes, 150'000u);
  EXPECT_EQ(q.port(0, 1).dequeued_bytes, 300'000u);
  EXPECT_EQ(q.port(0, 2).dequeued_bytes, 450'000u);
}

// DWRR is fair in bytes, not packets: equal weights, 1000 B packets against 300 B packets.
// Each turn adds 1500 B: priority 0 sends floor(1500 k / 1000) packets in k turns, priority 1
// five 300 B packets per turn; after 100 turns each has sent exactly 150000 B.
TEST(SwitchPriority, DwrrIsFairInBytesForUnequalPacketSizes) {
  SwitchQueues q(prio_config(2));
  queue_n(q, 1000, 1000, 0);
  queue_n(q, 1000, 300, 1);
  for (int i = 0; i < 150 + 500; ++i) ASSERT_TRUE(q.dequeue(0, 1s)) << i;
  EXPECT_EQ(q.port(0, 0).dequeued_bytes, 150'000u);
  EXPECT_EQ(q.port(0, 1).dequeued_bytes, 150'000u);
}

// An empty or paused queue gains no credit while skipped; one that empties loses its deficit.
TEST(SwitchPriority, DwrrSkipsIdleQueuesAndResetsAnEmptiedDeficit) {
  SwitchQueues q(prio_config(2));
  // Priority 1 alone: three 1000 B back to back (its turns refill, nobody else is eligible).
  queue_n(q, 3, 1000, 1);
  EXPECT_EQ(drain(q), (std::vector<Sent>{{1, 0, 1000}, {1, 1000, 2000}, {1, 2000, 3000}}));
  // Both backlogged again: priority 1's leftover did not carry (it emptied), and priority 0,
  // skipped while empty, starts from 0: 0 sends one (1500 credit), 1 one, 0 two, 1 two.
  queue_n(q, 3, 1000, 0, 10'000ns);
  queue_n(q, 3, 1000, 1, 10'000ns);
  std::vector<uint8_t> order;
  for (const Sent& s : drain(q)) order.push_back(s.priority);
  EXPECT_EQ(order, (std::vector<uint8_t>{0, 1, 0, 0, 1, 1}));
}

// Static port limit 10000 B shared by the port's lossy queues: priority 0 takes 6000, so
// priority 1 gets 4000. Dynamic thresholds apply per queue: alpha 1 and a 16000 B pool give
// queue 0 8 packets (d + 1000 <= 16000 - d) and queue 1 then 4 (d + 1000 <= 8000 - d).
TEST(SwitchPriority, PortLimitIsSharedAndDynamicThresholdsArePerQueue) {
  SwitchQueueConfig c = prio_config(2);
  c.port_buffer_bytes = 10000;
  SwitchQueues s(c);
  queue_n(s, 6, 1000, 0);
  int queued = 0;
  for (int i = 0; i < 10; ++i)
    queued += s.enqueue(0, prio_pkt(1000, 1), 0ns).verdict == EnqueueVerdict::kQueued;
  EXPECT_EQ(queued, 4);
  EXPECT_EQ(s.port(0, 1).dropped_tail, 6u);
  EXPECT_EQ(s.port(0, 0).dropped_tail, 0u);
  EXPECT_EQ(s.port(0).dropped_tail, 6u);
  EXPECT_EQ(s.port(0).depth_bytes, 10000u);

  c.port_buffer_bytes = 0;
  c.threshold = ThresholdMode::kDynamic;
  c.shared_buffer_bytes = 16000;
  c.alpha = 1.0;
  SwitchQueues d(c);
  int queued0 = 0, queued1 = 0;
  for (int i = 0; i < 20; ++i)
    queued0 += d.enqueue(0, prio_pkt(1000, 0), 0ns).verdict == EnqueueVerdict::kQueued;
  for (int i = 0; i < 20; ++i)
    queued1 += d.enqueue(0, prio_pkt(1000, 1), 0ns).verdict == EnqueueVerdict::kQueued;
  EXPECT_EQ(queued0, 8);
  EXPECT_EQ(queued1, 4);
  EXPECT_EQ(d.shared_used_bytes(), 12000u);
}

// RED looks at the packet's own queue: with kmin 1000, kmax 2000, pmax 1 (no random draw at
// p = 0 or 1), priority 0 holding 5000 B marks its next ECT packet, an ECT packet of the
// empty priority 1 is not marked.
TEST(SwitchPriority, RedUsesThePriorityQueueDepth) {
  SwitchQueueConfig c = prio_config(2);
  c.red = {.enabled = true,
           .kmin_bytes = 1000,
           .kmax_bytes = 2000,
           .pmax = 1.0,
           .at = MarkPoint::kEnqueue};
  SwitchQueues q(c);
  queue_n(q, 5, 1000, 0);
  EXPECT_FALSE(q.enqueue(0, prio_pkt(1000, 1, 0, 0, true), 0ns).marked);
  EXPECT_TRUE(q.enqueue(0, prio_pkt(1000, 0, 0, 0, true), 0ns).marked);
  EXPECT_EQ(q.port(0, 0).ecn_marked, 1u);
  EXPECT_EQ(q.port(0, 1).ecn_marked, 0u);
  EXPECT_EQ(q.port(0).ecn_marked, 1u);
}

// A priority at or above `priorities` is served as the last class.
TEST(SwitchPriority, PriorityAbovePrioritiesUsesTheLastClass) {
  SwitchQueues q(prio_config(2));
  EXPECT_EQ(q.traffic_class(0), 0u);
  EXPECT_EQ(q.traffic_class(1), 1u);
  EXPECT_EQ(q.traffic_class(7), 1u);
  queue_n(q, 1, 1000, 5);
  EXPECT_EQ(q.port(0, 1).enqueued, 1u);
  auto d = q.dequeue(0, 0ns);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->packet.priority, 5);  // the packet is returned unchanged
}

// Every priority lossless, XOFF 3000, XON 1000, headroom 2000, 1000 B packets. Ingress 1's
// priority 3 goes above XOFF with its 4th packet and is paused; its priority 0 keeps its
// own occupancy and is never paused (3000 = XOFF is not above it); priority 3 takes one more
// into the headroom (5000 = XOFF + headroom) and drops the next, while priority 0 of the same
// ingress is queued. DWRR (equal weights, quantum 1500) then sends 0, 3, 0, 0, 3, 3, 3, 3;
// priority 3's occupancy reaches XON at its 4th departure (tx_start t0 + 6000), resuming
// (1, 3) after 6000 ns paused.
TEST(SwitchPriority, PfcPausesOnePriorityOfAnIngressAndLeavesTheOthersFlowing) {
  SwitchQueueConfig c = prio_config(4);
  c.ingress_ports = 2;
  c.mode = BufferMode::kLossless;
  c.pfc = {.xoff_bytes = 3000, .xon_bytes = 1000, .headroom_bytes = 2000};
  ASSERT_EQ(validate(c), "");
  SwitchQueues q(c);
  const TimePoint t0 = 100ns;
  for (int i = 1; i <= 3; ++i) EXPECT_FALSE(q.enqueue(0, prio_pkt(1000, 3, 1), t0).pause) << i;
  EnqueueResult r = q.enqueue(0, prio_pkt(1000, 3, 1), t0);
  EXPECT_EQ(r.verdict, EnqueueVerdict::kQueued);
  EXPECT_TRUE(r.pause);
  EXPECT_TRUE(q.paused(1, 3));
  EXPECT_FALSE(q.paused(1, 0));
  EXPECT_TRUE(q.paused(1));
  EXPECT_FALSE(q.paused(0));
  for (int i = 1; i <= 3; ++i) {
    r = q.enqueue(0, prio_pkt(1000, 0, 1), t0);
    EXPECT_EQ(r.verdict, EnqueueVerdict::kQueued) << i;
    EXPECT_FALSE(r.pause) << i;
  }
  EXPECT_FALSE(q.paused(1, 0));
  r = q.enqueue(0, prio_pkt(1000, 3, 1), t0);
  EXPECT_EQ(r.verdict, EnqueueVerdict::kQueued);
  EXPECT_FALSE(r.pause);  // one pause event per episode
  EXPECT_EQ(q.enqueue(0, prio_pkt(1000, 3, 1), t0).verdict, EnqueueVerdict::kDroppedHeadroom);
  EXPECT_EQ(q.port(0, 3).dropped_headroom, 1u);
  EXPECT_EQ(q.port(0, 0).dropped_headroom, 0u);
  EXPECT_EQ(q.port(0).dropped_headroom, 1u);
  EXPECT_EQ(q.ingress(1, 3, t0).occupancy_bytes, 5000u);
  EXPECT_EQ(q.ingress(1, 0, t0).occupancy_bytes, 3000u);  // = XOFF, not above: flowing
  EXPECT_EQ(q.ingress(1, t0).occupancy_bytes, 8000u);

  std::vector<std::pair<uint8_t, int64_t>> resumes;
  std::vector<uint8_t> order;
  for (TimePoint t = q.next_dequeue(0); t != kNever; t = q.next_dequeue(0)) {
    auto d = q.dequeue(0, t);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->tx_start, t0 + Nanos(1000 * static_cast<int64_t>(order.size())));
    order.push_back(d->packet.priority);
    if (d->resume) resumes.emplace_back(d->packet.priority, (d->tx_start - t0).count());
  }
  EXPECT_EQ(order, (std::vector<uint8_t>{0, 3, 0, 0, 3, 3, 3, 3}));
  EXPECT_EQ(resumes, (std::vector<std::pair<uint8_t, int64_t>>{{3, 6000}}));
  EXPECT_FALSE(q.paused(1));
  const IngressCounters i13 = q.ingress(1, 3, 1s);
  EXPECT_EQ(i13.pause_events, 1u);
  EXPECT_EQ(i13.paused_ns, 6000u);
  EXPECT_EQ(q.ingress(1, 0, 1s).pause_events, 0u);
  EXPECT_EQ(q.ingress(1, 1s).pause_events, 1u);
  EXPECT_EQ(q.ingress(1, 1s).paused_ns, 6000u);
  EXPECT_EQ(q.ingress(0, 1s).pause_events, 0u);
}

// XOFF 4000, XON 2000 on lossless priority 1 (priority 0 lossy): exactly XOFF does not pause,
// one byte more does; between XON and XOFF the state stays what it was (paused on the way
// down, flowing on the way up); at XON it resumes. Paused time runs from the pause to the
// tx_start of the departure that reached XON.
TEST(SwitchPriority, XoffXonHysteresisIsExact) {
  SwitchQueueConfig c = prio_config(2);
  c.prio[1].lossless = true;
  c.pfc = {.xoff_bytes = 4000, .xon_bytes = 2000, .headroom_bytes = 10000};
  ASSERT_EQ(validate(c), "");
  SwitchQueues q(c);
  EXPECT_FALSE(q.enqueue(0, prio_pkt(2000, 1), 0ns).pause);
  EXPECT_FALSE(q.enqueue(0, prio_pkt(2000, 1), 0ns).pause);  // 4000 = XOFF
  EXPECT_TRUE(q.enqueue(0, prio_pkt(1, 1), 10ns).pause);     // 4001 > XOFF
  auto d = q.dequeue(0, 10ns);                               // starts at 0: 2001 left, above XON
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->resume);
  EXPECT_TRUE(q.paused(0, 1));
  d = q.dequeue(0, 2000ns);  // 1 left: resumed, paused from 10 to 2000
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->resume);
  EXPECT_EQ(d->tx_start, 2000ns);
  EXPECT_EQ(q.ingress(0, 1, 1s).paused_ns, 1990u);
  // On the way up from 1 B: 3001 (between XON and XOFF) stays flowing, 4000 too, 4001 pauses.
  EXPECT_FALSE(q.enqueue(0, prio_pkt(3000, 1), 5000ns).pause);
  EXPECT_FALSE(q.enqueue(0, prio_pkt(999, 1), 5000ns).pause);
  EXPECT_TRUE(q.enqueue(0, prio_pkt(1, 1), 5000ns).pause);
  EXPECT_EQ(q.ingress(0, 1, 5000ns).pause_events, 2u);
  // Down: 4000 after the 1 B packet leaves (still paused: 4000 > XON), 1000 after the
  // 3000 B one: resumed.
  std::vector<bool> resumed;
  while (auto e = q.dequeue(0, 1s)) resumed.push_back(e->resume);
  EXPECT_EQ(resumed, (std::vector<bool>{false, true, false, false}));
  // Priority 0 is lossy: no PFC accounting at all.
  EXPECT_FALSE(q.enqueue(0, prio_pkt(100000, 0), 2s).pause);
  EXPECT_EQ(q.ingress(0, 0, 2s).occupancy_bytes, 0u);
}

// Headroom is per (ingress, priority): XOFF 2000 + headroom 1500 = 3500 B may be queued;
// a packet that brings the occupancy to exactly 3500 is queued, one byte more is dropped.
TEST(SwitchPriority, HeadroomDropsOnlyBeyondXoffPlusHeadroom) {
  SwitchQueueConfig c = prio_config(2);
  c.mode = BufferMode::kLossless;
  c.ingress_ports = 2;
  c.pfc = {.xoff_bytes = 2000, .xon_bytes = 1000, .headroom_bytes = 1500};
  SwitchQueues q(c);
  EXPECT_FALSE(q.enqueue(0, prio_pkt(2000, 1), 0ns).pause);
  EXPECT_TRUE(q.enqueue(0, prio_pkt(1000, 1), 0ns).pause);
  EXPECT_EQ(q.enqueue(0, prio_pkt(501, 1), 0ns).verdict, EnqueueVerdict::kDroppedHeadroom);
  EXPECT_EQ(q.enqueue(0, prio_pkt(500, 1), 0ns).verdict, EnqueueVerdict::kQueued);  // 3500
  EXPECT_EQ(q.enqueue(0, prio_pkt(1, 1), 0ns).verdict, EnqueueVerdict::kDroppedHeadroom);
  // Another priority of the same ingress, and the same priority of another ingress, have
  // their own budgets.
  EXPECT_EQ(q.enqueue(0, prio_pkt(3500, 0), 0ns).verdict, EnqueueVerdict::kQueued);
  EXPECT_EQ(q.enqueue(0, prio_pkt(3500, 1, 1), 0ns).verdict, EnqueueVerdict::kQueued);
  EXPECT_EQ(q.port(0, 1).dropped_headroom, 2u);
  EXPECT_EQ(q.port(0, 0).dropped_headroom, 0u);
  EXPECT_EQ(q.port(0).dropped_tail, 0u);
}

// Dynamic XOFF per (ingress, priority): min(xoff, alpha * free pool), with the pool shared by
// every priority. 10000 B pool, alpha 0.25, xoff 5000: two priority-0 packets (free 8000,
// XOFF 2000 = occupancy: not paused); then priority 1: 1000 B (free 7000, XOFF 1750: not
// above), 2000 B (free 6000, XOFF 1500): paused, while priority 0 stays flowing. Headroom
// uses the XOFF before the packet: with 4000 B free (XOFF 1000) and 1000 B of headroom,
// priority 1 at 2000 B takes no more.
TEST(SwitchPriority, DynamicXoffPerPriorityShrinksAsThePoolFills) {
  SwitchQueueConfig c = prio_config(2);
  c.mode = BufferMode::kLossless;
  c.threshold = ThresholdMode::kDynamic;
  c.shared_buffer_bytes = 10000;
  c.alpha = 0.25;
  c.pfc = {.xoff_bytes = 5000, .xon_bytes = 500, .headroom_bytes = 1000};
  ASSERT_EQ(validate(c), "");
  SwitchQueues q(c);
  EXPECT_FALSE(q.enqueue(0, prio_pkt(1000, 0), 0ns).pause);
  EXPECT_FALSE(q.enqueue(0, prio_pkt(1000, 0), 0ns).pause);
  EXPECT_FALSE(q.enqueue(0, prio_pkt(1000, 1), 0ns).pause);
  EXPECT_TRUE(q.enqueue(0, prio_pkt(1000, 1), 0ns).pause);
  EXPECT_FALSE(q.paused(0, 0));
  EXPECT_TRUE(q.paused(0, 1));
  // Pool 4000 used, 6000 free: XOFF 1500, headroom to 2500 for priority 1 (at 2000).
  EXPECT_EQ(q.enqueue(0, prio_pkt(501, 1), 0ns).verdict, EnqueueVerdict::kDroppedHeadroom);
  EXPECT_EQ(q.enqueue(0, prio_pkt(500, 1), 0ns).verdict, EnqueueVerdict::kQueued);
}

// Downstream pause of priority 1 on egress 0: priority 0 keeps going, priority 1 waits, and
// starts exactly when released; the held time is exact, with a pause in progress included.
TEST(SwitchPriority, DownstreamPauseHoldsExactlyThatPriority) {
  SwitchQueues q(prio_config(2));
  queue_n(q, 2, 1000, 0);
  queue_n(q, 2, 1000, 1);
  q.set_egress_paused(0, 1, true, 0ns);
  q.set_egress_paused(0, 1, true, 300ns);  // already paused: no change
  EXPECT_TRUE(q.egress_paused(0, 1));
  EXPECT_FALSE(q.egress_paused(0, 0));
  EXPECT_EQ(drain(q), (std::vector<Sent>{{0, 0, 1000}, {0, 1000, 2000}}));
  EXPECT_EQ(q.next_dequeue(0), kNever);
  EXPECT_FALSE(q.dequeue(0, 1s));
  EXPECT_EQ(q.egress_paused_ns(0, 1, 4000ns), 4000u);
  q.set_egress_paused(0, 1, false, 5000ns);
  EXPECT_EQ(q.next_dequeue(0), 5000ns);  // not at 2000, when the link became free
  auto d = q.dequeue(0, 5000ns);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->packet.priority, 1);
  EXPECT_EQ(d->tx_start, 5000ns);
  // Paused again while its last packet waits; a packet of priority 0 arriving meanwhile goes.
  q.set_egress_paused(0, 1, true, 6000ns);
  queue_n(q, 1, 1000, 0, 6100ns);
  EXPECT_EQ(drain(q), (std::vector<Sent>{{0, 6100, 7100}}));
  EXPECT_EQ(q.egress_paused_ns(0, 1, 6200ns), 5200u);
  q.set_egress_paused(0, 1, false, 6500ns);
  EXPECT_EQ(drain(q), (std::vector<Sent>{{1, 7100, 8100}}));  // after the link is free
  EXPECT_EQ(q.egress_paused_ns(0, 1, 1s), 5500u);
  EXPECT_EQ(q.egress_paused_ns(0, 0, 1s), 0u);
  EXPECT_EQ(q.egress_paused_ns(0, 1s), 5500u);
  EXPECT_EQ(q.port(0, 1).pause_received, 2u);
  EXPECT_EQ(q.port(0).pause_received, 2u);
  EXPECT_EQ(q.port(0, 0).pause_received, 0u);
}

// A strict queue paused downstream lets the DWRR queues through.
TEST(SwitchPriority, PausedStrictQueueDoesNotBlockTheOthers) {
  SwitchQueueConfig c = prio_config(2);
  c.prio[1].strict = true;
  SwitchQueues q(c);
  queue_n(q, 1, 1000, 1);
  queue_n(q, 1, 1000, 0);
  q.set_egress_paused(0, 1, true, 0ns);
  EXPECT_EQ(drain(q), (std::vector<Sent>{{0, 0, 1000}}));
  q.set_egress_paused(0, 1, false, 1500ns);
  EXPECT_EQ(drain(q), (std::vector<Sent>{{1, 1500, 2500}}));
}

// Mixed: priority 3 lossless, priority 0 lossy, 3000 B port limit, 9000 B pool. Priority 0
// tail-drops at the port limit; priority 3 is not held by it (it pauses, then uses headroom).
// The pool is shared: with the lossless bytes in it, the lossy queue gets no more once the
// pool is full, even below its port limit.
TEST(SwitchPriority, MixedLossyAndLosslessPriorities) {
  SwitchQueueConfig c = prio_config(4);
  c.port_buffer_bytes = 3000;
  c.shared_buffer_bytes = 9000;
  c.prio[3].lossless = true;
  c.pfc = {.xoff_bytes = 2000, .xon_bytes = 1000, .headroom_bytes = 3000};
  ASSERT_EQ(validate(c), "");
  SwitchQueues q(c);
  EXPECT_TRUE(q.lossless(3));
  EXPECT_FALSE(q.lossless(0));
  queue_n(q, 3, 1000, 0);
  EXPECT_EQ(q.enqueue(0, prio_pkt(1000, 0), 0ns).verdict, EnqueueVerdict::kDroppedTail);
  std::vector<EnqueueVerdict> v;
  std::vector<bool> pauses;
  for (int i = 0; i < 6; ++i) {
    const EnqueueResult r = q.enqueue(0, prio_pkt(1000, 3), 0ns);
    v.push_back(r.verdict);
    pauses.push_back(r.pause);
  }
  using V = EnqueueVerdict;
  EXPECT_EQ(v, (std::vector<V>{V::kQueued, V::kQueued, V::kQueued, V::kQueued, V::kQueued,
                               V::kDroppedHeadroom}));
  EXPECT_EQ(pauses, (std::vector<bool>{false, false, true, false, false, false}));
  EXPECT_EQ(q.shared_used_bytes(), 8000u);
  EXPECT_EQ(q.port(0, 0).dropped_tail, 1u);
  EXPECT_EQ(q.port(0, 3).dropped_tail, 0u);
  EXPECT_EQ(q.port(0, 3).dropped_headroom, 1u);
  EXPECT_EQ(q.port(0, 0).depth_bytes, 3000u);
  EXPECT_EQ(q.port(0, 3).depth_bytes, 5000u);
  EXPECT_EQ(q.port(0).depth_bytes, 8000u);
  // Priority 0 leaves 2000 B of port room after one departure, but the pool has 1000 B left.
  auto d = q.dequeue(0, 0ns);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->packet.priority, 0);
  EXPECT_EQ(q.enqueue(0, prio_pkt(1000, 1), 0ns).verdict, EnqueueVerdict::kQueued);  // pool 9000
  EXPECT_EQ(q.enqueue(0, prio_pkt(1000, 0), 0ns).verdict, EnqueueVerdict::kDroppedTail);
  EXPECT_EQ(q.port(0).dropped_tail, 2u);
}

}  // namespace
}  // namespace uroce::fabric
