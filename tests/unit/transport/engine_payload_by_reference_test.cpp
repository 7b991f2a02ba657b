// Payload by reference (Engine::set_payload_by_reference): RC packets whose payload one SGE
// holds leave it in the source MR (TxSlot::payload) and seal the ICRC over it there; the
// harness joins each such packet as a socket's iovecs would. What must hold: the same bytes
// land, every packet's ICRC is right, and only the packets that may are built that way (not
// UC or UD, whose WQEs complete before their slots are sent; not inline data; not a packet
// that straddles two SGEs, nor one shorter than kPayloadByReferenceMin, which a copy moves
// for less).
#include <gtest/gtest.h>

#include "engine_harness.hpp"
#include "wire/icrc.hpp"

namespace uroce::test {
namespace {

using namespace transport;

void fill_pattern(std::span<uint8_t> s, uint32_t seed) {
  for (size_t i = 0; i < s.size(); ++i)
    s[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xFF);
}

// An RDMA WRITE of `s` into pair `p`'s target buffer at `offset`.
SendWr write_to(const QpPair& p, const Sge& s, uint64_t wr_id, size_t offset = 0) {
  SendWr wr = make_wr(WrOpcode::kRdmaWrite, {&s, 1}, wr_id);
  wr.rdma.remote_addr = p.b.addr(offset);
  wr.rdma.rkey = p.b.mr.rkey;
  return wr;
}

// Every packet engine `from` sent carries the ICRC of its bytes as they were joined.
void expect_icrcs_right(EngineHarness& h, int from = 0) {
  size_t checked = 0;
  for (const CapturedPacket& p : h.log()) {
    if (p.from != from) continue;
    EXPECT_EQ(wire::icrc_mismatch(p.meta.ip, p.bytes), 0u) << "packet " << checked;
    ++checked;
  }
  EXPECT_GT(checked, 0u);
  EXPECT_EQ(h.engine(1 - from).counters()[Counter::kIcrcErrors], 0u);
}

class PayloadByReferenceTest : public ::testing::Test {
 protected:
  PayloadByReferenceTest() { h.engine(0).set_payload_by_reference(true); }
  EngineHarness h;
};

TEST_F(PayloadByReferenceTest, RcWriteOfFourPacketsLandsByteForByte) {
  QpPair p = h.connect({.type = QpType::kRc, .mtu = Mtu::k4096});
  const uint32_t len = 3 * 4096 + 100;
  fill_pattern(std::span(p.a.buf).first(len), 3);
  const Sge s = p.a.sge(0, len);
  SendWr wr = write_to(p, s, 1, 64);
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  auto wc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + len, p.b.buf.begin() + 64));
  EXPECT_EQ(p.b.buf[63], 0);        // nothing before the target
  EXPECT_EQ(p.b.buf[64 + len], 0);  // nor after it
  // The last packet's 100 bytes are fewer than kPayloadByReferenceMin: copied.
  EXPECT_EQ(h.by_reference(0), 3u);
  expect_icrcs_right(h);
}

// The first packet of a SEND from two SGEs (2000 + 6000 bytes) takes bytes of both: copied.
// The second lies in the second SGE: by reference.
TEST_F(PayloadByReferenceTest, APacketAcrossTwoSgesIsCopiedTheNextIsNot) {
  QpPair p = h.connect({.type = QpType::kRc, .mtu = Mtu::k4096});
  fill_pattern(std::span(p.a.buf).first(16384), 5);
  const Sge r = p.b.sge(0, 8000);
  ASSERT_TRUE(post_recv(p.b, 1, {&r, 1}).is_ok());
  const Sge s[2] = {p.a.sge(0, 2000), p.a.sge(10000, 6000)};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, s, 2)).is_ok());
  auto rwc = h.wait_wcs(1, p.b.recv_cq, 1, 1ms);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rwc[0].byte_len, 8000u);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + 2000, p.b.buf.begin()));
  EXPECT_TRUE(std::equal(p.a.buf.begin() + 10000, p.a.buf.begin() + 16000, p.b.buf.begin() + 2000));
  EXPECT_EQ(h.by_reference(0), 1u);
  expect_icrcs_right(h);
}

// Go-back-N builds the resent packets again from the source: by reference too, same bytes.
TEST_F(PayloadByReferenceTest, ResentPacketsAreBuiltAgainFromTheSource) {
  QpPair p = h.connect({.type = QpType::kRc, .mtu = Mtu::k1024});
  const uint32_t len = 8 * 1024;
  fill_pattern(std::span(p.a.buf).first(len), 9);
  int seen = 0;
  h.faults(0).hook = [&seen](CapturedPacket&) {
    return HookVerdict{.action =
                           ++seen == 2 ? HookVerdict::Action::kDrop : HookVerdict::Action::kPass};
  };
  const Sge s = p.a.sge(0, len);
  SendWr wr = write_to(p, s, 1);
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  auto wc = h.wait_wcs(0, p.a.send_cq, 1, 100ms);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + len, p.b.buf.begin()));
  const uint64_t resent = h.qp_counter(0, p.a.qpn, Counter::kRetransmittedPkts);
  EXPECT_GE(resent, 7u);  // packets 2..8 again: the NAK names packet 2
  EXPECT_EQ(h.by_reference(0), 8u + resent);
  expect_icrcs_right(h);
}

