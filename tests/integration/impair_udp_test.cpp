// UROCE_IMPAIR on real devices over UDP on 127.0.0.1 (two devices in one process, the first
// opened with the variable set): a corruption shows up as exactly one icrc_errors at the
// receiver and the data still lands intact; CE marks travel through the kernel's IP_TOS and
// become np_ecn_marked_roce_packets and CNPs at the receiver; loss and receive-side
// impairment are recovered by retransmission; a delay adds to the round trip; a malformed
// spec fails Device::open with its one-line error.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "device/device.hpp"
#include "device_integration_util.hpp"

namespace uroce::itest {
namespace {

using transport::Counter;

constexpr size_t kMsg = 16384;
constexpr int kMessages = 64;

// Sets environment variables for the devices opened in its scope.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [k, v] : vars) {
      setenv(k, v, 1);
      names_.push_back(k);
    }
  }
  ~ScopedEnv() {
    for (const char* k : names_) unsetenv(k);
  }

 private:
  std::vector<const char*> names_;
};

class ImpairUdpTest : public ::testing::Test {
 protected:
  // `a_env` holds while A opens, `b_env` while B opens.
  void open(std::initializer_list<std::pair<const char*, const char*>> a_env,
            std::initializer_list<std::pair<const char*, const char*>> b_env = {}) {
    port_ = pick_udp_port();
    {
      ScopedEnv e(a_env);
      auto a = Device::open(loopback_options(port_, registry_.path()));
      ASSERT_TRUE(a.is_ok()) << a.error().message;
      a_ = std::make_unique<Side>(std::move(a.value()), 4 << 20);
    }
    {
      ScopedEnv e(b_env);
      auto b = Device::open(loopback_options(port_, registry_.path()));
      ASSERT_TRUE(b.is_ok()) << b.error().message;
      b_ = std::make_unique<Side>(std::move(b.value()), 4 << 20);
    }
    qa_ = std::make_unique<QueuePair>(a_->make_qp(QpType::kRc));
    qb_ = std::make_unique<QueuePair>(b_->make_qp(QpType::kRc));
    ASSERT_TRUE(connect_qp(*qa_, 100, QpEndpoint{qb_->qp_num(), 200, b_->gid()}));
    ASSERT_TRUE(connect_qp(*qb_, 200, QpEndpoint{qa_->qp_num(), 100, a_->gid()}));
  }

  // kMessages WRITEs of kMsg bytes from A to B; every one completes and every byte lands.
  void write_all_and_verify() {
    fill_pattern(a_->buf.data(), kMsg * kMessages, 3);
    std::memset(b_->buf.data(), 0, kMsg * kMessages);
    std::vector<Sge> sges;
    sges.reserve(kMessages);
    for (int i = 0; i < kMessages; ++i) sges.push_back(a_->mr.sge(kMsg * i, kMsg));
    for (int i = 0; i < kMessages; ++i) {
      SendWr w = make_wr(static_cast<uint64_t>(i), WrOpcode::kRdmaWrite, &sges[i], 1);
      w.rdma = {b_->mr.info().addr + kMsg * i, b_->mr.rkey()};
      ASSERT_TRUE(qa_->post_send(w));
    }
    const auto wcs = wait_wcs(a_->cq, kMessages, std::chrono::seconds(60));
    ASSERT_EQ(wcs.size(), size_t(kMessages));
    for (int i = 0; i < kMessages; ++i) {
      EXPECT_EQ(wcs[i].status, WcStatus::kSuccess) << i;
      EXPECT_EQ(wcs[i].wr_id, uint64_t(i));
    }
    EXPECT_EQ(std::memcmp(a_->buf.data(), b_->buf.data(), kMsg * kMessages), 0);
  }

  device::IoCounters io(Side& s) { return s.dev.raw().io_counters(); }

  // B's icrc_errors once it matches what `corrupter` corrupted, or after 5 s. A's last
  // completion does not mean every corrupted packet has reached B's ICRC check: a go-back-N
  // round sent before the ACK that completed everything can still be in A's impairment line,
  // in flight, or in B's socket (a CI run read 352 of 355 at once).
  uint64_t icrc_errors_settled(Side& corrupter) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (b_->dev.counters()[Counter::kIcrcErrors] != io(corrupter).impair_corrupted &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return b_->dev.counters()[Counter::kIcrcErrors];
  }

  TempDir registry_;
  uint16_t port_ = 0;
  std::unique_ptr<Side> a_;
  std::unique_ptr<Side> b_;
  std::unique_ptr<QueuePair> qa_;
  std::unique_ptr<QueuePair> qb_;
};

