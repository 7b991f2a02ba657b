// Error statuses between two engines: every work-completion error the transport can
// produce, on both sides, with the QP states and counters that go with it (IBA 10.7.2
// completion statuses, 10.3.1 the error state, 9.9 error classes; rxe behaviour from
// docs/rxe-facts.md §2d).
#include <gtest/gtest.h>

#include <string>

#include "engine_harness.hpp"
#include "script_harness.hpp"

namespace uroce::test {
namespace {

using namespace transport;
using script::expect_counters_exact;

// The counters of one QP, all of them: the listed ones as given, sent_pkts/bytes_sent as the
// wire log says, received traffic as given by the caller (0 by default), every other one 0.
void expect_qp_counters(EngineHarness& h, int side, uint32_t qpn,
                        std::vector<std::pair<Counter, uint64_t>> want) {
  uint64_t pkts = 0, bytes = 0;
  for (const CapturedPacket& p : h.log()) {
    if (p.from != side) continue;
    ++pkts;
    bytes += p.bytes.size();
  }
  const Counters& c = *h.engine(side).qp_counters(qpn);
  auto has = [&](Counter k) {
    return std::any_of(want.begin(), want.end(), [&](const auto& kv) { return kv.first == k; });
  };
  if (!has(Counter::kSentPkts)) want.emplace_back(Counter::kSentPkts, pkts);
  if (!has(Counter::kBytesSent)) want.emplace_back(Counter::kBytesSent, bytes);
  // Received traffic is the peer's sent traffic minus what the QP refused before counting.
  if (!has(Counter::kRcvdPkts)) want.emplace_back(Counter::kRcvdPkts, c[Counter::kRcvdPkts]);
  if (!has(Counter::kBytesRcvd)) want.emplace_back(Counter::kBytesRcvd, c[Counter::kBytesRcvd]);
  SCOPED_TRACE(std::string("engine ") + std::to_string(side) + " QP counters");
  expect_counters_exact(c, want);
}

QpState state_of(Engine& e, uint32_t qpn) {
  QpAttr a;
  QpInitAttr i;
  EXPECT_TRUE(e.query_qp(qpn, a, i).is_ok());
  return a.qp_state;
}

Status post(EngineHarness& h, const Endpoint& ep, uint64_t wr_id, WrOpcode op, size_t off,
            uint32_t len, uint64_t remote_addr = 0, uint32_t rkey = 0,
            uint32_t flags = kSendSignaled) {
  const Sge s = ep.sge(off, len);
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.sg_list = std::span<const Sge>(&s, 1);
  wr.rdma = {remote_addr, rkey};
  return ep.engine->post_send(h.now(), ep.qpn, wr);
}

void post_recv(const Endpoint& ep, uint64_t wr_id, size_t off, uint32_t len) {
  const Sge s = ep.sge(off, len);
  RecvWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = std::span<const Sge>(&s, 1);
  ASSERT_TRUE(ep.engine->post_recv(ep.qpn, wr).is_ok());
}

void expect_wc(const Wc& wc, uint64_t wr_id, WcStatus status, uint32_t qpn) {
  EXPECT_EQ(wc.wr_id, wr_id);
  EXPECT_EQ(wc.status, status);
  EXPECT_EQ(wc.qp_num, qpn);
}

// ---------------------------------------------------------------------------------------

// Nothing reaches the responder: the local ACK timer fires retry_cnt + 1 times, 4.096 us x
// 2^timeout apart, then RETRY_EXC_ERR, the next WR flushed, the requester QP in ERR. Each
// timeout resends the oldest unacknowledged packet alone (its probe: the rest follows only
// once a response shows the probe was needed), so nothing but the SEND is resent.
TEST(ErrorPaths, RetryExceeded) {
  EngineHarness h;
  PairOptions o;
  o.timeout = 8;  // 1048576 ns
  o.retry_cnt = 3;
  QpPair p = h.connect(o);
  h.faults(0).drop = 1.0;
  ASSERT_TRUE(post(h, p.a, 1, WrOpcode::kSend, 0, 64).is_ok());
  ASSERT_TRUE(post(h, p.a, 2, WrOpcode::kRdmaWrite, 0, 64, p.b.addr(0), p.b.mr.rkey).is_ok());
  const std::vector<Wc> wcs = h.wait_wcs(0, p.a.send_cq, 2, std::chrono::seconds(1));
  ASSERT_EQ(wcs.size(), 2u);
  expect_wc(wcs[0], 1, WcStatus::kRetryExcErr, p.a.qpn);
  expect_wc(wcs[1], 2, WcStatus::kWrFlushErr, p.a.qpn);
  EXPECT_EQ(h.now(), TimePoint(Nanos(4 * 1048576))) << "error after the 4th timeout exactly";
  EXPECT_EQ(state_of(h.engine(0), p.a.qpn), QpState::kErr);
  EXPECT_EQ(state_of(h.engine(1), p.b.qpn), QpState::kRts);
  EXPECT_EQ(h.log().size(), 5u) << "2 packets, then the first resent 3 times";
  expect_qp_counters(h, 0, p.a.qpn,
                     {{Counter::kLocalAckTimeoutErr, 4},
                      {Counter::kCompleterRetryErr, 3},
                      {Counter::kRetryExceededErr, 1},
                      {Counter::kRetransmittedPkts, 3},
                      {Counter::kReqCqeError, 1},
                      {Counter::kReqCqeFlushError, 1}});
}

// No receive WQE at the responder: RNR NAKs with its min_rnr_timer, rnr_retry retries, then
// RNR_RETRY_EXC_ERR. The responder is not in error (RNR is flow control, IBA 9.7.5.1.4).
TEST(ErrorPaths, RnrRetryExceeded) {
  EngineHarness h;
  PairOptions o;
  o.rnr_retry = 2;
  o.min_rnr_timer = 2;  // 20 us
  QpPair p = h.connect(o);
  ASSERT_TRUE(post(h, p.a, 1, WrOpcode::kSend, 0, 64).is_ok());
  ASSERT_TRUE(post(h, p.a, 2, WrOpcode::kSend, 0, 64).is_ok());
  const std::vector<Wc> wcs = h.wait_wcs(0, p.a.send_cq, 2, std::chrono::seconds(1));
  ASSERT_EQ(wcs.size(), 2u);
  expect_wc(wcs[0], 1, WcStatus::kRnrRetryExcErr, p.a.qpn);
  expect_wc(wcs[1], 2, WcStatus::kWrFlushErr, p.a.qpn);
  // 3 round trips of 4 us plus 2 waits of 20 us.
  EXPECT_EQ(h.now(), TimePoint(Nanos(3 * 4000 + 2 * 20000)));
  EXPECT_EQ(state_of(h.engine(0), p.a.qpn), QpState::kErr);
  EXPECT_EQ(state_of(h.engine(1), p.b.qpn), QpState::kRts);
  EXPECT_TRUE(h.poll(1, p.b.recv_cq).empty());
  expect_qp_counters(h, 0, p.a.qpn,
                     {{Counter::kRcvdRnrErr, 3},
                      {Counter::kRetryRnrExceededErr, 1},
                      {Counter::kRetransmittedPkts, 4},
                      {Counter::kReqCqeError, 1},
                      {Counter::kReqCqeFlushError, 1}});
  // B saw SEND 0x100 (RNR), 0x101 (silently dropped: a NAK is outstanding), twice more each.
  expect_qp_counters(h, 1, p.b.qpn,
                     {{Counter::kSendRnrErr, 3},
                      {Counter::kOutOfSeqRequest, 3},
                      {Counter::kDropOutOfSequence, 3}});
}

// A bad R_Key: the responder NAKs remote access error and goes to ERR (class C, IBA 9.9.2),
// flushing its receive queue; the requester completes REM_ACCESS_ERR and flushes the rest.
TEST(ErrorPaths, RemoteAccessError) {
  EngineHarness h;
  QpPair p = h.connect(PairOptions{});
  post_recv(p.b, 77, 0, 128);
  std::fill(p.b.buf.begin(), p.b.buf.begin() + 4096, 0x5A);
  ASSERT_TRUE(
      post(h, p.a, 1, WrOpcode::kRdmaWrite, 0, 64, p.b.addr(0), p.b.mr.rkey ^ 0x100000).is_ok());
  ASSERT_TRUE(post(h, p.a, 2, WrOpcode::kSend, 0, 8).is_ok());
  const std::vector<Wc> wcs = h.wait_wcs(0, p.a.send_cq, 2, std::chrono::seconds(1));
  ASSERT_EQ(wcs.size(), 2u);
  expect_wc(wcs[0], 1, WcStatus::kRemAccessErr, p.a.qpn);
  expect_wc(wcs[1], 2, WcStatus::kWrFlushErr, p.a.qpn);
  EXPECT_TRUE(
      std::all_of(p.b.buf.begin(), p.b.buf.begin() + 4096, [](uint8_t b) { return b == 0x5A; }));
  EXPECT_EQ(state_of(h.engine(0), p.a.qpn), QpState::kErr);
  EXPECT_EQ(state_of(h.engine(1), p.b.qpn), QpState::kErr);
  const std::vector<Wc> rw = h.poll(1, p.b.recv_cq);
  ASSERT_EQ(rw.size(), 1u);
  expect_wc(rw[0], 77, WcStatus::kWrFlushErr, p.b.qpn);
  h.run_until_idle(std::chrono::seconds(1));
  expect_qp_counters(h, 0, p.a.qpn,
                     {{Counter::kReqRemoteAccessErrors, 1},
                      {Counter::kReqCqeError, 1},
                      {Counter::kReqCqeFlushError, 1}});
  // B: the WRITE (and the SEND behind it, which arrives after the NAK put B in ERR).
  expect_qp_counters(h, 1, p.b.qpn,
                     {{Counter::kRxWriteRequests, 1},
                      {Counter::kRespRemoteAccessErrors, 1},
                      {Counter::kRespCqeFlushError, 1},
                      {Counter::kDropBadQpState, 1}});
}

// The responder QP does not allow RDMA READ: NAK invalid request (rxe check_op_valid) ->
// REM_INV_REQ_ERR.
TEST(ErrorPaths, RemoteInvalidRequest) {
  EngineHarness h;
  QpPair p = h.connect(PairOptions{});
  QpAttr a;
  a.qp_access_flags = kAccessRemoteWrite;
  ASSERT_TRUE(h.engine(1).modify_qp(p.b.qpn, a, kQpAccessFlags).is_ok());
  std::fill(p.a.buf.begin() + 8192, p.a.buf.begin() + 8192 + 256, 0x11);
  ASSERT_TRUE(post(h, p.a, 1, WrOpcode::kRdmaRead, 8192, 256, p.b.addr(0), p.b.mr.rkey).is_ok());
  const std::vector<Wc> wcs = h.wait_wcs(0, p.a.send_cq, 1, std::chrono::seconds(1));
  ASSERT_EQ(wcs.size(), 1u);
  expect_wc(wcs[0], 1, WcStatus::kRemInvReqErr, p.a.qpn);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::kRdmaRead);
  EXPECT_TRUE(std::all_of(p.a.buf.begin() + 8192, p.a.buf.begin() + 8192 + 256,
                          [](uint8_t b) { return b == 0x11; }));
  EXPECT_EQ(state_of(h.engine(0), p.a.qpn), QpState::kErr);
  EXPECT_EQ(state_of(h.engine(1), p.b.qpn), QpState::kErr);
  expect_qp_counters(h, 0, p.a.qpn,
                     {{Counter::kReqRemoteInvalidRequest, 1}, {Counter::kReqCqeError, 1}});
  expect_qp_counters(h, 1, p.b.qpn, {{Counter::kRespRemoteInvalidRequest, 1}});
}

// The responder's receive WQE names an L_Key that is not registered: LOC_PROT_ERR on the
// responder's receive, and the requester learns of it as a remote operational error.
TEST(ErrorPaths, RemoteOperationalErrorFromABadReceiveWqe) {
  EngineHarness h;
  QpPair p = h.connect(PairOptions{});
  const Sge bad{p.b.addr(0), 128, p.b.mr.lkey ^ 0x400000};
  RecvWr rwr;
  rwr.wr_id = 5;
  rwr.sg_list = std::span<const Sge>(&bad, 1);
  ASSERT_TRUE(h.engine(1).post_recv(p.b.qpn, rwr).is_ok());
  ASSERT_TRUE(post(h, p.a, 1, WrOpcode::kSend, 0, 64).is_ok());
  const std::vector<Wc> wcs = h.wait_wcs(0, p.a.send_cq, 1, std::chrono::seconds(1));
  ASSERT_EQ(wcs.size(), 1u);
  expect_wc(wcs[0], 1, WcStatus::kRemOpErr, p.a.qpn);
  const std::vector<Wc> rw = h.poll(1, p.b.recv_cq);
  ASSERT_EQ(rw.size(), 1u);
  expect_wc(rw[0], 5, WcStatus::kLocProtErr, p.b.qpn);
  EXPECT_EQ(state_of(h.engine(0), p.a.qpn), QpState::kErr);
  EXPECT_EQ(state_of(h.engine(1), p.b.qpn), QpState::kErr);
  expect_qp_counters(h, 0, p.a.qpn,
                     {{Counter::kReqRemoteOperationalError, 1}, {Counter::kReqCqeError, 1}});
  expect_qp_counters(h, 1, p.b.qpn,
                     {{Counter::kRespRemoteOperationalError, 1}, {Counter::kRespCqeError, 1}});
}

// The receive buffer is too small: LOC_LEN_ERR on the receiver, NAK invalid request, so the
// sender gets REM_INV_REQ_ERR (rxe RESPST_ERR_LENGTH). The bytes that fit may have landed;
// nothing beyond the buffer.
TEST(ErrorPaths, LocalLengthErrorOnTheReceiver) {
  EngineHarness h;
  PairOptions o;
  o.mtu = Mtu::k256;
  QpPair p = h.connect(o);
  std::fill(p.b.buf.begin(), p.b.buf.begin() + 4096, 0x5A);
  post_recv(p.b, 9, 0, 300);
  ASSERT_TRUE(post(h, p.a, 1, WrOpcode::kSend, 0, 1000).is_ok());
  const std::vector<Wc> wcs = h.wait_wcs(0, p.a.send_cq, 1, std::chrono::seconds(1));
  ASSERT_EQ(wcs.size(), 1u);
  expect_wc(wcs[0], 1, WcStatus::kRemInvReqErr, p.a.qpn);
  const std::vector<Wc> rw = h.poll(1, p.b.recv_cq);
  ASSERT_EQ(rw.size(), 1u);
  expect_wc(rw[0], 9, WcStatus::kLocLenErr, p.b.qpn);
  EXPECT_TRUE(std::all_of(p.b.buf.begin() + 300, p.b.buf.begin() + 4096,
                          [](uint8_t b) { return b == 0x5A; }));
  EXPECT_EQ(state_of(h.engine(0), p.a.qpn), QpState::kErr);
  EXPECT_EQ(state_of(h.engine(1), p.b.qpn), QpState::kErr);
  h.run_until_idle(std::chrono::seconds(1));
  expect_qp_counters(h, 0, p.a.qpn,
                     {{Counter::kReqRemoteInvalidRequest, 1}, {Counter::kReqCqeError, 1}});
  // The 3rd and 4th packets reach B after it entered ERR.
  expect_qp_counters(h, 1, p.b.qpn,
                     {{Counter::kRespLocalLengthError, 1},
                      {Counter::kRespCqeError, 1},
                      {Counter::kDropBadQpState, 2}});
}

// A send WQE whose L_Key is bad: LOC_PROT_ERR before anything goes on the wire; the QP goes
// to ERR and the WQE behind it is flushed. A READ into memory without LOCAL_WRITE likewise.
TEST(ErrorPaths, LocalProtectionError) {
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant == 0 ? "SEND with a bad lkey" : "READ into memory without LOCAL_WRITE");
    EngineHarness h;
    QpPair p = h.connect(PairOptions{});
    std::vector<uint8_t> ro(4096, 0x77);
    const MrInfo ro_mr = h.engine(0).reg_mr(p.a.pd, ro.data(), ro.size(), 0).value();
    SendWr wr;
    Sge s{};
    if (variant == 0) {
      s = {p.a.addr(0), 64, p.a.mr.lkey ^ 0x200000};
      wr.opcode = WrOpcode::kSend;
    } else {
      s = {ro_mr.addr, 64, ro_mr.lkey};
      wr.opcode = WrOpcode::kRdmaRead;
      wr.rdma = {p.b.addr(0), p.b.mr.rkey};
    }
    wr.wr_id = 1;
    wr.send_flags = kSendSignaled;
    wr.sg_list = std::span<const Sge>(&s, 1);
    ASSERT_TRUE(h.engine(0).post_send(h.now(), p.a.qpn, wr).is_ok());
    ASSERT_TRUE(post(h, p.a, 2, WrOpcode::kSend, 0, 8, 0, 0, 0).is_ok())
        << "unsignaled, flushed anyway";
    const std::vector<Wc> wcs = h.wait_wcs(0, p.a.send_cq, 2, std::chrono::seconds(1));
    ASSERT_EQ(wcs.size(), 2u);
    expect_wc(wcs[0], 1, WcStatus::kLocProtErr, p.a.qpn);
    expect_wc(wcs[1], 2, WcStatus::kWrFlushErr, p.a.qpn);
    EXPECT_TRUE(h.log().empty()) << "nothing may go on the wire";
    EXPECT_TRUE(std::all_of(ro.begin(), ro.end(), [](uint8_t b) { return b == 0x77; }));
    EXPECT_EQ(state_of(h.engine(0), p.a.qpn), QpState::kErr);
    expect_qp_counters(
        h, 0, p.a.qpn,
        {{Counter::kSendErr, 1}, {Counter::kReqCqeError, 1}, {Counter::kReqCqeFlushError, 1}});
  }
}

