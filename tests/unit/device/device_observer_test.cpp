// What telemetry (the DeviceObserver) is shown of the packets: each one received exactly
// once and before anything the device sends after it, as a capture must show them. A
// busy-polling program's pass hands its packets over only after the program's reply has
// gone out (the reply does not wait for telemetry), or at its next pass, whichever comes
// first; a program that stops still has them counted when its QP goes.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "device/observer.hpp"
#include "device_fixture.hpp"
#include "wire/header_layout.hpp"

namespace uroce::test {
namespace {

using namespace std::chrono_literals;

// Records "rx <opcode>" and "tx <opcode>" in the order the device reports them.
class RecordingObserver : public device::DeviceObserver {
 public:
  void on_tx(TimePoint /*now*/, std::span<const transport::TxSlot> sent) override {
    std::lock_guard lock(mu_);
    for (const transport::TxSlot& s : sent) log_.push_back(entry("tx", s.buf[0]));
  }
  void on_rx(TimePoint /*now*/, std::span<const device::RxPacket> received) override {
    std::lock_guard lock(mu_);
    for (const device::RxPacket& p : received) log_.push_back(entry("rx", p.bytes()[0]));
  }
  void on_pass(TimePoint /*now*/, const device::Device& /*dev*/) override {}
  TimePoint on_idle(TimePoint /*now*/, const device::Device& /*dev*/) override { return kNever; }
  void on_qp_created(uint32_t /*qpn*/) override {}
  void on_qp_modified(uint32_t /*qpn*/, const transport::QpAttr& /*attr*/,
                      uint32_t /*mask*/) override {}
  void on_qp_destroyed(uint32_t /*qpn*/) override {}
  void on_completion_error(const device::Device& /*dev*/, const transport::Wc& /*wc*/) override {}

  std::vector<std::string> log() const {
    std::lock_guard lock(mu_);
    return log_;
  }

 private:
  static std::string entry(const char* dir, uint8_t opcode) {
    return std::string(dir) + " " + std::to_string(opcode);
  }
  mutable std::mutex mu_;
  std::vector<std::string> log_;
};

std::string rx(uint8_t opcode) {
  return "rx " + std::to_string(opcode);
}
std::string tx(uint8_t opcode) {
  return "tx " + std::to_string(opcode);
}

// B is a busy-polling program (its progress thread stays parked for the whole test: 10 s
// handoff) with a recording observer; A pings it, and B's own poll receives the ping.
class ObserverOrderTest : public ::testing::Test {
 protected:
  ObserverOrderTest()
      : seen_(std::make_shared<RecordingObserver>()),
        a_(make_fake_device(wire_, 1, 0x100)),
        b_(make_fake_device(wire_, 2, 0x2000, true, std::chrono::seconds(10), true, seen_)),
        qa_(a_.make_qp(QpType::kRc)),
        qb_(b_.make_qp(QpType::kRc)) {}

  void SetUp() override {
    ConnectOptions opt;
    ASSERT_TRUE(connect_qp(qa_, 100, QpEndpoint{qb_.qp_num(), 200, fake_gid(2)}, opt));
    ASSERT_TRUE(connect_qp(qb_, 200, QpEndpoint{qa_.qp_num(), 100, fake_gid(1)}, opt));
    post_recv(qa_, a_, 4096, 1);
    post_recv(qb_, b_, 4096, 2);
    Wc wc;
    for (int i = 0; i < 20; ++i) {  // B polls its empty CQ: its progress thread parks
      ASSERT_EQ(b_.cq.poll(std::span<Wc>(&wc, 1)), 0);
      std::this_thread::sleep_for(1ms);
    }
    std::memcpy(a_.buf.data(), "ping....", 8);
    post_send(qa_, a_, 0, 10);
    const Wc r = wait_wc(b_.cq);
    ASSERT_EQ(r.status, WcStatus::kSuccess);
    ASSERT_EQ(r.wr_id, 2u);
  }

  // Polls B's CQ until the observer has `n` entries (an empty poll runs a pass).
  std::vector<std::string> poll_b_until(size_t n) {
    Wc wc;
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (seen_->log().size() < n && std::chrono::steady_clock::now() < deadline) {
      (void)b_.cq.poll(std::span<Wc>(&wc, 1));
    }
    return seen_->log();
  }

  FakeWire wire_;
  std::shared_ptr<RecordingObserver> seen_;
  Side a_;
  Side b_;
  QueuePair qa_;
  QueuePair qb_;
};

TEST_F(ObserverOrderTest, TheRequestIsSeenBeforeTheReplyAndItsAck) {
  std::memcpy(b_.buf.data(), "pong....", 8);
  post_send(qb_, b_, 0, 20);
  // The pong and the held ACK of the ping went out together; the ping comes first.
  EXPECT_EQ(seen_->log(),
            (std::vector<std::string>{rx(kRcSendOnly), tx(kRcSendOnly), tx(kRcAcknowledge)}));
  // A acknowledges the pong; B's next polls receive that ACK, seen once.
  const std::vector<std::string> log = poll_b_until(4);
  EXPECT_EQ(log, (std::vector<std::string>{rx(kRcSendOnly), tx(kRcSendOnly), tx(kRcAcknowledge),
                                           rx(kRcAcknowledge)}));
}

TEST_F(ObserverOrderTest, AProgramThatDoesNotReplyHasTheRequestSeenAtItsNextPoll) {
  Wc wc;
  ASSERT_EQ(b_.cq.poll(std::span<Wc>(&wc, 1)), 0);  // no reply: an empty poll
  // That pass sent the held ACK, after the ping was seen.
  const std::vector<std::string> log = seen_->log();
  ASSERT_GE(log.size(), 1u);
  EXPECT_EQ(log[0], rx(kRcSendOnly));
  EXPECT_EQ(std::count(log.begin(), log.end(), rx(kRcSendOnly)), 1);
}

TEST_F(ObserverOrderTest, AProgramThatStopsHasTheRequestSeenWhenItsQpGoes) {
  { QueuePair gone = std::move(qb_); }
  // Destroying the QP sends the held ACK; the ping was seen before it, once.
  EXPECT_EQ(seen_->log(), (std::vector<std::string>{rx(kRcSendOnly), tx(kRcAcknowledge)}));
}

}  // namespace
}  // namespace uroce::test
