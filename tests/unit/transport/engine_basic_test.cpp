// Basic behaviour of the transport engine, end to end between two engines in virtual time:
// every RC operation, multi-packet messages at each MTU, zero-byte messages, the PSN wrap,
// UC and UD basics, a lossy transfer, and the exact packets, completions and counters.
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "engine_harness.hpp"
#include "transport/qp_state.hpp"
#include "transport/ud.hpp"
#include "wire/icrc.hpp"

namespace uroce::test {
namespace {

using namespace transport;
using wire::Op;

void fill_pattern(std::span<uint8_t> s, uint32_t seed) {
  for (size_t i = 0; i < s.size(); ++i)
    s[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xFF);
}

uint8_t rc(Op op) {
  return wire::make_opcode(wire::Transport::kRc, op);
}

// Opcodes engine `from` sent, in order.
std::vector<uint8_t> opcodes_from(EngineHarness& h, int from) {
  std::vector<uint8_t> v;
  for (const auto& p : h.log()) {
    if (p.from == from) v.push_back(p.opcode());
  }
  return v;
}

uint64_t counter(Engine& e, Counter c) {
  return e.counters()[c];
}

// ---------------------------------------------------------------------------------------
// State machine.

class StateMachineTest : public ::testing::Test {
 protected:
  StateMachineTest() : engine_(EngineConfig{}) {
    pd_ = engine_.alloc_pd().value();
    cq_ = engine_.create_cq(16).value();
  }
  uint32_t make_qp(QpType type) {
    QpInitAttr init;
    init.qp_type = type;
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.cap = {8, 8, 1, 1, 0};
    return engine_.create_qp(pd_, init).value().qpn;
  }
  QpState state(uint32_t qpn) {
    QpAttr a;
    QpInitAttr i;
    EXPECT_TRUE(engine_.query_qp(qpn, a, i).is_ok());
    return a.qp_state;
  }
  static QpAttr rc_attr(QpState s) {
    QpAttr a;
    a.qp_state = s;
    a.port_num = 1;
    a.path_mtu = Mtu::k1024;
    a.ah_attr.is_global = true;
    a.ah_attr.port_num = 1;
    a.max_rd_atomic = 3;
    a.max_dest_rd_atomic = 5;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    return a;
  }
  Engine engine_;
  PdId pd_{};
  CqId cq_{};
};

constexpr uint32_t kRcInit = kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags;
constexpr uint32_t kRcRtr =
    kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
constexpr uint32_t kRcRts =
    kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;

TEST_F(StateMachineTest, RcFullBringUpAndRoundedDepths) {
  const uint32_t qpn = make_qp(QpType::kRc);
  EXPECT_EQ(state(qpn), QpState::kReset);
  ASSERT_TRUE(engine_.modify_qp(qpn, rc_attr(QpState::kInit), kRcInit).is_ok());
  ASSERT_TRUE(engine_.modify_qp(qpn, rc_attr(QpState::kRtr), kRcRtr).is_ok());
  ASSERT_TRUE(engine_.modify_qp(qpn, rc_attr(QpState::kRts), kRcRts).is_ok());
  QpAttr a;
  QpInitAttr i;
  ASSERT_TRUE(engine_.query_qp(qpn, a, i).is_ok());
  EXPECT_EQ(a.qp_state, QpState::kRts);
  EXPECT_EQ(a.max_rd_atomic, 4);       // 3 rounded up to a power of two (rxe)
  EXPECT_EQ(a.max_dest_rd_atomic, 8);  // 5 -> 8
}

TEST_F(StateMachineTest, MissingRequiredOrExtraAttributeIsEinval) {
  const uint32_t qpn = make_qp(QpType::kRc);
  // RESET->INIT without ACCESS_FLAGS.
  Status s = engine_.modify_qp(qpn, rc_attr(QpState::kInit), kRcInit & ~kQpAccessFlags);
  EXPECT_EQ(s.code(), EINVAL);
  // RESET->INIT with QKEY (a UD attribute): rejected, not ignored.
  s = engine_.modify_qp(qpn, rc_attr(QpState::kInit), kRcInit | kQpQkey);
  EXPECT_EQ(s.code(), EINVAL);
  EXPECT_EQ(state(qpn), QpState::kReset);
  ASSERT_TRUE(engine_.modify_qp(qpn, rc_attr(QpState::kInit), kRcInit).is_ok());
  // INIT->RTR without MIN_RNR_TIMER (required for RC).
  s = engine_.modify_qp(qpn, rc_attr(QpState::kRtr), kRcRtr & ~kQpMinRnrTimer);
  EXPECT_EQ(s.code(), EINVAL);
  // IBV_QP_CAP is never allowed.
  s = engine_.modify_qp(qpn, rc_attr(QpState::kRtr), kRcRtr | kQpCap);
  EXPECT_EQ(s.code(), EINVAL);
  EXPECT_EQ(state(qpn), QpState::kInit);
}

TEST_F(StateMachineTest, InvalidTransitions) {
  const uint32_t qpn = make_qp(QpType::kRc);
  EXPECT_EQ(engine_.modify_qp(qpn, rc_attr(QpState::kErr), kQpState).code(), EINVAL);  // RESET->ERR
  EXPECT_EQ(engine_.modify_qp(qpn, rc_attr(QpState::kRtr), kRcRtr).code(), EINVAL);    // RESET->RTR
  ASSERT_TRUE(engine_.modify_qp(qpn, rc_attr(QpState::kInit), kRcInit).is_ok());
  EXPECT_EQ(engine_.modify_qp(qpn, rc_attr(QpState::kRts), kRcRts).code(), EINVAL);    // INIT->RTS
  ASSERT_TRUE(engine_.modify_qp(qpn, rc_attr(QpState::kErr), kQpState).is_ok());       // INIT->ERR
  EXPECT_EQ(engine_.modify_qp(qpn, rc_attr(QpState::kInit), kRcInit).code(), EINVAL);  // ERR->INIT
  ASSERT_TRUE(engine_.modify_qp(qpn, rc_attr(QpState::kErr), kQpState).is_ok());       // ERR->ERR
  ASSERT_TRUE(engine_.modify_qp(qpn, rc_attr(QpState::kReset), kQpState).is_ok());     // ->RESET
  EXPECT_EQ(state(qpn), QpState::kReset);
}

TEST_F(StateMachineTest, ValueChecks) {
  const uint32_t qpn = make_qp(QpType::kRc);
  ASSERT_TRUE(engine_.modify_qp(qpn, rc_attr(QpState::kInit), kRcInit).is_ok());
  QpAttr a = rc_attr(QpState::kRtr);
  a.path_mtu = static_cast<Mtu>(6);
  EXPECT_EQ(engine_.modify_qp(qpn, a, kRcRtr).code(), EINVAL);
  a = rc_attr(QpState::kRtr);
  a.ah_attr.is_global = false;
  EXPECT_EQ(engine_.modify_qp(qpn, a, kRcRtr).code(), EINVAL);
  ASSERT_TRUE(engine_.modify_qp(qpn, rc_attr(QpState::kRtr), kRcRtr).is_ok());
  a = rc_attr(QpState::kRts);
  a.timeout = 32;
  EXPECT_EQ(engine_.modify_qp(qpn, a, kRcRts).code(), EINVAL);
  a = rc_attr(QpState::kRts);
  a.max_rd_atomic = 129;
  EXPECT_EQ(engine_.modify_qp(qpn, a, kRcRts).code(), EINVAL);
  // Bits beyond IBV_QP_DEST_QPN (RATE_LIMIT) are EOPNOTSUPP, like rxe.
  EXPECT_EQ(engine_.modify_qp(qpn, rc_attr(QpState::kRts), kRcRts | kQpRateLimit).code(),
            EOPNOTSUPP);
  EXPECT_EQ(state(qpn), QpState::kRtr);
}

TEST_F(StateMachineTest, UdAndUcMasks) {
  const uint32_t ud = make_qp(QpType::kUd);
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.qkey = 0x1234;
  // UD: ACCESS_FLAGS is not an UD attribute.
  EXPECT_EQ(engine_.modify_qp(ud, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags).code(),
            EINVAL);
  ASSERT_TRUE(engine_.modify_qp(ud, a, kQpState | kQpPkeyIndex | kQpPort | kQpQkey).is_ok());
  a.qp_state = QpState::kRtr;
  EXPECT_EQ(engine_.modify_qp(ud, a, kQpState | kQpPathMtu).code(), EINVAL);
  ASSERT_TRUE(engine_.modify_qp(ud, a, kQpState).is_ok());
  a.qp_state = QpState::kRts;
  EXPECT_EQ(engine_.modify_qp(ud, a, kQpState).code(), EINVAL);  // SQ_PSN required
  ASSERT_TRUE(engine_.modify_qp(ud, a, kQpState | kQpSqPsn).is_ok());

  const uint32_t uc = make_qp(QpType::kUc);
  ASSERT_TRUE(engine_.modify_qp(uc, rc_attr(QpState::kInit), kRcInit).is_ok());
  // UC may not pass MAX_DEST_RD_ATOMIC / MIN_RNR_TIMER.
  EXPECT_EQ(engine_.modify_qp(uc, rc_attr(QpState::kRtr), kRcRtr).code(), EINVAL);
  ASSERT_TRUE(engine_
                  .modify_qp(uc, rc_attr(QpState::kRtr),
                             kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn)
                  .is_ok());
  EXPECT_EQ(engine_.modify_qp(uc, rc_attr(QpState::kRts), kRcRts).code(), EINVAL);
  ASSERT_TRUE(engine_.modify_qp(uc, rc_attr(QpState::kRts), kQpState | kQpSqPsn).is_ok());
}

TEST_F(StateMachineTest, CurStateMustBeRtrToSqe) {
  const uint32_t qpn = make_qp(QpType::kRc);
  ASSERT_TRUE(engine_.modify_qp(qpn, rc_attr(QpState::kInit), kRcInit).is_ok());
  QpAttr a = rc_attr(QpState::kInit);
  a.cur_qp_state = QpState::kInit;
  EXPECT_EQ(engine_.modify_qp(qpn, a, kQpState | kQpCurState).code(), EINVAL);
}

TEST_F(StateMachineTest, TableMatchesRxe) {
  // Spot checks of the transcribed table (docs/rxe-facts.md §1).
  EXPECT_EQ(transition_masks(QpType::kGsi, QpState::kReset, QpState::kInit).required,
            kQpPkeyIndex | kQpQkey);
  EXPECT_EQ(transition_masks(QpType::kRc, QpState::kSqe, QpState::kRts).optional, 0u);
  EXPECT_TRUE(transition_masks(QpType::kRc, QpState::kSqe, QpState::kRts).valid);
  EXPECT_FALSE(transition_masks(QpType::kRc, QpState::kRts, QpState::kRtr).valid);
  EXPECT_FALSE(transition_masks(QpType::kUd, QpState::kReset, QpState::kErr).valid);
  EXPECT_EQ(transition_masks(QpType::kUc, QpState::kSqd, QpState::kSqd).optional,
            kQpAv | kQpAltPath | kQpAccessFlags | kQpPkeyIndex | kQpPathMigState);
}

TEST_F(StateMachineTest, PostRecvInResetIsEinvalAndErrFlushes) {
  const uint32_t qpn = make_qp(QpType::kRc);
  std::vector<uint8_t> buf(64);
  const MrInfo mr = engine_.reg_mr(pd_, buf.data(), buf.size(), kAccessLocalWrite).value();
  const Sge sge{mr.addr, 64, mr.lkey};
  RecvWr r;
  r.wr_id = 7;
  r.sg_list = {&sge, 1};
  EXPECT_EQ(engine_.post_recv(qpn, r).code(), EINVAL);
  ASSERT_TRUE(engine_.modify_qp(qpn, rc_attr(QpState::kInit), kRcInit).is_ok());
  ASSERT_TRUE(engine_.post_recv(qpn, r).is_ok());
  SendWr s = make_wr(WrOpcode::kSend, {&sge, 1}, 9);
  EXPECT_EQ(engine_.post_send(TimePoint{0}, qpn, s).code(), EINVAL);  // not RTS yet
  ASSERT_TRUE(engine_.modify_qp(qpn, rc_attr(QpState::kErr), kQpState).is_ok());
  std::array<Wc, 4> wc;
  ASSERT_EQ(engine_.poll_cq(cq_, wc), 1);
  EXPECT_EQ(wc[0].wr_id, 7u);
  EXPECT_EQ(wc[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kRecv);
  // Posting in ERR completes at once with a flush.
  r.wr_id = 8;
  ASSERT_TRUE(engine_.post_recv(qpn, r).is_ok());
  ASSERT_TRUE(engine_.post_send(TimePoint{0}, qpn, s).is_ok());
  ASSERT_EQ(engine_.poll_cq(cq_, wc), 2);
  EXPECT_EQ(wc[0].wr_id, 8u);
  EXPECT_EQ(wc[1].wr_id, 9u);
  EXPECT_EQ(wc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(wc[1].opcode, WcOpcode::kSend);
}

TEST_F(StateMachineTest, MemoryRegistrationRules) {
  std::vector<uint8_t> buf(64);
  EXPECT_EQ(engine_.reg_mr(pd_, buf.data(), buf.size(), kAccessRemoteWrite).status().code(),
            EINVAL);
  const MrInfo a = engine_.reg_mr(pd_, buf.data(), buf.size(), kAccessLocalWrite).value();
  const MrInfo b = engine_.reg_mr(pd_, buf.data(), buf.size(), kAccessLocalWrite).value();
  EXPECT_NE(a.lkey, a.rkey);
  EXPECT_NE(a.lkey, b.lkey);
  EXPECT_EQ(engine_.dealloc_pd(pd_).code(), EBUSY);
  EXPECT_TRUE(engine_.dereg_mr(a.lkey).is_ok());
  EXPECT_EQ(engine_.dereg_mr(a.lkey).code(), EINVAL);
}

// ---------------------------------------------------------------------------------------
// RC operations.

class RcTest : public ::testing::Test {
 protected:
  EngineHarness h;
};

TEST_F(RcTest, SendRecvExactPacketsCompletionsAndCounters) {
  QpPair p = h.connect({});
  fill_pattern(std::span(p.a.buf).first(100), 1);
  const Sge rsge = p.b.sge(0, 4096);
  ASSERT_TRUE(post_recv(p.b, 77, {&rsge, 1}).is_ok());
  const Sge ssge = p.a.sge(0, 100);
  SendWr wr = make_wr(WrOpcode::kSendWithImm, {&ssge, 1}, 55);
  wr.imm_data = 0xDEADBEEF;
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());

  auto rwc = h.wait_wcs(1, p.b.recv_cq, 1, 1ms);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].wr_id, 77u);
  EXPECT_EQ(rwc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rwc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rwc[0].byte_len, 100u);
  EXPECT_EQ(rwc[0].imm_data, 0xDEADBEEFu);
  EXPECT_EQ(rwc[0].wc_flags, kWcGrh | kWcWithImm);
  EXPECT_EQ(rwc[0].qp_num, p.b.qpn);
  EXPECT_EQ(rwc[0].src_qp, 0u);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + 100, p.b.buf.begin()));

  auto swc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].wr_id, 55u);
  EXPECT_EQ(swc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(swc[0].opcode, WcOpcode::kSend);
  EXPECT_EQ(swc[0].byte_len, 100u);

  ASSERT_EQ(h.log().size(), 2u);
  const wire::ParsedPacket req = h.log()[0].parse();
  EXPECT_EQ(req.hdr.bth.opcode, rc(Op::kSendOnlyImm));
  EXPECT_EQ(req.hdr.bth.psn.value(), 0x100u);
  EXPECT_TRUE(req.hdr.bth.ackreq);
  EXPECT_EQ(req.hdr.bth.dqpn, p.b.qpn);
  EXPECT_EQ(req.hdr.bth.pkey, 0xFFFF);
  EXPECT_EQ(req.hdr.immdt, 0xDEADBEEFu);
  const wire::ParsedPacket ack = h.log()[1].parse();
  EXPECT_EQ(ack.hdr.bth.opcode, rc(Op::kAcknowledge));
  EXPECT_EQ(ack.hdr.bth.psn.value(), 0x100u);
  EXPECT_EQ(ack.hdr.aeth.syndrome, 0x1F);
  EXPECT_EQ(ack.hdr.aeth.msn, 1u);
  EXPECT_FALSE(ack.hdr.bth.ackreq);
  // Both directions use the same rxe-derived UDP source port, in 0xC000..0xFFFF, and the
  // ICRC verifies for ID 0 / DF.
  EXPECT_EQ(h.log()[0].meta.ip.sport, h.log()[1].meta.ip.sport);
  EXPECT_GE(h.log()[0].meta.ip.sport, 0xC000);
  EXPECT_EQ(wire::verify_icrc_udp(h.log()[0].meta.ip, h.log()[0].bytes), wire::IcrcResult::kOk);

  EXPECT_EQ(counter(*p.a.engine, Counter::kSentPkts), 1u);
  EXPECT_EQ(counter(*p.b.engine, Counter::kRcvdPkts), 1u);
  EXPECT_EQ(counter(*p.b.engine, Counter::kSentPkts), 1u);
  EXPECT_EQ(counter(*p.a.engine, Counter::kRdmaSends), 1u);
  EXPECT_EQ(counter(*p.b.engine, Counter::kRdmaRecvs), 1u);
  EXPECT_TRUE(h.run_until_idle(1s));
}

