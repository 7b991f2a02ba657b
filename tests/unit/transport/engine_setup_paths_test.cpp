// Less travelled setup paths between two engines: IPv6 GIDs, QP1 (GSI) datagrams, a QP
// taken back to RESET and connected again, UD through an SRQ.
#include <gtest/gtest.h>

#include "engine_harness.hpp"
#include "wire/icrc.hpp"

namespace uroce::test {
namespace {

using namespace transport;
using wire::Op;

SendWr make_wr(WrOpcode op, std::span<const Sge> sges, uint64_t wr_id) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = sges;
  wr.send_flags = kSendSignaled;
  return wr;
}

TEST(SetupPaths, RcOverIpv6) {
  EngineHarness h({.ipv6 = true});
  QpPair p = h.connect({});
  const Sge r = p.b.sge(0, 64);
  RecvWr rw;
  rw.wr_id = 1;
  rw.sg_list = {&r, 1};
  ASSERT_TRUE(p.b.engine->post_recv(p.b.qpn, rw).is_ok());
  std::memcpy(p.a.buf.data(), "ipv6", 4);
  const Sge s = p.a.sge(0, 4);
  ASSERT_TRUE(
      p.a.engine->post_send(h.now(), p.a.qpn, make_wr(WrOpcode::kSend, {&s, 1}, 1)).is_ok());
  ASSERT_EQ(h.wait_wcs(1, p.b.recv_cq, 1, 1ms).size(), 1u);
  EXPECT_EQ(std::memcmp(p.b.buf.data(), "ipv6", 4), 0);
  ASSERT_FALSE(h.log().empty());
  EXPECT_TRUE(h.log()[0].meta.ip.ipv6);
  EXPECT_EQ(h.log()[0].meta.ip.dst, h.gid(1));
  EXPECT_EQ(wire::verify_icrc_udp(h.log()[0].meta.ip, h.log()[0].bytes), wire::IcrcResult::kOk);
}

TEST(SetupPaths, GsiQp1DatagramsUseTheGsiQkeyAndAckReq) {
  EngineHarness h;
  Endpoint ep[2];
  uint32_t qp1[2];
  for (int i = 0; i < 2; ++i) {
    Engine& e = h.engine(i);
    ep[i].engine = &e;
    ep[i].pd = e.alloc_pd().value();
    ep[i].send_cq = e.create_cq(16).value();
    ep[i].recv_cq = e.create_cq(16).value();
    ep[i].buf.assign(4096, 0);
    ep[i].mr = e.reg_mr(ep[i].pd, ep[i].buf.data(), ep[i].buf.size(), kAccessLocalWrite).value();
    QpInitAttr init;
    init.qp_type = QpType::kGsi;
    init.send_cq = ep[i].send_cq;
    init.recv_cq = ep[i].recv_cq;
    init.cap = {8, 8, 1, 1, 0};
    auto info = e.create_qp(ep[i].pd, init);
    ASSERT_TRUE(info.is_ok());
    qp1[i] = info->qpn;
    EXPECT_EQ(qp1[i], 1u);
    EXPECT_EQ(e.create_qp(ep[i].pd, init).status().code(), EBUSY);  // one QP1 per device
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.qkey = wire::kGsiQkey;
    // GSI takes PKEY_INDEX and QKEY but no PORT at RESET->INIT (kernel MAD layer).
    EXPECT_EQ(e.modify_qp(1, a, kQpState | kQpPkeyIndex | kQpQkey | kQpPort).code(), EINVAL);
    ASSERT_TRUE(e.modify_qp(1, a, kQpState | kQpPkeyIndex | kQpQkey).is_ok());
    a.qp_state = QpState::kRtr;
    ASSERT_TRUE(e.modify_qp(1, a, kQpState).is_ok());
    a.qp_state = QpState::kRts;
    ASSERT_TRUE(e.modify_qp(1, a, kQpState | kQpSqPsn).is_ok());
  }
  const Sge r = ep[1].sge(0, 256);
  RecvWr rw;
  rw.wr_id = 5;
  rw.sg_list = {&r, 1};
  ASSERT_TRUE(h.engine(1).post_recv(1, rw).is_ok());
  const Sge s = ep[0].sge(0, 100);
  SendWr wr = make_wr(WrOpcode::kSend, {&s, 1}, 1);
  wr.ud.ah.dgid = h.gid(1);
  wr.ud.ah.sgid = h.gid(0);
  wr.ud.remote_qpn = 1;
  wr.ud.remote_qkey = 0x1234;  // QP1 always sends the GSI Q_Key
  ASSERT_TRUE(h.engine(0).post_send(h.now(), 1, wr).is_ok());
  auto rwc = h.wait_wcs(1, ep[1].recv_cq, 1, 1ms);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].src_qp, 1u);
  EXPECT_EQ(rwc[0].byte_len, 140u);
  const wire::ParsedPacket pk = h.log()[0].parse();
  EXPECT_EQ(pk.hdr.deth.qkey, wire::kGsiQkey);
  EXPECT_TRUE(pk.hdr.bth.ackreq);
  EXPECT_EQ(pk.hdr.bth.dqpn, 1u);
}

