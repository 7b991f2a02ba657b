// Narrated packet scripts: one engine QP, the test plays the peer packet by packet and
// asserts on every packet the engine transmits, on memory, on completions and on every
// counter. Each script reads as "receive X / expect Y"; the rules cited are IBTA Vol 1
// chapter 9 (C9-xx) and what Linux rxe does (docs/rxe-facts.md §2d).
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "script_harness.hpp"

namespace uroce::script {
namespace {

using transport::Wc;
using transport::WcFlag;
using transport::WcOpcode;
using transport::WrOpcode;
using wire::NakCode;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  return v;
}

std::vector<uint8_t> bytes_of(const char* s) {
  return std::vector<uint8_t>(s, s + std::strlen(s));
}

void expect_recv_wc(const Wc& wc, uint64_t wr_id, uint32_t byte_len, uint32_t qpn) {
  EXPECT_EQ(wc.wr_id, wr_id);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.opcode, WcOpcode::kRecv);
  EXPECT_EQ(wc.byte_len, byte_len);
  EXPECT_EQ(wc.qp_num, qpn);
  EXPECT_EQ(wc.wc_flags, transport::kWcGrh);
}

void expect_send_wc(const Wc& wc, uint64_t wr_id, WcStatus status, WcOpcode op = WcOpcode::kSend) {
  EXPECT_EQ(wc.wr_id, wr_id);
  EXPECT_EQ(wc.status, status);
  if (status == WcStatus::kSuccess) {
    EXPECT_EQ(wc.opcode, op);
  }
}

// ---------------------------------------------------------------------------------------
// Responder: PSN sequence errors (IBA 9.7.5.1.1, C9-98..: one NAK per gap).

TEST(PacketScript, GapGetsOneSequenceNakThenSilenceUntilFilledAcrossTheWrap) {
  ScriptOptions o;
  o.rq_psn = 0xFFFFFE;
  ScriptQp s(o);
  for (uint64_t i = 0; i < 4; ++i) s.post_recv(100 + i, i * 256, 256);

  // receive SEND psn=0xFFFFFE / expect ACK psn=0xFFFFFE msn=1
  s.receive(s.request(Op::kSendOnly, 0xFFFFFE), {'a', 'b'});
  expect_ack(one(s.transmit()), 0xFFFFFE, 1);

  // receive SEND psn=0x000000 (0xFFFFFF is missing) / expect NAK PSN-sequence-error carrying ePSN
  s.receive(s.request(Op::kSendOnly, 0x000000), {'c'});
  expect_nak(one(s.transmit()), NakCode::kPsnSequenceError, 0xFFFFFF, 1);

  // receive SEND psn=0x000001, then psn=0x000000 again / expect nothing (one NAK per gap)
  s.receive(s.request(Op::kSendOnly, 0x000001), {'d'});
  EXPECT_TRUE(s.transmit().empty());
  s.receive(s.request(Op::kSendOnly, 0x000000), {'c'});
  EXPECT_TRUE(s.transmit().empty());
  EXPECT_EQ(s.recv_wcs().size(), 1u) << "out-of-sequence SENDs must not complete";

  // receive the missing psn=0xFFFFFF, then the resent 0x000000 and 0x000001 / expect ACKs
  s.receive(s.request(Op::kSendOnly, 0xFFFFFF), {'e', 'f', 'g'});
  expect_ack(one(s.transmit()), 0xFFFFFF, 2);
  s.receive(s.request(Op::kSendOnly, 0x000000), {'c'});
  expect_ack(one(s.transmit()), 0x000000, 3);
  s.receive(s.request(Op::kSendOnly, 0x000001), {'d'});
  expect_ack(one(s.transmit()), 0x000001, 4);

  const std::vector<Wc> wcs = s.recv_wcs();
  ASSERT_EQ(wcs.size(), 3u);
  expect_recv_wc(wcs[0], 101, 3, s.qpn());
  expect_recv_wc(wcs[1], 102, 1, s.qpn());
  expect_recv_wc(wcs[2], 103, 1, s.qpn());
  EXPECT_EQ(std::memcmp(s.mem(0), "ab", 2), 0);
  EXPECT_EQ(std::memcmp(s.mem(256), "efg", 3), 0);
  EXPECT_EQ(std::memcmp(s.mem(512), "c", 1), 0);
  EXPECT_EQ(std::memcmp(s.mem(768), "d", 1), 0);

  // A second gap after the first one was filled NAKs again.
  s.receive(s.request(Op::kSendOnly, 0x000005), {'x'});
  expect_nak(one(s.transmit()), NakCode::kPsnSequenceError, 0x000002, 4);

  s.expect_qp_counters(
      {{Counter::kOutOfSeqRequest, 4}, {Counter::kDropOutOfSequence, 2}, {Counter::kRdmaRecvs, 4}});
}

// ---------------------------------------------------------------------------------------
// Responder: duplicates (IBA 9.7.5.1.3). SEND/WRITE are ACKed again with ePSN-1 (C9-105) and
// never executed twice.

TEST(PacketScript, DuplicateSendAndWriteAreReAckedAndNotExecutedTwice) {
  ScriptOptions o;
  o.rq_psn = 100;
  ScriptQp s(o);
  s.post_recv(1, 0, 64);
  s.post_recv(2, 64, 64);

  // receive SEND psn=100 "hello" / expect ACK psn=100 msn=1 and one receive completion
  s.receive(s.request(Op::kSendOnly, 100), bytes_of("hello"));
  expect_ack(one(s.transmit()), 100, 1);
  std::vector<Wc> wcs = s.recv_wcs();
  ASSERT_EQ(wcs.size(), 1u);
  expect_recv_wc(wcs[0], 1, 5, s.qpn());

  // receive SEND psn=100 again (other bytes) / expect ACK psn=100 msn=1, nothing consumed
  s.receive(s.request(Op::kSendOnly, 100), bytes_of("HELLO"));
  expect_ack(one(s.transmit()), 100, 1);
  EXPECT_TRUE(s.recv_wcs().empty());
  EXPECT_EQ(std::memcmp(s.mem(0), "hello", 5), 0);
  EXPECT_EQ(s.load64(64), 0u) << "the second receive WQE must stay untouched";

  // receive WRITE psn=101 "wxyz" / expect ACK psn=101 msn=2
  s.receive(s.rdma(Op::kWriteOnly, 101, s.va(1024), s.mr().rkey, 4), bytes_of("wxyz"));
  expect_ack(one(s.transmit()), 101, 2);
  EXPECT_EQ(std::memcmp(s.mem(1024), "wxyz", 4), 0);

  // The application reuses the buffer; a re-executed WRITE would overwrite it.
  std::memcpy(s.mem(1024), "0000", 4);
  // receive WRITE psn=101 again / expect ACK psn=101 msn=2, memory unchanged
  s.receive(s.rdma(Op::kWriteOnly, 101, s.va(1024), s.mr().rkey, 4), bytes_of("wxyz"));
  expect_ack(one(s.transmit()), 101, 2);
  EXPECT_EQ(std::memcmp(s.mem(1024), "0000", 4), 0);

  // receive the older SEND psn=100 once more / expect ACK with ePSN-1 = 101, msn=2
  s.receive(s.request(Op::kSendOnly, 100), bytes_of("hello"));
  expect_ack(one(s.transmit()), 101, 2);

  // A duplicate without AckReq is not ACKed (rdmavt rc_rcv_error; re-ACKing it stalls rxe,
  // see interop_stall_test.cpp).
  s.receive(s.request(Op::kSendOnly, 100, /*ackreq=*/false), bytes_of("hello"));
  EXPECT_TRUE(s.transmit().empty());

  // receive SEND psn=102 / expect ACK psn=102 msn=3 on the second receive WQE
  s.receive(s.request(Op::kSendOnly, 102), bytes_of("next"));
  expect_ack(one(s.transmit()), 102, 3);
  wcs = s.recv_wcs();
  ASSERT_EQ(wcs.size(), 1u);
  expect_recv_wc(wcs[0], 2, 4, s.qpn());
  EXPECT_EQ(std::memcmp(s.mem(64), "next", 4), 0);

  s.expect_qp_counters(
      {{Counter::kDuplicateRequest, 4}, {Counter::kRdmaRecvs, 2}, {Counter::kRxWriteRequests, 1}});
}

// Duplicate atomics (C9-115): the saved original value is returned, memory is not touched.
TEST(PacketScript, DuplicateAtomicsReplayTheSavedResult) {
  ScriptOptions o;
  o.rq_psn = 200;
  ScriptQp s(o);
  s.store64(2048, 5);

  // receive CAS psn=200 compare=5 swap=9 / expect Atomic ACK psn=200 msn=1 orig=5, memory 9
  s.receive(s.atomic(Op::kCompareSwap, 200, s.va(2048), s.mr().rkey, /*swap=*/9, /*compare=*/5));
  expect_atomic_ack(one(s.transmit()), 200, 1, 5);
  EXPECT_EQ(s.load64(2048), 9u);

  // The application puts 5 back: a re-executed CAS would swap again.
  s.store64(2048, 5);
  // receive CAS psn=200 again / expect the saved orig=5, memory stays 5
  s.receive(s.atomic(Op::kCompareSwap, 200, s.va(2048), s.mr().rkey, 9, 5));
  expect_atomic_ack(one(s.transmit()), 200, 1, 5);
  EXPECT_EQ(s.load64(2048), 5u);

  // receive FAA psn=201 add=7 / expect orig=5, memory 12
  s.receive(s.atomic(Op::kFetchAdd, 201, s.va(2048), s.mr().rkey, 7, 0));
  expect_atomic_ack(one(s.transmit()), 201, 2, 5);
  EXPECT_EQ(s.load64(2048), 12u);

  // receive FAA psn=201 again / expect orig=5, memory still 12 (not 19)
  s.receive(s.atomic(Op::kFetchAdd, 201, s.va(2048), s.mr().rkey, 7, 0));
  expect_atomic_ack(one(s.transmit()), 201, 2, 5);
  EXPECT_EQ(s.load64(2048), 12u);

  // receive the older CAS psn=200 once more / expect orig=5 again, memory untouched
  s.receive(s.atomic(Op::kCompareSwap, 200, s.va(2048), s.mr().rkey, 9, 12));
  const TxPacket p = one(s.transmit());
  EXPECT_EQ(p.opcode(), rc(Op::kAtomicAcknowledge));
  EXPECT_EQ(p.psn(), 200u);
  EXPECT_EQ(p.hdr.atomic_ack_eth.orig, 5u);
  EXPECT_EQ(s.load64(2048), 12u);

  s.expect_qp_counters({{Counter::kDuplicateRequest, 3}, {Counter::kRxAtomicRequests, 2}});
}

// Duplicate READ (C9-114): executed again, the same bytes come back; a retried READ for the
// tail of the original gets just the tail.
TEST(PacketScript, DuplicateReadIsReExecutedWithTheSameData) {
  ScriptOptions o;
  o.rq_psn = 300;
  ScriptQp s(o);  // PMTU 1024
  const std::vector<uint8_t> data = pattern(3000, 3);
  std::memcpy(s.mem(4096), data.data(), data.size());
  const std::span<const uint8_t> d(data);

  // receive READ psn=300 len=3000 / expect READ First 300, Middle 301, Last 302 (msn 1)
  s.receive(s.rdma(Op::kReadRequest, 300, s.va(4096), s.mr().rkey, 3000));
  std::vector<TxPacket> r = s.transmit();
  ASSERT_EQ(r.size(), 3u);
  expect_read_response(r[0], Op::kReadResponseFirst, 300, d.subspan(0, 1024));
  expect_read_response(r[1], Op::kReadResponseMiddle, 301, d.subspan(1024, 1024));
  expect_read_response(r[2], Op::kReadResponseLast, 302, d.subspan(2048));
  EXPECT_EQ(r[0].hdr.aeth.msn, 1u);
  EXPECT_EQ(r[2].hdr.aeth.msn, 1u);
  EXPECT_EQ(r[0].hdr.aeth.syndrome, wire::Aeth::ack());

  // receive WRITE psn=303 len=0 / expect ACK psn=303 msn=2 (the READ consumed 3 PSNs)
  s.receive(s.rdma(Op::kWriteOnly, 303, s.va(0), s.mr().rkey, 0));
  expect_ack(one(s.transmit()), 303, 2);

  // receive READ psn=300 again / expect the same three packets with the same bytes
  s.receive(s.rdma(Op::kReadRequest, 300, s.va(4096), s.mr().rkey, 3000));
  r = s.transmit();
  ASSERT_EQ(r.size(), 3u);
  expect_read_response(r[0], Op::kReadResponseFirst, 300, d.subspan(0, 1024));
  expect_read_response(r[1], Op::kReadResponseMiddle, 301, d.subspan(1024, 1024));
  expect_read_response(r[2], Op::kReadResponseLast, 302, d.subspan(2048));

  // receive READ psn=301 for the tail (va+1024, 1976 bytes) / expect First 301, Last 302
  s.receive(s.rdma(Op::kReadRequest, 301, s.va(4096 + 1024), s.mr().rkey, 1976));
  r = s.transmit();
  ASSERT_EQ(r.size(), 2u);
  expect_read_response(r[0], Op::kReadResponseFirst, 301, d.subspan(1024, 1024));
  expect_read_response(r[1], Op::kReadResponseLast, 302, d.subspan(2048));

  s.expect_qp_counters({{Counter::kDuplicateRequest, 2},
                        {Counter::kRxReadRequests, 1},
                        {Counter::kRxWriteRequests, 1}});
}

