// RC flow control and error paths between two engines: READ/atomic depth, fences, the PSN
// window, SQD draining, implied NAKs, duplicates, invalid requests (bad opcode sequence,
// PMTU mismatch, no responder resources), local protection errors, flushes.
#include <gtest/gtest.h>

#include "engine_harness.hpp"
#include "wire/icrc.hpp"

namespace uroce::test {
namespace {

using namespace transport;
using wire::Op;

uint8_t rc(Op op) {
  return wire::make_opcode(wire::Transport::kRc, op);
}

QpState state_of(const Endpoint& ep) {
  QpAttr a;
  QpInitAttr i;
  EXPECT_TRUE(ep.engine->query_qp(ep.qpn, a, i).is_ok());
  return a.qp_state;
}

uint64_t counter(const Endpoint& ep, Counter c) {
  return ep.engine->counters()[c];
}

TEST(RcFlow, ReadDepthIsBoundedByMaxRdAtomic) {
  EngineHarness h;
  QpPair p = h.connect({.max_rd_atomic = 1});
  const Sge s = p.a.sge(0, 8);
  for (int k = 0; k < 3; ++k) {
    SendWr rd = make_wr(WrOpcode::kRdmaRead, {&s, 1}, k);
    rd.rdma = {p.b.addr(0), p.b.mr.rkey};
    ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, rd).is_ok());
  }
  ASSERT_EQ(h.wait_wcs(0, p.a.send_cq, 3, 1ms).size(), 3u);
  // Strict alternation: request, response, request, response, ...
  std::vector<int> from;
  for (const auto& pk : h.log()) from.push_back(pk.from);
  EXPECT_EQ(from, (std::vector<int>{0, 1, 0, 1, 0, 1}));
}

TEST(RcFlow, FenceWaitsForEarlierRead) {
  EngineHarness h;
  QpPair p = h.connect({});
  const Sge s = p.a.sge(0, 8);
  const Sge r = p.b.sge(0, 64);
  ASSERT_TRUE(post_recv(p.b, 1, {&r, 1}).is_ok());
  SendWr rd = make_wr(WrOpcode::kRdmaRead, {&s, 1}, 1);
  rd.rdma = {p.b.addr(100), p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, rd).is_ok());
  ASSERT_TRUE(p.a.engine
                  ->post_send(h.now(), p.a.qpn,
                              make_wr(WrOpcode::kSend, {&s, 1}, 2, kSendSignaled | kSendFence))
                  .is_ok());
  ASSERT_EQ(h.wait_wcs(0, p.a.send_cq, 2, 1ms).size(), 2u);
  ASSERT_GE(h.log().size(), 3u);
  EXPECT_EQ(h.log()[0].opcode(), rc(Op::kReadRequest));
  EXPECT_EQ(h.log()[1].opcode(), rc(Op::kReadResponseOnly));
  EXPECT_EQ(h.log()[2].opcode(), rc(Op::kSendOnly));
}

TEST(RcFlow, AtMost129UnackedPsns) {
  EngineHarness h;
  QpPair p = h.connect({.timeout = 20});
  h.faults(1).drop = 1.0;  // no ACK ever comes back
  const Sge s = p.a.sge(0, 4);
  for (int k = 0; k < 200; ++k) {
    SendWr w = make_wr(WrOpcode::kRdmaWrite, {&s, 1}, k, 0);
    w.rdma = {p.b.addr(0), p.b.mr.rkey};
    ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, w).is_ok());
  }
  h.run_for(Nanos(1000000));  // well before the 4.3 s timeout
  std::vector<uint32_t> psns;
  for (const auto& pk : h.log()) {
    if (pk.from == 0) psns.push_back(pk.psn());
  }
  ASSERT_EQ(psns.size(), 129u);  // comp.psn + 128 is the last PSN the window allows (rxe)
  EXPECT_EQ(psns.back(), 0x100u + 128);
}