TEST_F(RcTest, UnsignaledSendHasNoCompletionButSqSigAllHas) {
  QpPair p = h.connect({});
  const Sge rsge = p.b.sge(0, 64);
  ASSERT_TRUE(post_recv(p.b, 1, {&rsge, 1}).is_ok());
  ASSERT_TRUE(post_recv(p.b, 2, {&rsge, 1}).is_ok());
  const Sge ssge = p.a.sge(0, 8);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&ssge, 1}, 10, 0)).is_ok());
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&ssge, 1}, 11)).is_ok());
  auto rwc = h.wait_wcs(1, p.b.recv_cq, 2, 1ms);
  ASSERT_EQ(rwc.size(), 2u);
  auto swc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  h.run_until_idle(1s);
  auto more = h.poll(0, p.a.send_cq);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_TRUE(more.empty());
  EXPECT_EQ(swc[0].wr_id, 11u);
}

TEST_F(RcTest, WriteAndWriteWithImm) {
  QpPair p = h.connect({});
  fill_pattern(std::span(p.a.buf).first(3000), 3);
  const Sge ssge = p.a.sge(0, 3000);
  SendWr wr = make_wr(WrOpcode::kRdmaWrite, {&ssge, 1}, 1);
  wr.rdma = {p.b.addr(1000), p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  auto swc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(swc[0].opcode, WcOpcode::kRdmaWrite);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + 3000, p.b.buf.begin() + 1000));
  EXPECT_EQ(opcodes_from(h, 0),
            (std::vector<uint8_t>{rc(Op::kWriteFirst), rc(Op::kWriteMiddle), rc(Op::kWriteLast)}));
  EXPECT_EQ(h.log()[0].parse().hdr.reth.dma_len, 3000u);
  EXPECT_FALSE(h.log()[0].parse().hdr.bth.ackreq);
  EXPECT_TRUE(h.log()[2].parse().hdr.bth.ackreq);
  EXPECT_TRUE(h.poll(1, p.b.recv_cq).empty());  // a plain WRITE consumes no receive WQE

  // WRITE with immediate: consumes a receive WQE, byte_len = RETH DMA length.
  const Sge rsge = p.b.sge(100000, 16);
  ASSERT_TRUE(post_recv(p.b, 42, {&rsge, 1}).is_ok());
  const Sge ssge2 = p.a.sge(0, 2500);
  SendWr w2 = make_wr(WrOpcode::kRdmaWriteWithImm, {&ssge2, 1}, 2, kSendSignaled | kSendSolicited);
  w2.rdma = {p.b.addr(50000), p.b.mr.rkey};
  w2.imm_data = 0x01020304;
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, w2).is_ok());
  auto rwc = h.wait_wcs(1, p.b.recv_cq, 1, 1ms);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].wr_id, 42u);
  EXPECT_EQ(rwc[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rwc[0].byte_len, 2500u);
  EXPECT_EQ(rwc[0].imm_data, 0x01020304u);
  EXPECT_EQ(rwc[0].wc_flags, kWcGrh | kWcWithImm);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + 2500, p.b.buf.begin() + 50000));
  const auto& last = h.log().back().from == 0 ? h.log().back() : h.log()[h.log().size() - 2];
  EXPECT_EQ(last.opcode(), rc(Op::kWriteLastImm));
  EXPECT_TRUE(last.parse().hdr.bth.se);  // solicited on the last packet
}

