// Faults between two real devices over UDP on 127.0.0.1 (one process, one private port):
//   - an empty receive queue: the responder answers RNR NAK, the requester waits and retries
//     (rnr_retry 7 = forever), nothing completes and nothing is lost while the queue is
//     empty, and once receives are posted every SEND completes in order with exact data;
//   - a finite rnr_retry: RNR_RETRY_EXC_ERR for the first SEND, every other WR flushed,
//     the QP in ERROR, and all resources can be destroyed.
// (The peer process killed mid-transfer is ProcessTest.PeerKilledMidTransfer...; the link
// cut is NetnsTest.LinkCutMidTransfer...)
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <thread>

#include "device_integration_util.hpp"

namespace uroce::itest {
namespace {

constexpr size_t kMsg = 4096;
constexpr size_t kCount = 32;

class FaultPairTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = pick_udp_port();
    auto a = Device::open(loopback_options(port_, registry_.path()));
    ASSERT_TRUE(a.is_ok()) << a.error().message;
    auto b = Device::open(loopback_options(port_, registry_.path()));
    ASSERT_TRUE(b.is_ok()) << b.error().message;
    a_ = std::make_unique<Side>(std::move(a.value()), kCount * kMsg);
    b_ = std::make_unique<Side>(std::move(b.value()), kCount * kMsg);
  }

  void connect(QueuePair& qa, QueuePair& qb, const ConnectOptions& o) {
    ASSERT_TRUE(connect_qp(qa, 100, QpEndpoint{qb.qp_num(), 200, b_->gid()}, o));
    ASSERT_TRUE(connect_qp(qb, 200, QpEndpoint{qa.qp_num(), 100, a_->gid()}, o));
  }

  void post_sends(QueuePair& qa) {
    for (size_t i = 0; i < kCount; ++i) {
      const Sge s = a_->mr.sge(i * kMsg, kMsg);
      ASSERT_TRUE(qa.post_send(make_wr(i, WrOpcode::kSend, &s, 1)));
    }
  }

  TempDir registry_;
  uint16_t port_ = 0;
  std::unique_ptr<Side> a_;
  std::unique_ptr<Side> b_;
};

TEST_F(FaultPairTest, EmptyReceiveQueueGivesRnrNakThenEverySendArrivesExactly) {
  QueuePair qa = a_->make_qp(QpType::kRc);
  QueuePair qb = b_->make_qp(QpType::kRc);
  ConnectOptions o;
  o.rnr_retry = 7;       // retry forever
  o.min_rnr_timer = 14;  // 1.28 ms (IBA table 45)
  connect(qa, qb, o);
  fill_pattern(a_->buf.data(), a_->buf.size(), 31);
  post_sends(qa);

  // 200 ms without a receive: RNR NAKs go back and forth, nothing completes.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(wait_wcs(a_->cq, 1, std::chrono::milliseconds(1)).empty());
  EXPECT_TRUE(wait_wcs(b_->cq, 1, std::chrono::milliseconds(1)).empty());
  const Counters a_mid = a_->dev.counters();
  const Counters b_mid = b_->dev.counters();
  EXPECT_GT(a_mid[Counter::kRcvdRnrErr], 0u) << "the requester saw no RNR NAK";
  EXPECT_GT(b_mid[Counter::kSendRnrErr], 0u) << "the responder sent no RNR NAK";
  EXPECT_EQ(qa.state(), QpState::kRts);

  for (size_t i = 0; i < kCount; ++i) {
    const Sge r = b_->mr.sge(i * kMsg, kMsg);
    ASSERT_TRUE(qb.post_recv(RecvWr{100 + i, std::span<const Sge>(&r, 1)}));
  }
  auto sent = wait_wcs(a_->cq, kCount);
  auto got = wait_wcs(b_->cq, kCount);
  ASSERT_EQ(sent.size(), kCount);
  ASSERT_EQ(got.size(), kCount);
  for (size_t i = 0; i < kCount; ++i) {
    EXPECT_EQ(sent[i].wr_id, i);
    EXPECT_EQ(sent[i].status, WcStatus::kSuccess) << i;
    EXPECT_EQ(got[i].wr_id, 100 + i);
    EXPECT_EQ(got[i].status, WcStatus::kSuccess) << i;
    EXPECT_EQ(got[i].byte_len, kMsg);
  }
  EXPECT_EQ(std::memcmp(b_->buf.data(), a_->buf.data(), kCount * kMsg), 0);
  EXPECT_TRUE(wait_wcs(a_->cq, 1, std::chrono::milliseconds(20)).empty()) << "a second completion";
  EXPECT_TRUE(wait_wcs(b_->cq, 1, std::chrono::milliseconds(20)).empty()) << "a second receive";
  EXPECT_EQ(a_->dev.counters()[Counter::kRetryRnrExceededErr], 0u);
}

TEST_F(FaultPairTest, FiniteRnrRetryGivesRnrRetryExceededAndFlushesTheRest) {
  QueuePair qa = a_->make_qp(QpType::kRc);
  QueuePair qb = b_->make_qp(QpType::kRc);
  ConnectOptions o;
  o.rnr_retry = 2;
  o.min_rnr_timer = 14;  // 1.28 ms
  connect(qa, qb, o);
  post_sends(qa);
  const auto start = std::chrono::steady_clock::now();
  auto wcs = wait_wcs(a_->cq, kCount, std::chrono::seconds(10));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(wcs.size(), kCount) << "no hang: every WR completes";
  EXPECT_EQ(wcs[0].wr_id, 0u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRnrRetryExcErr);
  for (size_t i = 1; i < kCount; ++i) {
    EXPECT_EQ(wcs[i].wr_id, i);
    EXPECT_EQ(wcs[i].status, WcStatus::kWrFlushErr) << i;
  }
  // rnr_retry + 1 = 3 RNR waits of 1.28 ms (the responder's timer): well under 1 s.
  EXPECT_LT(took, std::chrono::seconds(1));
  EXPECT_EQ(qa.state(), QpState::kErr);
  EXPECT_EQ(a_->dev.counters()[Counter::kRetryRnrExceededErr], 1u);
  EXPECT_TRUE(wait_wcs(b_->cq, 1, std::chrono::milliseconds(20)).empty());
}

}  // namespace
}  // namespace uroce::itest
