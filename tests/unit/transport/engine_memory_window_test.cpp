// Memory windows between two uroce engines in virtual time: BIND_MW and LOCAL_INV run as
// work requests in order with the others and complete with their own opcodes; a peer's RDMA
// WRITE lands through a bound window byte for byte and is refused outside it or after an
// unbind, a LOCAL_INV or a SEND with Invalidate (which completes the receive WITH_INV); a
// failed bind or invalidation completes in error and moves the QP to ERR.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "engine_harness.hpp"

namespace uroce::test {
namespace {

using namespace transport;
using namespace std::chrono_literals;

// B's window over its buffer: an MR with MW_BIND (and LOCAL_WRITE, so the window may be
// writable) but no remote rights of its own.
struct Window {
  MrInfo mr;
  uint32_t rkey = 0;  // the window's current key
};

Window alloc_window(Endpoint& ep, MwType type) {
  Window w;
  w.mr = ep.engine->reg_mr(ep.pd, ep.buf.data(), ep.buf.size(), kAccessLocalWrite | kAccessMwBind)
             .value();
  w.rkey = ep.engine->alloc_mw(ep.pd, type).value();
  return w;
}

uint32_t next_key(uint32_t rkey) {
  return (rkey & ~0xFFu) | ((rkey + 1) & 0xFFu);
}

SendWr bind_wr(uint64_t wr_id, const Window& w, uint32_t new_rkey, uint64_t offset, uint64_t length,
               uint32_t access = kAccessRemoteWrite) {
  SendWr b;
  b.wr_id = wr_id;
  b.opcode = WrOpcode::kBindMw;
  b.send_flags = kSendSignaled;
  b.bind_mw = MwBind{w.rkey, new_rkey, w.mr.lkey, w.mr.addr + offset, length, access};
  return b;
}

SendWr write_wr(uint64_t wr_id, const Endpoint& src, uint64_t va, uint32_t rkey, uint32_t len) {
  SendWr w;
  w.wr_id = wr_id;
  w.opcode = WrOpcode::kRdmaWrite;
  w.send_flags = kSendSignaled;
  static thread_local Sge sge;
  sge = src.sge(0, len);
  w.sg_list = {&sge, 1};
  w.rdma = {va, rkey};
  return w;
}

// LOCAL_INV or SEND_WITH_INV of `rkey`, signaled.
SendWr invalidate(uint64_t wr_id, WrOpcode op, uint32_t rkey) {
  SendWr w;
  w.wr_id = wr_id;
  w.opcode = op;
  w.send_flags = kSendSignaled;
  w.invalidate_rkey = rkey;
  return w;
}

// Binds B's window (type `type`) to [4096, 4096 + 1024) of B's buffer for remote write,
// and checks the bind's completion.
Window bound_window(EngineHarness& h, QpPair& p, MwType type) {
  Window w = alloc_window(p.b, type);
  const uint32_t key = next_key(w.rkey);
  EXPECT_TRUE(p.b.engine->post_send(h.now(), p.b.qpn, bind_wr(7, w, key, 4096, 1024)).is_ok());
  const std::vector<Wc> wcs = h.wait_wcs(1, p.b.send_cq, 1, 10ms);
  EXPECT_EQ(wcs.size(), 1u);
  if (!wcs.empty()) {
    EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
    EXPECT_EQ(wcs[0].opcode, WcOpcode::kBindMw);
    EXPECT_EQ(wcs[0].wr_id, 7u);
    EXPECT_EQ(wcs[0].byte_len, 0u);
  }
  w.rkey = key;
  return w;
}

// A writes `len` bytes of a pattern at B's `offset` through `rkey`; returns A's completion.
Wc write_through(EngineHarness& h, QpPair& p, uint32_t rkey, uint64_t offset, uint32_t len,
                 uint64_t wr_id) {
  for (uint32_t i = 0; i < len; ++i) p.a.buf[i] = static_cast<uint8_t>(i * 7 + wr_id);
  EXPECT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, write_wr(wr_id, p.a, p.b.addr(offset), rkey, len))
          .is_ok());
  const std::vector<Wc> wcs = h.wait_wcs(0, p.a.send_cq, 1, 1s);
  return wcs.empty() ? Wc{.status = WcStatus::kGeneralErr} : wcs[0];
}