TEST_F(RcTest, ReadMultiPacketWithMultipleSges) {
  QpPair p = h.connect({.mtu = Mtu::k512});
  fill_pattern(std::span(p.b.buf).subspan(4096, 2000), 9);
  const std::array<Sge, 3> sges = {p.a.sge(0, 700), p.a.sge(10000, 1), p.a.sge(20000, 1299)};
  SendWr wr = make_wr(WrOpcode::kRdmaRead, sges, 5);
  wr.rdma = {p.b.addr(4096), p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  auto swc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(swc[0].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(swc[0].byte_len, 2000u);
  std::vector<uint8_t> got(p.a.buf.begin(), p.a.buf.begin() + 700);
  got.push_back(p.a.buf[10000]);
  got.insert(got.end(), p.a.buf.begin() + 20000, p.a.buf.begin() + 21299);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), p.b.buf.begin() + 4096));
  // One request, four responses (2000 / 512), PSNs 0x200.. from B answer A's PSN 0x100..0x103.
  EXPECT_EQ(opcodes_from(h, 0), (std::vector<uint8_t>{rc(Op::kReadRequest)}));
  EXPECT_EQ(opcodes_from(h, 1),
            (std::vector<uint8_t>{rc(Op::kReadResponseFirst), rc(Op::kReadResponseMiddle),
                                  rc(Op::kReadResponseMiddle), rc(Op::kReadResponseLast)}));
  EXPECT_EQ(h.log()[1].psn(), 0x100u);
  EXPECT_EQ(h.log()[4].psn(), 0x103u);
  // The next request takes PSN 0x104.
  const Sge s1 = p.a.sge(0, 1);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kRdmaWrite, {&s1, 1}, 6)).is_ok());
  h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  EXPECT_EQ(h.log()[5].psn(), 0x104u);
}