// One datagram per packet (UROCE_GSO=0): every packet leaves with ID 0, as sealed, so
// every intact one verifies exactly and nothing is accepted modulo the ID.
TEST_F(ImpairUdpTest, CorruptedPacketsAreIcrcErrorsAtTheReceiverOneForOne) {
  open({{"UROCE_IMPAIR", "corrupt=5%,seed=5"}, {"UROCE_GSO", "0"}});
  write_all_and_verify();
  const uint64_t icrc_errors = icrc_errors_settled(*a_);
  const uint64_t corrupted = io(*a_).impair_corrupted;
  EXPECT_GT(corrupted, 0u);
  EXPECT_EQ(icrc_errors, corrupted) << "B's kernel drops: " << io(*b_).rx_discards;
  EXPECT_EQ(b_->dev.counters()[Counter::kIcrcOkModuloIpId], 0u);
  EXPECT_GT(a_->dev.counters()[Counter::kRetransmittedPkts], 0u);
  // Nothing else was impaired, and B (opened without the variable) impaired nothing.
  EXPECT_EQ(io(*a_).impair_dropped, 0u);
  EXPECT_EQ(io(*b_).impair_corrupted, 0u);
}

// With UDP GSO (UROCE_GSO=1) segment k of a message has IPv4 ID k and an ICRC sealed for it,
// which the receiver, not seeing the ID, accepts modulo the ID; corruptions are still every
// one an ICRC error.
TEST_F(ImpairUdpTest, CorruptedGsoSegmentsAreIcrcErrorsOneForOne) {
  open({{"UROCE_IMPAIR", "corrupt=5%,seed=5"}, {"UROCE_GSO", "1"}});
  write_all_and_verify();
  const uint64_t icrc_errors = icrc_errors_settled(*a_);
  const uint64_t corrupted = io(*a_).impair_corrupted;
  EXPECT_GT(corrupted, 0u);
  EXPECT_EQ(icrc_errors, corrupted) << "B's kernel drops: " << io(*b_).rx_discards;
  // Only a GSO segment after the first leaves with an ID other than 0 between uroce peers.
  EXPECT_GT(b_->dev.counters()[Counter::kIcrcOkModuloIpId], 0u);
}

TEST_F(ImpairUdpTest, CeMarksReachTheNotificationPointThroughTheKernel) {
  open({{"UROCE_IMPAIR", "ce=100%"}, {"UROCE_CC", "dcqcn"}, {"UROCE_DCQCN", "rpg_min_rate=2000"}},
       {{"UROCE_CC", "dcqcn"}});
  write_all_and_verify();
  const uint64_t marked = io(*a_).impair_ce_marked;
  // With DCQCN every data packet is ECT(0), so every one A sent was marked...
  EXPECT_EQ(marked, a_->dev.counters()[Counter::kSentPkts]);
  EXPECT_GE(marked, uint64_t(kMessages * kMsg / 4096));
  // ...and B saw CE on each (IP_TOS on send, IP_RECVTOS on receive) and answered with CNPs.
  EXPECT_EQ(b_->dev.counters()[Counter::kNpEcnMarkedRocePackets], marked);
  EXPECT_GT(b_->dev.counters()[Counter::kNpCnpSent], 0u);
  // The last CNPs can still be on their way when A's last completion arrives (B may send a
  // CNP after the ACK that completes the WRITE), so A gets a bounded wait to handle them;
  // every CNP B sent must then have been handled, one for one.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (a_->dev.counters()[Counter::kRpCnpHandled] < b_->dev.counters()[Counter::kNpCnpSent] &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(a_->dev.counters()[Counter::kRpCnpHandled], b_->dev.counters()[Counter::kNpCnpSent]);
}

TEST_F(ImpairUdpTest, CeLeavesPacketsWithoutEcnAlone) {
  open({{"UROCE_IMPAIR", "ce=100%"}});  // congestion control off: Not-ECT
  write_all_and_verify();
  EXPECT_EQ(io(*a_).impair_ce_marked, 0u);
  EXPECT_EQ(b_->dev.counters()[Counter::kNpEcnMarkedRocePackets], 0u);
}

TEST_F(ImpairUdpTest, LossBothWaysIsRecovered) {
  open({{"UROCE_IMPAIR", "loss=3%,dup=2%,dir=both,seed=2"}});
  write_all_and_verify();
  EXPECT_GT(io(*a_).impair_dropped, 0u);
  EXPECT_GT(io(*a_).impair_duplicated, 0u);
  EXPECT_GT(a_->dev.counters()[Counter::kRetransmittedPkts], 0u);
}

