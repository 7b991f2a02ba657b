// Congestion control across two engines in virtual time: pacing on the wire, ECT(0) on the
// packets of a DCQCN QP, CE marks (set by the link hook, as a switch would) answered by CNPs
// at most one per min_time_between_cnps, the sender's rate falling and recovering, and with
// congestion control off (the default) no ECT, no CNP and the same packets as before.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "engine_harness.hpp"
#include "transport/cc/pacer.hpp"
#include "wire/icrc.hpp"

namespace uroce::test {
namespace {

using namespace transport;

constexpr uint64_t kGbps = 1'000'000'000;

CcConfig dcqcn_1g() {
  CcConfig c;
  c.algorithm = CcAlgorithm::kDcqcn;
  c.dcqcn.rpg_max_rate = 1000;  // 1 Gb/s: few packets per virtual ms
  c.dcqcn.pacer_burst_bytes = 0;
  return c;
}

SendWr write_wr(const Sge& sge, uint64_t wr_id, uint64_t remote_addr, uint32_t rkey) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.sg_list = {&sge, 1};
  wr.send_flags = kSendSignaled;
  wr.rdma.remote_addr = remote_addr;
  wr.rdma.rkey = rkey;
  return wr;
}

void fill_pattern(Endpoint& ep, size_t len) {
  for (size_t i = 0; i < len; ++i) ep.buf[i] = static_cast<uint8_t>(i * 7 + 3);
}

QpCcState cc_of(Endpoint& ep) {
  QpAttr a;
  QpInitAttr init;
  EXPECT_TRUE(ep.engine->query_qp(ep.qpn, a, init).is_ok());
  return a.cc;
}

const Counters& qpc(Endpoint& ep) {
  return *ep.engine->qp_counters(ep.qpn);
}

TEST(EngineCc, QueryReportsTheAlgorithmAndRate) {
  EngineHarness h({.cc = dcqcn_1g()});
  QpPair p = h.connect({});
  QpAttr a;
  QpInitAttr init;
  ASSERT_TRUE(p.a.engine->query_qp(p.a.qpn, a, init).is_ok());
  EXPECT_EQ(init.cc, CcAlgorithm::kDcqcn);
  EXPECT_EQ(a.cc.algorithm, CcAlgorithm::kDcqcn);
  EXPECT_EQ(a.cc.rate_bps, kGbps);
  EXPECT_EQ(a.cc.target_rate_bps, kGbps);
  // Per QP: kNone overrides the engine's default; UD never runs a controller.
  QpPair q = h.connect({.cc = CcAlgorithm::kNone});
  ASSERT_TRUE(q.a.engine->query_qp(q.a.qpn, a, init).is_ok());
  EXPECT_EQ(init.cc, CcAlgorithm::kNone);
  EXPECT_EQ(a.cc.algorithm, CcAlgorithm::kNone);
  EXPECT_EQ(a.cc.rate_bps, 0u);
  QpPair u = h.connect({.type = QpType::kUd});
  ASSERT_TRUE(u.a.engine->query_qp(u.a.qpn, a, init).is_ok());
  EXPECT_EQ(init.cc, CcAlgorithm::kNone);
  QpInitAttr bad;
  bad.send_cq = p.a.send_cq;
  bad.recv_cq = p.a.recv_cq;
  bad.cc = static_cast<CcAlgorithm>(9);
  EXPECT_EQ(p.a.engine->create_qp(p.a.pd, bad).status().code(), EINVAL);
}

TEST(EngineCc, PacingHoldsPacketsUntilTheirTimeInOrder) {
  EngineHarness h({.cc = dcqcn_1g()});
  QpPair p = h.connect({});
  constexpr uint32_t kLen = 8 * 1024;
  fill_pattern(p.a, kLen);
  const Sge sge = p.a.sge(0, kLen);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, write_wr(sge, 1, p.b.addr(0), p.b.mr.rkey)).is_ok());
  const auto wcs = h.wait_wcs(0, p.a.send_cq, 1, 10ms);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + kLen, p.b.buf.begin()));

  std::vector<const CapturedPacket*> data;
  for (const CapturedPacket& c : h.log()) {
    if (c.from == 0) data.push_back(&c);
  }
  ASSERT_EQ(data.size(), 8u);
  for (size_t i = 0; i < data.size(); ++i) {
    EXPECT_EQ(data[i]->psn(), 0x100 + i);  // in order
    EXPECT_EQ(data[i]->meta.tos & 3, 2);   // ECT(0)
    if (i == 0) continue;
    // Each packet waits exactly for the previous one's time on a 1 Gb/s link.
    const uint64_t ip_len = data[i - 1]->bytes.size() + 28;
    EXPECT_EQ(data[i]->sent_at - data[i - 1]->sent_at, Pacer::tx_time(ip_len, kGbps)) << i;
  }
  // The responder's ACK is ECT(0) too: both QPs run DCQCN.
  bool saw_ack = false;
  for (const CapturedPacket& c : h.log()) {
    if (c.from == 1) {
      saw_ack = true;
      EXPECT_EQ(c.meta.tos & 3, 2);
    }
  }
  EXPECT_TRUE(saw_ack);
}