TEST_F(RcTest, CompareSwapAndFetchAdd) {
  QpPair p = h.connect({});
  uint64_t target = 0x1111222233334444ull;
  std::memcpy(p.b.buf.data() + 64, &target, 8);
  const Sge res = p.a.sge(0, 8);
  SendWr cas = make_wr(WrOpcode::kAtomicCmpAndSwp, {&res, 1}, 1);
  cas.atomic = {p.b.addr(64), 0x1111222233334444ull, 0xAAAABBBBCCCCDDDDull, p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, cas).is_ok());
  auto wc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kCompSwap);
  EXPECT_EQ(wc[0].byte_len, 8u);
  uint64_t v = 0;
  std::memcpy(&v, p.a.buf.data(), 8);
  EXPECT_EQ(v, 0x1111222233334444ull);
  std::memcpy(&v, p.b.buf.data() + 64, 8);
  EXPECT_EQ(v, 0xAAAABBBBCCCCDDDDull);

  // A failing compare leaves memory alone and still returns the original.
  cas.wr_id = 2;
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, cas).is_ok());
  ASSERT_EQ(h.wait_wcs(0, p.a.send_cq, 1, 1ms).size(), 1u);
  std::memcpy(&v, p.a.buf.data(), 8);
  EXPECT_EQ(v, 0xAAAABBBBCCCCDDDDull);
  std::memcpy(&v, p.b.buf.data() + 64, 8);
  EXPECT_EQ(v, 0xAAAABBBBCCCCDDDDull);

  SendWr faa = make_wr(WrOpcode::kAtomicFetchAndAdd, {&res, 1}, 3);
  faa.atomic = {p.b.addr(64), 5, 0, p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, faa).is_ok());
  wc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kFetchAdd);
  std::memcpy(&v, p.a.buf.data(), 8);
  EXPECT_EQ(v, 0xAAAABBBBCCCCDDDDull);
  std::memcpy(&v, p.b.buf.data() + 64, 8);
  EXPECT_EQ(v, 0xAAAABBBBCCCCDDE2ull);
  EXPECT_EQ(h.log()[1].opcode(), rc(Op::kAtomicAcknowledge));
  EXPECT_EQ(counter(*p.b.engine, Counter::kRxAtomicRequests), 3u);
}

TEST_F(RcTest, MisalignedAtomicIsInvalidRequestAndBothQpsErr) {
  QpPair p = h.connect({});
  const Sge res = p.a.sge(0, 8);
  SendWr faa = make_wr(WrOpcode::kAtomicFetchAndAdd, {&res, 1}, 3);
  faa.atomic = {p.b.addr(65), 1, 0, p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, faa).is_ok());
  auto wc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(h.log()[1].parse().hdr.aeth.syndrome, 0x61);
  QpAttr a;
  QpInitAttr i;
  ASSERT_TRUE(p.b.engine->query_qp(p.b.qpn, a, i).is_ok());
  EXPECT_EQ(a.qp_state, QpState::kErr);
  ASSERT_TRUE(p.a.engine->query_qp(p.a.qpn, a, i).is_ok());
  EXPECT_EQ(a.qp_state, QpState::kErr);
}

TEST_F(RcTest, RemoteAccessErrorNeverTouchesMemory) {
  QpPair p = h.connect({});
  const Sge s = p.a.sge(0, 16);
  SendWr wr = make_wr(WrOpcode::kRdmaWrite, {&s, 1}, 1);
  wr.rdma = {p.b.addr(p.b.buf.size() - 8), p.b.mr.rkey};  // 8 bytes past the end
  fill_pattern(std::span(p.a.buf).first(16), 4);
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  const Sge s2 = p.a.sge(0, 4);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s2, 1}, 2)).is_ok());
  auto wc = h.wait_wcs(0, p.a.send_cq, 2, 1ms);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(wc[1].wr_id, 2u);
  EXPECT_EQ(wc[1].status, WcStatus::kWrFlushErr);
  EXPECT_TRUE(std::all_of(p.b.buf.end() - 8, p.b.buf.end(), [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(counter(*p.b.engine, Counter::kRespRemoteAccessErrors), 1u);
  EXPECT_EQ(counter(*p.a.engine, Counter::kReqRemoteAccessErrors), 1u);
}

// IBA 10.6.7.2: only memory windows and fast-registration MRs can be invalidated remotely.
// A SEND with Invalidate naming an ibv_reg_mr region is refused (rxe_invalidate_mr:
// -EINVAL): B's receive completes REM_INV_REQ_ERR, B's QP goes to ERR, A learns it from a
// NAK invalid request, and the region's R_Key stays valid.
TEST_F(RcTest, SendWithInvalidateOfARegisteredMrIsRefused) {
  QpPair p = h.connect({});
  std::vector<uint8_t> region(256, 0x5A);
  const MrInfo mr2 =
      p.b.engine
          ->reg_mr(p.b.pd, region.data(), region.size(), kAccessLocalWrite | kAccessRemoteRead)
          .value();
  const Sge rsge = p.b.sge(0, 64);
  ASSERT_TRUE(post_recv(p.b, 9, {&rsge, 1}).is_ok());
  const Sge s = p.a.sge(0, 10);
  SendWr inv = make_wr(WrOpcode::kSendWithInv, {&s, 1}, 1);
  inv.invalidate_rkey = mr2.rkey;
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, inv).is_ok());
  auto rwc = h.wait_wcs(1, p.b.recv_cq, 1, 1ms);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].wr_id, 9u);
  EXPECT_EQ(rwc[0].status, WcStatus::kRemInvReqErr);
  auto swc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, WcStatus::kRemInvReqErr);
  ASSERT_GE(h.log().size(), 2u);
  EXPECT_EQ(h.log()[0].opcode(), rc(Op::kSendOnlyInv));
  EXPECT_EQ(h.log()[1].opcode(), rc(Op::kAcknowledge));
  EXPECT_EQ(h.log()[1].parse().hdr.aeth.syndrome, wire::Aeth::nak(wire::NakCode::kInvalidRequest));
  EXPECT_EQ(counter(*p.b.engine, Counter::kRespRemoteInvalidRequest), 1u);
  EXPECT_EQ(counter(*p.a.engine, Counter::kReqRemoteInvalidRequest), 1u);
  EXPECT_TRUE(std::all_of(region.begin(), region.end(), [](uint8_t b) { return b == 0x5A; }));
}

class MtuTest : public ::testing::TestWithParam<Mtu> {};

TEST_P(MtuTest, MultiPacketSendAndWriteAtEachMtu) {
  EngineHarness h;
  const Mtu mtu = GetParam();
  const uint32_t m = mtu_bytes(mtu);
  QpPair p = h.connect({.mtu = mtu});
  const uint32_t len = 5 * m + 3;  // 6 packets, last one 3 bytes + 1 pad byte
  fill_pattern(std::span(p.a.buf).first(len), m);
  const Sge rsge = p.b.sge(0, len + 100);
  ASSERT_TRUE(post_recv(p.b, 1, {&rsge, 1}).is_ok());
  const Sge s = p.a.sge(0, len);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 1)).is_ok());
  auto rwc = h.wait_wcs(1, p.b.recv_cq, 1, 10ms);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].byte_len, len);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + len, p.b.buf.begin()));
  std::vector<uint8_t> ops = opcodes_from(h, 0);
  ASSERT_EQ(ops.size(), 6u);
  EXPECT_EQ(ops.front(), rc(Op::kSendFirst));
  EXPECT_EQ(ops.back(), rc(Op::kSendLast));
  const wire::ParsedPacket last = h.log()[5].parse();
  EXPECT_EQ(last.payload.size(), 3u);
  EXPECT_EQ(last.hdr.bth.padcnt, 1);
  EXPECT_EQ(h.log()[0].parse().payload.size(), m);

  SendWr wr = make_wr(WrOpcode::kRdmaWrite, {&s, 1}, 2);
  wr.rdma = {p.b.addr(len + 1000), p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  auto swc = h.wait_wcs(0, p.a.send_cq, 2, 10ms);
  ASSERT_EQ(swc.size(), 2u);
  EXPECT_EQ(swc[1].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + len, p.b.buf.begin() + len + 1000));
}