// ---------------------------------------------------------------------------------------
// Requester / completer: RNR NAK (IBA 9.7.5.2.8): wait exactly the encoded timer, then
// resend from the NAK'd PSN; rnr_retry exhausted -> RNR_RETRY_EXC_ERR, the rest flushed.

TEST(PacketScript, RnrNakIsRetriedAfterExactlyTheEncodedTimerUntilRnrRetryIsExhausted) {
  ScriptOptions o;
  o.sq_psn = 0x1000;
  o.rnr_retry = 2;
  ScriptQp s(o);
  const std::vector<uint8_t> msg = pattern(16, 9);
  std::memcpy(s.mem(0), msg.data(), msg.size());
  ASSERT_TRUE(s.post_send_one(1, WrOpcode::kSend, 0, 16).is_ok());
  ASSERT_TRUE(s.post_send_one(2, WrOpcode::kSend, 0, 16).is_ok());

  // expect SEND psn=0x1000 and psn=0x1001, both with AckReq
  std::vector<TxPacket> t = s.transmit();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].opcode(), rc(Op::kSendOnly));
  EXPECT_EQ(t[0].psn(), 0x1000u);
  EXPECT_TRUE(t[0].hdr.bth.ackreq);
  EXPECT_EQ(t[0].payload, msg);
  EXPECT_EQ(t[1].psn(), 0x1001u);

  const Nanos kRnr14 = std::chrono::microseconds(1280);  // code 14 = 1.28 ms
  for (int round = 0; round < 2; ++round) {
    // receive RNR NAK timer=14 psn=0x1000 / expect silence for exactly 1.28 ms, then a resend
    s.advance_to(s.now() + std::chrono::microseconds(10));
    const TimePoint nak_at = s.now();
    s.receive(s.rnr_nak(14, 0x1000, 0));
    EXPECT_TRUE(s.transmit().empty());
    EXPECT_EQ(s.engine().next_deadline(), nak_at + kRnr14);
    s.advance_to(nak_at + kRnr14 - Nanos(1));
    EXPECT_TRUE(s.transmit().empty());
    s.advance_to(nak_at + kRnr14);
    t = s.transmit();
    ASSERT_EQ(t.size(), 2u) << "round " << round;
    EXPECT_EQ(t[0].at, nak_at + kRnr14);
    EXPECT_EQ(t[0].opcode(), rc(Op::kSendOnly));
    EXPECT_EQ(t[0].psn(), 0x1000u);
    EXPECT_EQ(t[0].payload, msg);
    EXPECT_EQ(t[1].psn(), 0x1001u);
    EXPECT_TRUE(s.send_wcs().empty());
  }
  // receive a third RNR NAK / expect RNR_RETRY_EXC_ERR, the second WQE flushed, QP in ERR
  s.receive(s.rnr_nak(14, 0x1000, 0));
  EXPECT_TRUE(s.transmit().empty());
  const std::vector<Wc> wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 2u);
  expect_send_wc(wcs[0], 1, WcStatus::kRnrRetryExcErr);
  expect_send_wc(wcs[1], 2, WcStatus::kWrFlushErr);
  EXPECT_EQ(s.state(), QpState::kErr);
  EXPECT_EQ(s.engine().next_deadline(), kNever);

  s.expect_qp_counters({{Counter::kRcvdRnrErr, 3},
                        {Counter::kRetryRnrExceededErr, 1},
                        {Counter::kRetransmittedPkts, 4},
                        {Counter::kReqCqeError, 1},
                        {Counter::kReqCqeFlushError, 1}});
}

// A positive ACK gives the RNR retries back (rxe reset_retry_counters).
TEST(PacketScript, AckResetsTheRnrRetryBudget) {
  ScriptOptions o;
  o.sq_psn = 0x10;
  o.rnr_retry = 1;
  ScriptQp s(o);
  ASSERT_TRUE(s.post_send_one(1, WrOpcode::kSend, 0, 8).is_ok());
  ASSERT_TRUE(s.post_send_one(2, WrOpcode::kSend, 0, 8).is_ok());
  EXPECT_EQ(s.transmit().size(), 2u);
  // receive RNR NAK psn=0x10 (code 1 = 10 us) / expect both resent after 10 us
  s.receive(s.rnr_nak(1, 0x10, 0));
  s.advance_to(s.now() + std::chrono::microseconds(10));
  EXPECT_EQ(s.transmit().size(), 2u);
  // receive ACK psn=0x10, then RNR NAK psn=0x11 / expect a resend of 0x11, not an error
  s.receive(s.ack(0x10, 1));
  s.receive(s.rnr_nak(1, 0x11, 1));
  s.advance_to(s.now() + std::chrono::microseconds(10));
  const TxPacket p = one(s.transmit());
  EXPECT_EQ(p.psn(), 0x11u);
  s.receive(s.ack(0x11, 2));
  const std::vector<Wc> wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 2u);
  expect_send_wc(wcs[0], 1, WcStatus::kSuccess);
  expect_send_wc(wcs[1], 2, WcStatus::kSuccess);
  EXPECT_EQ(s.state(), QpState::kRts);
  s.expect_qp_counters(
      {{Counter::kRcvdRnrErr, 2}, {Counter::kRetransmittedPkts, 3}, {Counter::kRdmaSends, 2}});
}

// ---------------------------------------------------------------------------------------
// Local ACK timeout (IBA 9.7.6.1.3: 4.096 us x 2^timeout), go-back-N from the oldest
// unacknowledged PSN, retry_cnt exhausted -> RETRY_EXC_ERR, the rest WR_FLUSH_ERR, QP ERR.

TEST(PacketScript, LocalAckTimeoutGoesBackToTheOldestUnackedPsnUntilRetryCntIsExhausted) {
  ScriptOptions o;
  o.sq_psn = 0xFFFFFF;  // the three SENDs straddle the wrap
  o.timeout = 10;       // 4.096 us * 1024 = 4194304 ns
  o.retry_cnt = 2;
  o.adaptive_retrans = false;  // rxe-style: the configured timeout only (adaptive: below)
  ScriptQp s(o);
  const Nanos kT(4096 * 1024);
  for (uint64_t i = 1; i <= 3; ++i) {
    std::memset(s.mem(i * 64), static_cast<int>(i), 16);
    ASSERT_TRUE(s.post_send_one(i, WrOpcode::kSend, i * 64, 16).is_ok());
  }
  // expect SEND psn=0xFFFFFF, 0x000000, 0x000001; the timer armed at t=0 + T
  std::vector<TxPacket> t = s.transmit();
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].psn(), 0xFFFFFFu);
  EXPECT_EQ(t[1].psn(), 0x000000u);
  EXPECT_EQ(t[2].psn(), 0x000001u);
  EXPECT_EQ(s.engine().next_deadline(), TimePoint(0) + kT);

  // receive ACK psn=0xFFFFFF at 100 us / expect wr 1 done, the timer pushed to 100 us + T
  const TimePoint t_ack = TimePoint(0) + std::chrono::microseconds(100);
  s.advance_to(t_ack);
  s.receive(s.ack(0xFFFFFF, 1));
  EXPECT_TRUE(s.transmit().empty());
  std::vector<Wc> wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 1u);
  expect_send_wc(wcs[0], 1, WcStatus::kSuccess);
  EXPECT_EQ(s.engine().next_deadline(), t_ack + kT);

  for (int retry = 1; retry <= 2; ++retry) {
    const TimePoint due = t_ack + kT * retry;
    s.advance_to(due - Nanos(1));
    EXPECT_TRUE(s.transmit().empty());
    // timeout / expect go-back-N: psn=0x000000 and 0x000001 again, exactly at the deadline
    s.advance_to(due);
    t = s.transmit();
    ASSERT_EQ(t.size(), 2u) << "retry " << retry;
    EXPECT_EQ(t[0].at, due);
    EXPECT_EQ(t[0].psn(), 0x000000u);
    EXPECT_EQ(t[0].payload, std::vector<uint8_t>(16, 2));
    EXPECT_EQ(t[1].psn(), 0x000001u);
    EXPECT_EQ(t[1].payload, std::vector<uint8_t>(16, 3));
    EXPECT_EQ(s.engine().next_deadline(), due + kT);
  }
  // third timeout / expect RETRY_EXC_ERR for wr 2, WR_FLUSH_ERR for wr 3, QP in ERR
  s.advance_to(t_ack + kT * 3);
  EXPECT_TRUE(s.transmit().empty());
  wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 2u);
  expect_send_wc(wcs[0], 2, WcStatus::kRetryExcErr);
  expect_send_wc(wcs[1], 3, WcStatus::kWrFlushErr);
  EXPECT_EQ(wcs[0].qp_num, s.qpn());
  EXPECT_EQ(s.state(), QpState::kErr);
  EXPECT_EQ(s.engine().next_deadline(), kNever);

  // An ACK arriving now is dropped (the QP is in ERR).
  s.receive(s.ack(0x000001, 3));
  EXPECT_TRUE(s.send_wcs().empty());

  s.expect_qp_counters({{Counter::kRcvdPkts, 1},
                        {Counter::kBytesRcvd, 20},
                        {Counter::kLocalAckTimeoutErr, 3},
                        {Counter::kCompleterRetryErr, 2},
                        {Counter::kRetryExceededErr, 1},
                        {Counter::kRetransmittedPkts, 4},
                        {Counter::kRdmaSends, 1},
                        {Counter::kReqCqeError, 1},
                        {Counter::kReqCqeFlushError, 1},
                        {Counter::kDropBadQpState, 1}});
}

// Adaptive retransmission (the default; docs/congestion.md "Loss recovery"): the same script
// as above. The ACK 100 us after the send is the first RTT sample (SRTT 100 us, RTTVAR 50 us:
// RTO 300 us), so the tail is resent at 100 + 300 us, then with the RTO doubled each time
// (600, 1200 us) until the next one would pass the configured timeout, which still fires at
// t_ack + T and counts the retry; retry_cnt = 2 still ends in RETRY_EXC_ERR at the third
// configured timeout, at the same time as without adaptive retransmission.
TEST(PacketScript, AdaptiveRtoResendsBeforeTheConfiguredTimeoutAndRetryCntStillCounts) {
  ScriptOptions o;
  o.sq_psn = 0xFFFFFF;
  o.timeout = 10;  // 4194304 ns
  o.retry_cnt = 2;
  ScriptQp s(o);
  const Nanos kT(4096 * 1024);
  for (uint64_t i = 1; i <= 3; ++i) {
    std::memset(s.mem(i * 64), static_cast<int>(i), 16);
    ASSERT_TRUE(s.post_send_one(i, WrOpcode::kSend, i * 64, 16).is_ok());
  }
  ASSERT_EQ(s.transmit().size(), 3u);
  // no RTT sample yet: the configured timeout
  EXPECT_EQ(s.engine().next_deadline(), TimePoint(0) + kT);
  const TimePoint t_ack = TimePoint(0) + std::chrono::microseconds(100);
  s.advance_to(t_ack);
  s.receive(s.ack(0xFFFFFF, 1));
  ASSERT_EQ(s.send_wcs().size(), 1u);
  EXPECT_EQ(s.engine().next_deadline(), t_ack + std::chrono::microseconds(300));

  TimePoint due = t_ack + std::chrono::microseconds(300);
  for (const int64_t next_us : {600, 1200}) {
    s.advance_to(due - Nanos(1));
    EXPECT_TRUE(s.transmit().empty());
    s.advance_to(due);
    std::vector<TxPacket> t = s.transmit();
    ASSERT_EQ(t.size(), 2u);
    EXPECT_EQ(t[0].at, due);
    EXPECT_EQ(t[0].psn(), 0x000000u);
    EXPECT_EQ(t[0].payload, std::vector<uint8_t>(16, 2));
    EXPECT_EQ(t[1].psn(), 0x000001u);
    EXPECT_EQ(t[1].payload, std::vector<uint8_t>(16, 3));
    due = due + std::chrono::microseconds(next_us);
    EXPECT_EQ(s.engine().next_deadline(), due);
  }
  // the third adaptive resend at 2200 us; 2400 us more would pass t_ack + T
  s.advance_to(due);
  ASSERT_EQ(s.transmit().size(), 2u);
  EXPECT_EQ(s.engine().next_deadline(), t_ack + kT);
  EXPECT_EQ(s.state(), QpState::kRts);
  // the configured timeouts: retry 1, retry 2, then RETRY_EXC_ERR, as without adaptation.
  // Each resends 0x000000 alone, its probe: the rest would follow a response to it.
  for (int retry = 1; retry <= 2; ++retry) {
    s.advance_to(t_ack + kT * retry);
    const TxPacket probe = one(s.transmit());
    EXPECT_EQ(probe.psn(), 0x000000u) << "retry " << retry;
    EXPECT_EQ(probe.payload, std::vector<uint8_t>(16, 2));
    EXPECT_EQ(s.engine().next_deadline(), t_ack + kT * (retry + 1));
  }
  s.advance_to(t_ack + kT * 3);
  EXPECT_TRUE(s.transmit().empty());
  const std::vector<Wc> wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 2u);
  expect_send_wc(wcs[0], 2, WcStatus::kRetryExcErr);
  expect_send_wc(wcs[1], 3, WcStatus::kWrFlushErr);
  EXPECT_EQ(s.state(), QpState::kErr);
  s.expect_qp_counters({{Counter::kRcvdPkts, 1},
                        {Counter::kBytesRcvd, 20},
                        {Counter::kRoceAdpRetrans, 3},
                        {Counter::kRoceAdpRetransTo, 1},
                        {Counter::kLocalAckTimeoutErr, 3},
                        {Counter::kCompleterRetryErr, 2},
                        {Counter::kRetryExceededErr, 1},
                        {Counter::kRetransmittedPkts, 8},
                        {Counter::kRdmaSends, 1},
                        {Counter::kReqCqeError, 1},
                        {Counter::kReqCqeFlushError, 1}});
}