TEST(EngineMemoryWindow, Type1WindowTakesWritesInsideAndRefusesOutside) {
  EngineHarness h;
  QpPair p = h.connect({});
  const Window w = bound_window(h, p, MwType::kType1);
  std::fill(p.b.buf.begin(), p.b.buf.end(), uint8_t{0xEE});
  const Wc ok = write_through(h, p, w.rkey, 4096 + 100, 900, 1);
  EXPECT_EQ(ok.status, WcStatus::kSuccess);
  for (size_t i = 0; i < p.b.buf.size(); ++i) {
    const bool inside = i >= 4196 && i < 4196 + 900;
    ASSERT_EQ(p.b.buf[i], inside ? static_cast<uint8_t>((i - 4196) * 7 + 1) : 0xEE) << i;
  }
  // 25 bytes past the window's end: B's responder refuses, A's QP fails.
  const Wc past = write_through(h, p, w.rkey, 4096 + 1000, 49, 2);
  EXPECT_EQ(past.status, WcStatus::kRemAccessErr);
  EXPECT_EQ(p.b.engine->qp_counters(p.b.qpn)->get(Counter::kRespRemoteAccessErrors), 1u);
  EXPECT_EQ(p.b.buf[4096 + 1000], 0xEE);
}

TEST(EngineMemoryWindow, Type1UnbindRevokesTheKey) {
  EngineHarness h;
  QpPair p = h.connect({});
  Window w = bound_window(h, p, MwType::kType1);
  ASSERT_EQ(write_through(h, p, w.rkey, 4096, 64, 1).status, WcStatus::kSuccess);
  // Rebind with length 0: unbound.
  SendWr unbind = bind_wr(8, w, next_key(w.rkey), 0, 0, 0);
  ASSERT_TRUE(p.b.engine->post_send(h.now(), p.b.qpn, unbind).is_ok());
  const std::vector<Wc> b_wcs = h.wait_wcs(1, p.b.send_cq, 1, 10ms);
  ASSERT_EQ(b_wcs.size(), 1u);
  EXPECT_EQ(b_wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(write_through(h, p, w.rkey, 4096, 64, 2).status, WcStatus::kRemAccessErr);
}

TEST(EngineMemoryWindow, Type2LocalInvalidateRevokesTheKey) {
  EngineHarness h;
  QpPair p = h.connect({});
  const Window w = bound_window(h, p, MwType::kType2);
  ASSERT_EQ(write_through(h, p, w.rkey, 4096, 1024, 1).status, WcStatus::kSuccess);
  ASSERT_TRUE(
      p.b.engine->post_send(h.now(), p.b.qpn, invalidate(9, WrOpcode::kLocalInv, w.rkey)).is_ok());
  const std::vector<Wc> b_wcs = h.wait_wcs(1, p.b.send_cq, 1, 10ms);
  ASSERT_EQ(b_wcs.size(), 1u);
  EXPECT_EQ(b_wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(b_wcs[0].opcode, WcOpcode::kLocalInv);
  EXPECT_EQ(write_through(h, p, w.rkey, 4096, 8, 2).status, WcStatus::kRemAccessErr);
}

TEST(EngineMemoryWindow, SendWithInvalidateFreesTheWindowAndSaysSoInTheReceive) {
  EngineHarness h;
  QpPair p = h.connect({});
  const Window w = bound_window(h, p, MwType::kType2);
  ASSERT_TRUE(p.b.engine->post_recv(p.b.qpn, RecvWr{55, {}}).is_ok());
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, invalidate(3, WrOpcode::kSendWithInv, w.rkey))
                  .is_ok());
  const std::vector<Wc> sent = h.wait_wcs(0, p.a.send_cq, 1, 10ms);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, WcStatus::kSuccess);
  const std::vector<Wc> got = h.wait_wcs(1, p.b.recv_cq, 1, 10ms);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, WcStatus::kSuccess);
  EXPECT_EQ(got[0].wr_id, 55u);
  EXPECT_EQ(got[0].wc_flags & kWcWithInv, kWcWithInv);
  EXPECT_EQ(got[0].invalidated_rkey, w.rkey);
  EXPECT_EQ(write_through(h, p, w.rkey, 4096, 8, 4).status, WcStatus::kRemAccessErr);
}