// Moving a QP to ERR flushes its posted sends and receives in order; WRs posted in ERR
// complete with WR_FLUSH_ERR at once, signaled or not (IBA 10.3.1, 10.8.3.x).
TEST(ErrorPaths, FlushOnErrAndPostInErr) {
  EngineHarness h;
  QpPair p = h.connect(PairOptions{});
  for (uint64_t i = 0; i < 3; ++i) post_recv(p.b, 100 + i, i * 64, 64);
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        post(h, p.a, 10 + i, WrOpcode::kSend, 0, 8, 0, 0, i == 1 ? 0u : uint32_t{kSendSignaled})
            .is_ok());
  }
  QpAttr err;
  err.qp_state = QpState::kErr;
  ASSERT_TRUE(h.engine(0).modify_qp(p.a.qpn, err, kQpState).is_ok());
  ASSERT_TRUE(h.engine(1).modify_qp(p.b.qpn, err, kQpState).is_ok());
  std::vector<Wc> sw = h.poll(0, p.a.send_cq);
  ASSERT_EQ(sw.size(), 3u) << "an unsignaled WR is flushed with a completion too";
  for (uint64_t i = 0; i < 3; ++i) expect_wc(sw[i], 10 + i, WcStatus::kWrFlushErr, p.a.qpn);
  std::vector<Wc> rw = h.poll(1, p.b.recv_cq);
  ASSERT_EQ(rw.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    expect_wc(rw[i], 100 + i, WcStatus::kWrFlushErr, p.b.qpn);
    EXPECT_EQ(rw[i].opcode, WcOpcode::kRecv);
  }
  // Post in ERR: accepted, completed at once with a flush error.
  ASSERT_TRUE(post(h, p.a, 20, WrOpcode::kRdmaWrite, 0, 8, p.b.addr(0), p.b.mr.rkey, 0).is_ok());
  post_recv(p.b, 200, 0, 64);
  sw = h.poll(0, p.a.send_cq);
  ASSERT_EQ(sw.size(), 1u);
  expect_wc(sw[0], 20, WcStatus::kWrFlushErr, p.a.qpn);
  rw = h.poll(1, p.b.recv_cq);
  ASSERT_EQ(rw.size(), 1u);
  expect_wc(rw[0], 200, WcStatus::kWrFlushErr, p.b.qpn);
  h.run_until_idle(std::chrono::seconds(1));
  EXPECT_TRUE(h.log().empty()) << "a QP in ERR sends nothing";
  expect_qp_counters(h, 0, p.a.qpn, {{Counter::kReqCqeFlushError, 4}});
  expect_qp_counters(h, 1, p.b.qpn, {{Counter::kRespCqeFlushError, 4}});
}