// A spurious early resend (the peer stalled, nothing was lost): ACK at 100 us (RTO 300 us),
// the adaptive resend of 0x1001..0x1002 at 400 us, then the peer's ACK of everything at 500
// us and its duplicate ACK for the resend. The duplicate proves the resend spurious
// (adp_retrans_spurious); the estimate covers the 400 us stall (100 -> 500 us without
// progress) at once, as RFC 4015 responds: SRTT max(100, 400) = 400 us, RTTVAR max(50, 200) =
// 200 us, so the next RTO is 400 + 4 x 200 = 1200 us. A second duplicate changes nothing
// more. (Both PSNs were resent before the ACK: the ACK alone proves nothing.)
TEST(PacketScript, DuplicateAckAfterAnAdaptiveResendLengthensTheRto) {
  ScriptOptions o;
  o.timeout = 10;  // 4194304 ns
  ScriptQp s(o);
  for (uint64_t i = 1; i <= 3; ++i) {
    ASSERT_TRUE(s.post_send_one(i, WrOpcode::kSend, 0, 16).is_ok());
  }
  ASSERT_EQ(s.transmit().size(), 3u);  // 0x1000 .. 0x1002
  const TimePoint t_ack = TimePoint(0) + std::chrono::microseconds(100);
  s.advance_to(t_ack);
  s.receive(s.ack(0x1000, 1));
  EXPECT_EQ(s.engine().next_deadline(), t_ack + std::chrono::microseconds(300));
  s.advance_to(t_ack + std::chrono::microseconds(300));
  ASSERT_EQ(s.transmit().size(), 2u);  // the early resend
  const TimePoint t_all = TimePoint(0) + std::chrono::microseconds(500);
  s.advance_to(t_all);
  s.receive(s.ack(0x1002, 3));
  EXPECT_EQ(s.send_wcs().size(), 3u);
  EXPECT_EQ(s.engine().next_deadline(), kNever);
  s.receive(s.ack(0x1001, 3));  // the peer's answer to the resend: a duplicate
  s.receive(s.ack(0x1002, 3));
  ASSERT_TRUE(s.post_send_one(4, WrOpcode::kSend, 0, 16).is_ok());
  ASSERT_EQ(s.transmit().size(), 1u);
  EXPECT_EQ(s.engine().next_deadline(), t_all + std::chrono::microseconds(1200));
  s.expect_qp_counters({{Counter::kRcvdPkts, 4},
                        {Counter::kBytesRcvd, 80},
                        {Counter::kRoceAdpRetrans, 1},
                        {Counter::kAdpRetransSpurious, 1},
                        {Counter::kDropDuplicateResponse, 2},
                        {Counter::kRetransmittedPkts, 2},
                        {Counter::kRdmaSends, 3}});
}

// Go-back-N: an ACK for a PSN the adaptive go-back has not resent yet, sooner after the
// go-back than the smallest RTT measured, answers an original (F-RTO's test), so the go-back
// was spurious. 0x1000 .. 0x1003 out at 0, ACK of 0x1000 at 100 us (the smallest RTT; RTO
// 300 us), the go-back at 400 us resends 0x1001 only, then the ACK of 0x1002 at 450 us:
// adp_retrans_spurious, the estimate covers the 350 us stall (SRTT 350, RTTVAR 175 us) and
// the requester resumes where it was: 0x1003, in flight, is not resent. (An ACK 100 us or
// more after the go-back could answer the resend, which asks for one: see the next test.)
TEST(PacketScript, AnAckForAPsnNotResentProvesAnAdaptiveGoBackSpurious) {
  ScriptOptions o;
  o.timeout = 10;  // 4194304 ns
  ScriptQp s(o);
  for (uint64_t i = 1; i <= 4; ++i) {
    ASSERT_TRUE(s.post_send_one(i, WrOpcode::kSend, 0, 16).is_ok());
  }
  ASSERT_EQ(s.transmit().size(), 4u);  // 0x1000 .. 0x1003
  const TimePoint t_ack = TimePoint(0) + std::chrono::microseconds(100);
  s.advance_to(t_ack);
  s.receive(s.ack(0x1000, 1));
  EXPECT_EQ(s.engine().next_deadline(), t_ack + std::chrono::microseconds(300));
  s.advance_to(t_ack + std::chrono::microseconds(300));
  // One packet of the go-back goes out: 0x1001.
  std::array<uint8_t, 4096 + 128> buf{};
  transport::TxSlot slot;
  slot.buf = buf;
  ASSERT_EQ(s.engine().poll_tx(s.now(), std::span<transport::TxSlot>(&slot, 1)), 1u);
  wire::ParsedPacket resent;
  ASSERT_EQ(wire::parse_packet(std::span<const uint8_t>(buf.data(), slot.len), resent),
            wire::ParseError::kOk);
  EXPECT_EQ(resent.hdr.bth.psn.value(), 0x1001u);
  const TimePoint t_ack2 = TimePoint(0) + std::chrono::microseconds(450);
  s.advance_to(t_ack2);
  s.receive(s.ack(0x1002, 3));
  EXPECT_EQ(s.send_wcs().size(), 3u);
  EXPECT_TRUE(s.transmit().empty());  // 0x1003 is not resent
  EXPECT_EQ(s.engine().next_deadline(), t_ack2 + std::chrono::microseconds(1050));
  s.advance_to(t_ack2 + std::chrono::microseconds(10));
  s.receive(s.ack(0x1003, 4));
  EXPECT_EQ(s.send_wcs().size(), 1u);
  EXPECT_EQ(s.engine().next_deadline(), kNever);
  s.expect_qp_counters({{Counter::kSentPkts, 5},     // 4 + the resend polled by hand
                        {Counter::kBytesSent, 160},  // 5 x (12 + 16 + 4)
                        {Counter::kRcvdPkts, 3},
                        {Counter::kBytesRcvd, 60},
                        {Counter::kRoceAdpRetrans, 1},
                        {Counter::kAdpRetransSpurious, 1},
                        {Counter::kRetransmittedPkts, 1},
                        {Counter::kRdmaSends, 4}});
}

// Without a duplicate (the resend was needed: the packet or its ACK was lost) the stall is no
// sample, and neither is the resend's ACK (Karn's rule: it may answer the original): the next
// RTO still comes from the one real sample, 100 us (RTO 300 us).
TEST(PacketScript, AnAdaptiveResendThatWasNeededKeepsTheRto) {
  ScriptOptions o;
  o.timeout = 10;
  ScriptQp s(o);
  for (uint64_t i = 1; i <= 3; ++i) {
    ASSERT_TRUE(s.post_send_one(i, WrOpcode::kSend, 0, 16).is_ok());
  }
  ASSERT_EQ(s.transmit().size(), 3u);
  const TimePoint t_ack = TimePoint(0) + std::chrono::microseconds(100);
  s.advance_to(t_ack);
  s.receive(s.ack(0x1000, 1));
  s.advance_to(t_ack + std::chrono::microseconds(300));
  ASSERT_EQ(s.transmit().size(), 2u);
  const TimePoint t_all = TimePoint(0) + std::chrono::microseconds(500);
  s.advance_to(t_all);
  s.receive(s.ack(0x1002, 3));
  ASSERT_TRUE(s.post_send_one(4, WrOpcode::kSend, 0, 16).is_ok());
  ASSERT_EQ(s.transmit().size(), 1u);
  EXPECT_EQ(s.engine().next_deadline(), t_all + std::chrono::microseconds(300));
  s.expect_qp_counters({{Counter::kRcvdPkts, 2},
                        {Counter::kBytesRcvd, 40},
                        {Counter::kRoceAdpRetrans, 1},
                        {Counter::kRetransmittedPkts, 2},
                        {Counter::kRdmaSends, 3}});
}

// With UROCE_ADAPTIVE_RETRANS=0 a measured RTT changes nothing: the timer stays at the
// configured timeout after every ACK.
TEST(PacketScript, RxeStyleTimerIgnoresTheMeasuredRtt) {
  ScriptOptions o;
  o.timeout = 10;
  o.adaptive_retrans = false;
  ScriptQp s(o);
  const Nanos kT(4096 * 1024);
  ASSERT_TRUE(s.post_send_one(1, WrOpcode::kSend, 0, 16).is_ok());
  ASSERT_TRUE(s.post_send_one(2, WrOpcode::kSend, 0, 16).is_ok());
  ASSERT_EQ(s.transmit().size(), 2u);
  const TimePoint t_ack = TimePoint(0) + std::chrono::microseconds(100);
  s.advance_to(t_ack);
  s.receive(s.ack(0x1000, 1));
  EXPECT_EQ(s.engine().next_deadline(), t_ack + kT);
  s.advance_to(t_ack + kT - Nanos(1));
  EXPECT_TRUE(s.transmit().empty());
  s.advance_to(t_ack + kT);
  EXPECT_EQ(one(s.transmit()).psn(), 0x1001u);
  s.expect_qp_counters({{Counter::kRcvdPkts, 1},
                        {Counter::kBytesRcvd, 20},
                        {Counter::kLocalAckTimeoutErr, 1},
                        {Counter::kCompleterRetryErr, 1},
                        {Counter::kRetransmittedPkts, 1},
                        {Counter::kRdmaSends, 1}});
}

// PSN sequence NAK from the peer (IBA 9.7.5.2.4): what precedes the NAK'd PSN is
// acknowledged, the requester resends from the NAK'd PSN.
TEST(PacketScript, PeerSequenceNakMakesTheRequesterResendFromTheNakedPsn) {
  ScriptOptions o;
  o.sq_psn = 0x500;
  ScriptQp s(o);
  for (uint64_t i = 1; i <= 4; ++i) {
    std::memset(s.mem(i * 64), static_cast<int>(0x40 + i), 32);
    ASSERT_TRUE(s.post_send_one(i, WrOpcode::kSend, i * 64, 32).is_ok());
  }
  ASSERT_EQ(s.transmit().size(), 4u);
  // receive NAK PSN-sequence-error psn=0x502 msn=2 / expect wr 1, 2 done; resend 0x502, 0x503
  s.receive(s.nak(NakCode::kPsnSequenceError, 0x502, 2));
  std::vector<TxPacket> t = s.transmit();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].psn(), 0x502u);
  EXPECT_EQ(t[0].payload, std::vector<uint8_t>(32, 0x43));
  EXPECT_EQ(t[1].psn(), 0x503u);
  EXPECT_EQ(t[1].payload, std::vector<uint8_t>(32, 0x44));
  std::vector<Wc> wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 2u);
  expect_send_wc(wcs[0], 1, WcStatus::kSuccess);
  expect_send_wc(wcs[1], 2, WcStatus::kSuccess);
  // receive a second NAK for the same PSN (the first retry made no progress) / expect nothing
  s.receive(s.nak(NakCode::kPsnSequenceError, 0x502, 2));
  EXPECT_TRUE(s.transmit().empty());
  // receive ACK psn=0x503 / expect wr 3, 4 done
  s.receive(s.ack(0x503, 4));
  wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 2u);
  expect_send_wc(wcs[0], 3, WcStatus::kSuccess);
  expect_send_wc(wcs[1], 4, WcStatus::kSuccess);
  EXPECT_EQ(s.engine().next_deadline(), kNever);
  // One fast retransmit for the NAK episode, none for its duplicate.
  s.expect_qp_counters({{Counter::kRcvdSeqErr, 2},
                        {Counter::kPacketSeqErr, 2},
                        {Counter::kCompleterRetryErr, 1},
                        {Counter::kNakFastRetrans, 1},
                        {Counter::kRetransmittedPkts, 2},
                        {Counter::kRdmaSends, 4}});
}