INSTANTIATE_TEST_SUITE_P(AllMtus, MtuTest,
                         ::testing::Values(Mtu::k256, Mtu::k512, Mtu::k1024, Mtu::k2048,
                                           Mtu::k4096));

TEST_F(RcTest, ZeroByteSendWriteRead) {
  QpPair p = h.connect({});
  const Sge rsge = p.b.sge(0, 16);
  ASSERT_TRUE(post_recv(p.b, 1, {&rsge, 1}).is_ok());
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {}, 1)).is_ok());
  SendWr w = make_wr(WrOpcode::kRdmaWrite, {}, 2);
  w.rdma = {0, 0};  // a zero-length WRITE needs no valid rkey
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, w).is_ok());
  SendWr r = make_wr(WrOpcode::kRdmaRead, {}, 3);
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, r).is_ok());
  auto swc = h.wait_wcs(0, p.a.send_cq, 3, 1ms);
  ASSERT_EQ(swc.size(), 3u);
  for (const Wc& wc : swc) {
    EXPECT_EQ(wc.status, WcStatus::kSuccess);
    EXPECT_EQ(wc.byte_len, 0u);
  }
  auto rwc = h.wait_wcs(1, p.b.recv_cq, 1, 1ms);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].byte_len, 0u);
  EXPECT_EQ(opcodes_from(h, 0),
            (std::vector<uint8_t>{rc(Op::kSendOnly), rc(Op::kWriteOnly), rc(Op::kReadRequest)}));
}

TEST_F(RcTest, PsnWrapAcrossAMultiPacketMessage) {
  QpPair p = h.connect({.mtu = Mtu::k256, .psn0 = 0xFFFFFE, .psn1 = 0xFFFFFF});
  const uint32_t len = 256 * 4;
  fill_pattern(std::span(p.a.buf).first(len), 11);
  const Sge rsge = p.b.sge(0, len);
  ASSERT_TRUE(post_recv(p.b, 1, {&rsge, 1}).is_ok());
  ASSERT_TRUE(post_recv(p.b, 2, {&rsge, 1}).is_ok());
  const Sge s = p.a.sge(0, len);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 1)).is_ok());
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 2)).is_ok());
  SendWr rd = make_wr(WrOpcode::kRdmaRead, {&s, 1}, 3);
  rd.rdma = {p.b.addr(0), p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, rd).is_ok());
  auto swc = h.wait_wcs(0, p.a.send_cq, 3, 10ms);
  ASSERT_EQ(swc.size(), 3u);
  for (const Wc& wc : swc) EXPECT_EQ(wc.status, WcStatus::kSuccess);
  std::vector<uint32_t> psns;
  for (const auto& pk : h.log()) {
    if (pk.from == 0) psns.push_back(pk.psn());
  }
  EXPECT_EQ(psns, (std::vector<uint32_t>{0xFFFFFE, 0xFFFFFF, 0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(counter(*p.a.engine, Counter::kRetransmittedPkts), 0u);
}

TEST_F(RcTest, InlineDataIsCopiedAtPost) {
  QpPair p = h.connect({});
  std::array<uint8_t, 40> local{};
  fill_pattern(local, 5);
  const Sge rsge = p.b.sge(0, 64);
  ASSERT_TRUE(post_recv(p.b, 1, {&rsge, 1}).is_ok());
  const Sge s{reinterpret_cast<uint64_t>(local.data()), 40, 0};  // no MR: inline
  ASSERT_TRUE(p.a.engine
                  ->post_send(h.now(), p.a.qpn,
                              make_wr(WrOpcode::kSend, {&s, 1}, 1, kSendSignaled | kSendInline))
                  .is_ok());
  const std::array<uint8_t, 40> expect = local;
  local.fill(0);  // the engine copied it already
  auto rwc = h.wait_wcs(1, p.b.recv_cq, 1, 1ms);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_TRUE(std::equal(expect.begin(), expect.end(), p.b.buf.begin()));
}

TEST_F(RcTest, ReceiveTooSmallIsLocalLengthError) {
  QpPair p = h.connect({});
  const Sge rsge = p.b.sge(0, 10);
  ASSERT_TRUE(post_recv(p.b, 1, {&rsge, 1}).is_ok());
  const Sge s = p.a.sge(0, 11);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 1)).is_ok());
  auto rwc = h.wait_wcs(1, p.b.recv_cq, 1, 1ms);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, WcStatus::kLocLenErr);
  auto swc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(counter(*p.b.engine, Counter::kRespLocalLengthError), 1u);
}

TEST_F(RcTest, RnrNakThenSuccessWhenReceivePosted) {
  QpPair p = h.connect({.min_rnr_timer = 4});  // 40 us
  const Sge s = p.a.sge(0, 32);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 1)).is_ok());
  h.run_for(Nanos(30000));
  EXPECT_EQ(counter(*p.b.engine, Counter::kSendRnrErr), 1u);
  EXPECT_EQ(counter(*p.a.engine, Counter::kRcvdRnrErr), 1u);
  EXPECT_EQ(h.log()[1].parse().hdr.aeth.syndrome, 0x24);
  const Sge rsge = p.b.sge(0, 64);
  ASSERT_TRUE(post_recv(p.b, 1, {&rsge, 1}).is_ok());
  auto swc = h.wait_wcs(0, p.a.send_cq, 1, 10ms);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, WcStatus::kSuccess);
  // The retry went out one RNR period (40 us) after the NAK arrived.
  ASSERT_GE(h.log().size(), 3u);
  EXPECT_EQ(h.log()[2].sent_at - h.log()[1].sent_at, Nanos(2000 + 40000));
}

TEST_F(RcTest, RnrRetryExhaustedCompletesWithRnrRetryExcErr) {
  QpPair p = h.connect({.rnr_retry = 2, .min_rnr_timer = 1});
  const Sge s = p.a.sge(0, 32);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 1)).is_ok());
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 2)).is_ok());
  auto swc = h.wait_wcs(0, p.a.send_cq, 2, 10ms);
  ASSERT_EQ(swc.size(), 2u);
  EXPECT_EQ(swc[0].status, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(swc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(counter(*p.a.engine, Counter::kRcvdRnrErr), 3u);  // first try + 2 retries
  EXPECT_EQ(counter(*p.a.engine, Counter::kRetryRnrExceededErr), 1u);
}

TEST_F(RcTest, RetransmitTimeoutAndRetryExceeded) {
  QpPair p = h.connect({.timeout = 10, .retry_cnt = 2});  // 4.19 ms
  h.faults(0).drop = 1.0;                                 // A's packets never arrive
  const Sge s = p.a.sge(0, 32);
  SendWr w = make_wr(WrOpcode::kRdmaWrite, {&s, 1}, 1);
  w.rdma = {p.b.addr(0), p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, w).is_ok());
  auto swc = h.wait_wcs(0, p.a.send_cq, 1, 1s);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(counter(*p.a.engine, Counter::kLocalAckTimeoutErr), 3u);
  EXPECT_EQ(counter(*p.a.engine, Counter::kRetransmittedPkts), 2u);
  EXPECT_EQ(counter(*p.a.engine, Counter::kRetryExceededErr), 1u);
  // Three transmissions, 4.096 us * 2^10 apart.
  ASSERT_EQ(h.log().size(), 3u);
  EXPECT_EQ(h.log()[1].sent_at - h.log()[0].sent_at, Nanos(4096 << 10));
  EXPECT_EQ(h.log()[2].sent_at - h.log()[1].sent_at, Nanos(4096 << 10));
}