TEST_F(ImpairUdpTest, ReceiveSideCorruptionCountsAtThatReceiver) {
  open({}, {{"UROCE_IMPAIR", "corrupt=5%,dir=rx,seed=9"}});
  write_all_and_verify();
  const uint64_t icrc_errors = icrc_errors_settled(*b_);
  const uint64_t corrupted = io(*b_).impair_corrupted;
  EXPECT_GT(corrupted, 0u);
  EXPECT_EQ(icrc_errors, corrupted) << "B's kernel drops: " << io(*b_).rx_discards;
  EXPECT_EQ(io(*a_).impair_corrupted, 0u);
}

TEST_F(ImpairUdpTest, DelayAddsToTheRoundTrip) {
  open({{"UROCE_IMPAIR", "delay=2ms"}});
  const Sge s = a_->mr.sge(0, 64);
  std::vector<double> ms;
  for (int i = 0; i < 20; ++i) {
    SendWr w = make_wr(static_cast<uint64_t>(i), WrOpcode::kRdmaWrite, &s, 1);
    w.rdma = {b_->mr.info().addr, b_->mr.rkey()};
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(qa_->post_send(w));
    const auto wcs = wait_wcs(a_->cq, 1);
    ASSERT_EQ(wcs.size(), 1u);
    ASSERT_EQ(wcs[0].status, WcStatus::kSuccess);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  // The WRITE waits 2 ms in A's line; the ACK comes back at once. Never early; the median
  // within 2 ms of it on a loaded machine.
  EXPECT_GE(ms.front(), 2.0) << "fastest " << ms.front() << " ms";
  EXPECT_LT(ms[ms.size() / 2], 4.0) << "median " << ms[ms.size() / 2] << " ms";
  // Every WRITE was held (a retransmission of one, on a very slow machine, is held too).
  EXPECT_GE(io(*a_).impair_delayed, 20u);
}

TEST_F(ImpairUdpTest, ABottleneckWithRedMarksForDcqcnAndCapsTheGoodput) {
  // 50 Mbit/s = 6.25 MB/s with RED between 20 KB and 100 KB: DCQCN starts at line rate, the
  // queue builds, RED marks, B sees CE and sends CNPs. The data lands intact whatever was
  // tail-dropped (retransmitted), and no run can beat the rate: every payload byte crossed
  // the modelled link, which also carried the headers.
  open({{"UROCE_IMPAIR", "rate=50mbit,queue=200KB,kmin=20KB,kmax=100KB,pmax=0.2,seed=9"},
        {"UROCE_CC", "dcqcn"}},
       {{"UROCE_CC", "dcqcn"}});
  const auto t0 = std::chrono::steady_clock::now();
  write_all_and_verify();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double goodput = double(kMsg) * kMessages / secs;  // bytes/s
  EXPECT_LE(goodput, 6.25e6 * 1.01) << goodput << " B/s in " << secs << " s";
  const device::IoCounters c = io(*a_);
  EXPECT_GT(c.impair_queue_marked, 0u);
  EXPECT_GT(c.impair_queue_max_bytes, 20u * 1024);   // above kmin, where marking starts
  EXPECT_LE(c.impair_queue_max_bytes, 200u * 1024);  // never above queue=
  EXPECT_EQ(c.impair_ce_marked, 0u);                 // no ce=: every CE came from RED
  EXPECT_EQ(b_->dev.counters()[Counter::kNpEcnMarkedRocePackets], c.impair_queue_marked);
  EXPECT_GT(b_->dev.counters()[Counter::kNpCnpSent], 0u);
  EXPECT_EQ(a_->dev.counters()[Counter::kRpCnpHandled], b_->dev.counters()[Counter::kNpCnpSent]);
  EXPECT_EQ(io(*b_).impair_queue_marked, 0u);  // B was opened without the variable
}

TEST_F(ImpairUdpTest, AMalformedSpecFailsOpenWithItsOneLineError) {
  ScopedEnv e({{"UROCE_IMPAIR", "loss=2%,delay=50"}});
  auto d = Device::open(loopback_options(pick_udp_port(), registry_.path()));
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.error().message,
            "UROCE_IMPAIR: delay: '50' is not a duration; write delay=N with a unit ns, us, ms or "
            "s, at most 10s (e.g. delay=50us)");
}

}  // namespace
}  // namespace uroce::itest
