// Loss recovery (docs/congestion.md "Loss recovery"): go-back-N with fast retransmit and the
// adaptive timer, and selective repeat between QPs that agreed (QpAttr::recovery), in the
// two-engine virtual-time harness. Every case is deterministic: a failing seed replays.
#include <gtest/gtest.h>

#include <optional>
#include <random>

#include "engine_harness.hpp"

namespace uroce::test {
namespace {

using namespace transport;

void fill_random(std::vector<uint8_t>& buf, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
}

// ---------------------------------------------------------------------------------------
// Heavy seeded loss, duplication and reordering on both directions; a mixed workload of
// 64 KiB-class WRITEs, WRITE with immediate, SENDs and READs. Every completion (status, order,
// opcode, length, immediate) and every byte is checked, for go-back-N and selective repeat.

struct LossCase {
  uint64_t seed;
  bool sr;
  double drop;
  Mtu mtu;
};

std::string case_name(const ::testing::TestParamInfo<LossCase>& i) {
  return std::string(i.param.sr ? "sr" : "gbn") + "_seed" + std::to_string(i.param.seed) + "_drop" +
         std::to_string(static_cast<int>(i.param.drop * 100));
}

class HeavyLoss : public ::testing::TestWithParam<LossCase> {};

TEST_P(HeavyLoss, EveryByteAndEveryCompletionIsRight) {
  const LossCase c = GetParam();
  SCOPED_TRACE("seed " + std::to_string(c.seed) + (c.sr ? " sr" : " gbn"));
  EngineHarness h({.latency = Nanos(3000), .seed = c.seed});
  PairOptions po;
  po.mtu = c.mtu;
  po.timeout = 10;  // 4 ms
  po.max_rd_atomic = 4;
  po.max_dest_rd_atomic = 4;
  po.buffer_size = size_t{8} << 20;
  if (c.sr) po.recovery = Recovery::kSelectiveRepeat;
  QpPair p = h.connect(po);
  for (int i = 0; i < 2; ++i) {
    h.faults(i).drop = c.drop;
    h.faults(i).duplicate = c.drop / 2;
    h.faults(i).reorder = c.drop / 2;
    h.faults(i).reorder_delay = Nanos(7000);
  }
  fill_random(p.a.buf, c.seed * 3);
  fill_random(p.b.buf, c.seed * 5);
  constexpr size_t kSlot = 65536;
  constexpr size_t kDest = size_t{4} << 20;  // destinations start here on both sides
  constexpr int kOps = 40;
  std::mt19937_64 rng(c.seed);
  struct Op {
    WrOpcode opcode;
    uint32_t len;
  };
  std::vector<Op> ops;
  std::vector<Sge> sges(kOps);
  std::vector<Sge> rsges(kOps);
  std::vector<int> recv_ops;  // ops that consume a receive WQE, in order
  for (int k = 0; k < kOps; ++k) {
    const size_t slot = static_cast<size_t>(k) * kSlot;
    const uint64_t dice = rng() % 20;
    Op op{WrOpcode::kRdmaWrite, 1 + static_cast<uint32_t>(rng() % kSlot)};
    if (dice >= 17) {
      op = {WrOpcode::kRdmaRead, 1 + static_cast<uint32_t>(rng() % 20000)};
    } else if (dice >= 14) {
      op = {WrOpcode::kSend, 1 + static_cast<uint32_t>(rng() % 6000)};
    } else if (dice >= 11) {
      op = {WrOpcode::kRdmaWriteWithImm, 1 + static_cast<uint32_t>(rng() % 20000)};
    }
    ops.push_back(op);
    SendWr wr;
    wr.wr_id = static_cast<uint64_t>(k);
    wr.send_flags = kSendSignaled;
    wr.opcode = op.opcode;
    if (op.opcode == WrOpcode::kRdmaRead) {
      sges[k] = p.a.sge(kDest + slot, op.len);
      wr.rdma = {p.b.addr(slot), p.b.mr.rkey};
    } else {
      sges[k] = p.a.sge(slot, op.len);
      wr.rdma = {p.b.addr(kDest + slot), p.b.mr.rkey};
      wr.imm_data = 0xA0000000u + static_cast<uint32_t>(k);
    }
    if (op.opcode == WrOpcode::kSend || op.opcode == WrOpcode::kRdmaWriteWithImm) {
      rsges[k] = p.b.sge(kDest + slot, static_cast<uint32_t>(kSlot));
      RecvWr r;
      r.wr_id = 1000 + static_cast<uint64_t>(k);
      r.sg_list = {&rsges[k], 1};
      ASSERT_TRUE(p.b.engine->post_recv(p.b.qpn, r).is_ok());
      recv_ops.push_back(k);
    }
    wr.sg_list = {&sges[k], 1};
    ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  }
  const std::vector<uint8_t> a0 = p.a.buf;
  const std::vector<uint8_t> b0 = p.b.buf;

  const auto swc = h.wait_wcs(0, p.a.send_cq, kOps, 60s);
  const auto rwc = h.wait_wcs(1, p.b.recv_cq, recv_ops.size(), 10s);
  if (swc.size() != size_t{kOps}) {
    for (int side = 0; side < 2; ++side) {
      const Counters* k = h.engine(side).qp_counters(side == 0 ? p.a.qpn : p.b.qpn);
      for (size_t i = 0; i < kCounterCount; ++i) {
        if (k->values[i] != 0)
          ADD_FAILURE() << "side " << side << " " << kCounterNames[i] << " " << k->values[i];
      }
    }
    if (swc.size() < ops.size())
      ADD_FAILURE() << "stuck at op " << swc.size() << " opcode " << int(ops[swc.size()].opcode)
                    << " len " << ops[swc.size()].len;
  }
  ASSERT_EQ(swc.size(), size_t{kOps});
  ASSERT_EQ(rwc.size(), recv_ops.size());
  for (int k = 0; k < kOps; ++k) {
    EXPECT_EQ(swc[k].wr_id, uint64_t(k));
    EXPECT_EQ(swc[k].status, WcStatus::kSuccess) << "wr " << k;
  }
  for (size_t i = 0; i < recv_ops.size(); ++i) {
    const int k = recv_ops[i];
    EXPECT_EQ(rwc[i].wr_id, 1000 + uint64_t(k));
    EXPECT_EQ(rwc[i].status, WcStatus::kSuccess);
    EXPECT_EQ(rwc[i].byte_len, ops[k].len) << "recv of op " << k;
    if (ops[k].opcode == WrOpcode::kRdmaWriteWithImm) {
      EXPECT_EQ(rwc[i].opcode, WcOpcode::kRecvRdmaWithImm);
      EXPECT_EQ(rwc[i].imm_data, 0xA0000000u + static_cast<uint32_t>(k));
    } else {
      EXPECT_EQ(rwc[i].opcode, WcOpcode::kRecv);
    }
  }
  for (int k = 0; k < kOps; ++k) {
    const size_t slot = static_cast<size_t>(k) * kSlot;
    const size_t len = ops[k].len;
    if (ops[k].opcode == WrOpcode::kRdmaRead) {
      EXPECT_TRUE(
          std::equal(b0.begin() + slot, b0.begin() + slot + len, p.a.buf.begin() + kDest + slot))
          << "READ " << k;
    } else {
      EXPECT_TRUE(
          std::equal(a0.begin() + slot, a0.begin() + slot + len, p.b.buf.begin() + kDest + slot))
          << "op " << k;
      // Nothing past the message was touched.
      EXPECT_EQ(p.b.buf[kDest + slot + len], b0[kDest + slot + len]) << "op " << k;
    }
  }
  EXPECT_TRUE(h.run_until_idle(10s));
  const uint64_t placed = h.qp_counter(1, p.b.qpn, Counter::kSrOutOfOrderPlaced);
  const uint64_t holes = h.qp_counter(0, p.a.qpn, Counter::kSrRetransmittedPkts);
  // The wire: a plain multi-packet WRITE ends in WRITE Last (0x08) only under go-back-N.
  bool write_last = false;
  for (const CapturedPacket& pkt : h.log()) write_last |= pkt.from == 0 && pkt.opcode() == 0x08;
  if (c.sr) {
    EXPECT_GT(placed, 0u);
    EXPECT_GT(holes, 0u);
    EXPECT_FALSE(write_last);
  } else {
    EXPECT_EQ(placed, 0u);
    EXPECT_EQ(holes, 0u);
    EXPECT_TRUE(write_last);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Seeds, HeavyLoss,
    ::testing::Values(LossCase{1, false, 0.10, Mtu::k1024}, LossCase{1, true, 0.10, Mtu::k1024},
                      LossCase{2, false, 0.15, Mtu::k4096}, LossCase{2, true, 0.15, Mtu::k4096},
                      LossCase{3, false, 0.20, Mtu::k1024}, LossCase{3, true, 0.20, Mtu::k1024},
                      LossCase{4, true, 0.20, Mtu::k256}, LossCase{5, true, 0.05, Mtu::k2048},
                      LossCase{6, true, 0.15, Mtu::k512}, LossCase{7, false, 0.05, Mtu::k512}),
    case_name);

// ---------------------------------------------------------------------------------------
// One scripted loss: the first copy of the third packet of an 8-packet WRITE is dropped.

struct OneLoss {
  EngineHarness h;
  QpPair p;
  Nanos took{0};

  explicit OneLoss(std::optional<Recovery> recovery, uint32_t drop_index = 2,
                   RecoveryConfig rc = {})
      : h({.latency = Nanos(2000), .seed = 11, .recovery = rc}) {
    PairOptions o;
    o.recovery = recovery;
    p = h.connect(o);
    fill_random(p.a.buf, 99);
    const uint32_t target = o.psn0 + drop_index;
    bool dropped = false;
    h.faults(0).hook = [target, dropped](CapturedPacket& pkt) mutable {
      HookVerdict v;
      if (!dropped && pkt.psn() == target) {
        dropped = true;
        v.action = HookVerdict::Action::kDrop;
      }
      return v;
    };
  }

  void write(uint64_t wr_id, size_t off, uint32_t len) {
    const Sge sge = p.a.sge(off, len);
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.send_flags = kSendSignaled;
    wr.sg_list = {&sge, 1};
    wr.rdma = {p.b.addr(off), p.b.mr.rkey};
    const TimePoint start = h.now();
    ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
    const auto wcs = h.wait_wcs(0, p.a.send_cq, 1, 1s);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
    took = h.now() - start;
    EXPECT_TRUE(std::equal(p.a.buf.begin() + static_cast<ptrdiff_t>(off),
                           p.a.buf.begin() + static_cast<ptrdiff_t>(off + len),
                           p.b.buf.begin() + static_cast<ptrdiff_t>(off)));
  }
  uint64_t a(Counter c) { return h.qp_counter(0, p.a.qpn, c); }
  uint64_t b(Counter c) { return h.qp_counter(1, p.b.qpn, c); }
};

TEST(SelectiveRepeat, ResendsOnlyTheMissingPacket) {
  OneLoss t(Recovery::kSelectiveRepeat);
  t.write(1, 0, 8 * 1024);
  // Packets 3..7 are placed out of order and SACKed; only packet 2 goes again.
  EXPECT_EQ(t.b(Counter::kSrOutOfOrderPlaced), 5u);
  EXPECT_EQ(t.a(Counter::kSrRetransmittedPkts), 1u);
  EXPECT_EQ(t.a(Counter::kRetransmittedPkts), 1u);
  EXPECT_EQ(t.a(Counter::kNakFastRetrans), 0u);
  EXPECT_EQ(t.a(Counter::kRcvdSeqErr), 5u);  // one SACK per placed packet
  EXPECT_EQ(t.a(Counter::kLocalAckTimeoutErr), 0u);
  EXPECT_EQ(t.a(Counter::kRoceAdpRetrans), 0u);
  EXPECT_EQ(t.a(Counter::kSentPkts), 9u);
  // Every request packet of the WRITE is a WRITE Only (opcode 0x0A) with its own RETH.
  for (const CapturedPacket& pkt : t.h.log()) {
    if (pkt.from == 0) {
      EXPECT_EQ(pkt.opcode(), 0x0A);
    }
  }
}

// The resend of the hole is lost too. A packet first sent after that resend is SACKed while
// the hole is still missing, so the resend was lost (IRN's rule): the hole goes again at once,
// with no timer.
TEST(SelectiveRepeat, ALostHoleResendIsDetectedByALaterSack) {
  EngineHarness h({.latency = Nanos(2000), .seed = 12});
  PairOptions o;
  o.recovery = Recovery::kSelectiveRepeat;
  QpPair p = h.connect(o);
  fill_random(p.a.buf, 7);
  int copies = 0;
  h.faults(0).hook = [&copies, target = o.psn0 + 2](CapturedPacket& pkt) {
    HookVerdict v;
    if (pkt.psn() == target && copies++ < 2) v.action = HookVerdict::Action::kDrop;
    return v;
  };
  std::array<Sge, 2> sges = {p.a.sge(0, 8192), p.a.sge(8192, 8192)};
  auto post = [&](int i) {
    SendWr wr;
    wr.wr_id = static_cast<uint64_t>(i);
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.send_flags = kSendSignaled;
    wr.sg_list = {&sges[i], 1};
    wr.rdma = {p.b.addr(static_cast<size_t>(i) * 8192), p.b.mr.rkey};
    ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  };
  post(0);
  (void)h.run_until([] { return false; }, Nanos(5000));  // the first hole resend went out
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kSrRetransmittedPkts), 1u);
  post(1);
  const auto wcs = h.wait_wcs(0, p.a.send_cq, 2, 1s);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
  EXPECT_EQ(copies, 3);
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kSrRetransmittedPkts), 2u);
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kRetransmittedPkts), 2u);
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kRoceAdpRetrans), 0u);
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kLocalAckTimeoutErr), 0u);
  EXPECT_LT(h.now(), TimePoint(Nanos(20000)));
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + 16384, p.b.buf.begin()));
}

