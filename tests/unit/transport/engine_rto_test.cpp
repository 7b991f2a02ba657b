// The adaptive retransmission timer against a queue that deepens (docs/congestion.md "Loss
// recovery"): 64 KiB RDMA WRITEs, 8 outstanding, path MTU 1024 (an ACK every 64 packets, a
// window of 129 PSNs), over a wire whose one-way delay towards the responder is a queue
// that grows by 0.9 ms per ms from the start (2 us of latency) up to 40 ms: the RTT nearly
// doubles per window, from 1 ms to 40 ms within six windows; packets stay in order, as in a
// FIFO queue. Nothing is lost unless the test drops it, so
// every go-back is counted and a spurious one fails the test; a lost tail packet must still
// be resent by the adaptive timer, long before the configured timeout.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <vector>

#include "engine_harness.hpp"

namespace uroce::test {
namespace {

using namespace transport;

constexpr uint32_t kMsg = 64 * 1024;
constexpr int kSlots = 16;  // the buffer holds 16 messages; WRITE k uses slot k % 16
constexpr int kOutstanding = 8;

Nanos queue_delay(TimePoint sent) {
  const Nanos t = sent - TimePoint(0);
  return std::min(t * 9 / 10, Nanos(40'000'000));
}

struct RampRun {
  EngineHarness h{{.latency = Nanos(2000), .seed = 21}};
  QpPair p;
  Nanos max_delay{0};
  std::optional<uint32_t> drop_psn;  // dropped once (its first copy)
  std::vector<TimePoint> sends_of_dropped;
  int completed = 0;

  explicit RampRun(std::optional<uint32_t> drop = std::nullopt) : drop_psn(drop) {
    PairOptions o;
    o.timeout = 16;  // 4.096 us x 2^16 = 268 ms: far above the 40 ms the queue reaches
    o.buffer_size = size_t{kMsg} * kSlots;
    p = h.connect(o);
    std::mt19937_64 rng(5);
    for (uint8_t& b : p.a.buf) b = static_cast<uint8_t>(rng());
    h.faults(0).hook = [this](CapturedPacket& pkt) {
      HookVerdict v;
      if (drop_psn && pkt.psn() == *drop_psn) {
        sends_of_dropped.push_back(pkt.sent_at);
        if (sends_of_dropped.size() == 1) v.action = HookVerdict::Action::kDrop;
      }
      v.extra_delay = queue_delay(pkt.sent_at);
      max_delay = std::max(max_delay, v.extra_delay);
      return v;
    };
  }

  void post(int k) {
    const size_t off = static_cast<size_t>(k % kSlots) * kMsg;
    const Sge sge = p.a.sge(off, kMsg);
    SendWr wr;
    wr.wr_id = static_cast<uint64_t>(k);
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.send_flags = kSendSignaled;
    wr.sg_list = {&sge, 1};
    wr.rdma = {p.b.addr(off), p.b.mr.rkey};
    ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  }

  // Posts `n` WRITEs keeping 8 outstanding; every completion must be a success, in order.
  void run(int n) {
    int posted = 0;
    for (; posted < std::min(n, kOutstanding); ++posted) post(posted);
    const bool done = h.run_until(
        [&] {
          for (const Wc& wc : h.poll(0, p.a.send_cq)) {
            EXPECT_EQ(wc.status, WcStatus::kSuccess);
            EXPECT_EQ(wc.wr_id, static_cast<uint64_t>(completed));
            ++completed;
            if (posted < n) post(posted++);
          }
          return completed == n;
        },
        std::chrono::seconds(5));
    ASSERT_TRUE(done) << completed << " of " << n << " completed";
    EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.end(), p.b.buf.begin()));
  }

  uint64_t a(Counter c) { return h.qp_counter(0, p.a.qpn, c); }
};

// 48 WRITEs (3072 packets): the ramp to 40 ms within about 14 windows (six of them from 1 ms
// on), then the plateau. Every packet arrives, so every resend would be spurious: there must
// be none. Before: the RTO was max(SRTT + max(1 us, 4 RTTVAR), 200 us), below the next
// window's RTT once the RTT outgrew the floor: 6 early go-backs, 774 packets sent twice.
TEST(AdaptiveRto, AQueueRampingFrom1To40MsCausesNoSpuriousGoBack) {
  RampRun r;
  r.run(48);
  EXPECT_EQ(r.max_delay, Nanos(40'000'000));  // the ramp was reached
  EXPECT_EQ(r.a(Counter::kRoceAdpRetrans), 0u);
  EXPECT_EQ(r.a(Counter::kRetransmittedPkts), 0u);
  EXPECT_EQ(r.a(Counter::kLocalAckTimeoutErr), 0u);
  EXPECT_EQ(r.a(Counter::kCompleterRetryErr), 0u);
  EXPECT_EQ(r.a(Counter::kSentPkts), 48u * 64u);
  EXPECT_EQ(r.h.qp_counter(1, r.p.b.qpn, Counter::kDuplicateRequest), 0u);
}