// AckReq (rxe init_req_packet): on the last packet, and on the 66th packet after the last
// one that carried it. Also the 128-PSN window (RXE_MAX_UNACKED_PSNS) and exact segments.
TEST(PacketScript, AckReqOnLastPacketAndOnEvery66thPacketOfALongMessage) {
  ScriptOptions o;
  o.sq_psn = 0xFFFF00;
  o.mtu = Mtu::k256;
  ScriptQp s(o);
  constexpr uint32_t kPkts = 200;
  const std::vector<uint8_t> msg = pattern(kPkts * 256 - 10, 1);  // last packet 246 bytes
  std::memcpy(s.mem(0), msg.data(), msg.size());
  ASSERT_TRUE(s.post_send_one(7, WrOpcode::kSend, 0, static_cast<uint32_t>(msg.size())).is_ok());

  std::vector<TxPacket> all;
  auto take = [&](size_t expect_count) {
    std::vector<TxPacket> t = s.transmit();
    EXPECT_EQ(t.size(), expect_count);
    all.insert(all.end(), t.begin(), t.end());
  };
  // At most 129 PSNs unacknowledged.
  take(129);
  // receive ACK psn=first+65 (the 66th packet asked for it) / expect the window to move
  s.receive(s.ack((0xFFFF00 + 65) & 0xFFFFFF, 0));
  take(66);
  s.receive(s.ack((0xFFFF00 + 194) & 0xFFFFFF, 0));
  take(5);
  ASSERT_EQ(all.size(), kPkts);
  for (uint32_t k = 0; k < kPkts; ++k) {
    const TxPacket& p = all[k];
    EXPECT_EQ(p.psn(), (0xFFFF00 + k) & 0xFFFFFF);
    const Op op = k == 0 ? Op::kSendFirst : k + 1 == kPkts ? Op::kSendLast : Op::kSendMiddle;
    EXPECT_EQ(p.opcode(), rc(op)) << "packet " << k;
    const bool want_ackreq = k == 65 || k == 131 || k == 197 || k + 1 == kPkts;
    EXPECT_EQ(p.hdr.bth.ackreq, want_ackreq) << "packet " << k;
    const size_t len = k + 1 == kPkts ? 246 : 256;
    ASSERT_EQ(p.payload.size(), len) << "packet " << k;
    EXPECT_EQ(std::memcmp(p.payload.data(), msg.data() + k * 256, len), 0) << "packet " << k;
    EXPECT_FALSE(p.hdr.bth.se);
  }
  // receive ACK psn=last msn=1 / expect the one completion with the whole length
  s.receive(s.ack((0xFFFF00 + kPkts - 1) & 0xFFFFFF, 1));
  const std::vector<Wc> wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 1u);
  expect_send_wc(wcs[0], 7, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].byte_len, msg.size());
  s.expect_qp_counters({{Counter::kRdmaSends, 1}});
}

// ---------------------------------------------------------------------------------------
// Remote access violations (IBA 9.7.5.1.x C9-88.., o9-xx; rxe check_rkey): NAK remote access
// error (invalid request where rxe and the spec say so), memory never touched, QP to ERR.

struct Violation {
  const char* name;
  NakCode nak;
  Counter counter;       // responder error counter that counts it
  Counter request_kind;  // rx_*_requests counted before the check (kCount: none)
};

class RemoteAccessViolation : public ::testing::TestWithParam<int> {};

TEST_P(RemoteAccessViolation, IsNakedAndNeverTouchesMemory) {
  ScriptOptions o;
  o.rq_psn = 0x40;
  const int which = GetParam();
  if (which == 8) o.qp_access = transport::kAccessRemoteRead;  // QP without REMOTE_WRITE
  ScriptQp s(o);
  using namespace transport;
  // A second PD with an all-rights MR, and MRs in the QP's PD that each lack one right.
  const PdId other_pd = s.engine().alloc_pd().value();
  std::vector<uint64_t> other(512, 0xEEEEEEEEEEEEEEEEull), no_write(512, 0xEEEEEEEEEEEEEEEEull),
      no_read(512, 0xEEEEEEEEEEEEEEEEull), no_atomic(512, 0xEEEEEEEEEEEEEEEEull);
  const uint32_t all =
      kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  const MrInfo mr_other = s.engine().reg_mr(other_pd, other.data(), 4096, all).value();
  const MrInfo mr_no_write =
      s.engine().reg_mr(s.pd(), no_write.data(), 4096, all & ~kAccessRemoteWrite).value();
  const MrInfo mr_no_read =
      s.engine().reg_mr(s.pd(), no_read.data(), 4096, all & ~kAccessRemoteRead).value();
  const MrInfo mr_no_atomic =
      s.engine().reg_mr(s.pd(), no_atomic.data(), 4096, all & ~kAccessRemoteAtomic).value();
  const size_t mem_len = s.mr().length;
  std::memset(s.mem(0), 0xEE, mem_len);
  const std::vector<uint8_t> snapshot(s.mem(0), s.mem(0) + mem_len);
  const std::vector<uint8_t> payload = pattern(16, 0x31);
  const uint32_t mtu = s.mtu();
  const std::vector<uint8_t> full = pattern(mtu, 0x51);

  Violation v{};
  uint32_t nak_psn = 0x40;
  switch (which) {
    case 0:  // R_Key never registered (random key bits differ)
      v = {"bad rkey", NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors,
           Counter::kRxWriteRequests};
      s.receive(s.rdma(Op::kWriteOnly, 0x40, s.va(0), s.mr().rkey ^ 0x5A5A0000u, 16), payload);
      break;
    case 1:  // R_Key of an MR in another PD
      v = {"wrong PD", NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors,
           Counter::kRxWriteRequests};
      s.receive(s.rdma(Op::kWriteOnly, 0x40, mr_other.addr, mr_other.rkey, 16), payload);
      break;
    case 2:  // runs ONE byte past the end of the MR
      v = {"out of bounds", NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors,
           Counter::kRxWriteRequests};
      s.receive(s.rdma(Op::kWriteOnly, 0x40, s.va(s.mr().length - 15), s.mr().rkey, 16), payload);
      break;
    case 3:  // MR without REMOTE_WRITE
      v = {"no REMOTE_WRITE", NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors,
           Counter::kRxWriteRequests};
      s.receive(s.rdma(Op::kWriteOnly, 0x40, mr_no_write.addr, mr_no_write.rkey, 16), payload);
      break;
    case 4:  // MR without REMOTE_READ
      v = {"no REMOTE_READ", NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors,
           Counter::kRxReadRequests};
      s.receive(s.rdma(Op::kReadRequest, 0x40, mr_no_read.addr, mr_no_read.rkey, 64));
      break;
    case 5:  // MR without REMOTE_ATOMIC
      v = {"no REMOTE_ATOMIC", NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors,
           Counter::kRxAtomicRequests};
      s.receive(s.atomic(Op::kFetchAdd, 0x40, mr_no_atomic.addr, mr_no_atomic.rkey, 1, 0));
      break;
    case 6:  // atomic VA not 8-byte aligned: rxe RESPST_ERR_MISALIGNED_ATOMIC -> invalid request
      v = {"unaligned atomic", NakCode::kInvalidRequest, Counter::kRespRemoteInvalidRequest,
           Counter::kRxAtomicRequests};
      s.receive(s.atomic(Op::kCompareSwap, 0x40, s.va(4), s.mr().rkey, 1, 0xEEEEEEEEEEEEEEEEull));
      break;
    case 7:  // WRITE First whose DMA length runs past the MR: refused before any byte lands
      v = {"WRITE First out of bounds", NakCode::kRemoteAccessError,
           Counter::kRespRemoteAccessErrors, Counter::kRxWriteRequests};
      s.receive(
          s.rdma(Op::kWriteFirst, 0x40, s.va(s.mr().length - mtu), s.mr().rkey, 2 * mtu, false),
          full);
      break;
    case 8:  // the QP itself does not allow RDMA WRITE (rxe check_op_valid: invalid request)
      v = {"QP without REMOTE_WRITE", NakCode::kInvalidRequest, Counter::kRespRemoteInvalidRequest,
           Counter::kCount};
      s.receive(s.rdma(Op::kWriteOnly, 0x40, s.va(0), s.mr().rkey, 16), payload);
      break;
    case 9:  // MR without REMOTE_WRITE, multi-packet WRITE
      v = {"no REMOTE_WRITE (First)", NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors,
           Counter::kRxWriteRequests};
      s.receive(s.rdma(Op::kWriteFirst, 0x40, mr_no_write.addr, mr_no_write.rkey, 2 * mtu, false),
                full);
      break;
    case 10:  // bad rkey on a READ
      v = {"READ bad rkey", NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors,
           Counter::kRxReadRequests};
      s.receive(s.rdma(Op::kReadRequest, 0x40, s.va(0), s.mr().rkey + 1, 64));
      break;
    case 11:  // READ of an MR in another PD
      v = {"READ wrong PD", NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors,
           Counter::kRxReadRequests};
      s.receive(s.rdma(Op::kReadRequest, 0x40, mr_other.addr, mr_other.rkey, 64));
      break;
    case 12:  // READ ending one byte past the MR
      v = {"READ out of bounds", NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors,
           Counter::kRxReadRequests};
      s.receive(s.rdma(Op::kReadRequest, 0x40, mr_no_write.addr + 4096 - 63, mr_no_write.rkey, 64));
      break;
    case 13:  // atomic on the 8 bytes just past the MR
      v = {"atomic out of bounds", NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors,
           Counter::kRxAtomicRequests};
      s.receive(s.atomic(Op::kFetchAdd, 0x40, mr_no_write.addr + 4096, mr_no_write.rkey, 1, 0));
      break;
    default:
      FAIL();
  }
  SCOPED_TRACE(v.name);
  // expect NAK (code) psn=0x40 msn=0, nothing else
  expect_nak(one(s.transmit()), v.nak, nak_psn, 0);
  EXPECT_EQ(s.state(), QpState::kErr);
  // Memory: nothing written anywhere, and no READ data left the node.
  EXPECT_TRUE(std::equal(snapshot.begin(), snapshot.end(), s.mem(0)));
  for (const auto* m : {&other, &no_write, &no_read, &no_atomic}) {
    EXPECT_TRUE(
        std::all_of(m->begin(), m->end(), [](uint64_t x) { return x == 0xEEEEEEEEEEEEEEEEull; }));
  }
  // A valid request afterwards is dropped: the QP is in ERR (class C error, IBA 9.9.2).
  s.receive(s.rdma(Op::kWriteOnly, 0x41, s.va(0), s.mr().rkey, 16), payload);
  EXPECT_TRUE(s.transmit().empty());
  EXPECT_TRUE(std::equal(snapshot.begin(), snapshot.end(), s.mem(0)));
  std::vector<std::pair<Counter, uint64_t>> want = {{v.counter, 1}, {Counter::kDropBadQpState, 1}};
  if (v.request_kind != Counter::kCount) want.emplace_back(v.request_kind, 1);
  // Only the first packet reached the QP in a state that counts it as received.
  const auto& c = s.qp_counters();
  EXPECT_EQ(c[Counter::kRcvdPkts], 1u);
  EXPECT_EQ(c[Counter::kSentPkts], 1u);
  want.emplace_back(Counter::kRcvdPkts, 1);
  want.emplace_back(Counter::kSentPkts, 1);
  want.emplace_back(Counter::kBytesSent, 20);
  want.emplace_back(Counter::kBytesRcvd, c[Counter::kBytesRcvd]);
  expect_counters_exact(c, want);
}

INSTANTIATE_TEST_SUITE_P(PacketScript, RemoteAccessViolation, ::testing::Range(0, 14));

// rxe check_rkey: while more than one PMTU remains, a WRITE packet must carry exactly the
// PMTU; the last exactly the rest. Otherwise NAK invalid request (the QP goes to ERR).
TEST(PacketScript, WriteMiddlePacketShorterThanPmtuIsNakedInvalidRequest) {
  ScriptOptions o;
  o.rq_psn = 0x80;
  o.mtu = Mtu::k512;
  ScriptQp s(o);
  const std::vector<uint8_t> a = pattern(512, 1), b = pattern(508, 2);
  // receive WRITE First psn=0x80 len=1536 (512 bytes) / expect nothing (no AckReq), bytes placed
  s.receive(s.rdma(Op::kWriteFirst, 0x80, s.va(0), s.mr().rkey, 1536, false), a);
  EXPECT_TRUE(s.transmit().empty());
  EXPECT_EQ(std::memcmp(s.mem(0), a.data(), 512), 0);
  // receive WRITE Middle psn=0x81 with 508 bytes / expect NAK invalid request psn=0x81 msn=0
  s.receive(s.request(Op::kWriteMiddle, 0x81, false), b);
  expect_nak(one(s.transmit()), NakCode::kInvalidRequest, 0x81, 0);
  EXPECT_EQ(s.state(), QpState::kErr);
  EXPECT_EQ(s.load64(512), 0u) << "the bad segment must not be written";
  s.expect_qp_counters({{Counter::kRxWriteRequests, 1}, {Counter::kRespRemoteInvalidRequest, 1}});
}