TEST_F(RcTest, SequenceNakAndGoBackN) {
  QpPair p = h.connect({.mtu = Mtu::k256});
  // Drop A's second packet once.
  int seen = 0;
  h.faults(0).hook = [&](CapturedPacket&) {
    HookVerdict v;
    if (++seen == 2) v.action = HookVerdict::Action::kDrop;
    return v;
  };
  const uint32_t len = 256 * 6;
  fill_pattern(std::span(p.a.buf).first(len), 2);
  const Sge s = p.a.sge(0, len);
  SendWr w = make_wr(WrOpcode::kRdmaWrite, {&s, 1}, 1);
  w.rdma = {p.b.addr(0), p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, w).is_ok());
  auto swc = h.wait_wcs(0, p.a.send_cq, 1, 10ms);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + len, p.b.buf.begin()));
  // One NAK for the whole gap, then silence until the PSN arrives.
  EXPECT_EQ(counter(*p.b.engine, Counter::kOutOfSeqRequest), 4u);
  EXPECT_EQ(counter(*p.b.engine, Counter::kDropOutOfSequence), 3u);
  EXPECT_EQ(counter(*p.a.engine, Counter::kRcvdSeqErr), 1u);
  EXPECT_EQ(counter(*p.a.engine, Counter::kRetransmittedPkts), 5u);
  size_t naks = 0;
  for (const auto& pk : h.log()) {
    if (pk.from == 1 && pk.parse().hdr.aeth.syndrome == 0x60) {
      ++naks;
      EXPECT_EQ(pk.psn(), 0x101u);
    }
  }
  EXPECT_EQ(naks, 1u);
}

TEST_F(RcTest, LostReadResponseIsRecoveredWithPartialReread) {
  QpPair p = h.connect({.mtu = Mtu::k256});
  int responses = 0;
  h.faults(1).hook = [&](CapturedPacket& pk) {
    HookVerdict v;
    if ((pk.opcode() & 0x1F) >= 0x0D && (pk.opcode() & 0x1F) <= 0x10 && ++responses == 3) {
      v.action = HookVerdict::Action::kDrop;
    }
    return v;
  };
  const uint32_t len = 256 * 5;
  fill_pattern(std::span(p.b.buf).first(len), 8);
  const Sge s = p.a.sge(0, len);
  SendWr rd = make_wr(WrOpcode::kRdmaRead, {&s, 1}, 1);
  rd.rdma = {p.b.addr(0), p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, rd).is_ok());
  auto swc = h.wait_wcs(0, p.a.send_cq, 1, 10ms);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(p.b.buf.begin(), p.b.buf.begin() + len, p.a.buf.begin()));
  // The re-read asks for the tail only: PSN 0x102, VA + 512, length 768.
  const CapturedPacket* reread = nullptr;
  for (const auto& pk : h.log()) {
    if (pk.from == 0 && pk.opcode() == rc(Op::kReadRequest) && pk.psn() == 0x102) reread = &pk;
  }
  ASSERT_NE(reread, nullptr);
  EXPECT_EQ(reread->parse().hdr.reth.va, p.b.addr(512));
  EXPECT_EQ(reread->parse().hdr.reth.dma_len, 768u);
  EXPECT_EQ(counter(*p.b.engine, Counter::kDuplicateRequest), 1u);
}

TEST_F(RcTest, DuplicateAtomicIsReplayedNotReExecuted) {
  QpPair p = h.connect({});
  // Drop the first atomic ACK: the requester retries, the responder replays from its cache.
  int acks = 0;
  h.faults(1).hook = [&](CapturedPacket& pk) {
    HookVerdict v;
    if (pk.opcode() == rc(Op::kAtomicAcknowledge) && ++acks == 1)
      v.action = HookVerdict::Action::kDrop;
    return v;
  };
  const Sge res = p.a.sge(0, 8);
  SendWr faa = make_wr(WrOpcode::kAtomicFetchAndAdd, {&res, 1}, 1);
  faa.atomic = {p.b.addr(0), 10, 0, p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, faa).is_ok());
  auto swc = h.wait_wcs(0, p.a.send_cq, 1, 1s);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, WcStatus::kSuccess);
  uint64_t v = 0;
  std::memcpy(&v, p.b.buf.data(), 8);
  EXPECT_EQ(v, 10u);  // executed once
  std::memcpy(&v, p.a.buf.data(), 8);
  EXPECT_EQ(v, 0u);
  EXPECT_EQ(counter(*p.b.engine, Counter::kDuplicateRequest), 1u);
  EXPECT_EQ(counter(*p.b.engine, Counter::kRxAtomicRequests), 1u);
}

TEST_F(RcTest, AckRequestOnEvery66thPacket) {
  QpPair p = h.connect({.mtu = Mtu::k256});
  const uint32_t len = 256 * 140;
  const Sge s = p.a.sge(0, len);
  SendWr w = make_wr(WrOpcode::kRdmaWrite, {&s, 1}, 1);
  w.rdma = {p.b.addr(0), p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, w).is_ok());
  ASSERT_EQ(h.wait_wcs(0, p.a.send_cq, 1, 10ms).size(), 1u);
  std::vector<size_t> ackreq_at;
  size_t k = 0;
  for (const auto& pk : h.log()) {
    if (pk.from != 0) continue;
    if (pk.parse().hdr.bth.ackreq) ackreq_at.push_back(k);
    ++k;
  }
  EXPECT_EQ(ackreq_at, (std::vector<size_t>{65, 131, 139}));
}

TEST_F(RcTest, LossyBidirectionalTransfer) {
  EngineHarness lossy({.seed = 42});
  QpPair p = lossy.connect({.mtu = Mtu::k1024, .timeout = 8});
  for (int i = 0; i < 2; ++i) {
    lossy.faults(i).drop = 0.05;
    lossy.faults(i).duplicate = 0.02;
    lossy.faults(i).reorder = 0.02;
  }
  constexpr int kMessages = 40;
  constexpr uint32_t kLen = 5000;
  fill_pattern(std::span(p.a.buf).first(kLen * kMessages), 77);
  std::vector<Sge> rsges;
  for (int m = 0; m < kMessages; ++m) rsges.push_back(p.b.sge(static_cast<size_t>(m) * kLen, kLen));
  for (int m = 0; m < kMessages; ++m) ASSERT_TRUE(post_recv(p.b, m, {&rsges[m], 1}).is_ok());
  std::vector<Sge> ssges;
  for (int m = 0; m < kMessages; ++m) ssges.push_back(p.a.sge(static_cast<size_t>(m) * kLen, kLen));
  for (int m = 0; m < kMessages; ++m) {
    ASSERT_TRUE(p.a.engine
                    ->post_send(lossy.now(), p.a.qpn,
                                make_wr(m % 2 ? WrOpcode::kSend : WrOpcode::kSendWithImm,
                                        {&ssges[m], 1}, m))
                    .is_ok());
  }
  // And READs back the other way.
  const Sge back = p.b.sge(500000, 20000);
  SendWr rd = make_wr(WrOpcode::kRdmaRead, {&back, 1}, 1000);
  rd.rdma = {p.a.addr(0), p.a.mr.rkey};
  ASSERT_TRUE(p.b.engine->post_send(lossy.now(), p.b.qpn, rd).is_ok());

  auto swc = lossy.wait_wcs(0, p.a.send_cq, kMessages, 10s);
  auto rwc = lossy.wait_wcs(1, p.b.recv_cq, kMessages, 10s);
  auto bwc = lossy.wait_wcs(1, p.b.send_cq, 1, 10s);
  ASSERT_EQ(swc.size(), size_t{kMessages});
  ASSERT_EQ(rwc.size(), size_t{kMessages});
  ASSERT_EQ(bwc.size(), 1u);
  for (int m = 0; m < kMessages; ++m) {
    EXPECT_EQ(swc[m].wr_id, uint64_t(m));
    EXPECT_EQ(swc[m].status, WcStatus::kSuccess);
    EXPECT_EQ(rwc[m].wr_id, uint64_t(m));
    EXPECT_EQ(rwc[m].status, WcStatus::kSuccess);
    EXPECT_EQ(rwc[m].byte_len, kLen);
  }
  EXPECT_EQ(bwc[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + kLen * kMessages, p.b.buf.begin()));
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + 20000, p.b.buf.begin() + 500000));
  EXPECT_GT(counter(*p.a.engine, Counter::kRetransmittedPkts), 0u);
  EXPECT_GT(counter(*p.b.engine, Counter::kDuplicateRequest) +
                counter(*p.b.engine, Counter::kOutOfSeqRequest),
            0u);
}