// The hole and its resend are lost and no later PSN is sent, so the adaptive timer goes back;
// the rewind skips the SACKed PSNs and resends the hole alone, which moves the responder's
// ePSN over everything placed; the ACK of that move is lost. What recovers it: the timer
// resend asks for an ACK (a go-back resend of a mid-message packet did not, so its duplicate
// was answered by nothing), and the next rewind resends the oldest unacknowledged PSN even
// though it is SACKed (skipping every PSN sent nothing at all). Before, each resend waited
// the configured timeout (67 ms) until the 66th carried AckReq (uroce sim
// scenarios/validate-loss-1-sr.toml --seed 5: no goodput from 1.2 s to 5.4 s).
TEST(SelectiveRepeat, ALostAckOfTheMoveOverPlacedPsnsIsRecoveredByTheNextResend) {
  EngineHarness h({.latency = Nanos(2000), .seed = 13});
  PairOptions o;
  o.recovery = Recovery::kSelectiveRepeat;
  QpPair p = h.connect(o);
  fill_random(p.a.buf, 5);
  // The first WRITE (PSNs psn0..psn0+7) goes through and gives the RTT; the second loses its
  // third packet twice and then the ACK of its last PSN once.
  const uint32_t hole = o.psn0 + 8 + 2;
  const uint32_t last = o.psn0 + 8 + 7;
  int copies = 0;
  h.faults(0).hook = [&copies, hole](CapturedPacket& pkt) {
    HookVerdict v;
    if (pkt.psn() == hole && copies++ < 2) v.action = HookVerdict::Action::kDrop;
    return v;
  };
  int acks = 0;
  h.faults(1).hook = [&acks, last](CapturedPacket& pkt) {
    HookVerdict v;
    const wire::ParsedPacket r = pkt.parse();
    if (r.hdr.bth.psn.value() == last && r.hdr.aeth.type() == wire::AethType::kAck && acks++ == 0) {
      v.action = HookVerdict::Action::kDrop;
    }
    return v;
  };
  std::array<Sge, 2> sges = {p.a.sge(0, 8192), p.a.sge(8192, 8192)};
  TimePoint start{};
  for (int i = 0; i < 2; ++i) {
    SendWr wr;
    wr.wr_id = static_cast<uint64_t>(i);
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.send_flags = kSendSignaled;
    wr.sg_list = {&sges[i], 1};
    wr.rdma = {p.b.addr(static_cast<size_t>(i) * 8192), p.b.mr.rkey};
    start = h.now();
    ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
    const auto wcs = h.wait_wcs(0, p.a.send_cq, 1, 1s);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  }
  EXPECT_EQ(copies, 3);  // original, lost hole resend, timer resend (placed)
  EXPECT_EQ(acks, 2);    // the lost ACK of the move, the ACK of the duplicate hole + 1
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kSrRetransmittedPkts), 1u);
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kRetransmittedPkts), 3u);
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kRoceAdpRetrans), 2u);
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kLocalAckTimeoutErr), 0u);
  EXPECT_EQ(h.qp_counter(1, p.b.qpn, Counter::kDuplicateRequest), 1u);
  EXPECT_EQ(h.qp_counter(1, p.b.qpn, Counter::kSrOutOfOrderPlaced), 5u);
  // The original (packet 3 of 8) does not ask for an ACK; every resend does. After the ACK of
  // the hole (the resend asked for it), the second timer resends hole + 1, SACKed but the
  // oldest unacknowledged PSN, and its duplicate's ACK carries the move's cumulative ACK.
  std::vector<std::pair<uint32_t, bool>> resends;
  for (const CapturedPacket& pkt : h.log()) {
    if (pkt.from == 0 && (pkt.psn() == hole || pkt.psn() == hole + 1)) {
      resends.emplace_back(pkt.psn(), pkt.parse().hdr.bth.ackreq);
    }
  }
  EXPECT_EQ(resends,
            (std::vector<std::pair<uint32_t, bool>>{
                {hole, false}, {hole + 1, false}, {hole, true}, {hole, true}, {hole + 1, true}}));
  // Two adaptive RTOs (200 us floor, the second doubled), far inside one configured timeout.
  EXPECT_LT(h.now() - start, Nanos(1'000'000));
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + 16384, p.b.buf.begin()));
}