TEST(PacketScript, WriteLastPacketLongerThanTheRestIsNakedInvalidRequest) {
  ScriptOptions o;
  o.rq_psn = 0x90;
  o.mtu = Mtu::k256;
  ScriptQp s(o);
  const std::vector<uint8_t> a = pattern(256, 1), b = pattern(64, 2);
  s.receive(s.rdma(Op::kWriteFirst, 0x90, s.va(0), s.mr().rkey, 256 + 60, false), a);
  EXPECT_TRUE(s.transmit().empty());
  // receive WRITE Last psn=0x91 with 64 bytes where 60 remain / expect NAK invalid request
  s.receive(s.request(Op::kWriteLast, 0x91), b);
  expect_nak(one(s.transmit()), NakCode::kInvalidRequest, 0x91, 0);
  EXPECT_EQ(s.load64(256), 0u);
  EXPECT_EQ(s.state(), QpState::kErr);
  s.expect_qp_counters({{Counter::kRxWriteRequests, 1}, {Counter::kRespRemoteInvalidRequest, 1}});
}

// A SEND when no receive WQE is posted: RNR NAK with the QP's min_rnr_timer (IBA 9.7.5.1.4),
// then the retried SEND is accepted once a WQE exists.
TEST(PacketScript, SendWithoutReceiveWqeIsRnrNakedWithMinRnrTimer) {
  ScriptOptions o;
  o.rq_psn = 0x30;
  o.min_rnr_timer = 14;
  ScriptQp s(o);
  // receive SEND psn=0x30 / expect RNR NAK code 14 psn=0x30 msn=0
  s.receive(s.request(Op::kSendOnly, 0x30), {1, 2, 3});
  TxPacket p = one(s.transmit());
  EXPECT_EQ(p.opcode(), rc(Op::kAcknowledge));
  EXPECT_EQ(p.hdr.aeth.syndrome, wire::Aeth::rnr_nak(14));
  EXPECT_EQ(p.psn(), 0x30u);
  EXPECT_EQ(p.hdr.aeth.msn, 0u);
  // receive SEND psn=0x31 (was in flight) / expect nothing
  s.receive(s.request(Op::kSendOnly, 0x31), {4});
  EXPECT_TRUE(s.transmit().empty());
  // post a receive; receive the retried SEND psn=0x30 / expect ACK psn=0x30 msn=1
  s.post_recv(9, 0, 16);
  s.receive(s.request(Op::kSendOnly, 0x30), {1, 2, 3});
  expect_ack(one(s.transmit()), 0x30, 1);
  const std::vector<Wc> wcs = s.recv_wcs();
  ASSERT_EQ(wcs.size(), 1u);
  expect_recv_wc(wcs[0], 9, 3, s.qpn());
  s.expect_qp_counters({{Counter::kSendRnrErr, 1},
                        {Counter::kOutOfSeqRequest, 1},
                        {Counter::kDropOutOfSequence, 1},
                        {Counter::kRdmaRecvs, 1}});
}

// The requester side of READ and atomics against a hand-played responder: the response
// bytes land in the local SGEs, the atomic original value in host order.
TEST(PacketScript, ReadResponsesAndAtomicAckAreScatteredIntoLocalMemory) {
  ScriptOptions o;
  o.sq_psn = 0x700;
  ScriptQp s(o);  // PMTU 1024
  ASSERT_TRUE(s.post_send_one(1, WrOpcode::kRdmaRead, 8192, 2000, 0x9000, 0x77).is_ok());
  transport::SendWr fa;
  const transport::Sge fa_sge = s.sge(16384, 8);
  fa.wr_id = 2;
  fa.opcode = WrOpcode::kAtomicFetchAndAdd;
  fa.send_flags = transport::kSendSignaled;
  fa.sg_list = std::span<const transport::Sge>(&fa_sge, 1);
  fa.atomic = {0xA000, 3, 0, 0x88};
  ASSERT_TRUE(s.post_send(fa).is_ok());
  // expect READ request psn=0x700 len=2000 (consumes 0x700..0x701), FAA psn=0x702
  std::vector<TxPacket> t = s.transmit();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].opcode(), rc(Op::kReadRequest));
  EXPECT_EQ(t[0].psn(), 0x700u);
  EXPECT_EQ(t[0].hdr.reth, (wire::Reth{0x9000, 0x77, 2000}));
  EXPECT_TRUE(t[0].hdr.bth.ackreq);
  EXPECT_EQ(t[1].opcode(), rc(Op::kFetchAdd));
  EXPECT_EQ(t[1].psn(), 0x702u);
  EXPECT_EQ(t[1].hdr.atomic_eth, (wire::AtomicEth{0xA000, 0x88, 3, 0}));
  const std::vector<uint8_t> data = pattern(2000, 77);
  // receive READ First 0x700, READ Last 0x701, Atomic ACK 0x702 orig=0x1122334455667788
  s.receive(s.response(Op::kReadResponseFirst, 0x700, wire::Aeth::ack(), 1),
            std::span<const uint8_t>(data).first(1024));
  // A READ Last with the wrong length is dropped and does not complete the READ.
  s.receive(s.response(Op::kReadResponseLast, 0x701, wire::Aeth::ack(), 1), {});
  EXPECT_TRUE(s.send_wcs().empty());
  s.receive(s.response(Op::kReadResponseLast, 0x701, wire::Aeth::ack(), 1),
            std::span<const uint8_t>(data).subspan(1024));
  wire::Headers aa = s.response(Op::kAtomicAcknowledge, 0x702, wire::Aeth::ack(), 2);
  aa.atomic_ack_eth.orig = 0x1122334455667788ull;
  s.receive(aa);
  const std::vector<Wc> wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 2u);
  expect_send_wc(wcs[0], 1, WcStatus::kSuccess, WcOpcode::kRdmaRead);
  EXPECT_EQ(wcs[0].byte_len, 2000u);
  expect_send_wc(wcs[1], 2, WcStatus::kSuccess, WcOpcode::kFetchAdd);
  EXPECT_EQ(std::memcmp(s.mem(8192), data.data(), 2000), 0);
  EXPECT_EQ(s.load64(16384), 0x1122334455667788ull);
  EXPECT_EQ(s.engine().next_deadline(), kNever);
  s.expect_qp_counters({{Counter::kDropBadResponse, 1}});
}

// ---------------------------------------------------------------------------------------
// More requester/completer scripts: cumulative ACKs, ghosts and duplicates, implied NAKs.

// ACKs are cumulative (IBA 9.7.5.2.2): one ACK for the last PSN completes every WQE before it.
TEST(PacketScript, CumulativeAckCompletesEverythingBeforeItAndGhostsAreDropped) {
  ScriptOptions o;
  o.sq_psn = 0x20;
  ScriptQp s(o);
  for (uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(s.post_send_one(i, WrOpcode::kSend, 0, 8).is_ok());
  ASSERT_EQ(s.transmit().size(), 3u);
  // receive ACK psn=0x23 (never sent) / expect it dropped as unexpected
  s.receive(s.ack(0x23, 4));
  EXPECT_TRUE(s.send_wcs().empty());
  // receive ACK psn=0x22 msn=3 / expect all three complete in order
  s.receive(s.ack(0x22, 3));
  std::vector<Wc> wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) expect_send_wc(wcs[i], i + 1, WcStatus::kSuccess);
  // receive ACK psn=0x20 again / expect it dropped as a duplicate
  s.receive(s.ack(0x20, 1));
  EXPECT_TRUE(s.send_wcs().empty());
  EXPECT_TRUE(s.transmit().empty());
  EXPECT_EQ(s.engine().next_deadline(), kNever);
  s.expect_qp_counters({{Counter::kDropUnexpectedResponse, 1},
                        {Counter::kDropDuplicateResponse, 1},
                        {Counter::kRdmaSends, 3}});
}

// An ACK beyond an outstanding READ means its response was lost: implied NAK (IBA
// 9.7.5.2.5), go back to the READ and resend it (the same RETH) and what follows.
TEST(PacketScript, AckBeyondAnOutstandingReadIsAnImpliedNak) {
  ScriptOptions o;
  o.sq_psn = 0x300;
  ScriptQp s(o);
  ASSERT_TRUE(s.post_send_one(1, WrOpcode::kRdmaRead, 4096, 100, 0xB000, 0x99).is_ok());
  ASSERT_TRUE(s.post_send_one(2, WrOpcode::kSend, 0, 8).is_ok());
  std::vector<TxPacket> t = s.transmit();
  ASSERT_EQ(t.size(), 2u);
  // receive ACK psn=0x301 msn=2 (the READ response was lost) / expect READ 0x300 and SEND 0x301
  // again
  s.receive(s.ack(0x301, 2));
  t = s.transmit();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].opcode(), rc(Op::kReadRequest));
  EXPECT_EQ(t[0].psn(), 0x300u);
  EXPECT_EQ(t[0].hdr.reth, (wire::Reth{0xB000, 0x99, 100}));
  EXPECT_EQ(t[1].opcode(), rc(Op::kSendOnly));
  EXPECT_EQ(t[1].psn(), 0x301u);
  EXPECT_TRUE(s.send_wcs().empty());
  // receive READ Response Only 0x300, ACK 0x301 / expect both complete, the data in place
  const std::vector<uint8_t> data = pattern(100, 5);
  s.receive(s.response(Op::kReadResponseOnly, 0x300, wire::Aeth::ack(), 1), data);
  s.receive(s.ack(0x301, 2));
  const std::vector<Wc> wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 2u);
  expect_send_wc(wcs[0], 1, WcStatus::kSuccess, WcOpcode::kRdmaRead);
  expect_send_wc(wcs[1], 2, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(s.mem(4096), data.data(), 100), 0);
  s.expect_qp_counters({{Counter::kImpliedNakSeqErr, 1},
                        {Counter::kCompleterRetryErr, 1},
                        {Counter::kRetransmittedPkts, 2},
                        {Counter::kRdmaSends, 1}});
}

// The same for a lost Atomic ACK: the atomic is resent with its PSN (the responder will
// replay its saved result, never execute it twice).
TEST(PacketScript, AckBeyondAnOutstandingAtomicResendsTheAtomic) {
  ScriptOptions o;
  o.sq_psn = 0x400;
  ScriptQp s(o);
  transport::SendWr fa;
  const transport::Sge fa_sge = s.sge(64, 8);
  fa.wr_id = 1;
  fa.opcode = WrOpcode::kAtomicCmpAndSwp;
  fa.send_flags = transport::kSendSignaled;
  fa.sg_list = std::span<const transport::Sge>(&fa_sge, 1);
  fa.atomic = {0xC000, 0x10, 0x20, 0x5};
  ASSERT_TRUE(s.post_send(fa).is_ok());
  ASSERT_TRUE(s.post_send_one(2, WrOpcode::kSend, 0, 8).is_ok());
  ASSERT_EQ(s.transmit().size(), 2u);
  s.receive(s.ack(0x401, 2));
  std::vector<TxPacket> t = s.transmit();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].opcode(), rc(Op::kCompareSwap));
  EXPECT_EQ(t[0].psn(), 0x400u);
  EXPECT_EQ(t[0].hdr.atomic_eth, (wire::AtomicEth{0xC000, 0x5, 0x20, 0x10}));
  wire::Headers aa = s.response(Op::kAtomicAcknowledge, 0x400, wire::Aeth::ack(), 1);
  aa.atomic_ack_eth.orig = 0x10;
  s.receive(aa);
  s.receive(s.ack(0x401, 2));
  const std::vector<Wc> wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 2u);
  expect_send_wc(wcs[0], 1, WcStatus::kSuccess, WcOpcode::kCompSwap);
  expect_send_wc(wcs[1], 2, WcStatus::kSuccess);
  EXPECT_EQ(s.load64(64), 0x10u);
  s.expect_qp_counters({{Counter::kImpliedNakSeqErr, 1},
                        {Counter::kCompleterRetryErr, 1},
                        {Counter::kRetransmittedPkts, 2},
                        {Counter::kRdmaSends, 1}});
}

// ---------------------------------------------------------------------------------------
// More responder scripts.

// IBA 9.7.5.1.2: a Middle/Last with no message in progress is an opcode sequence error:
// NAK invalid request, the QP goes to ERR.
TEST(PacketScript, MiddleWithoutFirstIsNakedInvalidRequest) {
  ScriptOptions o;
  o.rq_psn = 0x60;
  ScriptQp s(o);
  s.post_recv(1, 0, 4096);
  // receive SEND Middle psn=0x60 / expect NAK invalid request psn=0x60 msn=0
  s.receive(s.request(Op::kSendMiddle, 0x60, false), pattern(1024, 1));
  expect_nak(one(s.transmit()), NakCode::kInvalidRequest, 0x60, 0);
  EXPECT_EQ(s.state(), QpState::kErr);
  const std::vector<Wc> wcs = s.recv_wcs();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(s.load64(0), 0u);
  s.expect_qp_counters({{Counter::kRespRemoteInvalidRequest, 1}, {Counter::kRespCqeFlushError, 1}});
}