// UD: a datagram with the wrong Q_Key is dropped and counted (IBA 10.2.5, rxe qkey_viol);
// a WR Q_Key with bit 31 set means "use the QP's own Q_Key".
TEST(ErrorPaths, UdQkeyMismatchIsDroppedAndCounted) {
  EngineHarness h;
  PairOptions o;
  o.type = QpType::kUd;
  QpPair p = h.connect(o);
  post_recv(p.b, 1, 0, 1024);
  auto ud_send = [&](uint64_t wr_id, uint32_t qkey) {
    const Sge s = p.a.sge(0, 32);
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = WrOpcode::kSend;
    wr.send_flags = kSendSignaled;
    wr.sg_list = std::span<const Sge>(&s, 1);
    wr.ud.ah.dgid = p.b.gid;
    wr.ud.ah.sgid = p.a.gid;
    wr.ud.remote_qpn = p.b.qpn;
    wr.ud.remote_qkey = qkey;
    return h.engine(0).post_send(h.now(), p.a.qpn, wr);
  };
  ASSERT_TRUE(ud_send(1, 0x22222222).is_ok());
  h.run_until_idle(std::chrono::milliseconds(1));
  std::vector<Wc> sw = h.poll(0, p.a.send_cq);
  ASSERT_EQ(sw.size(), 1u);
  expect_wc(sw[0], 1, WcStatus::kSuccess, p.a.qpn);
  EXPECT_TRUE(h.poll(1, p.b.recv_cq).empty());
  EXPECT_EQ(h.engine(1).counters()[Counter::kDropBadQkey], 1u);
  // The receive WQE is still there: a datagram with the QP's own Q_Key (bit 31) lands in it.
  ASSERT_TRUE(ud_send(2, 0x80000000u).is_ok());
  h.run_until_idle(std::chrono::milliseconds(1));
  const std::vector<Wc> rw = h.poll(1, p.b.recv_cq);
  ASSERT_EQ(rw.size(), 1u);
  expect_wc(rw[0], 1, WcStatus::kSuccess, p.b.qpn);
  EXPECT_EQ(rw[0].byte_len, 40u + 32u);
  EXPECT_EQ(rw[0].src_qp, p.a.qpn);
  EXPECT_EQ(std::memcmp(p.b.buf.data() + 40, p.a.buf.data(), 32), 0);
  expect_qp_counters(h, 1, p.b.qpn, {{Counter::kDropBadQkey, 1}, {Counter::kRdmaRecvs, 1}});
}