TEST(EngineCc, PostingOnAPacedQpIsNotReadyBeforeItsTime) {
  EngineHarness h({.cc = dcqcn_1g()});
  QpPair p = h.connect({});
  const Sge sge = p.a.sge(0, 1024);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, write_wr(sge, 1, p.b.addr(0), p.b.mr.rkey)).is_ok());
  EXPECT_TRUE(p.a.engine->has_tx());
  std::vector<uint8_t> buf(8192);
  std::array<TxSlot, 1> slot;
  slot[0].buf = buf;
  ASSERT_EQ(p.a.engine->poll_tx(h.now(), slot), 1u);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, write_wr(sge, 2, p.b.addr(0), p.b.mr.rkey)).is_ok());
  // Held by its pacing time (not before now + 1080 bytes at 1 Gb/s), kept in the timer heap.
  EXPECT_FALSE(p.a.engine->has_tx());
  const TimePoint due = h.now() + Pacer::tx_time(slot[0].len + 28, kGbps);
  EXPECT_EQ(p.a.engine->next_deadline(), due);
  p.a.engine->on_timer(due);
  EXPECT_TRUE(p.a.engine->has_tx());
  ASSERT_EQ(p.a.engine->poll_tx(due, slot), 1u);
  EXPECT_EQ(slot[0].len, 12u + 16 + 1024 + 4);
}

// DCQCN at mlx5's 1 Mb/s floor, then its first increase: the packet the pacer holds goes out
// at the gap recomputed at the new rate, not after the 8.672 ms the floor had set for it.
TEST(EngineCc, ARateRiseReleasesThePacketThePacerHolds) {
  CcConfig cc = dcqcn_1g();
  cc.dcqcn.rate_to_set_on_first_cnp = 1;  // the first CNP sets RC to 1 Mb/s
  cc.dcqcn.rpg_time_reset = 100;
  cc.dcqcn.rpg_byte_reset = 0;
  EngineHarness h({.cc = cc});
  QpPair p = h.connect({});
  wire::Headers hdr;
  hdr.bth.opcode = wire::kCnpOpcode;
  hdr.bth.becn = true;
  hdr.bth.dqpn = p.a.qpn;
  std::vector<uint8_t> bytes(64);
  bytes.resize(wire::build_packet(hdr, {}, bytes));
  PacketMeta meta;
  meta.ip.src = h.gid(1);
  meta.ip.dst = h.gid(0);
  meta.ip_id_known = true;
  wire::write_icrc(meta.ip, bytes);
  h.inject(1, bytes, meta);
  ASSERT_TRUE(h.run_until([&] { return cc_of(p.a).rate_bps == 1'000'000; }, 1ms));
  ASSERT_EQ(h.now(), TimePoint(0));

  constexpr uint32_t kLen = 2048;  // two 1024-byte packets
  fill_pattern(p.a, kLen);
  const Sge sge = p.a.sge(0, kLen);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, write_wr(sge, 1, p.b.addr(0), p.b.mr.rkey)).is_ok());
  const auto wcs = h.wait_wcs(0, p.a.send_cq, 1, 20ms);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + kLen, p.b.buf.begin()));
  std::vector<const CapturedPacket*> data;
  for (const CapturedPacket& c : h.log()) {
    if (c.from == 0) data.push_back(&c);
  }
  ASSERT_EQ(data.size(), 2u);
  EXPECT_EQ(data[0]->sent_at, TimePoint(0));
  const uint64_t first_ip = data[0]->bytes.size() + 28;  // WRITE First: 1084 bytes
  ASSERT_EQ(Pacer::tx_time(first_ip, 1'000'000), Nanos(8'672'000));
  // At 100 µs RC = (1 Gb/s + 1 Mb/s + 1) / 2 = 500.5 Mb/s: the 8.572 ms still owed are
  // 8.572 ms x 1e6 / 500.5e6 = 17126.9 ns, rounded up.
  EXPECT_EQ(data[1]->sent_at, TimePoint(100us) + Nanos(17127));
  EXPECT_LE(data[1]->sent_at - TimePoint(100us), Pacer::tx_time(first_ip, 500'500'000));
}