// ---------------------------------------------------------------------------------------
// UC and UD.

TEST(UcTest, SendAndWriteAndGapDropsTheMessage) {
  EngineHarness h;
  QpPair p = h.connect({.type = QpType::kUc, .mtu = Mtu::k256});
  int seen = 0;
  h.faults(0).hook = [&](CapturedPacket&) {
    HookVerdict v;
    if (++seen == 2) v.action = HookVerdict::Action::kDrop;  // 2nd packet of message 1
    return v;
  };
  const uint32_t len = 700;  // 3 packets
  fill_pattern(std::span(p.a.buf).first(len), 6);
  const Sge r0 = p.b.sge(0, 1000);
  const Sge r1 = p.b.sge(2000, 1000);
  ASSERT_TRUE(post_recv(p.b, 1, {&r0, 1}).is_ok());
  ASSERT_TRUE(post_recv(p.b, 2, {&r1, 1}).is_ok());
  const Sge s = p.a.sge(0, len);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 1)).is_ok());
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 2)).is_ok());
  // UC completes at send time.
  auto swc = h.wait_wcs(0, p.a.send_cq, 2, 1ms);
  ASSERT_EQ(swc.size(), 2u);
  EXPECT_EQ(swc[0].status, WcStatus::kSuccess);
  h.run_until_idle(1s);
  // The first message was dropped; its receive WQE (wr_id 1) took the second message.
  auto rwc = h.poll(1, p.b.recv_cq);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].wr_id, 1u);
  EXPECT_EQ(rwc[0].byte_len, len);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + len, p.b.buf.begin()));
  EXPECT_EQ(counter(*p.b.engine, Counter::kDropUcMessage), 1u);
  for (const auto& pk : h.log()) EXPECT_EQ(pk.from, 0);  // UC never answers

  SendWr w = make_wr(WrOpcode::kRdmaWriteWithImm, {&s, 1}, 3);
  w.rdma = {p.b.addr(10000), p.b.mr.rkey};
  w.imm_data = 5;
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, w).is_ok());
  rwc = h.wait_wcs(1, p.b.recv_cq, 1, 1ms);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].wr_id, 2u);
  EXPECT_EQ(rwc[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + len, p.b.buf.begin() + 10000));
}

TEST(UdTest, SendWithGrhAreaQkeyAndSrcQp) {
  EngineHarness h({.active_mtu = Mtu::k1024});
  QpPair p = h.connect({.type = QpType::kUd});
  fill_pattern(std::span(p.a.buf).first(300), 12);
  const Sge r = p.b.sge(0, 1024 + 40);
  ASSERT_TRUE(post_recv(p.b, 5, {&r, 1}).is_ok());
  const Sge s = p.a.sge(0, 300);
  SendWr wr = make_wr(WrOpcode::kSendWithImm, {&s, 1}, 1);
  wr.imm_data = 99;
  wr.ud.ah.dgid = h.gid(1);
  wr.ud.ah.sgid = h.gid(0);
  wr.ud.ah.traffic_class = 0x28;
  wr.ud.remote_qpn = p.b.qpn;
  wr.ud.remote_qkey = 0x80000000;  // high bit: use the QP's Q_Key
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  auto rwc = h.wait_wcs(1, p.b.recv_cq, 1, 1ms);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rwc[0].byte_len, 340u);
  EXPECT_EQ(rwc[0].src_qp, p.a.qpn);
  EXPECT_EQ(rwc[0].wc_flags, kWcGrh | kWcWithImm);
  EXPECT_EQ(rwc[0].imm_data, 99u);
  // GRH area: 20 zero bytes, then the IPv4 header.
  EXPECT_TRUE(std::all_of(p.b.buf.begin(), p.b.buf.begin() + 20, [](uint8_t b) { return b == 0; }));
  const uint8_t* ip = p.b.buf.data() + 20;
  EXPECT_EQ(ip[0], 0x45);
  EXPECT_EQ(ip[1], 0x28);
  const size_t roce_len = h.log()[0].bytes.size();
  EXPECT_EQ((ip[2] << 8) | ip[3], int(20 + 8 + roce_len));
  EXPECT_EQ(ip[6], 0x40);  // DF
  EXPECT_EQ(ip[8], 64);
  EXPECT_EQ(ip[9], 17);
  EXPECT_EQ(std::vector<uint8_t>(ip + 12, ip + 16), (std::vector<uint8_t>{10, 0, 0, 1}));
  EXPECT_EQ(std::vector<uint8_t>(ip + 16, ip + 20), (std::vector<uint8_t>{10, 0, 0, 2}));
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (ip[i] << 8) | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  EXPECT_EQ(sum, 0xFFFFu);  // a valid header checksum
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + 300, p.b.buf.begin() + 40));
  const wire::ParsedPacket pk = h.log()[0].parse();
  EXPECT_EQ(pk.hdr.bth.opcode, wire::make_opcode(wire::Transport::kUd, Op::kSendOnlyImm));
  EXPECT_EQ(pk.hdr.deth.qkey, 0x11111111u);
  EXPECT_EQ(pk.hdr.deth.src_qp, p.a.qpn);
  EXPECT_FALSE(pk.hdr.bth.ackreq);
  EXPECT_EQ(h.log()[0].meta.tos, 0x28);
  auto swc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, WcStatus::kSuccess);
}

TEST(UdTest, WrongQkeyIsDroppedAndOversizeIsLocLenErr) {
  EngineHarness h({.active_mtu = Mtu::k1024});
  QpPair p = h.connect({.type = QpType::kUd});
  const Sge r = p.b.sge(0, 4096);
  ASSERT_TRUE(post_recv(p.b, 5, {&r, 1}).is_ok());
  const Sge s = p.a.sge(0, 100);
  SendWr wr = make_wr(WrOpcode::kSend, {&s, 1}, 1);
  wr.ud.ah.dgid = h.gid(1);
  wr.ud.ah.sgid = h.gid(0);
  wr.ud.remote_qpn = p.b.qpn;
  wr.ud.remote_qkey = 0x1234;
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  const Sge big = p.a.sge(0, 1025);
  SendWr w2 = wr;
  w2.wr_id = 2;
  w2.sg_list = {&big, 1};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, w2).is_ok());
  auto swc = h.wait_wcs(0, p.a.send_cq, 2, 1ms);
  h.run_until_idle(1s);
  ASSERT_EQ(swc.size(), 2u);
  EXPECT_EQ(swc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(swc[1].status, WcStatus::kLocLenErr);
  EXPECT_TRUE(h.poll(1, p.b.recv_cq).empty());
  EXPECT_EQ(counter(*p.b.engine, Counter::kDropBadQkey), 1u);
  EXPECT_EQ(h.log().size(), 1u);  // the oversized datagram never left
  QpAttr a;
  QpInitAttr i;
  ASSERT_TRUE(p.a.engine->query_qp(p.a.qpn, a, i).is_ok());
  EXPECT_EQ(a.qp_state, QpState::kRts);  // one bad datagram does not break a UD QP
}