// UD: a send longer than the active MTU fails alone with LOC_LEN_ERR and nothing on the wire
// (rxe drops it and reports success, C10-93.1.1; uroce tells the truth); the QP carries on.
// A datagram longer than the receive buffer completes LOC_LEN_ERR on the receiver.
TEST(ErrorPaths, UdOversizedSendAndTooSmallReceiveBuffer) {
  EngineHarness::Options ho;
  ho.active_mtu = Mtu::k1024;
  EngineHarness h(ho);
  PairOptions o;
  o.type = QpType::kUd;
  QpPair p = h.connect(o);
  auto ud_send = [&](uint64_t wr_id, uint32_t len) {
    const Sge s = p.a.sge(0, len);
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = WrOpcode::kSend;
    wr.send_flags = kSendSignaled;
    wr.sg_list = std::span<const Sge>(&s, 1);
    wr.ud.ah.dgid = p.b.gid;
    wr.ud.ah.sgid = p.a.gid;
    wr.ud.remote_qpn = p.b.qpn;
    wr.ud.remote_qkey = o.qkey;
    return h.engine(0).post_send(h.now(), p.a.qpn, wr);
  };
  post_recv(p.b, 1, 0, 40 + 100);
  post_recv(p.b, 2, 4096, 40 + 1024);
  ASSERT_TRUE(ud_send(1, 1025).is_ok());
  ASSERT_TRUE(ud_send(2, 101).is_ok());   // one byte too long for receive WQE 1
  ASSERT_TRUE(ud_send(3, 1024).is_ok());  // exactly the MTU, into WQE 2
  h.run_until_idle(std::chrono::milliseconds(1));
  const std::vector<Wc> sw = h.poll(0, p.a.send_cq);
  ASSERT_EQ(sw.size(), 3u);
  expect_wc(sw[0], 1, WcStatus::kLocLenErr, p.a.qpn);
  expect_wc(sw[1], 2, WcStatus::kSuccess, p.a.qpn);
  expect_wc(sw[2], 3, WcStatus::kSuccess, p.a.qpn);
  EXPECT_EQ(h.log().size(), 2u) << "the oversized datagram must not be sent";
  EXPECT_EQ(state_of(h.engine(0), p.a.qpn), QpState::kRts);
  const std::vector<Wc> rw = h.poll(1, p.b.recv_cq);
  ASSERT_EQ(rw.size(), 2u);
  expect_wc(rw[0], 1, WcStatus::kLocLenErr, p.b.qpn);
  expect_wc(rw[1], 2, WcStatus::kSuccess, p.b.qpn);
  EXPECT_EQ(rw[1].byte_len, 40u + 1024u);
  EXPECT_EQ(std::memcmp(p.b.buf.data() + 4096 + 40, p.a.buf.data(), 1024), 0);
  EXPECT_EQ(state_of(h.engine(1), p.b.qpn), QpState::kRts);
  expect_qp_counters(
      h, 0, p.a.qpn,
      {{Counter::kSendErr, 1}, {Counter::kReqCqeError, 1}, {Counter::kRdmaSends, 2}});
  expect_qp_counters(
      h, 1, p.b.qpn,
      {{Counter::kRespLocalLengthError, 1}, {Counter::kRespCqeError, 1}, {Counter::kRdmaRecvs, 1}});
}

