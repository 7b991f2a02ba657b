// FLUSH and ATOMIC WRITE (IBA 1.5) between two uroce engines in virtual time: the
// requester's packets, the responder's checks and effect, the completer's completions,
// also when packets are lost (the retry is answered, never executed twice).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "engine_harness.hpp"

namespace uroce::test {
namespace {

using namespace transport;
using namespace std::chrono_literals;
using wire::Op;

uint8_t rc(Op op) {
  return wire::make_opcode(wire::Transport::kRc, op);
}

PairOptions flush_pair() {
  PairOptions o;
  o.access |= kAccessFlushGlobal;  // QP and MR rights on both sides
  return o;
}

SendWr atomic_write(uint64_t wr_id, uint64_t va, uint32_t rkey, uint64_t value) {
  SendWr w;
  w.wr_id = wr_id;
  w.opcode = WrOpcode::kAtomicWrite;
  w.send_flags = kSendSignaled;
  w.rdma = {va, rkey};
  std::memcpy(w.atomic_write.data(), &value, sizeof(value));
  return w;
}

SendWr flush(uint64_t wr_id, uint64_t va, uint32_t rkey, uint32_t len, uint8_t type,
             uint8_t level) {
  SendWr f;
  f.wr_id = wr_id;
  f.opcode = WrOpcode::kFlush;
  f.send_flags = kSendSignaled;
  f.flush = {va, rkey, len, type, level};
  return f;
}

TEST(FlushAtomicWrite, WriteThenFlushBetweenTwoEngines) {
  EngineHarness h;
  QpPair p = h.connect(flush_pair());
  std::fill(p.b.buf.begin(), p.b.buf.end(), uint8_t{0xEE});
  const uint64_t value = 0x0123'4567'89AB'CDEFull;
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, atomic_write(1, p.b.addr(64), p.b.mr.rkey, value))
          .is_ok());
  ASSERT_TRUE(p.a.engine
                  ->post_send(h.now(), p.a.qpn,
                              flush(2, p.b.addr(64), p.b.mr.rkey, 8, kFlushGlobal, kFlushRange))
                  .is_ok());
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, flush(3, 0, p.b.mr.rkey, 0, kFlushGlobal, kFlushMr))
          .is_ok());
  const std::vector<Wc> wcs = h.wait_wcs(0, p.a.send_cq, 3, 10ms);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::kAtomicWrite);
  EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].opcode, WcOpcode::kFlush);
  EXPECT_EQ(wcs[2].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[2].opcode, WcOpcode::kFlush);
  uint64_t got = 0;
  std::memcpy(&got, p.b.buf.data() + 64, sizeof(got));
  EXPECT_EQ(got, value);
  for (size_t i = 0; i < p.b.buf.size(); ++i) {
    if (i >= 64 && i < 72) continue;
    ASSERT_EQ(p.b.buf[i], 0xEE) << "byte " << i;
  }
  // On the wire: the three requests and three zero-length READ responses.
  std::vector<uint8_t> from_a;
  std::vector<uint8_t> from_b;
  for (const auto& c : h.log()) (c.from == 0 ? from_a : from_b).push_back(c.opcode());
  EXPECT_EQ(from_a, (std::vector<uint8_t>{rc(Op::kAtomicWrite), rc(Op::kFlush), rc(Op::kFlush)}));
  EXPECT_EQ(from_b, std::vector<uint8_t>(3, rc(Op::kReadResponseOnly)));
  EXPECT_EQ(p.b.engine->qp_counters(p.b.qpn)->get(Counter::kRxWriteRequests), 1u);
}

TEST(FlushAtomicWrite, LostAnswerIsRepliedNotReExecuted) {
  EngineHarness h;
  QpPair p = h.connect(flush_pair());
  // Drop B's first answer: A retries after its ACK timeout; B answers the duplicate.
  int answers = 0;
  h.faults(1).hook = [&](CapturedPacket&) {
    HookVerdict v;
    if (answers++ == 0) v.action = HookVerdict::Action::kDrop;
    return v;
  };
  const uint64_t value = 42;
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, atomic_write(1, p.b.addr(0), p.b.mr.rkey, value))
          .is_ok());
  // The application on B overwrites the word after the first (lost-answer) execution.
  ASSERT_TRUE(h.run_until([&] { return answers == 1; }, 1ms));
  const uint64_t mine = 7;
  std::memcpy(p.b.buf.data(), &mine, sizeof(mine));
  const std::vector<Wc> wcs = h.wait_wcs(0, p.a.send_cq, 1, 1s);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  uint64_t got = 0;
  std::memcpy(&got, p.b.buf.data(), sizeof(got));
  EXPECT_EQ(got, mine) << "the retried ATOMIC WRITE was executed a second time";
  EXPECT_EQ(p.b.engine->qp_counters(p.b.qpn)->get(Counter::kDuplicateRequest), 1u);
  EXPECT_EQ(p.a.engine->qp_counters(p.a.qpn)->get(Counter::kLocalAckTimeoutErr), 1u);
}

TEST(FlushAtomicWrite, FlushWithoutTheRightFailsTheRequester) {
  EngineHarness h;
  QpPair p = h.connect({});  // no FLUSH_GLOBAL on B's QP
  ASSERT_TRUE(p.a.engine
                  ->post_send(h.now(), p.a.qpn,
                              flush(1, p.b.addr(0), p.b.mr.rkey, 64, kFlushGlobal, kFlushRange))
                  .is_ok());
  const std::vector<Wc> wcs = h.wait_wcs(0, p.a.send_cq, 1, 10ms);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(p.b.engine->qp_counters(p.b.qpn)->get(Counter::kRespRemoteInvalidRequest), 1u);
}

}  // namespace
}  // namespace uroce::test
