// Round trips from AckReq requests to the ACKs that cover them, with Karn's rule on
// retransmissions; narrated packet by packet with exact times.
#include "telemetry/rtt_tracker.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "wire/packet.hpp"

namespace uroce::telemetry {
namespace {

using std::chrono::microseconds;

constexpr std::array<uint8_t, 16> kPeer = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};
constexpr uint32_t kLocalQpn = 0x11;
constexpr uint32_t kRemoteQpn = 0x12;

std::vector<uint8_t> packet(uint8_t opcode, uint32_t dqpn, uint32_t psn, bool ackreq,
                            uint8_t syndrome = 0x1f) {
  wire::Headers h;
  h.bth.opcode = opcode;
  h.bth.dqpn = dqpn;
  h.bth.psn = Psn(psn);
  h.bth.ackreq = ackreq;
  h.aeth.syndrome = syndrome;
  std::vector<uint8_t> buf(256);
  const size_t n = wire::build_packet(h, {}, buf);
  buf.resize(n);
  return buf;
}

transport::PacketMeta to_peer() {
  transport::PacketMeta m;
  m.ip.dst = kPeer;
  return m;
}

class RttTest : public ::testing::Test {
 protected:
  void SetUp() override { t_.set_peer(kLocalQpn, kPeer, kRemoteQpn); }
  void send(int64_t us, uint32_t psn, bool ackreq) {
    auto p = packet(0x04 /* RC SEND ONLY */, kRemoteQpn, psn, ackreq);
    t_.on_sent(microseconds(us), to_peer(), p);
  }
  void ack(int64_t us, uint32_t psn, uint8_t syndrome = 0x1f) {
    auto p = packet(0x11 /* ACK */, kLocalQpn, psn, false, syndrome);
    t_.on_received(microseconds(us), transport::PacketMeta{}, p);
  }
  const RttHistogram& h() { return *t_.histogram(kLocalQpn); }
  RttTracker t_;
};

TEST_F(RttTest, AckEndsTheSampleOfTheRequestItCovers) {
  send(100, 5, true);  // send PSN 5 with AckReq at 100 us
  ack(130, 5);         // its ACK at 130 us: one sample of 30 us
  EXPECT_EQ(h().count, 1u);
  EXPECT_EQ(h().sum_ns, 30000u);
  EXPECT_EQ(h().buckets[5], 1u);  // (16 us, 32 us]
  EXPECT_EQ(t_.acks_received(kLocalQpn), 1u);
}

TEST_F(RttTest, CoalescedAckAnswersTheNewestRequestItCovers) {
  send(0, 1, true);
  send(10, 2, false);  // no AckReq: never a sample
  send(20, 3, true);
  ack(50, 3);  // covers 1..3: one sample, from PSN 3 (30 us), not PSN 1 (50 us)
  EXPECT_EQ(h().count, 1u);
  EXPECT_EQ(h().sum_ns, 30000u);
}

TEST_F(RttTest, NaksAndRnrNaksDoNotEndASample) {
  send(0, 7, true);
  ack(10, 7, 0x60);  // NAK PSN sequence error
  ack(20, 7, 0x2e);  // RNR NAK
  EXPECT_EQ(h().count, 0u);
  ack(40, 7);
  EXPECT_EQ(h().count, 1u);
  EXPECT_EQ(h().sum_ns, 40000u);
}

TEST_F(RttTest, RetransmittedPsnsGiveNoSample) {
  send(0, 6, true);
  send(5000, 6, true);  // resent after a timeout: the ACK could answer either copy
  ack(5010, 6);
  EXPECT_EQ(h().count, 0u);
  send(6000, 7, true);  // new PSNs sample again
  ack(6020, 7);
  EXPECT_EQ(h().count, 1u);
  EXPECT_EQ(h().sum_ns, 20000u);
}

TEST_F(RttTest, PsnWrapIsSerialArithmetic) {
  send(0, 0xFFFFFF, true);
  send(1, 0, true);
  ack(11, 0);  // covers 0xFFFFFF and 0
  EXPECT_EQ(h().count, 1u);
  EXPECT_EQ(h().sum_ns, 10000u);
}

// The sizes that tell a path MTU problem from a lost peer: a 1052-byte request answered,
// then a 4124-byte one (sent twice) that is not; IPv4 adds 28 bytes to the UDP payload.
TEST_F(RttTest, SizesSeparateAnsweredFromUnansweredRequests) {
  auto small = packet(0x04, kRemoteQpn, 1, true);
  small.resize(1024);
  t_.on_sent(microseconds(0), to_peer(), small);
  ack(10, 1);
  auto big = packet(0x04, kRemoteQpn, 2, true);
  big.resize(4096);
  t_.on_sent(microseconds(20), to_peer(), big);
  t_.on_sent(microseconds(90), to_peer(), big);  // retransmitted
  auto resp = packet(0x11, kLocalQpn, 1, false, 0x1f);
  resp.resize(600);  // a stale ACK (PSN 1) answers nothing new
  t_.on_received(microseconds(95), transport::PacketMeta{}, resp);
  const PacketSizes s = t_.sizes(kLocalQpn);
  EXPECT_EQ(s.largest_answered, 1024u + 28);
  EXPECT_EQ(s.largest_unanswered, 4096u + 28);
  EXPECT_EQ(s.largest_received, 600u + 28);
  ack(100, 2);
  EXPECT_EQ(t_.sizes(kLocalQpn).largest_answered, 4096u + 28);
  EXPECT_EQ(t_.sizes(kLocalQpn).largest_unanswered, 0u);
}

// A pipelined stream: the ACK covers the AckReq request but not the ones sent after it;
// the answered size still counts (a bandwidth test never has everything acknowledged).
TEST_F(RttTest, AnAckOfAnAckReqRequestAnswersItsSizeWhilePipelined) {
  auto first = packet(0x0a /* RC WRITE ONLY */, kRemoteQpn, 1, true);
  first.resize(1056);
  t_.on_sent(microseconds(0), to_peer(), first);
  auto next = packet(0x0a, kRemoteQpn, 2, false);
  next.resize(1056);
  t_.on_sent(microseconds(1), to_peer(), next);
  ack(10, 1);
  EXPECT_EQ(t_.sizes(kLocalQpn).largest_answered, 1056u + 28);
  EXPECT_EQ(t_.sizes(kLocalQpn).largest_unanswered, 0u);
  t_.on_sent(microseconds(90), to_peer(), next);  // PSN 2 retransmitted: unanswered again
  EXPECT_EQ(t_.sizes(kLocalQpn).largest_unanswered, 1056u + 28);
}

// Heavy go-back-N loss: the stream rewinds before its AckReq packet is answered, so Karn's
// rule leaves no sample, and it never gets everything acknowledged. An ACK that covers the
// oldest full-size PSN still proves full-size packets cross the path (no MTU verdict).
TEST_F(RttTest, AnAckOfARewoundStreamAnswersItsSizeWithoutASample) {
  auto write = [&](int64_t us, uint32_t psn, bool ackreq) {
    auto p = packet(0x07 /* RC WRITE MIDDLE */, kRemoteQpn, psn, ackreq);
    p.resize(1056);
    t_.on_sent(microseconds(us), to_peer(), p);
  };
  for (uint32_t psn = 10; psn <= 13; ++psn) write(psn, psn, psn == 13);
  for (uint32_t psn = 11; psn <= 13; ++psn) write(100 + psn, psn, psn == 13);  // NAK'd from 11
  EXPECT_EQ(t_.sizes(kLocalQpn).largest_unanswered, 1056u + 28);
  ack(150, 9);  // covers none of them: nothing answered yet
  EXPECT_EQ(t_.sizes(kLocalQpn).largest_answered, 0u);
  ack(160, 10);  // PSN 10 arrived: a 1084-byte packet crossed
  EXPECT_EQ(t_.sizes(kLocalQpn).largest_answered, 1056u + 28);
  EXPECT_EQ(t_.sizes(kLocalQpn).largest_unanswered, 0u);
  EXPECT_EQ(h().count, 0u);  // and still no sample (PSN 13 was resent)
}

TEST_F(RttTest, PacketsOfOtherQpsAreIgnored) {
  auto p = packet(0x04, 0x99, 1, true);
  t_.on_sent(microseconds(0), to_peer(), p);
  auto a = packet(0x11, 0x77, 1, false);
  t_.on_received(microseconds(5), transport::PacketMeta{}, a);
  EXPECT_EQ(h().count, 0u);
  EXPECT_EQ(t_.histogram(0x77), nullptr);
}

// The tracker remembers the last packet's QP; a peer moved to another QP by set_peer, and a
// QP forgotten, must not keep receiving samples through what it remembered.
TEST_F(RttTest, APeerMovedToAnotherQpAndAForgottenQpLeaveNothingBehind) {
  constexpr uint32_t kOtherQpn = 0x21;
  send(0, 1, true);
  ack(10, 1);                                 // QP 0x11: one sample, and both lookups remembered
  t_.set_peer(kOtherQpn, kPeer, kRemoteQpn);  // the same peer QP now talks to QP 0x21
  send(20, 2, true);
  t_.on_received(microseconds(50), transport::PacketMeta{}, packet(0x11, kOtherQpn, 2, false));
  EXPECT_EQ(h().count, 1u);  // QP 0x11 kept its one sample
  ASSERT_NE(t_.histogram(kOtherQpn), nullptr);
  EXPECT_EQ(t_.histogram(kOtherQpn)->count, 1u);
  EXPECT_EQ(t_.histogram(kOtherQpn)->sum_ns, 30000u);
  t_.forget(kOtherQpn);
  send(60, 3, true);  // to a peer no QP talks to now
  t_.on_received(microseconds(70), transport::PacketMeta{}, packet(0x11, kOtherQpn, 3, false));
  EXPECT_EQ(t_.histogram(kOtherQpn), nullptr);
  ack(80, 3);  // QP 0x11 sent nothing since PSN 1
  EXPECT_EQ(h().count, 1u);
  EXPECT_EQ(t_.acks_received(kLocalQpn), 2u);
}

TEST(RttHistogramTest, QuantileBounds) {
  RttHistogram h;
  for (int i = 0; i < 99; ++i) h.add(microseconds(3));  // bucket 2: <= 4 us
  h.add(std::chrono::milliseconds(3));                  // bucket 12: <= 4.096 ms
  EXPECT_EQ(h.quantile_bound_ns(0.5), 4000u);
  EXPECT_EQ(h.quantile_bound_ns(1.0), 4096000u);
  h.add(std::chrono::seconds(2));  // beyond the last bound: +Inf
  EXPECT_EQ(h.buckets[kRttBuckets], 1u);
}

}  // namespace
}  // namespace uroce::telemetry