struct CeRun {
  std::vector<CapturedPacket> cnps;
  uint64_t marked = 0;
  uint64_t min_rate = UINT64_MAX;
  TimePoint min_rate_at{};
  uint64_t final_rate = 0;
  uint64_t final_target = 0;
  size_t completions = 0;
};

// Engine 0 writes 8 x 64 KiB to engine 1; the link from 0 marks CE on every packet sent in
// [from, to).
CeRun run_ce_marking(EngineHarness& h, QpPair& p, TimePoint from = TimePoint(100us),
                     TimePoint to = TimePoint(400us)) {
  CeRun r;
  h.faults(0).hook = [&r, from, to](CapturedPacket& c) {
    if (c.sent_at >= from && c.sent_at < to) {
      c.meta.tos |= 3;
      ++r.marked;
    }
    return HookVerdict{};
  };
  constexpr uint32_t kLen = 64 * 1024;
  fill_pattern(p.a, 8 * kLen);
  std::vector<Sge> sges;
  for (uint32_t i = 0; i < 8; ++i) sges.push_back(p.a.sge(i * kLen, kLen));
  for (uint32_t i = 0; i < 8; ++i) {
    EXPECT_TRUE(
        p.a.engine
            ->post_send(h.now(), p.a.qpn, write_wr(sges[i], i, p.b.addr(i * kLen), p.b.mr.rkey))
            .is_ok());
  }
  std::vector<Wc> got;
  h.run_until(
      [&] {
        const uint64_t rate = cc_of(p.a).rate_bps;
        if (rate != 0 && rate < r.min_rate) {
          r.min_rate = rate;
          r.min_rate_at = h.now();
        }
        for (const Wc& w : h.poll(0, p.a.send_cq)) got.push_back(w);
        return false;
      },
      20ms);
  r.completions = got.size();
  for (const Wc& w : got) EXPECT_EQ(w.status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + 8 * kLen, p.b.buf.begin()));
  for (const CapturedPacket& c : h.log()) {
    if (c.opcode() == wire::kCnpOpcode) r.cnps.push_back(c);
  }
  const QpCcState s = cc_of(p.a);
  r.final_rate = s.rate_bps;
  r.final_target = s.target_rate_bps;
  return r;
}

