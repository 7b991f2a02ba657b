// Completion channels: the eventfd becomes readable (poll) when an armed CQ gets a
// completion, get_event names the CQ, and ibverbs' ack rule holds for destroy.
#include <poll.h>

#include <cstring>

#include "device_fixture.hpp"

namespace uroce::test {
namespace {

TEST_F(DevicePairTest, ChannelFdBecomesReadableOnAnArmedCompletion) {
  auto channel = b_.dev.create_comp_channel();
  ASSERT_TRUE(channel.is_ok());
  auto cq = b_.dev.create_cq(64, &channel.value());
  ASSERT_TRUE(cq.is_ok());
  QueuePair qa = a_.make_qp(QpType::kRc);
  QueuePair qb = b_.make_qp(QpType::kRc, &cq.value());
  connect(qa, qb);

  const int fd = channel->fd();
  ASSERT_GE(fd, 0);
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0);  // nothing yet
  EXPECT_EQ(channel.value().get_event(Nanos::zero()).status().code(), EAGAIN);

  ASSERT_TRUE(cq.value().req_notify(false));
  const Sge rsge = b_.mr.sge(0, 64);
  ASSERT_TRUE(qb.post_recv(RecvWr{1, std::span<const Sge>(&rsge, 1)}));
  const Sge sge = a_.mr.sge(0, 10);
  SendWr s;
  s.opcode = WrOpcode::kSend;
  s.sg_list = std::span<const Sge>(&sge, 1);
  ASSERT_TRUE(qa.post_send(s));

  p.revents = 0;
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  EXPECT_TRUE(p.revents & POLLIN);
  auto ev = channel.value().get_event(Nanos::zero());
  ASSERT_TRUE(ev.is_ok());
  EXPECT_EQ(*ev, cq->id());
  p.revents = 0;
  EXPECT_EQ(poll(&p, 1, 0), 0);  // one event, consumed

  Wc wc;
  ASSERT_EQ(cq.value().poll(std::span<Wc>(&wc, 1)), 1);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.byte_len, 10u);

  // Not re-armed: a second completion raises no event.
  ASSERT_TRUE(qb.post_recv(RecvWr{2, std::span<const Sge>(&rsge, 1)}));
  ASSERT_TRUE(qa.post_send(s));
  Wc wc2 = wait_wc(cq.value());
  EXPECT_EQ(wc2.wr_id, 2u);
  EXPECT_EQ(channel.value().get_event(std::chrono::milliseconds(20)).status().code(), EAGAIN);

  // ibverbs rule: every event got must be acked before the CQ can be destroyed.
  ASSERT_TRUE(qb.destroy());
  EXPECT_EQ(cq.value().destroy().code(), EBUSY);
  EXPECT_EQ(channel.value().destroy().code(), EBUSY);
  cq.value().ack_events(1);
  EXPECT_TRUE(cq.value().destroy());
  EXPECT_TRUE(channel.value().destroy());
}

TEST_F(DevicePairTest, BlockingGetEventWakesOnCompletion) {
  auto channel = a_.dev.create_comp_channel();
  ASSERT_TRUE(channel.is_ok());
  auto cq = a_.dev.create_cq(64, &channel.value());
  ASSERT_TRUE(cq.is_ok());
  QpInitAttr init;
  init.qp_type = QpType::kRc;
  init.send_cq = cq->id();
  init.recv_cq = cq->id();
  init.cap = QpCap{16, 16, 1, 1, 0};
  auto qa = a_.pd.create_qp(init);
  ASSERT_TRUE(qa.is_ok());
  QueuePair qb = b_.make_qp(QpType::kRc);
  connect(qa.value(), qb);
  ASSERT_TRUE(cq.value().req_notify(false));

  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const Sge sge = a_.mr.sge(0, 8);
    SendWr w;
    w.opcode = WrOpcode::kRdmaWrite;
    w.send_flags = kSendSignaled;
    w.sg_list = std::span<const Sge>(&sge, 1);
    w.rdma = {b_.mr.info().addr, b_.mr.rkey()};
    EXPECT_TRUE(qa.value().post_send(w));
  });
  auto ev = channel.value().get_event(std::chrono::seconds(5));
  writer.join();
  ASSERT_TRUE(ev.is_ok());
  EXPECT_EQ(*ev, cq->id());
  cq.value().ack_events(1);
  Wc wc = wait_wc(cq.value());
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.opcode, WcOpcode::kRdmaWrite);
  ASSERT_TRUE(qa.value().destroy());
}

}  // namespace
}  // namespace uroce::test

namespace uroce::test {
namespace {

TEST_F(DevicePairTest, SrqLimitRaisesAnAsyncEventOnTheAsyncFd) {
  auto srq = b_.pd.create_srq(SrqInitAttr{16, 1, 0});
  ASSERT_TRUE(srq.is_ok());
  QpInitAttr init;
  init.qp_type = QpType::kRc;
  init.send_cq = b_.cq.id();
  init.recv_cq = b_.cq.id();
  init.srq = srq->id();
  init.cap = QpCap{4, 0, 1, 0, 0};
  auto qb = b_.pd.create_qp(init);
  ASSERT_TRUE(qb.is_ok());
  QueuePair qa = a_.make_qp(QpType::kRc);
  connect(qa, qb.value());
  for (uint64_t i = 0; i < 3; ++i) {
    const Sge r = b_.mr.sge(i * 64, 64);
    ASSERT_TRUE(srq.value().post_recv(RecvWr{i, std::span<const Sge>(&r, 1)}));
  }
  // Arm the limit at 3: the first receive that leaves 2 WQEs fires it (IBA 10.2.9.2).
  ASSERT_TRUE(srq.value().modify(SrqAttr{0, 0, 3}, kSrqLimit));
  pollfd p{b_.dev.async_fd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0);

  const Sge s = a_.mr.sge(0, 8);
  SendWr wr;
  wr.opcode = WrOpcode::kSend;
  wr.send_flags = kSendSignaled;
  wr.sg_list = std::span<const Sge>(&s, 1);
  ASSERT_TRUE(qa.post_send(wr));
  ASSERT_EQ(wait_wc(a_.cq).status, WcStatus::kSuccess);
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  auto ev = b_.dev.get_async_event(Nanos::zero());
  ASSERT_TRUE(ev.is_ok());
  EXPECT_EQ(ev->type, EventType::kSrqLimitReached);
  EXPECT_EQ(ev->element, static_cast<uint32_t>(srq->id()));
  EXPECT_EQ(b_.dev.get_async_event(Nanos::zero()).status().code(), EAGAIN);
  SrqAttr attr;
  ASSERT_TRUE(srq.value().query(attr));
  EXPECT_EQ(attr.srq_limit, 0u);  // disarmed after firing
  EXPECT_EQ(wait_wc(b_.cq).wr_id, 0u);
  ASSERT_TRUE(qb.value().destroy());
}

}  // namespace
}  // namespace uroce::test