// A network duplicate of the First packet of the message in progress is a duplicate (ACKed
// with ePSN-1 when it asks for an ACK), not a restart of the message.
TEST(PacketScript, DuplicateFirstPacketDoesNotRestartTheMessageInProgress) {
  ScriptOptions o;
  o.rq_psn = 0x70;
  ScriptQp s(o);
  s.post_recv(1, 0, 4096);
  const std::vector<uint8_t> msg = pattern(2500, 4);
  const std::span<const uint8_t> m(msg);
  s.receive(s.request(Op::kSendFirst, 0x70, false), m.subspan(0, 1024));
  EXPECT_TRUE(s.transmit().empty());
  // receive SEND First psn=0x70 again, with AckReq / expect ACK psn=0x70 msn=0
  s.receive(s.request(Op::kSendFirst, 0x70, true), m.subspan(0, 1024));
  expect_ack(one(s.transmit()), 0x70, 0);
  s.receive(s.request(Op::kSendMiddle, 0x71, false), m.subspan(1024, 1024));
  s.receive(s.request(Op::kSendLast, 0x72), m.subspan(2048));
  expect_ack(one(s.transmit()), 0x72, 1);
  const std::vector<Wc> wcs = s.recv_wcs();
  ASSERT_EQ(wcs.size(), 1u);
  expect_recv_wc(wcs[0], 1, 2500, s.qpn());
  EXPECT_EQ(std::memcmp(s.mem(0), msg.data(), msg.size()), 0);
  s.expect_qp_counters({{Counter::kDuplicateRequest, 1}, {Counter::kRdmaRecvs, 1}});
}

// SEND with Invalidate (IBA 10.6.7.2): only a memory window or a fast-registration MR can be
// invalidated remotely; an ibv_reg_mr region cannot (rxe_invalidate_mr refuses it). The
// receive completes REM_INV_REQ_ERR, the QP goes to ERR (rxe class J) and the requester gets
// NAK invalid request (uroce tells it; rxe ACKs). The R_Key survives: after the QP is
// reconnected a WRITE with it lands.
TEST(PacketScript, SendWithInvalidateOfARegisteredMrIsRefused) {
  ScriptOptions o;
  o.rq_psn = 0x10;
  ScriptQp s(o);
  std::vector<uint64_t> target(64, 0);
  const transport::MrInfo mr2 =
      s.engine()
          .reg_mr(s.pd(), target.data(), 512,
                  transport::kAccessLocalWrite | transport::kAccessRemoteWrite)
          .value();
  s.post_recv(1, 0, 64);
  s.post_recv(2, 64, 64);
  // receive WRITE psn=0x10 with the rkey / expect ACK (it is valid)
  s.receive(s.rdma(Op::kWriteOnly, 0x10, mr2.addr, mr2.rkey, 8), {1, 2, 3, 4, 5, 6, 7, 8});
  expect_ack(one(s.transmit()), 0x10, 1);
  // receive SEND Only with Invalidate psn=0x11 ieth=rkey / expect NAK invalid request
  wire::Headers inv = s.request(Op::kSendOnlyInv, 0x11);
  inv.ieth_rkey = mr2.rkey;
  s.receive(inv, {9, 9});
  expect_nak(one(s.transmit()), NakCode::kInvalidRequest, 0x11, 1);
  EXPECT_EQ(s.state(), QpState::kErr);
  const std::vector<Wc> wcs = s.recv_wcs();
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(wcs[0].wc_flags & transport::kWcWithInv, 0u);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, WcStatus::kWrFlushErr);
  s.expect_qp_counters({{Counter::kRxWriteRequests, 1},
                        {Counter::kRespRemoteInvalidRequest, 1},
                        {Counter::kRespCqeError, 1},
                        {Counter::kRespCqeFlushError, 1}});
  // reconnect, receive WRITE psn=0x40 with the same rkey / expect ACK: the key still works
  s.reconnect(0x40);
  s.receive(s.rdma(Op::kWriteOnly, 0x40, mr2.addr + 8, mr2.rkey, 8), {7, 7, 7, 7, 7, 7, 7, 7});
  expect_ack(one(s.transmit()), 0x40, 1);
  EXPECT_EQ(target[1], 0x0707070707070707u);
}

// The same refusal on the Last packet of a multi-packet SEND with Invalidate: the first
// packet's data was placed, the receive still completes in error, never WITH_INV.
TEST(PacketScript, SendLastWithInvalidateIsRefusedToo) {
  ScriptOptions o;
  o.rq_psn = 0x20;
  o.mtu = Mtu::k256;
  ScriptQp s(o);
  s.post_recv(1, 0, 1024);
  const std::vector<uint8_t> first = pattern(256, 3);
  s.receive(s.request(Op::kSendFirst, 0x20, false), first);
  EXPECT_TRUE(s.transmit().empty());
  wire::Headers last = s.request(Op::kSendLastInv, 0x21);
  last.ieth_rkey = s.mr().rkey;  // the QP's own buffer MR
  s.receive(last, {1, 2, 3});
  expect_nak(one(s.transmit()), NakCode::kInvalidRequest, 0x21, 0);
  EXPECT_EQ(s.state(), QpState::kErr);
  const std::vector<Wc> wcs = s.recv_wcs();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemInvReqErr);
  s.expect_qp_counters({{Counter::kRespRemoteInvalidRequest, 1}, {Counter::kRespCqeError, 1}});
}

// Zero-length RDMA (IBA 9.7.5.1.x o9-..: no R_Key check when the DMA length is 0): a
// WRITE or READ of 0 bytes with any R_Key succeeds and touches nothing.
TEST(PacketScript, ZeroLengthWriteAndReadDoNotCheckTheRkey) {
  ScriptOptions o;
  o.rq_psn = 0x50;
  ScriptQp s(o);
  s.receive(s.rdma(Op::kWriteOnly, 0x50, 0xDEAD0000, 0x1234, 0));
  expect_ack(one(s.transmit()), 0x50, 1);
  s.receive(s.rdma(Op::kReadRequest, 0x51, 0xDEAD0000, 0x1234, 0));
  const TxPacket p = one(s.transmit());
  EXPECT_EQ(p.opcode(), rc(Op::kReadResponseOnly));
  EXPECT_EQ(p.psn(), 0x51u);
  EXPECT_TRUE(p.payload.empty());
  EXPECT_EQ(p.hdr.aeth.msn, 2u);
  EXPECT_EQ(s.state(), QpState::kRts);
  s.expect_qp_counters({{Counter::kRxWriteRequests, 1}, {Counter::kRxReadRequests, 1}});
}

// RNR on the Last-with-immediate of a multi-packet WRITE: the NAK names that packet; once a
// receive WQE exists the retried Last completes with the RETH length.
TEST(PacketScript, WriteWithImmediateWithoutReceiveWqeIsRnrNakedOnItsLastPacket) {
  ScriptOptions o;
  o.rq_psn = 0x90;
  o.min_rnr_timer = 3;
  ScriptQp s(o);
  const std::vector<uint8_t> msg = pattern(1500, 8);
  const std::span<const uint8_t> m(msg);
  s.receive(s.rdma(Op::kWriteFirst, 0x90, s.va(8192), s.mr().rkey, 1500, false),
            m.subspan(0, 1024));
  wire::Headers last = s.request(Op::kWriteLastImm, 0x91);
  last.immdt = 0xCAFEF00D;
  s.receive(last, m.subspan(1024));
  TxPacket p = one(s.transmit());
  EXPECT_EQ(p.hdr.aeth.syndrome, wire::Aeth::rnr_nak(3));
  EXPECT_EQ(p.psn(), 0x91u);
  EXPECT_TRUE(s.recv_wcs().empty());
  s.post_recv(4, 0, 0);
  s.receive(last, m.subspan(1024));
  expect_ack(one(s.transmit()), 0x91, 1);
  const std::vector<Wc> wcs = s.recv_wcs();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 4u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(wcs[0].byte_len, 1500u);
  EXPECT_EQ(wcs[0].imm_data, 0xCAFEF00Du);
  EXPECT_EQ(wcs[0].wc_flags, transport::kWcGrh | transport::kWcWithImm);
  EXPECT_EQ(std::memcmp(s.mem(8192), msg.data(), msg.size()), 0);
  s.expect_qp_counters({{Counter::kRxWriteRequests, 1}, {Counter::kSendRnrErr, 1}});
}

// A READ or atomic to a QP with max_dest_rd_atomic = 0: NAK invalid request (rxe).
TEST(PacketScript, ReadWithoutResponderResourcesIsNakedInvalidRequest) {
  ScriptOptions o;
  o.rq_psn = 0xA0;
  o.max_dest_rd_atomic = 0;
  ScriptQp s(o);
  s.receive(s.rdma(Op::kReadRequest, 0xA0, s.va(0), s.mr().rkey, 16));
  expect_nak(one(s.transmit()), NakCode::kInvalidRequest, 0xA0, 0);
  EXPECT_EQ(s.state(), QpState::kErr);
  s.expect_qp_counters({{Counter::kRespRemoteInvalidRequest, 1}});
}

// UC (IBA 9.8.3): a PSN gap drops the message in progress silently (no NAK exists in UC);
// the next First/Only starts a new message in the same receive WQE.
TEST(PacketScript, UcGapDropsTheMessageAndTheNextOneReusesTheWqe) {
  ScriptOptions o;
  o.type = QpType::kUc;
  o.rq_psn = 5;
  ScriptQp s(o);
  s.post_recv(1, 0, 4096);
  s.receive(s.request(Op::kSendFirst, 5), pattern(1024, 1));
  // receive SEND Last psn=7 (psn=6 lost) / expect nothing, no completion
  s.receive(s.request(Op::kSendLast, 7), pattern(10, 2));
  EXPECT_TRUE(s.transmit().empty());
  EXPECT_TRUE(s.recv_wcs().empty());
  // receive SEND Only psn=8 "abc" / expect a completion on WQE 1 with exactly "abc"
  s.receive(s.request(Op::kSendOnly, 8), bytes_of("abc"));
  EXPECT_TRUE(s.transmit().empty());
  const std::vector<Wc> wcs = s.recv_wcs();
  ASSERT_EQ(wcs.size(), 1u);
  expect_recv_wc(wcs[0], 1, 3, s.qpn());
  EXPECT_EQ(std::memcmp(s.mem(0), "abc", 3), 0);
  s.expect_qp_counters(
      {{Counter::kOutOfSeqRequest, 1}, {Counter::kDropUcMessage, 1}, {Counter::kRdmaRecvs, 1}});
}

// Completion notification (ibv_req_notify_cq solicited_only): only a receive of a packet
// with the SE bit raises the event.
TEST(PacketScript, SolicitedOnlyNotificationFiresOnTheSeBitOnly) {
  ScriptOptions o;
  o.rq_psn = 0x10;
  ScriptQp s(o);
  s.post_recv(1, 0, 64);
  s.post_recv(2, 64, 64);
  ASSERT_TRUE(s.engine().req_notify_cq(s.recv_cq(), true).is_ok());
  std::array<transport::AsyncEvent, 4> ev;
  s.receive(s.request(Op::kSendOnly, 0x10), {1});
  expect_ack(one(s.transmit()), 0x10, 1);
  EXPECT_EQ(s.engine().poll_events(ev), 0u);
  wire::Headers se = s.request(Op::kSendOnly, 0x11);
  se.bth.se = true;
  s.receive(se, {2});
  expect_ack(one(s.transmit()), 0x11, 2);
  ASSERT_EQ(s.engine().poll_events(ev), 1u);
  EXPECT_EQ(ev[0].type, transport::EventType::kCqCompletion);
  EXPECT_EQ(ev[0].element, static_cast<uint32_t>(s.recv_cq()));
  EXPECT_EQ(s.recv_wcs().size(), 2u);
}

// ---------------------------------------------------------------------------------------
// Retry budgets: counted per stall, not per connection (rxe reset_retry_counters), 7 means
// forever, and timeout 0 means no timer at all.