TEST(GoBackN, NakFastRetransmitResendsFromTheNakedPsnOncePerEpisode) {
  OneLoss t(std::nullopt);
  t.write(1, 0, 8 * 1024);
  // One NAK (the responder stays silent for the rest of the episode), one go-back from 2.
  EXPECT_EQ(t.a(Counter::kNakFastRetrans), 1u);
  EXPECT_EQ(t.a(Counter::kRcvdSeqErr), 1u);
  EXPECT_EQ(t.a(Counter::kRetransmittedPkts), 6u);
  EXPECT_EQ(t.a(Counter::kCompleterRetryErr), 1u);
  EXPECT_EQ(t.a(Counter::kSrRetransmittedPkts), 0u);
  EXPECT_EQ(t.b(Counter::kSrOutOfOrderPlaced), 0u);
  EXPECT_EQ(t.b(Counter::kOutOfSeqRequest), 5u);
  EXPECT_EQ(t.a(Counter::kLocalAckTimeoutErr), 0u);
  // Two round trips (4 us each) and no timer: the NAK started the resend at once.
  EXPECT_LT(t.took, Nanos(20000));
}

// UROCE_RECOVERY=sr on both devices is only an offer: a QP whose application did not set
// QpAttr::recovery (no agreement, e.g. the drop-in or a perftest peer) is plain RoCE v2 GBN.
TEST(SelectiveRepeat, AnOfferWithoutTheQpAttributeIsGoBackNOnTheWire) {
  RecoveryConfig rc;
  rc.offer = Recovery::kSelectiveRepeat;
  OneLoss t(std::nullopt, 2, rc);
  t.write(1, 0, 8 * 1024);
  EXPECT_EQ(t.a(Counter::kNakFastRetrans), 1u);
  EXPECT_EQ(t.a(Counter::kRetransmittedPkts), 6u);
  EXPECT_EQ(t.b(Counter::kSrOutOfOrderPlaced), 0u);
  std::vector<uint8_t> ops;
  for (const CapturedPacket& pkt : t.h.log()) {
    if (pkt.from == 0) ops.push_back(pkt.opcode());
  }
  // WRITE First, Middle x6, Last; then the resend from packet 2: Middle x5, Last.
  const std::vector<uint8_t> want = {0x06, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07,
                                     0x08, 0x07, 0x07, 0x07, 0x07, 0x07, 0x08};
  EXPECT_EQ(ops, want);
}