TEST(UdTest, GrhAreaForIpv6IsTheIpv6Header) {
  PacketMeta meta;
  meta.ip.ipv6 = true;
  for (uint8_t i = 0; i < 16; ++i) {
    meta.ip.src[i] = static_cast<uint8_t>(0x20 + i);
    meta.ip.dst[i] = static_cast<uint8_t>(0x40 + i);
  }
  meta.tos = 0xAB;
  meta.ttl = 17;
  const std::array<uint8_t, kGrhLen> g = build_grh(meta, 100);
  EXPECT_EQ(g[0], 0x6A);               // version 6, traffic class high nibble
  EXPECT_EQ(g[1], 0xB0);               // traffic class low nibble, flow label 0
  EXPECT_EQ((g[4] << 8) | g[5], 108);  // UDP header + RoCE bytes
  EXPECT_EQ(g[6], 17);
  EXPECT_EQ(g[7], 17);
  EXPECT_TRUE(std::equal(meta.ip.src.begin(), meta.ip.src.end(), g.begin() + 8));
  EXPECT_TRUE(std::equal(meta.ip.dst.begin(), meta.ip.dst.end(), g.begin() + 24));
}

TEST(UdTest, GrhAreaUsesTheReceivedIpv4IdWhenKnown) {
  PacketMeta meta;
  meta.ip.src = ipv4_gid(192, 168, 1, 1);
  meta.ip.dst = ipv4_gid(192, 168, 1, 2);
  meta.ip.ipv4_id = 0x1234;
  meta.ip.ipv4_df = false;
  meta.ip_id_known = true;
  const std::array<uint8_t, kGrhLen> g = build_grh(meta, 60);
  EXPECT_EQ((g[24] << 8) | g[25], 0x1234);
  EXPECT_EQ(g[26], 0);  // no DF
  EXPECT_EQ((g[22] << 8) | g[23], 88);
}

// ---------------------------------------------------------------------------------------
// SRQ, CQ events, CNP.

TEST(SrqTest, LimitEventFiresOnceBelowTheLimit) {
  EngineHarness h;
  QpPair p = h.connect({.use_srq = true});
  const Sge r = p.b.sge(0, 64);
  RecvWr rw;
  rw.sg_list = {&r, 1};
  for (int k = 0; k < 4; ++k) {
    rw.wr_id = k;
    ASSERT_TRUE(p.b.engine->post_srq_recv(*p.b.srq, rw).is_ok());
  }
  ASSERT_TRUE(p.b.engine->modify_srq(*p.b.srq, {0, 0, 3}, kSrqLimit).is_ok());
  EXPECT_EQ(post_recv(p.b, 9, {&r, 1}).code(), EINVAL);  // the QP uses the SRQ
  const Sge s = p.a.sge(0, 8);
  for (int k = 0; k < 3; ++k) {
    ASSERT_TRUE(
        p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, k)).is_ok());
  }
  auto rwc = h.wait_wcs(1, p.b.recv_cq, 3, 1ms);
  ASSERT_EQ(rwc.size(), 3u);
  EXPECT_EQ(rwc[2].wr_id, 2u);
  std::array<AsyncEvent, 8> ev;
  ASSERT_EQ(p.b.engine->poll_events(ev), 1u);
  EXPECT_EQ(ev[0].type, EventType::kSrqLimitReached);
  EXPECT_EQ(ev[0].element, static_cast<uint32_t>(*p.b.srq));
  SrqAttr sa;
  ASSERT_TRUE(p.b.engine->query_srq(*p.b.srq, sa).is_ok());
  EXPECT_EQ(sa.srq_limit, 0u);  // disarmed after firing
}

TEST(CqTest, NotificationAndOverflow) {
  EngineHarness h;
  QpPair p = h.connect({.cqe = 2});
  ASSERT_TRUE(p.b.engine->req_notify_cq(p.b.recv_cq, true).is_ok());  // solicited only
  const Sge r = p.b.sge(0, 64);
  for (int k = 0; k < 4; ++k) ASSERT_TRUE(post_recv(p.b, k, {&r, 1}).is_ok());
  const Sge s = p.a.sge(0, 8);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 0)).is_ok());
  h.run_until_idle(1s);
  std::array<AsyncEvent, 8> ev;
  EXPECT_EQ(p.b.engine->poll_events(ev), 0u);  // not solicited
  ASSERT_TRUE(p.a.engine
                  ->post_send(h.now(), p.a.qpn,
                              make_wr(WrOpcode::kSend, {&s, 1}, 1, kSendSignaled | kSendSolicited))
                  .is_ok());
  h.run_until_idle(1s);
  ASSERT_EQ(p.b.engine->poll_events(ev), 1u);
  EXPECT_EQ(ev[0].type, EventType::kCqCompletion);
  EXPECT_EQ(ev[0].element, static_cast<uint32_t>(p.b.recv_cq));
  // The CQ holds 2: a third completion overflows.
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 2)).is_ok());
  h.run_until_idle(1s);
  ASSERT_EQ(p.b.engine->poll_events(ev), 1u);
  EXPECT_EQ(ev[0].type, EventType::kCqErr);
  EXPECT_EQ(counter(*p.b.engine, Counter::kCqOverflow), 1u);
}

class CountingCc : public CongestionControl {
 public:
  void on_cnp(TimePoint) override { ++cnps; }
  void on_ack(TimePoint, uint64_t bytes) override { acked += bytes; }
  void on_timer(TimePoint) override {}
  [[nodiscard]] TimePoint next_timer() const override { return kNever; }
  [[nodiscard]] uint64_t rate_bytes_per_sec() const override { return 0; }
  int cnps = 0;
  uint64_t acked = 0;
};

TEST(CnpTest, CnpIsCountedAndForwarded) {
  EngineHarness h;
  QpPair p = h.connect({});
  CountingCc cc;
  ASSERT_TRUE(p.a.engine->set_congestion_control(p.a.qpn, &cc).is_ok());
  wire::Headers hdr;
  hdr.bth.opcode = wire::kCnpOpcode;
  hdr.bth.becn = true;
  hdr.bth.dqpn = p.a.qpn;
  std::vector<uint8_t> bytes(64);
  const size_t n = wire::build_packet(hdr, {}, bytes);
  ASSERT_GT(n, 0u);
  bytes.resize(n);
  PacketMeta meta;
  meta.ip.src = h.gid(1);
  meta.ip.dst = h.gid(0);
  meta.ip.sport = 0xC123;
  meta.ip_id_known = true;
  wire::write_icrc(meta.ip, bytes);
  h.inject(1, bytes, meta);
  h.run_until_idle(1s);
  EXPECT_EQ(cc.cnps, 1);
  EXPECT_EQ(counter(*p.a.engine, Counter::kRpCnpHandled), 1u);
  EXPECT_EQ(p.a.engine->qp_counters(p.a.qpn)->get(Counter::kRpCnpHandled), 1u);
  // A corrupted copy is an ICRC error.
  bytes[14] ^= 1;
  h.inject(1, bytes, meta);
  h.run_until_idle(1s);
  EXPECT_EQ(counter(*p.a.engine, Counter::kIcrcErrors), 1u);
  EXPECT_EQ(cc.cnps, 1);
}

TEST(CounterNames, AreUniqueAndRxeNamed) {
  std::set<std::string_view> names(kCounterNames.begin(), kCounterNames.end());
  EXPECT_EQ(names.size(), kCounterCount);
  EXPECT_EQ(counter_name(Counter::kDuplicateRequest), "duplicate_request");
  EXPECT_EQ(counter_name(Counter::kRpCnpHandled), "rp_cnp_handled");
}

}  // namespace
}  // namespace uroce::test