// The same ramp, and the last packet of the last WRITE is lost: nothing comes after it, so no
// NAK; the adaptive timer goes back from the oldest unacknowledged PSN (that WRITE's first)
// once, without using up retry_cnt, at the last ACK (the other WRITE of its window, 40 ms
// after the loss) + the RTO (B + max(200 us, 4 RTTVAR, B - min RTT) with B = 40 ms and a min
// RTT of a few us: 80 ms), so within 3 x 40 ms (+ 1 ms) of the lost packet's send,
// not after the configured 268 ms.
TEST(AdaptiveRto, ALostTailOnTheDeepQueueIsResentWithinTheRtoBound) {
  constexpr int kWrites = 48;
  const uint32_t last = 0x100 + kWrites * 64 - 1;  // PairOptions::psn0 = 0x100
  RampRun r(last);
  r.run(kWrites);
  ASSERT_EQ(r.sends_of_dropped.size(), 2u);
  const Nanos waited = r.sends_of_dropped[1] - r.sends_of_dropped[0];
  EXPECT_GT(waited, Nanos(40'000'000));
  EXPECT_LT(waited, Nanos(121'000'000));
  EXPECT_EQ(r.a(Counter::kRoceAdpRetrans), 1u);
  EXPECT_EQ(r.a(Counter::kRetransmittedPkts), 64u);
  EXPECT_EQ(r.a(Counter::kLocalAckTimeoutErr), 0u);
  EXPECT_EQ(r.a(Counter::kCompleterRetryErr), 0u);
  EXPECT_EQ(r.a(Counter::kAdpRetransSpurious), 0u);
}

// DCQCN paces the QP at 10 Mb/s, so each 64 KiB WRITE takes 56 ms to leave and its last
// packet, the only one that asks for an ACK, leaves 56 ms after the previous ACK; the RTT is
// 200 us. The ACK is not late before the packet that asks for it is sent: the adaptive RTO
// runs from that send (before, it ran from the last ACK, 600 us, and went back in the middle
// of the messages: 6 early go-backs, 43 packets sent twice).
TEST(AdaptiveRto, APacedMessageEndIsNotLateBeforeItIsSent) {
  CcConfig cc;
  cc.algorithm = CcAlgorithm::kDcqcn;
  cc.dcqcn.rpg_max_rate = 10;
  cc.dcqcn.pacer_burst_bytes = 0;
  EngineHarness h({.latency = Nanos(100'000), .seed = 4, .cc = cc});
  PairOptions o;
  o.timeout = 16;  // 268 ms
  o.buffer_size = size_t{kMsg} * 4;
  QpPair p = h.connect(o);
  std::mt19937_64 rng(9);
  for (uint8_t& b : p.a.buf) b = static_cast<uint8_t>(rng());
  for (int k = 0; k < 4; ++k) {
    const Sge sge = p.a.sge(static_cast<size_t>(k) * kMsg, kMsg);
    SendWr wr;
    wr.wr_id = static_cast<uint64_t>(k);
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.send_flags = kSendSignaled;
    wr.sg_list = {&sge, 1};
    wr.rdma = {p.b.addr(static_cast<size_t>(k) * kMsg), p.b.mr.rkey};
    ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  }
  const auto wcs = h.wait_wcs(0, p.a.send_cq, 4, std::chrono::seconds(2));
  ASSERT_EQ(wcs.size(), 4u);
  for (const Wc& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.end(), p.b.buf.begin()));
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kRoceAdpRetrans), 0u);
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kRetransmittedPkts), 0u);
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kLocalAckTimeoutErr), 0u);
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kSentPkts), 4u * 64u);
  // The 256 packets at 10 Mb/s: about 225 ms, with no go-back stretching it.
  EXPECT_LT(h.now() - TimePoint(0), Nanos(240'000'000));
}

}  // namespace
}  // namespace uroce::test
