// The lossless hold queue of `uroce switch` (src/cli/switch_hold_queue.hpp): RC requests are
// recognised in real frame bytes (built here from the header layouts), the queue is FIFO, and
// a requester's go-back-N resend takes out exactly the held frames of its own QP from the
// resent PSN on, leaving every other frame and the order alone.
#include "cli/switch_hold_queue.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "test_frames.hpp"

namespace uroce::cli {
namespace {

using test::Bytes;

constexpr uint16_t kPort = 4791;
const UdpPortSet kPorts = UdpPortSet().set(kPort);

// BTH (12 bytes) + 4 payload bytes + ICRC placeholder: enough for the BTH reader.
Bytes bth(uint8_t opcode, uint32_t dest_qp, uint32_t psn) {
  Bytes b = {opcode, 0x00, 0xFF, 0xFF, 0x00};
  b.push_back(static_cast<uint8_t>(dest_qp >> 16));
  b.push_back(static_cast<uint8_t>(dest_qp >> 8));
  b.push_back(static_cast<uint8_t>(dest_qp));
  b.push_back(0x80);  // AckReq
  b.push_back(static_cast<uint8_t>(psn >> 16));
  b.push_back(static_cast<uint8_t>(psn >> 8));
  b.push_back(static_cast<uint8_t>(psn));
  for (int i = 0; i < 8; ++i) b.push_back(0);
  return b;
}

Bytes frame(uint8_t opcode, uint32_t dest_qp, uint32_t psn, uint8_t src_last = 3,
            uint16_t dport = kPort) {
  test::Ipv4Fields ip;
  ip.src[3] = src_last;
  return test::ethernet(0x0800, test::ipv4(ip, test::udp(50000, dport, bth(opcode, dest_qp, psn))));
}

constexpr uint8_t kWriteOnly = 0x0A, kSendMiddle = 0x01, kAck = 0x11, kReadResponse = 0x10,
                  kUdSendOnly = 0x64, kUcWriteOnly = 0x2A;

TEST(RcRequestOf, ReadsQpAndPsnOfRcRequestsOnly) {
  const auto w = rc_request_of(frame(kWriteOnly, 0x123456, 0xABCDEF), kPorts);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->dest_qp, 0x123456u);
  EXPECT_EQ(w->psn, 0xABCDEFu);
  EXPECT_EQ(w->src[15], 3);
  EXPECT_EQ(w->dst[15], 2);
  EXPECT_EQ(w->src[10], 0xFF);  // IPv4-mapped
  EXPECT_TRUE(rc_request_of(frame(kSendMiddle, 1, 2), kPorts).has_value());
  // Responses, other transports, another UDP port, a cut BTH, non-IP: not requests.
  EXPECT_FALSE(rc_request_of(frame(kAck, 1, 2), kPorts).has_value());
  EXPECT_FALSE(rc_request_of(frame(kReadResponse, 1, 2), kPorts).has_value());
  EXPECT_FALSE(rc_request_of(frame(kUdSendOnly, 1, 2), kPorts).has_value());
  EXPECT_FALSE(rc_request_of(frame(kUcWriteOnly, 1, 2), kPorts).has_value());
  UdpPortSet others;
  others.set(40001).set(40002);
  EXPECT_FALSE(rc_request_of(frame(kWriteOnly, 1, 2), others).has_value());
  EXPECT_TRUE(rc_request_of(frame(kWriteOnly, 1, 2, 3, 40001), others).has_value());
  EXPECT_TRUE(rc_request_of(frame(kWriteOnly, 1, 2, 3, 40002), others).has_value());
  EXPECT_FALSE(rc_request_of(frame(kWriteOnly, 1, 2, 3, 40003), others).has_value());
  // IPv6 and a VLAN tag.
  const auto v6 = rc_request_of(
      test::ethernet(0x86DD, test::ipv6(test::udp(1, kPort, bth(kWriteOnly, 9, 77)))), kPorts);
  ASSERT_TRUE(v6.has_value());
  EXPECT_EQ(v6->psn, 77u);
  EXPECT_EQ(v6->src[0], 0xFD);
  EXPECT_EQ(v6->dst[15], 0x2F);
  test::Ipv4Fields ip;
  const auto tagged = rc_request_of(
      test::ethernet(0x0800, test::ipv4(ip, test::udp(1, kPort, bth(kWriteOnly, 9, 78))),
                     {{0x8100, 5}}),
      kPorts);
  ASSERT_TRUE(tagged.has_value());
  EXPECT_EQ(tagged->psn, 78u);
  Bytes cut = frame(kWriteOnly, 1, 2);
  cut.resize(14 + 20 + 8 + 11);
  EXPECT_FALSE(rc_request_of(cut, kPorts).has_value());
  EXPECT_FALSE(rc_request_of(test::ethernet(0x0806, Bytes(28, 0)), kPorts).has_value());
}

// Pushes a frame in slot `slot` with the identity rc_request_of reads from its bytes.
struct Fixture {
  HoldQueue q{64};
  std::vector<uint32_t> gone;
  void push(uint32_t slot, const Bytes& f) {
    gone.clear();
    gone.reserve(64);
    q.push({slot, 7}, rc_request_of(f, kPorts), gone);
  }
  std::vector<uint32_t> drain() {
    std::vector<uint32_t> out;
    while (!q.empty()) {
      const HeldFrame h = q.pop();
      EXPECT_EQ(h.egress, 7u);
      out.push_back(h.slot);
    }
    return out;
  }
};

TEST(HoldQueue, AGoBackTakesOutItsQpsHeldFramesFromTheResentPsnOn) {
  Fixture t;
  // QP 5 sends PSNs 100..104, QP 9 (same hosts) and a non-RoCE frame in between.
  for (uint32_t i = 0; i < 5; ++i) t.push(i, frame(kWriteOnly, 5, 100 + i));
  t.push(10, frame(kWriteOnly, 9, 100));
  t.push(11, test::ethernet(0x0806, Bytes(28, 0)));
  t.push(12, frame(kWriteOnly, 9, 101));
  EXPECT_TRUE(t.gone.empty());
  // QP 5 goes back to 102: its held 102, 103 and 104 leave; 100 and 101 stay.
  t.push(20, frame(kWriteOnly, 5, 102));
  EXPECT_EQ(t.gone, (std::vector<uint32_t>{2, 3, 4}));
  EXPECT_EQ(t.q.size(), 6u);
  t.push(21, frame(kWriteOnly, 5, 103));
  EXPECT_TRUE(t.gone.empty());
  EXPECT_EQ(t.drain(), (std::vector<uint32_t>{0, 1, 10, 11, 12, 20, 21}));
}

TEST(HoldQueue, TheSamePsnAgainSupersedesAndOtherHostsAreOtherQps) {
  Fixture t;
  t.push(0, frame(kWriteOnly, 5, 7, /*src_last=*/3));
  t.push(1, frame(kWriteOnly, 5, 7, /*src_last=*/4));  // another requester, same QP number
  t.push(2, frame(kWriteOnly, 5, 7, /*src_last=*/3));  // a resend of slot 0
  EXPECT_EQ(t.gone, (std::vector<uint32_t>{0}));
  EXPECT_EQ(t.drain(), (std::vector<uint32_t>{1, 2}));
}

TEST(HoldQueue, PsnsCompareAcrossTheWrap) {
  Fixture t;
  t.push(0, frame(kWriteOnly, 5, 0xFFFFFE));
  t.push(1, frame(kWriteOnly, 5, 0xFFFFFF));
  t.push(2, frame(kWriteOnly, 5, 0x000000));  // after 0xFFFFFF: no go-back
  t.push(3, frame(kWriteOnly, 5, 0x000001));
  EXPECT_TRUE(t.gone.empty());
  t.push(4, frame(kWriteOnly, 5, 0xFFFFFF));  // back over the wrap
  EXPECT_EQ(t.gone, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(t.drain(), (std::vector<uint32_t>{0, 4}));
}

TEST(HoldQueue, ReleasedFramesAreNotSupersededAndResponsesNever) {
  Fixture t;
  t.push(0, frame(kWriteOnly, 5, 10));
  t.push(1, frame(kWriteOnly, 5, 11));
  EXPECT_EQ(t.q.pop().slot, 0u);
  EXPECT_EQ(t.q.pop().slot, 1u);
  // Nothing of QP 5 is held: a resend of 10 goes in as it is.
  t.push(2, frame(kWriteOnly, 5, 10));
  EXPECT_TRUE(t.gone.empty());
  // ACKs with the same PSN twice stay (a duplicate ACK is the responder's business).
  t.push(3, frame(kAck, 5, 10));
  t.push(4, frame(kAck, 5, 10));
  EXPECT_TRUE(t.gone.empty());
  EXPECT_EQ(t.drain(), (std::vector<uint32_t>{2, 3, 4}));
}

TEST(HoldQueue, QpsBeyondTheTableAreHeldWithoutSuperseding) {
  HoldQueue q(512);
  std::vector<uint32_t> gone;
  gone.reserve(512);
  uint32_t slot = 0;
  for (uint32_t qp = 0; qp < HoldQueue::kMaxFlows + 1; ++qp) {
    q.push({slot++, 0}, rc_request_of(frame(kWriteOnly, qp, 50), kPorts), gone);
  }
  const uint32_t last_qp = HoldQueue::kMaxFlows;
  q.push({slot++, 0}, rc_request_of(frame(kWriteOnly, last_qp, 50), kPorts), gone);
  EXPECT_TRUE(gone.empty());  // untracked QP: both copies held
  q.push({slot++, 0}, rc_request_of(frame(kWriteOnly, 0, 50), kPorts), gone);
  EXPECT_EQ(gone, (std::vector<uint32_t>{0}));  // tracked QP 0: its first copy leaves
  EXPECT_EQ(q.size(), HoldQueue::kMaxFlows + 2);
  // Once a tracked QP has nothing held, its entry serves another QP.
  while (!q.empty()) (void)q.pop();
  gone.clear();
  q.push({1, 0}, rc_request_of(frame(kWriteOnly, 1000, 8), kPorts), gone);
  q.push({2, 0}, rc_request_of(frame(kWriteOnly, 1000, 8), kPorts), gone);
  EXPECT_EQ(gone, (std::vector<uint32_t>{1}));
}

}  // namespace
}  // namespace uroce::cli