// A lost tail packet: no later packet arrives, so no NAK. The adaptive RTO (from the RTT the
// first WRITE measured) resends it long before the configured timeout (67 ms); without
// adaptive retransmission the QP waits the full configured timeout.
TEST(GoBackN, AdaptiveRtoRecoversALostTailBeforeTheConfiguredTimeout) {
  OneLoss t(std::nullopt, 8 + 7);  // the second WRITE's last packet
  t.write(1, 0, 8 * 1024);
  t.write(2, 8 * 1024, 8 * 1024);
  EXPECT_EQ(t.a(Counter::kRoceAdpRetrans), 1u);
  EXPECT_EQ(t.a(Counter::kRoceAdpRetransTo), 0u);
  EXPECT_EQ(t.a(Counter::kLocalAckTimeoutErr), 0u);
  // Go-back-N from the oldest unacknowledged PSN: the WRITE's 8 packets (only its last
  // packet asks for an ACK).
  EXPECT_EQ(t.a(Counter::kRetransmittedPkts), 8u);
  EXPECT_EQ(t.a(Counter::kCompleterRetryErr), 0u);  // the retry budget is untouched
  // RTT 4 us: the RTO is the 200 us floor; the resend's round trip follows.
  EXPECT_GE(t.took, Nanos(200'000));
  EXPECT_LT(t.took, Nanos(220'000));
}

TEST(GoBackN, RxeStyleTimerWaitsTheConfiguredTimeoutForALostTail) {
  RecoveryConfig rc;
  rc.adaptive = false;
  OneLoss t(std::nullopt, 8 + 7, rc);
  t.write(1, 0, 8 * 1024);
  t.write(2, 8 * 1024, 8 * 1024);
  EXPECT_EQ(t.a(Counter::kRoceAdpRetrans), 0u);
  EXPECT_EQ(t.a(Counter::kLocalAckTimeoutErr), 1u);
  EXPECT_EQ(t.a(Counter::kRetransmittedPkts), 8u);
  EXPECT_GE(t.took, Nanos(4096ll << 14));
}

// Selective repeat with the tail lost: no SACK can come, the adaptive timer goes back (there
// is nothing SACKed to skip) and the data is right.
TEST(SelectiveRepeat, LostTailIsRecoveredByTheAdaptiveTimer) {
  OneLoss t(Recovery::kSelectiveRepeat, 8 + 7);
  t.write(1, 0, 8 * 1024);
  t.write(2, 8 * 1024, 8 * 1024);
  EXPECT_EQ(t.a(Counter::kRoceAdpRetrans), 1u);
  EXPECT_EQ(t.a(Counter::kRetransmittedPkts), 8u);
  EXPECT_LT(t.took, Nanos(220'000));
}

// With retry_cnt 2 and every packet lost, the adaptive timer resends early but RETRY_EXC_ERR
// still comes at the third configured timeout after the last progress.
TEST(GoBackN, RetryExhaustionIsUnchangedByTheAdaptiveTimer) {
  EngineHarness h({.latency = Nanos(2000), .seed = 3});
  PairOptions o;
  o.timeout = 8;  // 1048576 ns
  o.retry_cnt = 2;
  QpPair p = h.connect(o);
  const Sge sge = p.a.sge(0, 64);
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.send_flags = kSendSignaled;
  wr.sg_list = {&sge, 1};
  wr.rdma = {p.b.addr(0), p.b.mr.rkey};
  wr.wr_id = 1;
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  ASSERT_EQ(h.wait_wcs(0, p.a.send_cq, 1, 1s).size(), 1u);  // an RTT sample
  const TimePoint t0 = h.now();
  h.faults(0).drop = 1.0;
  wr.wr_id = 2;
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  const auto wcs = h.wait_wcs(0, p.a.send_cq, 1, 1s);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(h.now(), t0 + Nanos(3 * 1048576));
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kLocalAckTimeoutErr), 3u);
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kCompleterRetryErr), 2u);
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kRetryExceededErr), 1u);
  // 200, 400 us (then 800 would pass the first 1 ms period): two early resends.
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kRoceAdpRetrans), 2u);
  EXPECT_EQ(h.qp_counter(0, p.a.qpn, Counter::kRoceAdpRetransTo), 1u);
}

}  // namespace
}  // namespace uroce::test