TEST(EngineCc, CeMarksMakeCnpsAtMostOnePerIntervalAndTheRateDropsAndRecovers) {
  CcConfig cc = dcqcn_1g();
  cc.dcqcn.min_time_between_cnps = 50;
  cc.dcqcn.rpg_time_reset = 20;
  cc.dcqcn.rpg_byte_reset = 0;
  EngineHarness h({.cc = cc});
  QpPair p = h.connect({});
  const CeRun r = run_ce_marking(h, p);
  EXPECT_EQ(r.completions, 8u);
  ASSERT_GT(r.marked, 0u);
  EXPECT_EQ(qpc(p.b)[Counter::kNpEcnMarkedRocePackets], r.marked);
  EXPECT_EQ(p.b.engine->counters()[Counter::kNpEcnMarkedRocePackets], r.marked);

  // The first marked packet (sent at >= 100 µs, 2 µs on the wire) gets a CNP at once; then
  // one per 50 µs window that saw a mark, the last for the window the marks ended in.
  ASSERT_EQ(r.cnps.size(), 7u);
  EXPECT_EQ(qpc(p.b)[Counter::kNpCnpSent], 7u);
  EXPECT_EQ(qpc(p.a)[Counter::kRpCnpHandled], 7u);
  EXPECT_EQ(qpc(p.a)[Counter::kRpCnpIgnored], 0u);
  EXPECT_GE(r.cnps[0].sent_at, TimePoint(102us));
  EXPECT_LT(r.cnps[0].sent_at, TimePoint(111us));  // + one paced packet (8.6 µs)
  for (size_t i = 1; i < r.cnps.size(); ++i) {
    EXPECT_EQ(r.cnps[i].sent_at - r.cnps[i - 1].sent_at, Nanos(50us)) << i;
  }
  // Each CNP: BTH 0x81, BECN, P_Key 0xFFFF, DestQP = the sender's QP, PSN 0, 16 zero bytes,
  // a valid ICRC, DSCP 48 with ECT(0), from the receiver's address to the sender's.
  for (const CapturedPacket& c : r.cnps) {
    EXPECT_EQ(c.from, 1);
    ASSERT_EQ(c.bytes.size(), 32u);
    wire::ParsedPacket pkt;
    ASSERT_EQ(wire::parse_packet(c.bytes, pkt), wire::ParseError::kOk);
    EXPECT_TRUE(pkt.hdr.bth.becn);
    EXPECT_FALSE(pkt.hdr.bth.fecn);
    EXPECT_FALSE(pkt.hdr.bth.ackreq);
    EXPECT_EQ(pkt.hdr.bth.pkey, 0xFFFF);
    EXPECT_EQ(pkt.hdr.bth.dqpn, p.a.qpn);
    EXPECT_EQ(pkt.hdr.bth.psn.value(), 0u);
    EXPECT_TRUE(
        std::all_of(c.bytes.begin() + 12, c.bytes.begin() + 28, [](uint8_t b) { return b == 0; }));
    EXPECT_EQ(c.bytes[4], 0x40);
    EXPECT_EQ(wire::icrc_of(c.meta.ip, std::span(c.bytes).first(28)), pkt.icrc);
    EXPECT_EQ(c.meta.tos, (48 << 2) | 2);
    EXPECT_EQ(c.meta.ip.src, h.gid(1));
    EXPECT_EQ(c.meta.ip.dst, h.gid(0));
  }
  // The rate fell to at most the first cut (1025/2048 of 1 Gb/s) while marked, and is back
  // at the line rate, with the target, once the marks stopped.
  EXPECT_LE(r.min_rate, 500'488'281u);
  EXPECT_GE(r.min_rate_at, TimePoint(100us));
  EXPECT_LT(r.min_rate_at, TimePoint(460us));
  EXPECT_EQ(r.final_rate, kGbps);
  EXPECT_EQ(r.final_target, kGbps);
  // Packets really went slower while the rate was cut: the marked window carried fewer
  // than the same window at the line rate (1 Gb/s x 300 µs / 1080 B = 277 packets).
  size_t in_window = 0;
  for (const CapturedPacket& c : h.log()) {
    if (c.from == 0 && c.sent_at >= TimePoint(100us) && c.sent_at < TimePoint(400us)) ++in_window;
  }
  EXPECT_EQ(in_window, r.marked);
  EXPECT_LT(in_window, 200u);
}

