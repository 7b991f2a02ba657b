// Narrated packet scripts for the IBA 1.5 remote operations FLUSH and ATOMIC WRITE (both
// sides), the UD length rule, the multicast QPN and the two ICRC checks (exact when the
// driver saw the IP header, modulo the IPv4 ID when it did not). Every script asserts the
// packets on the wire, memory byte for byte (guard bytes around the target MR included),
// completions, QP state and every counter. Rules: IBA 1.5 FLUSH/ATOMIC WRITE as Linux rxe
// 6.2+ executes them (docs/engine.md "FLUSH and ATOMIC WRITE").
#include <gtest/gtest.h>

#include <algorithm>

#include "script_harness.hpp"

namespace uroce::script {
namespace {

using transport::kAccessFlushGlobal;
using transport::kAccessFlushPersistent;
using transport::kAccessLocalWrite;
using transport::kAccessRemoteAtomic;
using transport::kAccessRemoteRead;
using transport::kAccessRemoteWrite;
using transport::kFlushGlobal;
using transport::kFlushMr;
using transport::kFlushPersistent;
using transport::kFlushRange;
using transport::Wc;
using transport::WcOpcode;
using transport::WrOpcode;
using wire::NakCode;

// A 256-byte buffer whose middle [64, 192) is registered; the rest are guard bytes that
// must never change.
struct GuardedMr {
  static constexpr size_t kSize = 256;
  static constexpr size_t kOff = 64;
  static constexpr size_t kLen = 128;
  alignas(64) std::array<uint8_t, kSize> bytes{};
  std::array<uint8_t, kSize> expect{};
  transport::MrInfo mr;