TEST(RcFlow, SqdDrainsThenResumes) {
  EngineHarness h;
  QpPair p = h.connect({});
  const Sge s = p.a.sge(0, 4);
  SendWr w = make_wr(WrOpcode::kRdmaWrite, {&s, 1}, 1);
  w.rdma = {p.b.addr(0), p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, w).is_ok());
  h.run_until([&] { return !h.log().empty(); }, 1ms);  // the WRITE is on the wire
  QpAttr a;
  a.qp_state = QpState::kSqd;
  a.en_sqd_async_notify = 1;
  ASSERT_TRUE(p.a.engine->modify_qp(p.a.qpn, a, kQpState | kQpEnSqdAsyncNotify).is_ok());
  w.wr_id = 2;
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, w).is_ok());  // queued, not started
  auto wc = h.wait_wcs(0, p.a.send_cq, 2, 1ms);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  std::array<AsyncEvent, 4> ev;
  ASSERT_EQ(p.a.engine->poll_events(ev), 1u);
  EXPECT_EQ(ev[0].type, EventType::kSqDrained);
  EXPECT_EQ(ev[0].element, p.a.qpn);
  EXPECT_EQ(h.log().size(), 2u);  // WRITE and its ACK only
  a.qp_state = QpState::kRts;
  ASSERT_TRUE(p.a.engine->modify_qp(p.a.qpn, a, kQpState).is_ok());
  wc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 2u);
}

TEST(RcFlow, ImpliedNakWhenAckPassesAnUnansweredRead) {
  EngineHarness h;
  QpPair p = h.connect({});
  int responses = 0;
  h.faults(1).hook = [&](CapturedPacket& pk) {
    HookVerdict v;
    if (pk.opcode() == rc(Op::kReadResponseOnly) && ++responses == 1)
      v.action = HookVerdict::Action::kDrop;
    return v;
  };
  const Sge s = p.a.sge(0, 8);
  const Sge r = p.b.sge(0, 64);
  ASSERT_TRUE(post_recv(p.b, 1, {&r, 1}).is_ok());
  ASSERT_TRUE(post_recv(p.b, 2, {&r, 1}).is_ok());
  SendWr rd = make_wr(WrOpcode::kRdmaRead, {&s, 1}, 1);
  rd.rdma = {p.b.addr(100), p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, rd).is_ok());
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 2)).is_ok());
  auto wc = h.wait_wcs(0, p.a.send_cq, 2, 10ms);  // far less than the 67 ms ACK timeout
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wc[1].status, WcStatus::kSuccess);
  EXPECT_EQ(counter(p.a, Counter::kImpliedNakSeqErr), 1u);
  EXPECT_EQ(counter(p.a, Counter::kLocalAckTimeoutErr), 0u);
  // The SEND was retransmitted (go-back-N from the READ) and re-ACKed as a duplicate.
  EXPECT_EQ(counter(p.b, Counter::kDuplicateRequest), 2u);
  EXPECT_EQ(h.poll(1, p.b.recv_cq).size(), 1u);  // executed once
}

TEST(RcFlow, DuplicateSendIsReAckedWithEpsnMinusOne) {
  EngineHarness h;
  QpPair p = h.connect({.timeout = 8});  // 1 ms
  int acks = 0;
  h.faults(1).hook = [&](CapturedPacket& pk) {
    HookVerdict v;
    if (pk.opcode() == rc(Op::kAcknowledge) && ++acks == 1) v.action = HookVerdict::Action::kDrop;
    return v;
  };
  const Sge s = p.a.sge(0, 8);
  const Sge r = p.b.sge(0, 64);
  ASSERT_TRUE(post_recv(p.b, 1, {&r, 1}).is_ok());
  ASSERT_TRUE(post_recv(p.b, 2, {&r, 1}).is_ok());
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 1)).is_ok());
  auto wc = h.wait_wcs(0, p.a.send_cq, 1, 10ms);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(counter(p.b, Counter::kDuplicateRequest), 1u);
  EXPECT_EQ(counter(p.a, Counter::kLocalAckTimeoutErr), 1u);
  EXPECT_EQ(h.poll(1, p.b.recv_cq).size(), 1u);
  const wire::ParsedPacket reack = h.log().back().parse();
  EXPECT_EQ(reack.hdr.bth.opcode, rc(Op::kAcknowledge));
  EXPECT_EQ(reack.hdr.bth.psn.value(), 0x100u);  // ePSN - 1
  EXPECT_EQ(reack.hdr.aeth.msn, 1u);
}