// SRQ limit (IBA 10.2.9.4, ibv_modify_srq): the event fires once when the WQE count drops
// below the armed limit; the limit then reads 0 and nothing fires again until re-armed.
TEST(ErrorPaths, SrqLimitEventFiresOnce) {
  EngineHarness h;
  PairOptions o;
  o.use_srq = true;
  QpPair p = h.connect(o);
  ASSERT_TRUE(p.b.srq.has_value());
  const SrqId srq = *p.b.srq;
  auto srq_recv = [&](uint64_t wr_id) {
    const Sge s = p.b.sge(wr_id * 64, 64);
    RecvWr wr;
    wr.wr_id = wr_id;
    wr.sg_list = std::span<const Sge>(&s, 1);
    ASSERT_TRUE(h.engine(1).post_srq_recv(srq, wr).is_ok());
  };
  for (uint64_t i = 0; i < 4; ++i) srq_recv(i);
  SrqAttr attr;
  attr.srq_limit = 2;
  ASSERT_TRUE(h.engine(1).modify_srq(srq, attr, kSrqLimit).is_ok());
  auto events = [&] {
    std::array<AsyncEvent, 16> ev;
    const size_t n = h.engine(1).poll_events(ev);
    return std::vector<AsyncEvent>(ev.begin(), ev.begin() + static_cast<ptrdiff_t>(n));
  };
  for (uint64_t i = 0; i < 6; ++i) {
    SCOPED_TRACE("SEND #" + std::to_string(i));
    if (i == 4) {
      srq_recv(10);
      srq_recv(11);
    }
    ASSERT_TRUE(post(h, p.a, i, WrOpcode::kSend, 0, 16).is_ok());
    ASSERT_EQ(h.wait_wcs(0, p.a.send_cq, 1, std::chrono::seconds(1)).size(), 1u);
    const std::vector<AsyncEvent> ev = events();
    if (i == 2) {  // 4 -> 3 -> 2 -> 1: below 2 after the third receive
      ASSERT_EQ(ev.size(), 1u);
      EXPECT_EQ(ev[0].type, EventType::kSrqLimitReached);
      EXPECT_EQ(ev[0].element, static_cast<uint32_t>(srq));
      SrqAttr q;
      ASSERT_TRUE(h.engine(1).query_srq(srq, q).is_ok());
      EXPECT_EQ(q.srq_limit, 0u);
    } else {
      EXPECT_TRUE(ev.empty());
    }
  }
  const std::vector<Wc> rw = h.poll(1, p.b.recv_cq);
  ASSERT_EQ(rw.size(), 6u);
  const uint64_t order[] = {0, 1, 2, 3, 10, 11};
  for (size_t i = 0; i < 6; ++i) expect_wc(rw[i], order[i], WcStatus::kSuccess, p.b.qpn);
}