// UC and UD complete a WQE once its last packet is built: the application may reuse the
// buffer before the slot is sent, so their payloads are copied. Inline data is in the WQE.
TEST_F(PayloadByReferenceTest, UcUdAndInlineAreCopied) {
  QpPair uc = h.connect({.type = QpType::kUc, .mtu = Mtu::k1024});
  fill_pattern(std::span(uc.a.buf).first(3000), 11);
  const Sge s = uc.a.sge(0, 3000);
  SendWr wr = write_to(uc, s, 1);
  ASSERT_TRUE(uc.a.engine->post_send(h.now(), uc.a.qpn, wr).is_ok());
  ASSERT_EQ(h.wait_wcs(0, uc.a.send_cq, 1, 1ms).size(), 1u);
  h.run_until([] { return false; }, 1ms);
  EXPECT_TRUE(std::equal(uc.a.buf.begin(), uc.a.buf.begin() + 3000, uc.b.buf.begin()));

  QpPair ud = h.connect({.type = QpType::kUd});
  fill_pattern(std::span(ud.a.buf).first(300), 12);
  const Sge r = ud.b.sge(0, 1024 + 40);
  ASSERT_TRUE(post_recv(ud.b, 5, {&r, 1}).is_ok());
  const Sge us = ud.a.sge(0, 300);
  SendWr uwr = make_wr(WrOpcode::kSend, {&us, 1}, 2);
  uwr.ud.ah.dgid = h.gid(1);
  uwr.ud.ah.sgid = h.gid(0);
  uwr.ud.remote_qpn = ud.b.qpn;
  uwr.ud.remote_qkey = 0x80000000;
  ASSERT_TRUE(ud.a.engine->post_send(h.now(), ud.a.qpn, uwr).is_ok());
  ASSERT_EQ(h.wait_wcs(1, ud.b.recv_cq, 1, 1ms).size(), 1u);
  EXPECT_TRUE(std::equal(ud.a.buf.begin(), ud.a.buf.begin() + 300, ud.b.buf.begin() + 40));

  QpPair rc = h.connect({.type = QpType::kRc});
  const uint8_t inline_bytes[40] = {1, 2, 3, 4, 5};
  const Sge is{reinterpret_cast<uint64_t>(inline_bytes), sizeof inline_bytes, 0};
  SendWr iwr = make_wr(WrOpcode::kRdmaWrite, {&is, 1}, 3, kSendInline | kSendSignaled);
  iwr.rdma.remote_addr = rc.b.addr(0);
  iwr.rdma.rkey = rc.b.mr.rkey;
  ASSERT_TRUE(rc.a.engine->post_send(h.now(), rc.a.qpn, iwr).is_ok());
  ASSERT_EQ(h.wait_wcs(0, rc.a.send_cq, 1, 1ms).size(), 1u);
  EXPECT_TRUE(std::equal(inline_bytes, inline_bytes + 40, rc.b.buf.begin()));

  EXPECT_EQ(h.by_reference(0), 0u);
  expect_icrcs_right(h);
}

// A READ's responses come from the responder's MR by reference too (the responder's device
// sends them before it releases the engine, as a request's): all but the last, whose 100
// bytes are copied. The requester gets every byte.
TEST(PayloadByReference, ReadResponsesLeaveFromTheRespondersMr) {
  EngineHarness h;
  h.engine(1).set_payload_by_reference(true);
  QpPair p = h.connect({.type = QpType::kRc, .mtu = Mtu::k4096});
  const uint32_t len = 3 * 4096 + 100;
  fill_pattern(std::span(p.b.buf).first(len + 32), 13);
  const Sge s = p.a.sge(16, len);
  SendWr wr = make_wr(WrOpcode::kRdmaRead, {&s, 1}, 4);
  wr.rdma.remote_addr = p.b.addr(32);
  wr.rdma.rkey = p.b.mr.rkey;
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  auto wc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(p.b.buf.begin() + 32, p.b.buf.begin() + 32 + len, p.a.buf.begin() + 16));
  EXPECT_EQ(p.a.buf[15], 0);
  EXPECT_EQ(p.a.buf[16 + len], 0);
  EXPECT_EQ(h.by_reference(1), 3u);
  EXPECT_EQ(h.by_reference(0), 0u);  // the READ request carries no payload
  expect_icrcs_right(h, 1);
}

// Off unless the driver asks for it.
TEST(PayloadByReference, OffByDefault) {
  EngineHarness h;
  QpPair p = h.connect({.type = QpType::kRc});
  const Sge s = p.a.sge(0, 5000);
  SendWr wr = write_to(p, s, 1);
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  ASSERT_EQ(h.wait_wcs(0, p.a.send_cq, 1, 1ms).size(), 1u);
  EXPECT_EQ(h.by_reference(0), 0u);
}

}  // namespace
}  // namespace uroce::test
