// uroce/connect.hpp beyond connect_qp's defaults: its two halves with receives posted in
// between (as ibv_*_pingpong and perftest do), and the options the CLI needs (service level,
// traffic class, the RC timers and depths, selective repeat) landing in the QP's attributes.
#include <cstring>

#include "device_fixture.hpp"

namespace uroce::test {
namespace {

QpAttr query(const QueuePair& qp) {
  QpAttr attr;
  QpInitAttr init;
  EXPECT_TRUE(qp.query(attr, init));
  return attr;
}

SendWr signaled(uint64_t wr_id, WrOpcode opcode, const Sge& sge) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = opcode;
  wr.send_flags = kSendSignaled;
  wr.sg_list = std::span<const Sge>(&sge, 1);
  return wr;
}

TEST_F(DevicePairTest, SplitConnectTakesReceivesBetweenInitAndRts) {
  QueuePair qa = a_.make_qp(QpType::kRc);
  QueuePair qb = b_.make_qp(QpType::kRc);
  ConnectOptions opt;
  ASSERT_TRUE(qp_to_init(qa, opt));
  ASSERT_TRUE(qp_to_init(qb, opt));
  EXPECT_EQ(qb.state(), QpState::kInit);
  // Posted before the peer is known: the receive must be there when the SEND arrives.
  const Sge rsge = b_.mr.sge(0, 64);
  ASSERT_TRUE(qb.post_recv(RecvWr{9, std::span<const Sge>(&rsge, 1)}));
  ASSERT_TRUE(qp_to_rts(qa, 100, QpEndpoint{qb.qp_num(), 200, fake_gid(2)}, opt));
  ASSERT_TRUE(qp_to_rts(qb, 200, QpEndpoint{qa.qp_num(), 100, fake_gid(1)}, opt));
  EXPECT_EQ(qa.state(), QpState::kRts);

  std::memcpy(a_.buf.data(), "split", 5);
  const Sge sge = a_.mr.sge(0, 5);
  ASSERT_TRUE(qa.post_send(signaled(1, WrOpcode::kSend, sge)));
  EXPECT_EQ(wait_wc(a_.cq).status, WcStatus::kSuccess);
  const Wc r = wait_wc(b_.cq);
  EXPECT_EQ(r.status, WcStatus::kSuccess);
  EXPECT_EQ(r.wr_id, 9u);
  EXPECT_EQ(std::memcmp(b_.buf.data(), "split", 5), 0);
}

TEST_F(DevicePairTest, ConnectOptionsLandInTheQpAttributes) {
  QueuePair qa = a_.make_qp(QpType::kRc);
  QueuePair qb = b_.make_qp(QpType::kRc);
  connect(qa, qb,
          {.timeout = 10,
           .retry_cnt = 3,
           .max_rd_atomic = 4,
           .max_dest_rd_atomic = 2,
           .access = kAccessLocalWrite | kAccessRemoteWrite,
           .traffic_class = 0x68,
           .sl = 5,
           .recovery = transport::Recovery::kSelectiveRepeat});  // both ends, as agreed
  const QpAttr a = query(qa);
  EXPECT_EQ(a.ah_attr.sl, 5);
  EXPECT_EQ(a.ah_attr.traffic_class, 0x68);
  EXPECT_EQ(a.ah_attr.sgid, fake_gid(1));
  EXPECT_EQ(a.max_rd_atomic, 4);
  EXPECT_EQ(a.max_dest_rd_atomic, 2);
  EXPECT_EQ(a.timeout, 10);
  EXPECT_EQ(a.retry_cnt, 3);
  EXPECT_EQ(a.qp_access_flags, kAccessLocalWrite | kAccessRemoteWrite);
  EXPECT_EQ(a.recovery, transport::Recovery::kSelectiveRepeat);

  // Selective repeat on both ends still moves data.
  const Sge sge = a_.mr.sge(0, 4096);
  SendWr wr = signaled(2, WrOpcode::kRdmaWrite, sge);
  wr.rdma = {b_.mr.info().addr, b_.mr.rkey()};
  ASSERT_TRUE(qa.post_send(wr));
  EXPECT_EQ(wait_wc(a_.cq).status, WcStatus::kSuccess);

  // The default stays go-back-N with service level 0.
  QueuePair qc = a_.make_qp(QpType::kRc);
  QueuePair qd = b_.make_qp(QpType::kRc);
  connect(qc, qd);
  const QpAttr c = query(qc);
  EXPECT_EQ(c.recovery, transport::Recovery::kGoBackN);
  EXPECT_EQ(c.ah_attr.sl, 0);
}

TEST_F(DevicePairTest, UcKeepsOnlyTheWriteAccessAndUdTheQkey) {
  QueuePair uc = a_.make_qp(QpType::kUc);
  ASSERT_TRUE(qp_to_init(uc));  // the default access has READ and atomics
  EXPECT_EQ(query(uc).qp_access_flags, kAccessLocalWrite | kAccessRemoteWrite);
  QueuePair ud = a_.make_qp(QpType::kUd);
  ASSERT_TRUE(qp_to_init(ud, {.qkey = 0x1234}));
  EXPECT_EQ(query(ud).qkey, 0x1234u);
}

TEST(MakeAhAttr, CarriesPortGidIndexTrafficClassAndServiceLevel) {
  const Gid dgid = fake_gid(2);
  const AhAttr ah =
      make_ah_attr(dgid, {.port_num = 1, .sgid_index = 2, .traffic_class = 0x10, .sl = 3});
  EXPECT_EQ(ah.dgid, dgid);
  EXPECT_EQ(ah.sgid_index, 2);
  EXPECT_EQ(ah.port_num, 1);
  EXPECT_EQ(ah.traffic_class, 0x10);
  EXPECT_EQ(ah.sl, 3);
  EXPECT_EQ(ah.hop_limit, 64);
  EXPECT_TRUE(ah.is_global);
}

}  // namespace
}  // namespace uroce::test