// An atomic whose local buffer is shorter than 8 bytes fails locally with LOC_LEN_ERR.
TEST(ErrorPaths, AtomicWithShortLocalBufferIsLocalLengthError) {
  EngineHarness h;
  QpPair p = h.connect(PairOptions{});
  const Sge s = p.a.sge(0, 4);
  SendWr wr;
  wr.wr_id = 1;
  wr.opcode = WrOpcode::kAtomicFetchAndAdd;
  wr.send_flags = kSendSignaled;
  wr.sg_list = std::span<const Sge>(&s, 1);
  wr.atomic = {p.b.addr(0), 1, 0, p.b.mr.rkey};
  ASSERT_TRUE(h.engine(0).post_send(h.now(), p.a.qpn, wr).is_ok());
  const std::vector<Wc> wcs = h.wait_wcs(0, p.a.send_cq, 1, std::chrono::seconds(1));
  ASSERT_EQ(wcs.size(), 1u);
  expect_wc(wcs[0], 1, WcStatus::kLocLenErr, p.a.qpn);
  EXPECT_TRUE(h.log().empty());
  EXPECT_EQ(state_of(h.engine(0), p.a.qpn), QpState::kErr);
}

// A QP in ERR goes back to work through RESET -> INIT -> RTR -> RTS with new PSNs: nothing
// of the old connection (PSNs, queued WQEs, timers, responder state) leaks into the new one.
TEST(ErrorPaths, RecoveryThroughResetStartsAFreshConnection) {
  EngineHarness h;
  PairOptions o;
  o.timeout = 8;
  o.retry_cnt = 1;
  QpPair p = h.connect(o);
  // Break it: B is unreachable, A retries out.
  h.faults(0).drop = 1.0;
  ASSERT_TRUE(post(h, p.a, 1, WrOpcode::kSend, 0, 64).is_ok());
  ASSERT_EQ(h.wait_wcs(0, p.a.send_cq, 1, std::chrono::seconds(1)).size(), 1u);
  EXPECT_EQ(state_of(h.engine(0), p.a.qpn), QpState::kErr);
  h.faults(0).drop = 0.0;
  // Both sides to RESET and up again with other PSNs.
  auto bring_up = [&](int side, Endpoint& self, const Endpoint& peer, uint32_t rq_psn,
                      uint32_t sq_psn) {
    Engine& e = h.engine(side);
    QpAttr a;
    a.qp_state = QpState::kReset;
    ASSERT_TRUE(e.modify_qp(self.qpn, a, kQpState).is_ok());
    a.qp_state = QpState::kInit;
    a.port_num = 1;
    a.qp_access_flags = o.access;
    ASSERT_TRUE(
        e.modify_qp(self.qpn, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags).is_ok());
    a.qp_state = QpState::kRtr;
    a.path_mtu = Mtu::k1024;
    a.dest_qp_num = peer.qpn;
    a.rq_psn = rq_psn;
    a.ah_attr.dgid = peer.gid;
    a.ah_attr.sgid = self.gid;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    ASSERT_TRUE(e.modify_qp(self.qpn, a,
                            kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                kQpMaxDestRdAtomic | kQpMinRnrTimer)
                    .is_ok());
    a.qp_state = QpState::kRts;
    a.sq_psn = sq_psn;
    a.timeout = 8;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    ASSERT_TRUE(
        e.modify_qp(self.qpn, a,
                    kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic)
            .is_ok());
  };
  bring_up(0, p.a, p.b, 0x900, 0x5000);
  bring_up(1, p.b, p.a, 0x5000, 0x900);
  EXPECT_TRUE(h.poll(0, p.a.send_cq).empty()) << "RESET discards without new completions";
  h.log().clear();
  post_recv(p.b, 7, 0, 64);
  std::memset(p.a.buf.data(), 0x3C, 64);
  std::memset(p.b.buf.data() + 4096, 0x4D, 128);
  ASSERT_TRUE(post(h, p.a, 2, WrOpcode::kSend, 0, 64).is_ok());
  ASSERT_TRUE(post(h, p.a, 3, WrOpcode::kRdmaRead, 8192, 128, p.b.addr(4096), p.b.mr.rkey).is_ok());
  const std::vector<Wc> wcs = h.wait_wcs(0, p.a.send_cq, 2, std::chrono::seconds(1));
  ASSERT_EQ(wcs.size(), 2u);
  expect_wc(wcs[0], 2, WcStatus::kSuccess, p.a.qpn);
  expect_wc(wcs[1], 3, WcStatus::kSuccess, p.a.qpn);
  EXPECT_TRUE(std::all_of(p.a.buf.begin() + 8192, p.a.buf.begin() + 8192 + 128,
                          [](uint8_t b) { return b == 0x4D; }));
  const std::vector<Wc> rw = h.poll(1, p.b.recv_cq);
  ASSERT_EQ(rw.size(), 1u);
  expect_wc(rw[0], 7, WcStatus::kSuccess, p.b.qpn);
  EXPECT_TRUE(
      std::all_of(p.b.buf.begin(), p.b.buf.begin() + 64, [](uint8_t b) { return b == 0x3C; }));
  ASSERT_FALSE(h.log().empty());
  EXPECT_EQ(h.log().front().psn(), 0x5000u) << "the first packet carries the new SQ PSN";
  h.run_until_idle(std::chrono::seconds(1));
  EXPECT_EQ(h.engine(0).next_deadline(), kNever);
}

