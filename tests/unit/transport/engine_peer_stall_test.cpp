// The adaptive timer of QPs that share one peer (transport/peer_clock.hpp): a peer that
// stalls delays every QP to it at once, and each QP's go-back then resent a whole window
// into the stall (64 QPs: 32 MiB of duplicates); now each expiry resends one packet while
// another QP's later packet is unanswered too. A loss the peer has shown (it answered a
// later packet of another QP) is still resent whole, at once; and tails lost on two QPs at
// once cost one probe more. Two engines, two RC QPs between them, virtual time.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>

#include "engine_harness.hpp"
#include "transport/peer_clock.hpp"

namespace uroce::test {
namespace {

using namespace transport;

constexpr uint32_t kMsg = 64 * 1024;  // 64 packets at path MTU 1024, AckReq on the last
constexpr int kSlots = 8;

struct TwoQps {
  EngineHarness h{{.latency = Nanos(2000), .seed = 41}};
  std::array<QpPair, 2> p;

  TwoQps() {
    PairOptions o;
    o.buffer_size = size_t{kMsg} * kSlots;
    for (int q = 0; q < 2; ++q) {
      p[q] = h.connect(o);
      std::mt19937_64 rng(100 + q);
      for (uint8_t& b : p[q].a.buf) b = static_cast<uint8_t>(rng());
    }
  }

  void write(int q, uint64_t wr_id, size_t off, uint32_t len) {
    const Sge sge = p[q].a.sge(off, len);
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.send_flags = kSendSignaled;
    wr.sg_list = {&sge, 1};
    wr.rdma = {p[q].b.addr(off), p[q].b.mr.rkey};
    ASSERT_TRUE(p[q].a.engine->post_send(h.now(), p[q].a.qpn, wr).is_ok());
  }