TEST(RcErrors, PathMtuMismatchWriteIsInvalidRequest) {
  EngineHarness h;
  QpPair p = h.connect({.mtu = Mtu::k1024, .mtu1 = Mtu::k256});
  const Sge s = p.a.sge(0, 3000);
  SendWr w = make_wr(WrOpcode::kRdmaWrite, {&s, 1}, 1);
  w.rdma = {p.b.addr(0), p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, w).is_ok());
  auto wc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(state_of(p.a), QpState::kErr);
  EXPECT_EQ(state_of(p.b), QpState::kErr);
  EXPECT_EQ(counter(p.b, Counter::kRespRemoteInvalidRequest), 1u);
  EXPECT_TRUE(
      std::all_of(p.b.buf.begin(), p.b.buf.begin() + 3000, [](uint8_t b) { return b == 0; }));
}

TEST(RcErrors, PathMtuMismatchSendIsInvalidRequest) {
  EngineHarness h;
  QpPair p = h.connect({.mtu = Mtu::k256, .mtu1 = Mtu::k1024});
  const Sge r = p.b.sge(0, 4096);
  ASSERT_TRUE(post_recv(p.b, 1, {&r, 1}).is_ok());
  const Sge s = p.a.sge(0, 600);  // 256 + 256 + 88 at A's PMTU; B expects 1024-byte segments
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 1)).is_ok());
  auto wc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRemInvReqErr);
  auto rwc = h.poll(1, p.b.recv_cq);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(state_of(p.b), QpState::kErr);
}

TEST(RcErrors, ReadWithoutResponderResourcesIsInvalidRequest) {
  EngineHarness h;
  QpPair p = h.connect({.max_dest_rd_atomic = 0});
  const Sge s = p.a.sge(0, 8);
  SendWr rd = make_wr(WrOpcode::kRdmaRead, {&s, 1}, 1);
  rd.rdma = {p.b.addr(0), p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, rd).is_ok());
  auto wc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRemInvReqErr);
}

TEST(RcErrors, BadOpcodeSequenceNaksInvalidRequestAndErrs) {
  EngineHarness h;
  QpPair p = h.connect({});
  wire::Headers hdr;
  hdr.bth.opcode = rc(Op::kSendMiddle);
  hdr.bth.dqpn = p.b.qpn;
  hdr.bth.psn = Psn(0x100);  // B's ePSN
  std::vector<uint8_t> payload(1024, 0xAB);
  std::vector<uint8_t> bytes(2048);
  bytes.resize(wire::build_packet(hdr, payload, bytes));
  PacketMeta meta;
  meta.ip.src = h.gid(0);
  meta.ip.dst = h.gid(1);
  meta.ip_id_known = true;
  wire::write_icrc(meta.ip, bytes);
  h.inject(0, bytes, meta);
  h.run_until([&] { return !h.log().empty(); }, 1ms);
  ASSERT_EQ(h.log().size(), 1u);
  const wire::ParsedPacket nak = h.log()[0].parse();
  EXPECT_EQ(nak.hdr.bth.opcode, rc(Op::kAcknowledge));
  EXPECT_EQ(nak.hdr.aeth.syndrome, 0x61);
  EXPECT_EQ(nak.hdr.bth.psn.value(), 0x100u);
  EXPECT_EQ(nak.hdr.bth.dqpn, p.a.qpn);
  EXPECT_EQ(state_of(p.b), QpState::kErr);
}