// A QP attached to an SRQ that goes to ERR: IBV_EVENT_QP_LAST_WQE_REACHED, and the SRQ keeps
// its WQEs for the other QPs (IBA 10.3.1, 10.2.9).
TEST(ErrorPaths, SrqQpInErrRaisesLastWqeReachedAndKeepsTheSrqWqes) {
  EngineHarness h;
  PairOptions o;
  o.use_srq = true;
  QpPair p = h.connect(o);
  const SrqId srq = *p.b.srq;
  for (uint64_t i = 0; i < 3; ++i) {
    const Sge s = p.b.sge(i * 64, 64);
    RecvWr wr;
    wr.wr_id = i;
    wr.sg_list = std::span<const Sge>(&s, 1);
    ASSERT_TRUE(h.engine(1).post_srq_recv(srq, wr).is_ok());
  }
  QpAttr err;
  err.qp_state = QpState::kErr;
  ASSERT_TRUE(h.engine(1).modify_qp(p.b.qpn, err, kQpState).is_ok());
  std::array<AsyncEvent, 8> ev;
  ASSERT_EQ(h.engine(1).poll_events(ev), 1u);
  EXPECT_EQ(ev[0].type, EventType::kQpLastWqeReached);
  EXPECT_EQ(ev[0].element, p.b.qpn);
  EXPECT_TRUE(h.poll(1, p.b.recv_cq).empty()) << "SRQ WQEs are not flushed with the QP";
  // The SRQ still holds all three: it takes exactly max_wr - 3 more.
  uint64_t extra = 0;
  for (;; ++extra) {
    const Sge s = p.b.sge(0, 8);
    RecvWr wr;
    wr.wr_id = 1000 + extra;
    wr.sg_list = std::span<const Sge>(&s, 1);
    if (!h.engine(1).post_srq_recv(srq, wr).is_ok()) break;
  }
  EXPECT_EQ(extra, o.max_recv_wr - 3);
}