  // Both QPs post `n` 64 KiB WRITEs each, two outstanding per QP; every completion is a
  // success in order, and every byte arrives.
  void stream(int n) {
    std::array<int, 2> posted{};
    std::array<int, 2> done{};
    for (int q = 0; q < 2; ++q) {
      for (; posted[q] < 2; ++posted[q]) {
        write(q, static_cast<uint64_t>(posted[q]), size_t(posted[q] % kSlots) * kMsg, kMsg);
      }
    }
    // run_until returns when nothing is left to happen, and the completions that end a
    // round may post the next WRITEs only then: go on while they do.
    const TimePoint limit = h.now() + Nanos(5'000'000'000);
    auto all_done = [&] { return done[0] == n && done[1] == n; };
    while (!all_done() && h.now() < limit) {
      h.run_until(
          [&] {
            for (int q = 0; q < 2; ++q) {
              for (const Wc& wc : h.poll(0, p[q].a.send_cq)) {
                EXPECT_EQ(wc.status, WcStatus::kSuccess);
                EXPECT_EQ(wc.wr_id, static_cast<uint64_t>(done[q]));
                ++done[q];
                if (posted[q] < n) {
                  write(q, static_cast<uint64_t>(posted[q]), size_t(posted[q] % kSlots) * kMsg,
                        kMsg);
                  ++posted[q];
                }
              }
            }
            return all_done();
          },
          limit - h.now());
    }
    ASSERT_TRUE(all_done()) << done[0] << " and " << done[1] << " of " << n;
    for (int q = 0; q < 2; ++q) {
      EXPECT_TRUE(std::equal(p[q].a.buf.begin(), p[q].a.buf.end(), p[q].b.buf.begin()));
    }
  }

  uint64_t a(int q, Counter c) { return h.qp_counter(0, p[q].a.qpn, c); }
};

// The peer stops for 5 ms: what reaches it in that time is read when it resumes, in order,
// and nothing is lost, so every resend is a duplicate. Each QP's timer (RTO about 200 us,
// doubling) fires four times in the stall (after 0.2, 0.6, 1.4 and 3 ms; the next would be
// at 6.2 ms), and each expiry resends one packet. Whole go-backs resent 512 packets per QP.
TEST(PeerStall, EveryQpsTimerResendsOnePacketPerExpiryNotAWindow) {
  TwoQps t;
  const TimePoint from = t.h.now() + Nanos(20'000);  // a few WRITEs in
  const TimePoint to = from + Nanos(5'000'000);
  t.h.faults(0).hook = [&](CapturedPacket& pkt) {
    HookVerdict v;
    const TimePoint arrives = pkt.sent_at + Nanos(2000);
    if (!(arrives < from) && arrives < to) v.extra_delay = to - arrives;
    return v;
  };
  t.stream(40);  // 5,120 packets, well past the stall
  for (int q = 0; q < 2; ++q) {
    SCOPED_TRACE(q);
    EXPECT_EQ(t.a(q, Counter::kRoceAdpRetrans), 4u);
    EXPECT_EQ(t.a(q, Counter::kRetransmittedPkts), t.a(q, Counter::kRoceAdpRetrans));
    EXPECT_EQ(t.a(q, Counter::kLocalAckTimeoutErr), 0u);
    EXPECT_EQ(t.a(q, Counter::kCompleterRetryErr), 0u);
  }
  // The responder saw every resend as a duplicate.
  uint64_t resent = 0;
  uint64_t duplicates = 0;
  for (int q = 0; q < 2; ++q) {
    resent += t.a(q, Counter::kRetransmittedPkts);
    duplicates += t.h.qp_counter(1, t.p[q].b.qpn, Counter::kDuplicateRequest);
  }
  EXPECT_EQ(duplicates, resent);
}

// A warm-up WRITE on each QP gives the RTO its first sample (200 us, the floor).
void warm_up(TwoQps& t) {
  for (int q = 0; q < 2; ++q) {
    t.write(q, 100, 0, 8 * 1024);
    ASSERT_EQ(t.h.wait_wcs(0, t.p[q].a.send_cq, 1, 1s).size(), 1u);
  }
}

// QP 0's 8-packet WRITE loses its last packet (the only one asking for an ACK); QP 1's
// WRITE, posted 10 us later, is answered. So the peer got past QP 0's packet: it is lost,
// and the first expiry resends the WRITE's 8 packets at once, as with one QP.
TEST(PeerStall, ALossThePeerShowedIsResentWholeAtTheFirstExpiry) {
  TwoQps t;
  warm_up(t);
  bool dropped = false;
  t.h.faults(0).hook = [&](CapturedPacket& pkt) {
    HookVerdict v;
    const wire::Bth bth = pkt.parse().hdr.bth;
    if (!dropped && bth.dqpn == t.p[0].b.qpn && bth.ackreq) {
      dropped = true;
      v.action = HookVerdict::Action::kDrop;
    }
    return v;
  };
  const TimePoint start = t.h.now();
  t.write(0, 1, 8 * 1024, 8 * 1024);
  t.h.run_for(Nanos(10'000));
  t.write(1, 1, 8 * 1024, 8 * 1024);
  ASSERT_EQ(t.h.wait_wcs(0, t.p[1].a.send_cq, 1, 1s).size(), 1u);
  const auto wcs = t.h.wait_wcs(0, t.p[0].a.send_cq, 1, 1s);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(dropped);
  EXPECT_EQ(t.a(0, Counter::kRoceAdpRetrans), 1u);
  EXPECT_EQ(t.a(0, Counter::kRetransmittedPkts), 8u);
  EXPECT_EQ(t.a(1, Counter::kRetransmittedPkts), 0u);
  EXPECT_LT(t.h.now() - start, Nanos(230'000));
  EXPECT_TRUE(
      std::equal(t.p[0].a.buf.begin(), t.p[0].a.buf.begin() + 16 * 1024, t.p[0].b.buf.begin()));
}

// Both QPs lose the last packet of a WRITE posted in the same instant: nothing later is
// answered, so each first expiry probes. The probe (the WRITE's first packet) comes back
// as a duplicate answered up to the packet before the lost one; the next expiry resends
// that one. One packet more than a whole go-back, and 0.84 ms instead of 0.21 ms, far
// inside the configured timeout (67 ms): the price of not resending windows into stalls.
TEST(PeerStall, TailsLostOnTwoQpsAtOnceAreRecoveredByAProbeThenTheLostPacket) {
  TwoQps t;
  warm_up(t);
  std::array<bool, 2> dropped{};
  t.h.faults(0).hook = [&](CapturedPacket& pkt) {
    HookVerdict v;
    const wire::ParsedPacket parsed = pkt.parse();
    for (int q = 0; q < 2; ++q) {
      if (!dropped[q] && parsed.hdr.bth.dqpn == t.p[q].b.qpn && parsed.hdr.bth.ackreq) {
        dropped[q] = true;
        v.action = HookVerdict::Action::kDrop;
      }
    }
    return v;
  };
  const TimePoint start = t.h.now();
  t.write(0, 1, 8 * 1024, 8 * 1024);
  t.write(1, 1, 8 * 1024, 8 * 1024);
  for (int q = 0; q < 2; ++q) {
    SCOPED_TRACE(q);
    const auto wcs = t.h.wait_wcs(0, t.p[q].a.send_cq, 1, 1s);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
    EXPECT_TRUE(dropped[q]);
    EXPECT_EQ(t.a(q, Counter::kRoceAdpRetrans), 2u);
    EXPECT_EQ(t.a(q, Counter::kAdpRetransSpurious), 1u);  // the probe was a duplicate
    EXPECT_EQ(t.a(q, Counter::kRetransmittedPkts), 2u);
    EXPECT_TRUE(
        std::equal(t.p[q].a.buf.begin(), t.p[q].a.buf.begin() + 16 * 1024, t.p[q].b.buf.begin()));
  }
  // Probe at 204 us, answered 4 us later; Eifel's response raises the RTO to cover those
  // 208 us (SRTT 208, RTTVAR 104: 624 us); the lost packet leaves at 832 us.
  EXPECT_LT(t.h.now() - start, Nanos(900'000));
}

TEST(PeerClocks, APeerHasNotReachedAPacketUntilItAnswersOneSentNoSooner) {
  PeerClocks c;
  const std::array<uint8_t, 16> g1 = ipv4_gid(10, 0, 0, 2);
  const std::array<uint8_t, 16> g2 = ipv4_gid(10, 0, 0, 3);
  const uint16_t p = c.index_of(g1);
  EXPECT_EQ(c.index_of(g1), p);
  const uint16_t p2 = c.index_of(g2);
  EXPECT_NE(p2, p);
  const TimePoint t0 = TimePoint(Nanos(1000));
  c.note_sent(p, 5, t0);
  EXPECT_FALSE(c.not_reached(p, 5, t0));  // only QP 5 sent: nothing to compare with
  c.note_sent(p, 6, t0);                  // the same burst
  EXPECT_TRUE(c.not_reached(p, 5, t0));
  EXPECT_TRUE(c.not_reached(p, 6, t0));
  EXPECT_FALSE(c.not_reached(p2, 5, t0));  // another peer knows nothing of it
  c.note_sent(p, 6, t0 + Nanos(10));
  EXPECT_TRUE(c.not_reached(p, 5, t0));
  EXPECT_FALSE(c.not_reached(p, 6, t0 + Nanos(10)));  // QP 5 sent nothing since
  c.note_answered(p, t0 - Nanos(1));                  // older than QP 5's packet
  EXPECT_TRUE(c.not_reached(p, 5, t0));
  c.note_answered(p, t0 + Nanos(10));  // QP 6's later packet answered: QP 5's is lost
  EXPECT_FALSE(c.not_reached(p, 5, t0));
  EXPECT_EQ(c.not_reached(PeerClocks::kNone, 5, t0), false);
}

}  // namespace
}  // namespace uroce::test