TEST(EngineCc, WithCcNoneNothingChangesOnTheWire) {
  // (a) the default engine: CC none.
  EngineHarness a;
  QpPair pa = a.connect({});
  // Without pacing the whole transfer takes a few µs: mark inside it.
  const CeRun ra = run_ce_marking(a, pa, TimePoint(1us), TimePoint(5us));
  // (b) an engine whose default is DCQCN, with QPs created with cc = none.
  EngineHarness b({.cc = dcqcn_1g()});
  QpPair pb = b.connect({.cc = CcAlgorithm::kNone});
  const CeRun rb = run_ce_marking(b, pb, TimePoint(1us), TimePoint(5us));
  EXPECT_EQ(ra.completions, 8u);
  EXPECT_TRUE(ra.cnps.empty());
  EXPECT_TRUE(rb.cnps.empty());
  ASSERT_GT(ra.marked, 0u);
  // CE is still counted at the receiver, but answered by nothing.
  EXPECT_EQ(qpc(pa.b)[Counter::kNpEcnMarkedRocePackets], ra.marked);
  EXPECT_EQ(qpc(pa.b)[Counter::kNpCnpSent], 0u);
  ASSERT_EQ(a.log().size(), b.log().size());
  for (size_t i = 0; i < a.log().size(); ++i) {
    const CapturedPacket& x = a.log()[i];
    const CapturedPacket& y = b.log()[i];
    // Equal packets, but for the buffer addresses in the RETH (and so the ICRC): the two
    // runs' buffers live at different virtual addresses.
    wire::ParsedPacket px;
    wire::ParsedPacket py;
    ASSERT_EQ(wire::parse_packet(x.bytes, px), wire::ParseError::kOk);
    ASSERT_EQ(wire::parse_packet(y.bytes, py), wire::ParseError::kOk);
    if (px.hdr.reth.va != 0) px.hdr.reth.va -= x.from == 0 ? pa.b.addr() : pa.a.addr();
    if (py.hdr.reth.va != 0) py.hdr.reth.va -= y.from == 0 ? pb.b.addr() : pb.a.addr();
    EXPECT_EQ(px.hdr, py.hdr) << i;
    EXPECT_TRUE(std::ranges::equal(px.payload, py.payload)) << i;
    EXPECT_EQ(x.bytes.size(), y.bytes.size()) << i;
    EXPECT_EQ(x.sent_at, y.sent_at) << i;
    EXPECT_EQ(x.meta.ip.sport, y.meta.ip.sport) << i;
    EXPECT_EQ(x.meta.tos, 0) << i;  // Not-ECT, as rxe sends (the hook marks after the log)
    EXPECT_EQ(y.meta.tos, 0) << i;
  }
}

TEST(EngineCc, TrafficClassEcnBitsWinOverEct0) {
  EngineHarness h({.cc = dcqcn_1g()});
  QpPair p = h.connect({.traffic_class = (26 << 2) | 1});  // DSCP 26, ECT(1)
  const Sge sge = p.a.sge(0, 512);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, write_wr(sge, 1, p.b.addr(0), p.b.mr.rkey)).is_ok());
  ASSERT_EQ(h.wait_wcs(0, p.a.send_cq, 1, 10ms).size(), 1u);
  ASSERT_FALSE(h.log().empty());
  EXPECT_EQ(h.log()[0].meta.tos, (26 << 2) | 1);
}

TEST(EngineCc, CnpForAQpWithoutCcIsIgnored) {
  EngineHarness h;
  QpPair p = h.connect({});
  wire::Headers hdr;
  hdr.bth.opcode = wire::kCnpOpcode;
  hdr.bth.becn = true;
  hdr.bth.dqpn = p.a.qpn;
  std::vector<uint8_t> bytes(64);
  bytes.resize(wire::build_packet(hdr, {}, bytes));
  PacketMeta meta;
  meta.ip.src = h.gid(1);
  meta.ip.dst = h.gid(0);
  meta.ip_id_known = true;
  wire::write_icrc(meta.ip, bytes);
  h.inject(1, bytes, meta);
  h.run_until_idle(1s);
  EXPECT_EQ(qpc(p.a)[Counter::kRpCnpIgnored], 1u);
  EXPECT_EQ(qpc(p.a)[Counter::kRpCnpHandled], 0u);
  EXPECT_EQ(p.a.engine->counters()[Counter::kRpCnpIgnored], 1u);
}

}  // namespace
}  // namespace uroce::test