  GuardedMr(ScriptQp& s, uint32_t access) {
    for (size_t i = 0; i < kSize; ++i) bytes[i] = static_cast<uint8_t>(0xA0 ^ i);
    expect = bytes;
    mr = s.engine().reg_mr(s.pd(), bytes.data() + kOff, kLen, access).value();
  }
  [[nodiscard]] uint64_t va(size_t off = 0) const { return mr.addr + off; }
  void expect_unchanged() const {
    for (size_t i = 0; i < kSize; ++i) EXPECT_EQ(bytes[i], expect[i]) << "byte " << i;
  }
};

ScriptOptions flush_options() {
  ScriptOptions o;
  o.rq_psn = 0x100;
  o.qp_access |= kAccessFlushGlobal;
  return o;
}

wire::Headers flush(const ScriptQp& s, uint32_t psn, uint64_t va, uint32_t rkey, uint32_t len,
                    uint32_t placement, uint32_t selectivity) {
  wire::Headers h = s.rdma(Op::kFlush, psn, va, rkey, len);
  h.feth = wire::Feth::make(placement, selectivity);
  return h;
}

std::array<uint8_t, 8> eight(uint8_t first) {
  std::array<uint8_t, 8> v{};
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(first + i);
  return v;
}

void expect_empty_read_response(const TxPacket& p, uint32_t psn, uint32_t msn) {
  EXPECT_EQ(p.opcode(), rc(Op::kReadResponseOnly));
  EXPECT_EQ(p.hdr.aeth.syndrome, wire::Aeth::ack());
  EXPECT_EQ(p.psn(), psn);
  EXPECT_EQ(p.hdr.aeth.msn, msn);
  EXPECT_TRUE(p.payload.empty());
}

// ---------------------------------------------------------------------------------------
// FLUSH, responder side.

TEST(RemoteOps, FlushOfARangeAndOfTheWholeRegionIsAnsweredByAnEmptyReadResponse) {
  ScriptQp s(flush_options());
  GuardedMr g(s, kAccessLocalWrite | kAccessFlushGlobal);
  // receive FLUSH psn=0x100 global range [va+8, va+40) / expect READ Response Only psn=0x100
  s.receive(flush(s, 0x100, g.va(8), g.mr.rkey, 32, kFlushGlobal, kFlushRange));
  expect_empty_read_response(one(s.transmit()), 0x100, 1);
  // receive FLUSH psn=0x101 of the whole region (VA and length ignored) / expect the same
  s.receive(flush(s, 0x101, 0xDEAD'0000'0000, g.mr.rkey, 0xFFFF'FFFF, kFlushGlobal, kFlushMr));
  expect_empty_read_response(one(s.transmit()), 0x101, 2);
  // receive the FLUSH psn=0x101 again (a retry) / expect the answer again, MSN unchanged
  s.receive(flush(s, 0x101, 0xDEAD'0000'0000, g.mr.rkey, 0xFFFF'FFFF, kFlushGlobal, kFlushMr));
  expect_empty_read_response(one(s.transmit()), 0x101, 2);
  // receive SEND psn=0x102 / expect ACK: the ePSN moved on past both FLUSHes
  s.post_recv(1, 0, 64);
  s.receive(s.request(Op::kSendOnly, 0x102), {1});
  expect_ack(one(s.transmit()), 0x102, 3);
  g.expect_unchanged();
  EXPECT_EQ(s.state(), QpState::kRts);
  s.expect_qp_counters({{Counter::kDuplicateRequest, 1}, {Counter::kRdmaRecvs, 1}});
}

struct FlushRefusal {
  const char* what;
  uint32_t qp_access_extra;  // added to the QP's flags besides FLUSH_GLOBAL
  uint32_t mr_access;
  int64_t va_off;  // from the MR start
  uint32_t len;
  uint32_t placement;
  uint32_t selectivity;
  bool wrong_rkey;
  NakCode nak;
  Counter counter;
};

class FlushRefused : public ::testing::TestWithParam<FlushRefusal> {};

// Each refused FLUSH: the NAK IBA/rxe give, the QP in ERR, the counter, memory untouched.
TEST_P(FlushRefused, NaksAndMovesTheQpToError) {
  const FlushRefusal& c = GetParam();
  ScriptOptions o = flush_options();
  o.qp_access |= c.qp_access_extra;
  ScriptQp s(o);
  GuardedMr g(s, c.mr_access);
  const uint32_t rkey = c.wrong_rkey ? g.mr.rkey ^ 0x100 : g.mr.rkey;
  s.receive(flush(s, 0x100, g.va() + static_cast<uint64_t>(c.va_off), rkey, c.len, c.placement,
                  c.selectivity));
  expect_nak(one(s.transmit()), c.nak, 0x100, 0);
  EXPECT_EQ(s.state(), QpState::kErr);
  g.expect_unchanged();
  s.expect_qp_counters({{c.counter, 1}});
}

constexpr uint32_t kGlobalMr = kAccessLocalWrite | kAccessFlushGlobal;

INSTANTIATE_TEST_SUITE_P(
    RemoteOps, FlushRefused,
    ::testing::Values(
        // rxe check_rkey: the R_Key, the range, the MR's FLUSH right -> remote access error
        FlushRefusal{"range past the end", 0, kGlobalMr, 120, 16, kFlushGlobal, kFlushRange, false,
                     NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors},
        FlushRefusal{"range before the start", 0, kGlobalMr, -8, 16, kFlushGlobal, kFlushRange,
                     false, NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors},
        FlushRefusal{"unknown R_Key", 0, kGlobalMr, 0, 16, kFlushGlobal, kFlushMr, true,
                     NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors},
        FlushRefusal{"MR without FLUSH_GLOBAL", 0, kAccessLocalWrite | kAccessRemoteWrite, 0, 16,
                     kFlushGlobal, kFlushRange, false, NakCode::kRemoteAccessError,
                     Counter::kRespRemoteAccessErrors},
        // no MR can be persistent (reg_mr refuses FLUSH_PERSISTENT): a persistent FLUSH on a
        // QP that allows it fails the MR right
        FlushRefusal{"persistent placement", kAccessFlushPersistent, kGlobalMr, 0, 16,
                     kFlushPersistent, kFlushRange, false, NakCode::kRemoteAccessError,
                     Counter::kRespRemoteAccessErrors},
        // rxe check_qp_attr_access: the QP's FLUSH right -> invalid request
        FlushRefusal{"QP without FLUSH_PERSISTENT", 0, kGlobalMr, 0, 16,
                     kFlushGlobal | kFlushPersistent, kFlushRange, false, NakCode::kInvalidRequest,
                     Counter::kRespRemoteInvalidRequest},
        // reserved FETH values (uroce is stricter than rxe, which ignores them)
        FlushRefusal{"no placement type", 0, kGlobalMr, 0, 16, 0, kFlushRange, false,
                     NakCode::kInvalidRequest, Counter::kRespRemoteInvalidRequest},
        FlushRefusal{"reserved placement bit", 0, kGlobalMr, 0, 16, kFlushGlobal | 4, kFlushRange,
                     false, NakCode::kInvalidRequest, Counter::kRespRemoteInvalidRequest},
        FlushRefusal{"reserved selectivity", 0, kGlobalMr, 0, 16, kFlushGlobal, 2, false,
                     NakCode::kInvalidRequest, Counter::kRespRemoteInvalidRequest}),
    [](const ::testing::TestParamInfo<FlushRefusal>& i) {
      std::string n = i.param.what;
      std::replace_if(
          n.begin(), n.end(), [](char ch) { return !std::isalnum(ch); }, '_');
      return n;
    });

TEST(RemoteOps, QpWithoutFlushRightsRefusesFlushAsInvalidRequest) {
  ScriptOptions o;  // REMOTE_WRITE/READ/ATOMIC but no FLUSH_GLOBAL on the QP
  o.rq_psn = 0x100;
  ScriptQp s(o);
  GuardedMr g(s, kGlobalMr);
  s.receive(flush(s, 0x100, g.va(), g.mr.rkey, 16, kFlushGlobal, kFlushRange));
  expect_nak(one(s.transmit()), NakCode::kInvalidRequest, 0x100, 0);
  EXPECT_EQ(s.state(), QpState::kErr);
  s.expect_qp_counters({{Counter::kRespRemoteInvalidRequest, 1}});
}

TEST(RemoteOps, RegMrRefusesFlushPersistentAndAcceptsFlushGlobal) {
  ScriptQp s(flush_options());
  std::array<uint8_t, 64> buf{};
  const auto bad =
      s.engine().reg_mr(s.pd(), buf.data(), buf.size(), kAccessLocalWrite | kAccessFlushPersistent);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), EINVAL);
  EXPECT_NE(std::string(bad.status().message()).find("FLUSH_PERSISTENT"), std::string::npos);
  EXPECT_TRUE(s.engine().reg_mr(s.pd(), buf.data(), buf.size(), kAccessFlushGlobal).is_ok());
}

// ---------------------------------------------------------------------------------------
// ATOMIC WRITE, responder side.

TEST(RemoteOps, AtomicWriteStoresEightBytesOnceAndAnswersWithAnEmptyReadResponse) {
  ScriptOptions o;
  o.rq_psn = 0x200;
  ScriptQp s(o);
  GuardedMr g(s, kAccessLocalWrite | kAccessRemoteWrite);
  const auto v = eight(0x11);
  // receive ATOMIC WRITE psn=0x200 va=MR+16 / expect READ Response Only, the 8 bytes in place
  s.receive(s.rdma(Op::kAtomicWrite, 0x200, g.va(16), g.mr.rkey, 8), v);
  expect_empty_read_response(one(s.transmit()), 0x200, 1);
  std::copy(v.begin(), v.end(), g.expect.begin() + GuardedMr::kOff + 16);
  g.expect_unchanged();
  // the application changes the word; the retried ATOMIC WRITE must not write it again
  g.bytes[GuardedMr::kOff + 16] = 0x77;
  g.expect[GuardedMr::kOff + 16] = 0x77;
  s.receive(s.rdma(Op::kAtomicWrite, 0x200, g.va(16), g.mr.rkey, 8), v);
  expect_empty_read_response(one(s.transmit()), 0x200, 1);
  g.expect_unchanged();
  EXPECT_EQ(s.state(), QpState::kRts);
  s.expect_qp_counters({{Counter::kRxWriteRequests, 1}, {Counter::kDuplicateRequest, 1}});
}

struct AtomicWriteRefusal {
  const char* what;
  uint32_t qp_access;
  uint8_t max_dest_rd_atomic;
  uint32_t mr_access;
  int64_t va_off;
  uint32_t dma_len;
  bool wrong_rkey;
  NakCode nak;
  Counter counter;
  bool counts_request;  // reached the executor (rx_write_requests counted)
};

class AtomicWriteRefused : public ::testing::TestWithParam<AtomicWriteRefusal> {};

TEST_P(AtomicWriteRefused, NaksAndMovesTheQpToError) {
  const AtomicWriteRefusal& c = GetParam();
  ScriptOptions o;
  o.rq_psn = 0x200;
  o.qp_access = c.qp_access;
  o.max_dest_rd_atomic = c.max_dest_rd_atomic;
  ScriptQp s(o);
  GuardedMr g(s, c.mr_access);
  const uint32_t rkey = c.wrong_rkey ? g.mr.rkey + (1u << 20) : g.mr.rkey;
  s.receive(
      s.rdma(Op::kAtomicWrite, 0x200, g.va() + static_cast<uint64_t>(c.va_off), rkey, c.dma_len),
      eight(0x30));
  expect_nak(one(s.transmit()), c.nak, 0x200, 0);
  EXPECT_EQ(s.state(), QpState::kErr);
  g.expect_unchanged();
  if (c.counts_request) {
    s.expect_qp_counters({{c.counter, 1}, {Counter::kRxWriteRequests, 1}});
  } else {
    s.expect_qp_counters({{c.counter, 1}});
  }
}

constexpr uint32_t kAllQp = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
constexpr uint32_t kWritableMr = kAccessLocalWrite | kAccessRemoteWrite;

INSTANTIATE_TEST_SUITE_P(
    RemoteOps, AtomicWriteRefused,
    ::testing::Values(
        AtomicWriteRefusal{"unaligned", kAllQp, 16, kWritableMr, 4, 8, false,
                           NakCode::kInvalidRequest, Counter::kRespRemoteInvalidRequest, true},
        AtomicWriteRefusal{"dma length 16", kAllQp, 16, kWritableMr, 0, 16, false,
                           NakCode::kInvalidRequest, Counter::kRespRemoteInvalidRequest, true},
        AtomicWriteRefusal{"last word plus one", kAllQp, 16, kWritableMr, 128, 8, false,
                           NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors, true},
        AtomicWriteRefusal{"straddles the end", kAllQp, 16, kWritableMr, 124, 8, false,
                           NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors, true},
        AtomicWriteRefusal{"unknown R_Key", kAllQp, 16, kWritableMr, 0, 8, true,
                           NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors, true},
        AtomicWriteRefusal{"MR read only", kAllQp, 16, kAccessRemoteRead, 0, 8, false,
                           NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors, true},
        AtomicWriteRefusal{"MR atomic but not write", kAllQp, 16,
                           kAccessLocalWrite | kAccessRemoteAtomic, 0, 8, false,
                           NakCode::kRemoteAccessError, Counter::kRespRemoteAccessErrors, true},
        AtomicWriteRefusal{"QP without REMOTE_WRITE", kAccessRemoteRead | kAccessRemoteAtomic, 16,
                           kWritableMr, 0, 8, false, NakCode::kInvalidRequest,
                           Counter::kRespRemoteInvalidRequest, false},
        AtomicWriteRefusal{"no responder resources", kAllQp, 0, kWritableMr, 0, 8, false,
                           NakCode::kInvalidRequest, Counter::kRespRemoteInvalidRequest, false}),
    [](const ::testing::TestParamInfo<AtomicWriteRefusal>& i) {
      std::string n = i.param.what;
      std::replace_if(
          n.begin(), n.end(), [](char ch) { return !std::isalnum(ch); }, '_');
      return n;
    });

// ---------------------------------------------------------------------------------------
// FLUSH and ATOMIC WRITE, requester side.

TEST(RemoteOps, RequesterSendsFlushAndAtomicWriteAndCompletesThemOnTheirResponses) {
  ScriptOptions o;
  o.sq_psn = 0x300;
  ScriptQp s(o);
  transport::SendWr f;
  f.wr_id = 1;
  f.opcode = WrOpcode::kFlush;
  f.send_flags = transport::kSendSignaled;
  f.flush = {0x7000'0000, 0xABCD, 4096, kFlushGlobal, kFlushRange};
  ASSERT_TRUE(s.post_send(f).is_ok());
  transport::SendWr w;
  w.wr_id = 2;
  w.opcode = WrOpcode::kAtomicWrite;
  w.send_flags = transport::kSendSignaled;
  w.rdma = {0x7000'0040, 0xABCD};
  w.atomic_write = eight(0xC0);
  ASSERT_TRUE(s.post_send(w).is_ok());
  // expect FLUSH psn=0x300 (FETH global/range, RETH) and ATOMIC WRITE psn=0x301 (RETH, 8 bytes)
  const std::vector<TxPacket> t = s.transmit();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].opcode(), rc(Op::kFlush));
  EXPECT_EQ(t[0].psn(), 0x300u);
  EXPECT_TRUE(t[0].hdr.bth.ackreq);
  EXPECT_EQ(t[0].hdr.feth.bits, 0x01u);
  EXPECT_EQ(t[0].hdr.reth, (wire::Reth{0x7000'0000, 0xABCD, 4096}));
  EXPECT_TRUE(t[0].payload.empty());
  EXPECT_EQ(t[1].opcode(), rc(Op::kAtomicWrite));
  EXPECT_EQ(t[1].psn(), 0x301u);
  EXPECT_TRUE(t[1].hdr.bth.ackreq);
  EXPECT_EQ(t[1].hdr.reth, (wire::Reth{0x7000'0040, 0xABCD, 8}));
  const auto v = eight(0xC0);
  EXPECT_EQ(t[1].payload, std::vector<uint8_t>(v.begin(), v.end()));
  // receive a plain ACK for the FLUSH / expect it dropped: the answer is a READ response
  s.receive(s.ack(0x300, 1));
  EXPECT_TRUE(s.send_wcs().empty());
  // receive the two empty READ Response Only / expect FLUSH and ATOMIC_WRITE completions
  s.receive(s.response(Op::kReadResponseOnly, 0x300, wire::Aeth::ack(), 1));
  s.receive(s.response(Op::kReadResponseOnly, 0x301, wire::Aeth::ack(), 2));
  const std::vector<Wc> wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::kFlush);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].opcode, WcOpcode::kAtomicWrite);
  EXPECT_EQ(wcs[1].byte_len, 8u);
  EXPECT_EQ(s.engine().next_deadline(), kNever) << "nothing left to acknowledge";
  s.expect_qp_counters({{Counter::kDropBadResponse, 1}});
}

TEST(RemoteOps, NakedFlushCompletesWithTheNaksStatus) {
  ScriptOptions o;
  o.sq_psn = 0x300;
  ScriptQp s(o);
  transport::SendWr f;
  f.wr_id = 7;
  f.opcode = WrOpcode::kFlush;
  f.flush = {0, 0x1234, 0, kFlushGlobal, kFlushMr};
  ASSERT_TRUE(s.post_send(f).is_ok());
  const TxPacket p = one(s.transmit());
  EXPECT_EQ(p.hdr.feth.bits, 0x11u) << "selectivity 1 (whole MR) in bits 4..5";
  EXPECT_EQ(p.hdr.reth.dma_len, 0u);
  s.receive(s.nak(NakCode::kRemoteAccessError, 0x300, 0));
  const std::vector<Wc> wcs = s.send_wcs();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 7u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(s.state(), QpState::kErr);
  s.expect_qp_counters({{Counter::kReqRemoteAccessErrors, 1}, {Counter::kReqCqeError, 1}});
}

TEST(RemoteOps, PostSendChecksFlushAndAtomicWriteArguments) {
  ScriptQp s;
  transport::SendWr f;
  f.opcode = WrOpcode::kFlush;
  f.flush.type = 0;
  EXPECT_EQ(s.post_send(f).code(), EINVAL);
  f.flush.type = 4;
  EXPECT_EQ(s.post_send(f).code(), EINVAL);
  f.flush.type = kFlushGlobal;
  f.flush.level = 2;
  EXPECT_EQ(s.post_send(f).code(), EINVAL);
  transport::SendWr w;
  w.opcode = WrOpcode::kAtomicWrite;
  const transport::Sge g = s.sge(0, 8);
  w.sg_list = std::span<const transport::Sge>(&g, 1);
  EXPECT_EQ(s.post_send(w).code(), EINVAL) << "the 8 bytes travel in atomic_write, not SGEs";
  EXPECT_TRUE(s.transmit().empty());
  ScriptOptions uc;
  uc.type = QpType::kUc;
  ScriptQp u(uc);
  w.sg_list = {};
  EXPECT_EQ(u.post_send(w).code(), EINVAL) << "RC only";
}

// ---------------------------------------------------------------------------------------
// UD: a datagram is one packet of at most the MTU.

wire::Headers ud_send(const ScriptQp& s, uint32_t qkey) {
  wire::Headers h{};
  h.bth.opcode = wire::make_opcode(wire::Transport::kUd, Op::kSendOnly);
  h.bth.dqpn = s.qpn();
  h.deth = {qkey, 0x77};
  return h;
}

TEST(RemoteOps, UdDatagramAboveTheMtuIsDroppedAndCountedWithoutUsingTheWqe) {
  ScriptOptions o;
  o.type = QpType::kUd;
  ScriptQp s(o);  // the port's active MTU is 4096
  s.post_recv(1, 0, 8192);
  // receive UD SEND of 4097 bytes / expect nothing, drop_ud_too_long, the WQE kept
  s.receive(ud_send(s, o.qkey), std::vector<uint8_t>(4097, 0x42));
  EXPECT_TRUE(s.recv_wcs().empty());
  EXPECT_TRUE(std::all_of(s.mem(0), s.mem(8192), [](uint8_t b) { return b == 0; }));
  // receive UD SEND of exactly 4096 bytes / expect it in the same WQE after the 40-byte GRH
  s.receive(ud_send(s, o.qkey), std::vector<uint8_t>(4096, 0x43));
  const std::vector<Wc> wcs = s.recv_wcs();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].byte_len, 40u + 4096u);
  EXPECT_TRUE(std::all_of(s.mem(40), s.mem(40 + 4096), [](uint8_t b) { return b == 0x43; }));
  EXPECT_EQ(*s.mem(40 + 4096), 0);
  s.expect_qp_counters({{Counter::kDropUdTooLong, 1}, {Counter::kRdmaRecvs, 1}});
}

// ---------------------------------------------------------------------------------------
// QPN 0xFFFFFF is the multicast QPN (IBA 9.3.2); uroce joins no group.

TEST(RemoteOps, PacketForTheMulticastQpnIsCountedAsSuch) {
  ScriptOptions o;
  o.rq_psn = 0x10;
  ScriptQp s(o);
  s.post_recv(1, 0, 64);
  wire::Headers h = s.request(Op::kSendOnly, 0x10);
  h.bth.dqpn = 0xFFFFFF;
  std::vector<uint8_t> bytes(wire::packet_size(h.bth.opcode, 4));
  const std::array<uint8_t, 4> payload = {1, 2, 3, 4};
  ASSERT_EQ(wire::build_packet(h, payload, bytes), bytes.size());
  transport::PacketMeta meta;
  meta.ip.src = v4_gid(10, 0, 0, 2);
  meta.ip.dst = v4_gid(10, 0, 0, 1);
  meta.ip_id_known = true;
  wire::write_icrc(meta.ip, bytes);
  s.engine().on_packet(s.now(), meta, bytes);
  EXPECT_TRUE(s.transmit().empty());
  EXPECT_TRUE(s.recv_wcs().empty());
  const Counters& dev = s.engine().counters();
  EXPECT_EQ(dev[Counter::kDropMulticastQpn], 1u);
  EXPECT_EQ(dev[Counter::kDropBadQpn], 0u);
  EXPECT_EQ(dev[Counter::kRcvdPkts], 1u);
  s.expect_qp_counters({{Counter::kRcvdPkts, 0}, {Counter::kBytesRcvd, 0}});
}

// ---------------------------------------------------------------------------------------
// ICRC: exact when the driver saw the IP header (PacketMeta::ip_id_known, a raw or AF_XDP
// driver, the simulator), modulo the IPv4 ID/DF when it did not (a UDP socket).

// A SEND whose ICRC was computed for IPv4 ID 0x1234 (the sender's kernel) and DF set.
std::vector<uint8_t> send_with_id(const ScriptQp& s, uint32_t psn, uint16_t ip_id) {
  const wire::Headers h = s.request(Op::kSendOnly, psn);
  const std::array<uint8_t, 4> payload = {5, 6, 7, 8};
  std::vector<uint8_t> bytes(wire::packet_size(h.bth.opcode, payload.size()));
  EXPECT_EQ(wire::build_packet(h, payload, bytes), bytes.size());
  wire::IpContext ip;
  ip.src = v4_gid(10, 0, 0, 2);
  ip.dst = v4_gid(10, 0, 0, 1);
  ip.ipv4_id = ip_id;
  wire::write_icrc(ip, bytes);
  return bytes;
}

transport::PacketMeta seen(uint16_t ip_id, bool known) {
  transport::PacketMeta m;
  m.ip.src = v4_gid(10, 0, 0, 2);
  m.ip.dst = v4_gid(10, 0, 0, 1);
  m.ip.ipv4_id = ip_id;
  m.ip_id_known = known;
  return m;
}

TEST(RemoteOps, IcrcIsExactWhenTheDriverKnowsTheIpIdAndModuloItOtherwise) {
  ScriptOptions o;
  o.rq_psn = 0x10;
  ScriptQp s(o);
  for (uint64_t i = 0; i < 3; ++i) s.post_recv(i + 1, 64 * i, 64);
  // The same bytes, ICRC for ID 0x1234. A driver that saw ID 0x1234: exact, accepted.
  s.engine().on_packet(s.now(), seen(0x1234, true), send_with_id(s, 0x10, 0x1234));
  expect_ack(one(s.transmit()), 0x10, 1);
  EXPECT_EQ(s.engine().counters()[Counter::kIcrcOkModuloIpId], 0u);
  // A driver that saw ID 0x4321 on the wire: to the exact check this is corruption (the
  // difference is exactly what a flipped ID would make, the case the modulo check cannot
  // see): dropped as an ICRC error.
  s.engine().on_packet(s.now(), seen(0x4321, true), send_with_id(s, 0x11, 0x1234));
  EXPECT_TRUE(s.transmit().empty());
  EXPECT_EQ(s.engine().counters()[Counter::kIcrcErrors], 1u);
  // A UDP socket (ID unknown) accepts the same packet modulo the ID and says so.
  s.engine().on_packet(s.now(), seen(0, false), send_with_id(s, 0x11, 0x1234));
  expect_ack(one(s.transmit()), 0x11, 2);
  EXPECT_EQ(s.engine().counters()[Counter::kIcrcOkModuloIpId], 1u);
  // Both paths catch a corrupted payload bit.
  std::vector<uint8_t> bad = send_with_id(s, 0x12, 0x1234);
  bad[13] ^= 0x01;
  s.engine().on_packet(s.now(), seen(0x1234, true), bad);
  s.engine().on_packet(s.now(), seen(0, false), bad);
  EXPECT_TRUE(s.transmit().empty());
  const Counters& dev = s.engine().counters();
  EXPECT_EQ(dev[Counter::kIcrcErrors], 3u);
  EXPECT_EQ(dev[Counter::kIcrcOkModuloIpId], 1u);
  EXPECT_EQ(dev[Counter::kRcvdPkts], 2u);
  EXPECT_EQ(s.recv_wcs().size(), 2u);
}

}  // namespace
}  // namespace uroce::script