TEST(RcErrors, BadLocalKeyIsLocalProtectionError) {
  EngineHarness h;
  QpPair p = h.connect({});
  const Sge bad{p.a.addr(0), 16, p.a.mr.lkey ^ 0x100000u};
  const Sge good = p.a.sge(0, 16);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&bad, 1}, 1)).is_ok());
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&good, 1}, 2)).is_ok());
  auto wc = h.wait_wcs(0, p.a.send_cq, 2, 1ms);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].status, WcStatus::kLocProtErr);
  EXPECT_EQ(wc[1].status, WcStatus::kWrFlushErr);
  EXPECT_TRUE(h.log().empty());
  EXPECT_EQ(state_of(p.a), QpState::kErr);
}

TEST(RcErrors, BadReceiveWqeIsRemoteOperationalError) {
  EngineHarness h;
  QpPair p = h.connect({});
  const Sge bad{p.b.addr(0), 64, p.b.mr.lkey ^ 0x100000u};
  ASSERT_TRUE(post_recv(p.b, 1, {&bad, 1}).is_ok());
  const Sge s = p.a.sge(0, 16);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 1)).is_ok());
  auto wc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRemOpErr);
  auto rwc = h.poll(1, p.b.recv_cq);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, WcStatus::kLocProtErr);
  EXPECT_EQ(counter(p.b, Counter::kRespRemoteOperationalError), 1u);
}

TEST(RcErrors, ModifyToErrFlushesOutstandingInOrder) {
  EngineHarness h;
  QpPair p = h.connect({});
  h.faults(0).drop = 1.0;
  const Sge s = p.a.sge(0, 16);
  for (int k = 0; k < 3; ++k) {
    ASSERT_TRUE(
        p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, k, 0)).is_ok());
  }
  h.run_for(Nanos(10000));
  QpAttr a;
  a.qp_state = QpState::kErr;
  ASSERT_TRUE(p.a.engine->modify_qp(p.a.qpn, a, kQpState).is_ok());
  auto wc = h.poll(0, p.a.send_cq);
  ASSERT_EQ(wc.size(), 3u);  // flushed WRs complete even when unsignaled
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(wc[k].wr_id, uint64_t(k));
    EXPECT_EQ(wc[k].status, WcStatus::kWrFlushErr);
  }
  EXPECT_EQ(p.a.engine->next_deadline(), kNever);  // no timer left armed
  EXPECT_EQ(counter(p.a, Counter::kReqCqeFlushError), 3u);
}

TEST(Resources, BusyObjectsCannotBeDestroyed) {
  EngineHarness h;
  QpPair p = h.connect({.use_srq = true});
  Engine& e = *p.a.engine;
  EXPECT_EQ(e.destroy_cq(p.a.send_cq).code(), EBUSY);
  EXPECT_EQ(e.destroy_srq(*p.a.srq).code(), EBUSY);
  EXPECT_EQ(e.dealloc_pd(p.a.pd).code(), EBUSY);
  ASSERT_TRUE(e.destroy_qp(p.a.qpn).is_ok());
  EXPECT_EQ(e.destroy_qp(p.a.qpn).code(), EINVAL);
  ASSERT_TRUE(e.destroy_cq(p.a.send_cq).is_ok());
  ASSERT_TRUE(e.destroy_cq(p.a.recv_cq).is_ok());
  ASSERT_TRUE(e.destroy_srq(*p.a.srq).is_ok());
  ASSERT_TRUE(e.dereg_mr(p.a.mr.lkey).is_ok());
  ASSERT_TRUE(e.dealloc_pd(p.a.pd).is_ok());
  // Packets for the destroyed QP are counted as bad QPN.
  const Sge s = p.b.sge(0, 4);
  SendWr w = make_wr(WrOpcode::kRdmaWrite, {&s, 1}, 1);
  ASSERT_TRUE(p.b.engine->post_send(h.now(), p.b.qpn, w).is_ok());
  h.run_for(Nanos(100000));
  EXPECT_EQ(counter(p.a, Counter::kDropBadQpn), 1u);
}

}  // namespace
}  // namespace uroce::test