TEST(SetupPaths, ResetAndReconnect) {
  EngineHarness h;
  QpPair p = h.connect({});
  const Sge s = p.a.sge(0, 8);
  SendWr w = make_wr(WrOpcode::kRdmaWrite, {&s, 1}, 1);
  w.rdma = {p.b.addr(0), p.b.mr.rkey};
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, w).is_ok());
  ASSERT_EQ(h.wait_wcs(0, p.a.send_cq, 1, 1ms).size(), 1u);
  // Both sides back to RESET, then connected again with fresh PSNs.
  QpAttr a;
  a.qp_state = QpState::kReset;
  ASSERT_TRUE(p.a.engine->modify_qp(p.a.qpn, a, kQpState).is_ok());
  ASSERT_TRUE(p.b.engine->modify_qp(p.b.qpn, a, kQpState).is_ok());
  for (int i = 0; i < 2; ++i) {
    Endpoint& self = i == 0 ? p.a : p.b;
    const Endpoint& peer = i == 0 ? p.b : p.a;
    QpAttr q;
    q.qp_state = QpState::kInit;
    q.port_num = 1;
    q.qp_access_flags = kAccessRemoteWrite;
    ASSERT_TRUE(
        self.engine->modify_qp(self.qpn, q, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags)
            .is_ok());
    q.qp_state = QpState::kRtr;
    q.path_mtu = Mtu::k512;
    q.dest_qp_num = peer.qpn;
    q.rq_psn = 0xABCDE0;
    q.ah_attr.dgid = peer.gid;
    q.ah_attr.sgid = self.gid;
    q.max_dest_rd_atomic = 1;
    ASSERT_TRUE(self.engine
                    ->modify_qp(self.qpn, q,
                                kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                    kQpMaxDestRdAtomic | kQpMinRnrTimer)
                    .is_ok());
    q.qp_state = QpState::kRts;
    q.sq_psn = 0xABCDE0;
    q.timeout = 14;
    q.retry_cnt = 7;
    q.rnr_retry = 7;
    q.max_rd_atomic = 1;
    ASSERT_TRUE(self.engine
                    ->modify_qp(self.qpn, q,
                                kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry |
                                    kQpMaxQpRdAtomic)
                    .is_ok());
  }
  const size_t before = h.log().size();
  const Sge big = p.a.sge(0, 1500);
  w = make_wr(WrOpcode::kRdmaWrite, {&big, 1}, 2);
  w.rdma = {p.b.addr(1000), p.b.mr.rkey};
  std::fill(p.a.buf.begin(), p.a.buf.begin() + 1500, 0x5A);
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, w).is_ok());
  auto wc = h.wait_wcs(0, p.a.send_cq, 1, 1ms);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(h.log()[before].psn(), 0xABCDE0u);
  EXPECT_EQ(h.log()[before].parse().payload.size(), 512u);
  EXPECT_TRUE(std::all_of(p.b.buf.begin() + 1000, p.b.buf.begin() + 2500,
                          [](uint8_t b) { return b == 0x5A; }));
}

TEST(SetupPaths, UdThroughAnSrq) {
  EngineHarness h;
  QpPair p = h.connect({.type = QpType::kUd, .use_srq = true});
  const Sge r = p.b.sge(0, 200);
  RecvWr rw;
  rw.wr_id = 9;
  rw.sg_list = {&r, 1};
  ASSERT_TRUE(p.b.engine->post_srq_recv(*p.b.srq, rw).is_ok());
  const Sge s = p.a.sge(0, 60);
  SendWr wr = make_wr(WrOpcode::kSend, {&s, 1}, 1);
  wr.ud.ah.dgid = h.gid(1);
  wr.ud.ah.sgid = h.gid(0);
  wr.ud.remote_qpn = p.b.qpn;
  wr.ud.remote_qkey = 0x11111111;
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  auto rwc = h.wait_wcs(1, p.b.recv_cq, 1, 1ms);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].wr_id, 9u);
  EXPECT_EQ(rwc[0].byte_len, 100u);
  // A second datagram finds no WQE: dropped and counted (UD has no RNR).
  ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  h.run_until_idle(1s);
  EXPECT_EQ(p.b.engine->counters()[Counter::kDropNoRecvWqe], 1u);
}

}  // namespace
}  // namespace uroce::test