TEST(EngineMemoryWindow, SendWithInvalidateOfAnMrKeyIsRefused) {
  EngineHarness h;
  QpPair p = h.connect({});
  ASSERT_TRUE(p.b.engine->post_recv(p.b.qpn, RecvWr{55, {}}).is_ok());
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, invalidate(0, WrOpcode::kSendWithInv, p.b.mr.rkey))
          .is_ok());
  const std::vector<Wc> got = h.wait_wcs(1, p.b.recv_cq, 1, 10ms);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, WcStatus::kRemInvReqErr);
  const std::vector<Wc> sent = h.wait_wcs(0, p.a.send_cq, 1, 10ms);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, WcStatus::kRemInvReqErr);
}

TEST(EngineMemoryWindow, LocalOperationsCompleteInOrderAfterEarlierWrites) {
  EngineHarness h;
  QpPair p = h.connect({});
  // On A: a 64 KiB WRITE to B (many packets, in flight for a while), then a bind of A's own
  // window, then another WRITE. The bind waits for the first WRITE; completions keep order.
  Window w = alloc_window(p.a, MwType::kType1);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, write_wr(1, p.a, p.b.addr(0), p.b.mr.rkey, 65536))
          .is_ok());
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, bind_wr(2, w, next_key(w.rkey), 0, 4096)).is_ok());
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, write_wr(3, p.a, p.b.addr(0), p.b.mr.rkey, 8))
                  .is_ok());
  const std::vector<Wc> wcs = h.wait_wcs(0, p.a.send_cq, 3, 1s);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].opcode, WcOpcode::kBindMw);
  EXPECT_EQ(wcs[2].wr_id, 3u);
  for (const Wc& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess);
}

TEST(EngineMemoryWindow, FailedBindAndLocalInvalidateCompleteInErrorAndFailTheQp) {
  EngineHarness h;
  QpPair p = h.connect({});
  // The harness MR has no MW_BIND right: the bind fails (C10-73).
  const uint32_t mw = p.b.engine->alloc_mw(p.b.pd, MwType::kType2).value();
  SendWr b = bind_wr(1, Window{p.b.mr, mw}, next_key(mw), 0, 64);
  ASSERT_TRUE(p.b.engine->post_send(h.now(), p.b.qpn, b).is_ok());
  ASSERT_TRUE(
      p.b.engine->post_send(h.now(), p.b.qpn, invalidate(2, WrOpcode::kLocalInv, mw)).is_ok());
  std::vector<Wc> wcs = h.wait_wcs(1, p.b.send_cq, 2, 10ms);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kMwBindErr);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::kBindMw);
  EXPECT_EQ(wcs[1].status, WcStatus::kWrFlushErr);
  QpAttr attr;
  QpInitAttr init;
  ASSERT_TRUE(p.b.engine->query_qp(p.b.qpn, attr, init).is_ok());
  EXPECT_EQ(attr.qp_state, QpState::kErr);

  // On A: LOCAL_INV of an MR key (uroce has no fast-registration MRs): LOC_QP_OP_ERR.
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, invalidate(4, WrOpcode::kLocalInv, p.a.mr.rkey))
          .is_ok());
  wcs = h.wait_wcs(0, p.a.send_cq, 1, 10ms);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kLocQpOpErr);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::kLocalInv);
}

TEST(EngineMemoryWindow, UdRefusesWindowOperationsAtPost) {
  EngineHarness h;
  PairOptions o;
  o.type = QpType::kUd;
  QpPair p = h.connect(o);
  SendWr inv;
  inv.opcode = WrOpcode::kLocalInv;
  EXPECT_EQ(p.a.engine->post_send(h.now(), p.a.qpn, inv).code(), EINVAL);
  SendWr bind;
  bind.opcode = WrOpcode::kBindMw;
  EXPECT_EQ(p.a.engine->post_send(h.now(), p.a.qpn, bind).code(), EINVAL);
}

}  // namespace
}  // namespace uroce::test