TEST(PacketScript, ProgressGivesTheRetryBudgetBack) {
  ScriptOptions o;
  o.sq_psn = 0x100;
  o.timeout = 4;  // 65536 ns
  o.retry_cnt = 1;
  ScriptQp s(o);
  const Nanos kT(4096 << 4);
  ASSERT_TRUE(s.post_send_one(1, WrOpcode::kSend, 0, 8).is_ok());
  ASSERT_TRUE(s.post_send_one(2, WrOpcode::kSend, 0, 8).is_ok());
  ASSERT_EQ(s.transmit().size(), 2u);
  // timeout / expect 0x100 resent alone, the probe (retry 1 of 1)
  s.advance_to(TimePoint(kT));
  EXPECT_EQ(one(s.transmit()).psn(), 0x100u);
  // receive ACK psn=0x100 / expect progress: the budget is back. No RTT was measured to show
  // that it answers the original, so it answers the probe: go-back-N resends 0x101 now
  s.receive(s.ack(0x100, 1));
  EXPECT_EQ(one(s.transmit()).psn(), 0x101u);
  // timeout / expect 0x101 resent, not RETRY_EXC_ERR
  s.advance_to(TimePoint(kT * 2));
  const TxPacket p = one(s.transmit());
  EXPECT_EQ(p.psn(), 0x101u);
  EXPECT_EQ(s.state(), QpState::kRts);
  // timeout again without progress / expect RETRY_EXC_ERR now
  s.advance_to(TimePoint(kT * 3));
  EXPECT_TRUE(s.transmit().empty());
  const std::vector<Wc> wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 2u);
  expect_send_wc(wcs[0], 1, WcStatus::kSuccess);
  expect_send_wc(wcs[1], 2, WcStatus::kRetryExcErr);
  EXPECT_EQ(s.state(), QpState::kErr);
  s.expect_qp_counters({{Counter::kLocalAckTimeoutErr, 3},
                        {Counter::kCompleterRetryErr, 2},
                        {Counter::kRetryExceededErr, 1},
                        {Counter::kRetransmittedPkts, 3},
                        {Counter::kRdmaSends, 1},
                        {Counter::kReqCqeError, 1}});
}

// A configured timeout resends the oldest unacknowledged packet alone (its probe) when the
// RTT is longer than the timeout (a deep queue): the RTO (150 us from the 50 us sample) is past
// the configured 65.5 us. Its first response decides what follows.
struct ProbeScript {
  ScriptQp s;
  TimePoint probe_at;
  explicit ProbeScript(const ScriptOptions& o) : s(o) {}
};

ScriptOptions probe_options() {
  ScriptOptions o;
  o.sq_psn = 0x100;
  o.timeout = 4;  // 65536 ns
  o.retry_cnt = 3;
  return o;
}

// Three SENDs, the first ACKed after 50 us (the only RTT sample: min RTT 50 us), then the
// configured timeout: 0x101 resent alone.
void run_to_probe(ProbeScript& p) {
  ScriptQp& s = p.s;
  for (uint64_t i = 1; i <= 3; ++i) {
    std::memset(s.mem(i * 64), static_cast<int>(i), 16);
    ASSERT_TRUE(s.post_send_one(i, WrOpcode::kSend, i * 64, 16).is_ok());
  }
  ASSERT_EQ(s.transmit().size(), 3u);
  const TimePoint t_ack = TimePoint(0) + std::chrono::microseconds(50);
  s.advance_to(t_ack);
  s.receive(s.ack(0x100, 1));
  ASSERT_EQ(s.send_wcs().size(), 1u);
  p.probe_at = t_ack + Nanos(4096 << 4);
  EXPECT_EQ(s.engine().next_deadline(), p.probe_at);
  s.advance_to(p.probe_at);
  const TxPacket probe = one(s.transmit());
  EXPECT_EQ(probe.psn(), 0x101u);
  EXPECT_EQ(probe.payload, std::vector<uint8_t>(16, 2));
  // Nothing more leaves before a response.
  s.advance_to(p.probe_at + std::chrono::microseconds(5));
  EXPECT_TRUE(s.transmit().empty());
}

// The sender (or its link) paused, nothing was lost: 10 us after the probe, sooner than half
// the smallest RTT (25 us), comes the ACK of the original 0x101. The requester resumes after
// the highest PSN sent: 0x102 is not resent, and its own ACK completes the last SEND.
TEST(PacketScript, ATimeoutProbeMetByAnOriginalsAckResendsNothingMore) {
  ProbeScript p(probe_options());
  run_to_probe(p);
  ScriptQp& s = p.s;
  s.advance_to(p.probe_at + std::chrono::microseconds(10));
  s.receive(s.ack(0x101, 2));
  EXPECT_TRUE(s.transmit().empty());
  s.receive(s.ack(0x102, 3));
  EXPECT_TRUE(s.transmit().empty());
  const std::vector<Wc> wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 2u);
  expect_send_wc(wcs[0], 2, WcStatus::kSuccess);
  expect_send_wc(wcs[1], 3, WcStatus::kSuccess);
  EXPECT_EQ(s.state(), QpState::kRts);
  s.expect_qp_counters({{Counter::kLocalAckTimeoutErr, 1},
                        {Counter::kCompleterRetryErr, 1},
                        {Counter::kTimeoutSpurious, 1},
                        {Counter::kRetransmittedPkts, 1},
                        {Counter::kRdmaSends, 3}});
}

// 0x101 was lost (and 0x102 behind it): the ACK of the probe comes a round trip (50 us) after
// it. It answers the probe, so go-back-N resends the rest, 0x102, at once.
TEST(PacketScript, ATimeoutProbeAnsweredAfterARoundTripResendsTheRest) {
  ProbeScript p(probe_options());
  run_to_probe(p);
  ScriptQp& s = p.s;
  s.advance_to(p.probe_at + std::chrono::microseconds(50));
  s.receive(s.ack(0x101, 2));
  const TxPacket rest = one(s.transmit());
  EXPECT_EQ(rest.psn(), 0x102u);
  EXPECT_EQ(rest.payload, std::vector<uint8_t>(16, 3));
  s.receive(s.ack(0x102, 3));
  EXPECT_EQ(s.send_wcs().size(), 2u);
  s.expect_qp_counters({{Counter::kLocalAckTimeoutErr, 1},
                        {Counter::kCompleterRetryErr, 1},
                        {Counter::kRetransmittedPkts, 2},
                        {Counter::kRdmaSends, 3}});
}

// The responder had 0x101 and 0x102 and only their ACK was lost: the probe's duplicate is
// answered, a round trip later, with the cumulative ACK of 0x102, beyond the probe. Nothing
// is resent; the SENDs complete.
TEST(PacketScript, ATimeoutProbeAnsweredBeyondItselfResendsNothingMore) {
  ProbeScript p(probe_options());
  run_to_probe(p);
  ScriptQp& s = p.s;
  s.advance_to(p.probe_at + std::chrono::microseconds(50));
  s.receive(s.ack(0x102, 3));
  EXPECT_TRUE(s.transmit().empty());
  EXPECT_EQ(s.send_wcs().size(), 2u);
  EXPECT_EQ(s.engine().next_deadline(), TimePoint::max());
  s.expect_qp_counters({{Counter::kLocalAckTimeoutErr, 1},
                        {Counter::kCompleterRetryErr, 1},
                        {Counter::kTimeoutSpurious, 1},
                        {Counter::kRetransmittedPkts, 1},
                        {Counter::kRdmaSends, 3}});
}

// Without adaptive retransmission (rxe's timer, UROCE_ADAPTIVE_RETRANS=0) a timeout resends
// everything from the oldest unacknowledged PSN, with no probe.
TEST(PacketScript, WithoutAdaptiveRetransmissionATimeoutResendsTheWholeWindow) {
  ScriptOptions o = probe_options();
  o.adaptive_retrans = false;
  ScriptQp s(o);
  for (uint64_t i = 1; i <= 3; ++i) {
    ASSERT_TRUE(s.post_send_one(i, WrOpcode::kSend, i * 64, 16).is_ok());
  }
  ASSERT_EQ(s.transmit().size(), 3u);
  s.advance_to(TimePoint(0) + std::chrono::microseconds(50));
  s.receive(s.ack(0x100, 1));
  s.advance_to(TimePoint(0) + std::chrono::microseconds(50) + Nanos(4096 << 4));
  const std::vector<TxPacket> t = s.transmit();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].psn(), 0x101u);
  EXPECT_EQ(t[1].psn(), 0x102u);
}

TEST(PacketScript, RetryCnt7AndRnrRetry7RetryForever) {
  ScriptOptions o;
  o.sq_psn = 0x200;
  o.timeout = 1;  // 8192 ns
  o.retry_cnt = 7;
  o.rnr_retry = 7;
  ScriptQp s(o);
  ASSERT_TRUE(s.post_send_one(1, WrOpcode::kSend, 0, 8).is_ok());
  ASSERT_EQ(s.transmit().size(), 1u);
  for (int i = 1; i <= 20; ++i) {
    s.advance_to(s.engine().next_deadline());
    ASSERT_EQ(s.transmit().size(), 1u) << "timeout " << i;
  }
  for (int i = 1; i <= 20; ++i) {
    s.receive(s.rnr_nak(1, 0x200, 0));
    s.advance_to(s.engine().next_deadline());
    ASSERT_EQ(s.transmit().size(), 1u) << "RNR " << i;
  }
  EXPECT_EQ(s.state(), QpState::kRts);
  EXPECT_TRUE(s.send_wcs().empty());
  s.receive(s.ack(0x200, 1));
  ASSERT_EQ(s.send_wcs().size(), 1u);
  s.expect_qp_counters({{Counter::kLocalAckTimeoutErr, 20},
                        {Counter::kCompleterRetryErr, 20},
                        {Counter::kRcvdRnrErr, 20},
                        {Counter::kRetransmittedPkts, 40},
                        {Counter::kRdmaSends, 1}});
}

TEST(PacketScript, TimeoutZeroArmsNoTimer) {
  ScriptOptions o;
  o.timeout = 0;
  ScriptQp s(o);
  ASSERT_TRUE(s.post_send_one(1, WrOpcode::kSend, 0, 8).is_ok());
  ASSERT_EQ(s.transmit().size(), 1u);
  EXPECT_EQ(s.engine().next_deadline(), kNever);
  s.advance_to(TimePoint(std::chrono::seconds(100)));
  EXPECT_TRUE(s.transmit().empty());
  EXPECT_EQ(s.state(), QpState::kRts);
}

// Packets a QP must never act on: bad ICRC, unknown QPN, wrong P_Key, another transport,
// another source address, bad TVer. Each is dropped and counted under its own name.
TEST(PacketScript, MalformedAndMisaddressedPacketsAreDroppedAndCounted) {
  ScriptOptions o;
  o.rq_psn = 0x10;
  ScriptQp s(o);
  s.post_recv(1, 0, 64);
  const std::vector<uint8_t> payload = {1, 2, 3, 4};
  auto raw = [&](const wire::Headers& h, bool corrupt_icrc, const std::array<uint8_t, 16>& src) {
    std::vector<uint8_t> bytes(wire::packet_size(h.bth.opcode, payload.size()));
    EXPECT_EQ(wire::build_packet(h, payload, bytes), bytes.size());
    transport::PacketMeta meta;
    meta.ip.src = src;
    meta.ip.dst = v4_gid(10, 0, 0, 1);
    meta.ip_id_known = true;
    wire::write_icrc(meta.ip, bytes);
    if (corrupt_icrc) bytes[bytes.size() - 1] ^= 0x01;
    s.engine().on_packet(s.now(), meta, bytes);
  };
  const auto peer = v4_gid(10, 0, 0, 2);
  wire::Headers good = s.request(Op::kSendOnly, 0x10);
  raw(good, true, peer);  // bad ICRC
  wire::Headers h = good;
  h.bth.dqpn = 0x777;  // no such QP
  raw(h, false, peer);
  h = good;
  h.bth.pkey = 0x1234;  // another partition
  raw(h, false, peer);
  h = good;
  h.bth.opcode = wire::make_opcode(wire::Transport::kUc, Op::kSendOnly);  // UC opcode to an RC QP
  raw(h, false, peer);
  raw(good, false, v4_gid(10, 0, 0, 99));  // not the connected peer
  h = good;
  h.bth.tver = 1;
  raw(h, false, peer);
  EXPECT_TRUE(s.transmit().empty());
  EXPECT_TRUE(s.recv_wcs().empty());
  // The real one still works, with the expected PSN.
  s.receive(good, payload);
  expect_ack(one(s.transmit()), 0x10, 1);
  ASSERT_EQ(s.recv_wcs().size(), 1u);
  const Counters& dev = s.engine().counters();
  EXPECT_EQ(dev[Counter::kIcrcErrors], 1u);
  EXPECT_EQ(dev[Counter::kDropBadQpn], 1u);
  EXPECT_EQ(dev[Counter::kDropBadPkey], 1u);
  EXPECT_EQ(dev[Counter::kDropBadQpType], 1u);
  EXPECT_EQ(dev[Counter::kDropBadAddress], 1u);
  EXPECT_EQ(dev[Counter::kDropBadTver], 1u);
  EXPECT_EQ(dev[Counter::kRcvdPkts], 1u + 4u)
      << "ICRC-valid packets are received; the TVer one is not parsed";
  // Per QP: only what was addressed to it and got past the device checks.
  s.expect_qp_counters(
      {{Counter::kDropBadQpType, 1}, {Counter::kDropBadAddress, 1}, {Counter::kRdmaRecvs, 1}});
}