// A full CQ loses the completion, counts cq_overflow and raises IBV_EVENT_CQ_ERR (rxe).
TEST(ErrorPaths, CqOverflowIsCountedAndRaisesCqErr) {
  EngineHarness h;
  PairOptions o;
  o.cqe = 1;
  QpPair p = h.connect(o);
  const uint32_t cap = h.engine(0).cq_capacity(p.a.send_cq);
  ASSERT_GE(cap, 1u);
  for (uint64_t i = 0; i <= cap; ++i) ASSERT_TRUE(post(h, p.a, i, WrOpcode::kSend, 0, 0).is_ok());
  for (uint64_t i = 0; i <= cap; ++i) post_recv(p.b, 100 + i, 0, 0);
  h.run_until_idle(std::chrono::seconds(1));
  const std::vector<Wc> wcs = h.poll(0, p.a.send_cq);
  ASSERT_EQ(wcs.size(), cap);
  for (uint64_t i = 0; i < cap; ++i) expect_wc(wcs[i], i, WcStatus::kSuccess, p.a.qpn);
  EXPECT_EQ(h.engine(0).counters()[Counter::kCqOverflow], 1u);
  std::array<AsyncEvent, 8> ev;
  ASSERT_EQ(h.engine(0).poll_events(ev), 1u);
  EXPECT_EQ(ev[0].type, EventType::kCqErr);
  EXPECT_EQ(ev[0].element, static_cast<uint32_t>(p.a.send_cq));
}

}  // namespace
}  // namespace uroce::test