// ---------------------------------------------------------------------------------------
// Requester flow limits: max_rd_atomic (IBA 9.5, rounded up to a power of two like rxe) and
// the Fence indicator (IBA 10.8.3.3: wait until every earlier READ and atomic completed).

TEST(PacketScript, MaxRdAtomicBoundsOutstandingReadsAndAtomics) {
  ScriptOptions o;
  o.sq_psn = 0x10;
  o.max_rd_atomic = 2;
  ScriptQp s(o);
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        s.post_send_one(i + 1, WrOpcode::kRdmaRead, 1024 * i, 16, 0xD000 + 16 * i, 7).is_ok());
  }
  ASSERT_TRUE(s.post_send_one(4, WrOpcode::kSend, 4096, 8).is_ok());
  // expect READ 0x10 and READ 0x11 only: the third READ waits, and the SEND behind it too
  std::vector<TxPacket> t = s.transmit();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].psn(), 0x10u);
  EXPECT_EQ(t[1].psn(), 0x11u);
  // receive READ Response Only 0x10 / expect the third READ 0x12 and then the SEND 0x13
  s.receive(s.response(Op::kReadResponseOnly, 0x10, wire::Aeth::ack(), 1), pattern(16, 1));
  t = s.transmit();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].opcode(), rc(Op::kReadRequest));
  EXPECT_EQ(t[0].psn(), 0x12u);
  EXPECT_EQ(t[0].hdr.reth.va, 0xD020u);
  EXPECT_EQ(t[1].opcode(), rc(Op::kSendOnly));
  EXPECT_EQ(t[1].psn(), 0x13u);
}

TEST(PacketScript, FencedWrWaitsForEarlierReadsToComplete) {
  ScriptOptions o;
  o.sq_psn = 0x40;
  ScriptQp s(o);
  ASSERT_TRUE(s.post_send_one(1, WrOpcode::kRdmaRead, 0, 64, 0xE000, 9).is_ok());
  ASSERT_TRUE(s.post_send_one(2, WrOpcode::kSend, 1024, 8).is_ok());  // not fenced: goes out
  transport::SendWr w;
  const transport::Sge g = s.sge(2048, 32);
  w.wr_id = 3;
  w.opcode = WrOpcode::kRdmaWrite;
  w.send_flags = transport::kSendSignaled | transport::kSendFence;
  w.sg_list = std::span<const transport::Sge>(&g, 1);
  w.rdma = {0xE000, 9};
  ASSERT_TRUE(s.post_send(w).is_ok());
  // expect READ 0x40 and SEND 0x41; the fenced WRITE waits for the READ
  std::vector<TxPacket> t = s.transmit();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].opcode(), rc(Op::kReadRequest));
  EXPECT_EQ(t[1].opcode(), rc(Op::kSendOnly));
  // receive READ Response Only 0x40 / expect the WRITE 0x42 now
  s.receive(s.response(Op::kReadResponseOnly, 0x40, wire::Aeth::ack(), 1), pattern(64, 3));
  t = s.transmit();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].opcode(), rc(Op::kWriteOnly));
  EXPECT_EQ(t[0].psn(), 0x42u);
  s.receive(s.ack(0x42, 3));
  const std::vector<Wc> wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 3u);
  expect_send_wc(wcs[0], 1, WcStatus::kSuccess, WcOpcode::kRdmaRead);
  expect_send_wc(wcs[1], 2, WcStatus::kSuccess);
  expect_send_wc(wcs[2], 3, WcStatus::kSuccess, WcOpcode::kRdmaWrite);
}

// SE (IBA 9.2.1): only on the last packet of a solicited SEND / WRITE with immediate.
TEST(PacketScript, SolicitedEventBitOnlyOnTheLastPacket) {
  ScriptOptions o;
  o.sq_psn = 0x80;
  o.mtu = Mtu::k256;
  ScriptQp s(o);
  transport::SendWr w;
  const transport::Sge g = s.sge(0, 600);
  w.wr_id = 1;
  w.opcode = WrOpcode::kSendWithImm;
  w.imm_data = 0x01020304;
  w.send_flags = transport::kSendSignaled | transport::kSendSolicited;
  w.sg_list = std::span<const transport::Sge>(&g, 1);
  ASSERT_TRUE(s.post_send(w).is_ok());
  w.wr_id = 2;
  w.opcode = WrOpcode::kRdmaWrite;  // SE has no meaning for a WRITE without immediate
  w.rdma = {0xF000, 3};
  ASSERT_TRUE(s.post_send(w).is_ok());
  const std::vector<TxPacket> t = s.transmit();
  ASSERT_EQ(t.size(), 6u);
  EXPECT_EQ(t[0].opcode(), rc(Op::kSendFirst));
  EXPECT_FALSE(t[0].hdr.bth.se);
  EXPECT_FALSE(t[1].hdr.bth.se);
  EXPECT_EQ(t[2].opcode(), rc(Op::kSendLastImm));
  EXPECT_TRUE(t[2].hdr.bth.se);
  EXPECT_EQ(t[2].hdr.immdt, 0x01020304u);
  EXPECT_EQ(t[2].payload.size(), 88u);
  for (size_t i = 3; i < 6; ++i) EXPECT_FALSE(t[i].hdr.bth.se) << "WRITE packet " << i;
  EXPECT_EQ(t[3].hdr.reth, (wire::Reth{0xF000, 3, 600}));
}

// A driver that cannot see the IPv4 ID (a UDP socket) leaves ip_id_known false: the ICRC is
// then checked modulo the ID/DF bits (wire::verify_icrc_udp). A peer's nonzero ID passes and
// is counted as such; a corrupted payload is still caught.
TEST(PacketScript, IcrcIsCheckedModuloTheUnknownIpv4Id) {
  ScriptOptions o;
  o.rq_psn = 0x10;
  ScriptQp s(o);
  s.post_recv(1, 0, 64);
  s.post_recv(2, 64, 64);
  const std::vector<uint8_t> payload = {5, 6, 7, 8};
  auto deliver = [&](uint32_t psn, bool corrupt) {
    const wire::Headers h = s.request(Op::kSendOnly, psn);
    std::vector<uint8_t> bytes(wire::packet_size(h.bth.opcode, payload.size()));
    EXPECT_EQ(wire::build_packet(h, payload, bytes), bytes.size());
    transport::PacketMeta sent;
    sent.ip.src = v4_gid(10, 0, 0, 2);
    sent.ip.dst = v4_gid(10, 0, 0, 1);
    sent.ip.ipv4_id = 0x1234;  // what the peer's kernel wrote (rxe: a per-destination counter)
    wire::write_icrc(sent.ip, bytes);
    if (corrupt) bytes[13] ^= 0x40;     // a payload bit
    transport::PacketMeta seen = sent;  // a UDP socket sees addresses and ports, not the ID
    seen.ip.ipv4_id = 0;
    seen.ip_id_known = false;
    s.engine().on_packet(s.now(), seen, bytes);
  };
  deliver(0x10, true);
  EXPECT_TRUE(s.transmit().empty());
  deliver(0x10, false);
  expect_ack(one(s.transmit()), 0x10, 1);
  const std::vector<Wc> wcs = s.recv_wcs();
  ASSERT_EQ(wcs.size(), 1u);
  expect_recv_wc(wcs[0], 1, 4, s.qpn());
  EXPECT_EQ(s.engine().counters()[Counter::kIcrcErrors], 1u);
  EXPECT_EQ(s.engine().counters()[Counter::kIcrcOkModuloIpId], 1u);
  EXPECT_EQ(s.engine().counters()[Counter::kRcvdPkts], 1u);
}

// ---------------------------------------------------------------------------------------
// A hostile peer: thousands of well-formed (valid ICRC) but arbitrary requests and responses
// with PSNs around the expected ones, R_Keys valid or not, addresses and lengths around and
// far beyond a guarded MR. The engine must stay memory-safe (run under ASan), never touch a
// byte outside a registered MR, and only transmit packets that parse and carry a valid ICRC.
TEST(PacketScript, HostilePeerNeverMakesTheEngineTouchMemoryOutsideAnMr) {
  std::mt19937_64 rng(0xBADC0FFEE);
  auto below = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  static constexpr Op kOps[] = {
      Op::kSendFirst,        Op::kSendMiddle,        Op::kSendLast,           Op::kSendLastImm,
      Op::kSendOnly,         Op::kSendOnlyImm,       Op::kWriteFirst,         Op::kWriteMiddle,
      Op::kWriteLast,        Op::kWriteLastImm,      Op::kWriteOnly,          Op::kWriteOnlyImm,
      Op::kReadRequest,      Op::kReadResponseFirst, Op::kReadResponseMiddle, Op::kReadResponseLast,
      Op::kReadResponseOnly, Op::kAcknowledge,       Op::kAtomicAcknowledge,  Op::kCompareSwap,
      Op::kFetchAdd,         Op::kSendLastInv,       Op::kSendOnlyInv};
  for (int round = 0; round < 40; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    ScriptOptions o;
    o.mtu = static_cast<Mtu>(1 + below(5));
    o.sq_psn = static_cast<uint32_t>(rng()) & 0xFFFFFF;
    o.rq_psn = static_cast<uint32_t>(rng()) & 0xFFFFFF;
    o.timeout = 1;
    ScriptQp s(o);
    // The guarded MR: 4 KiB with 4 KiB of canary on each side.
    std::vector<uint8_t> guarded(3 * 4096, 0xC5);
    const uint32_t all = transport::kAccessLocalWrite | transport::kAccessRemoteWrite |
                         transport::kAccessRemoteRead | transport::kAccessRemoteAtomic;
    const transport::MrInfo mr2 =
        s.engine().reg_mr(s.pd(), guarded.data() + 4096, 4096, all).value();
    // Local work the responses can land in: READs and atomics into the fixture's own MR.
    for (uint64_t i = 0; i < 8; ++i) {
      (void)s.post_send_one(i, i % 2 ? WrOpcode::kRdmaRead : WrOpcode::kSend, 4096 * i,
                            1 + below(5000));
      s.post_recv(100 + i, 8192 * i, static_cast<uint32_t>(below(9000)));
    }
    (void)s.transmit();
    for (int k = 0; k < 300; ++k) {
      const Op op = kOps[below(std::size(kOps))];
      const bool response = op >= Op::kReadResponseFirst && op <= Op::kAtomicAcknowledge;
      const uint32_t base = response ? o.sq_psn : o.rq_psn;
      wire::Headers h =
          s.request(op, (base + static_cast<uint32_t>(below(40)) - 8) & 0xFFFFFF, below(2) == 0);
      const int64_t off = static_cast<int64_t>(below(4096 + 256)) - 128;
      h.reth.va = below(8) == 0 ? rng() : mr2.addr + static_cast<uint64_t>(off);
      h.reth.rkey = below(5) == 0 ? static_cast<uint32_t>(rng()) : mr2.rkey;
      h.reth.dma_len =
          below(8) == 0 ? static_cast<uint32_t>(rng()) : static_cast<uint32_t>(below(6000));
      if (below(3) == 0) {
        // Aim at the MR's last byte: ends one short of, exactly at, or one past the end.
        const uint64_t end = mr2.addr + 4096;
        h.reth.va = end - 1 - below(std::min<uint64_t>(4096, s.mtu()));
        h.reth.dma_len = static_cast<uint32_t>(end - h.reth.va + below(3) - 1);
      }
      h.atomic_eth = {h.reth.va & (below(4) == 0 ? ~0ull : ~7ull), h.reth.rkey, rng(), rng()};
      h.aeth = {static_cast<uint8_t>(rng()), static_cast<uint32_t>(rng()) & 0xFFFFFF};
      h.ieth_rkey = below(2) == 0 ? mr2.rkey : static_cast<uint32_t>(rng());
      h.immdt = static_cast<uint32_t>(rng());
      const wire::OpcodeInfo& info = wire::opcode_info(h.bth.opcode);
      size_t len = 0;
      if ((info.flags & wire::kPayload) != 0) len = below(3) == 0 ? s.mtu() : below(s.mtu() + 1);
      std::vector<uint8_t> payload(len);
      for (auto& b : payload) b = static_cast<uint8_t>(rng());
      s.receive(h, payload);
      if (below(4) == 0) (void)s.transmit();
      if (below(16) == 0) s.advance_to(s.now() + Nanos(below(200'000)));
      if (::testing::Test::HasFatalFailure()) return;
    }
    (void)s.transmit();
    EXPECT_TRUE(std::all_of(guarded.begin(), guarded.begin() + 4096, [](uint8_t b) {
      return b == 0xC5;
    })) << "bytes before the MR changed";
    EXPECT_TRUE(std::all_of(guarded.begin() + 8192, guarded.end(), [](uint8_t b) {
      return b == 0xC5;
    })) << "bytes after the MR changed";
    ASSERT_TRUE(s.engine().dereg_mr(mr2.lkey).is_ok());
  }
}

}  // namespace
}  // namespace uroce::script
