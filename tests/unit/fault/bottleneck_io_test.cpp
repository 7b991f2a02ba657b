// The bottleneck queue of UROCE_IMPAIR (rate=, queue=, kmin=, kmax=, pmax=) through
// ImpairedPacketIo in virtual time, with exact numbers: at rate R packets leave back to back
// at exactly bytes/R apart, tail drop happens at exactly queue= bytes, RED marks exactly the
// packets the switch model marks (p = 1 above kmax, none at or below kmin; a fixed seed gives
// a fixed count in the ramp), the delay adds after the queue, receive works the same way, and
// a full queue is backpressure.
#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "fault/bottleneck.hpp"
#include "memory_io.hpp"
#include "net/impaired_packet_io.hpp"

namespace uroce::net {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

using test::g_now;
using test::MemoryIo;
using test::Packet;
using test::virtual_now;

// 958 bytes of RoCE + 42 of UDP/IPv4/Ethernet = 1000 bytes on the link.
constexpr size_t kLen = 958;
static_assert(fault::wire_bytes(kLen, false) == 1000);

Packet packet(uint32_t tag, uint8_t tos = 0x02) {
  Packet p;
  p.bytes.assign(kLen, static_cast<uint8_t>(tag));
  p.bytes[1] = static_cast<uint8_t>(tag >> 8);
  p.meta.tos = tos;
  return p;
}

uint32_t link_tag_of(const std::vector<uint8_t>& b) {
  return b[0] | uint32_t{b[1]} << 8;
}

class BottleneckIoTest : public ::testing::Test {
 protected:
  void make(const std::string& text) {
    fault::ImpairSpec spec;
    ASSERT_EQ(fault::parse_impair_spec("UROCE_IMPAIR", text, spec), "");
    auto inner = std::make_unique<MemoryIo>();
    mem_ = inner.get();
    io_ = std::make_unique<ImpairedPacketIo>(std::move(inner), spec, 1, &virtual_now);
  }

  size_t send(uint32_t first, uint32_t count, uint8_t tos = 0x02) {
    std::vector<Packet> pkts;
    for (uint32_t i = 0; i < count; ++i) pkts.push_back(packet(first + i, tos));
    std::vector<transport::TxSlot> slots(count);
    for (uint32_t i = 0; i < count; ++i) {
      slots[i].buf = std::span<uint8_t>(pkts[i].bytes.data(), pkts[i].bytes.size());
      slots[i].len = pkts[i].bytes.size();
      slots[i].meta = pkts[i].meta;
    }
    return io_->tx_burst(slots);
  }

  std::vector<Packet> receive() {
    std::vector<std::vector<uint8_t>> bufs(64, std::vector<uint8_t>(device::kPacketBufferSize));
    std::vector<device::RxPacket> rx(64);
    for (size_t i = 0; i < rx.size(); ++i) rx[i].buf = bufs[i];
    const size_t n = io_->rx_burst(rx);
    std::vector<Packet> out;
    for (size_t i = 0; i < n; ++i) {
      out.push_back(Packet{
          std::vector<uint8_t>(bufs[i].begin(), bufs[i].begin() + static_cast<long>(rx[i].len)),
          rx[i].meta, g_now});
    }
    return out;
  }

  // Steps the virtual clock from one published release to the next until nothing is held,
  // collecting what was delivered on receive.
  std::vector<Packet> run_until_idle() {
    std::vector<Packet> got;
    for (int guard = 0; guard < 100000 && io_->next_release() != kNever; ++guard) {
      g_now = std::max(g_now, io_->next_release());
      for (Packet& p : receive()) got.push_back(std::move(p));
    }
    EXPECT_EQ(io_->next_release(), kNever);
    return got;
  }

  void SetUp() override { g_now = milliseconds(10); }

  MemoryIo* mem_ = nullptr;
  std::unique_ptr<ImpairedPacketIo> io_;
};

TEST_F(BottleneckIoTest, BackToBackPacketsLeaveExactlyOneSerializationTimeApart) {
  make("rate=8mbit");  // 1'000'000 bytes/s: a 1000-byte frame takes exactly 1 ms
  const TimePoint t0 = g_now;
  ASSERT_EQ(send(1, 5), 5u);
  EXPECT_TRUE(mem_->sent.empty());  // the first is on the link until t0 + 1 ms
  EXPECT_EQ(io_->next_release(), t0 + milliseconds(1));
  g_now = t0 + milliseconds(1) - Nanos(1);
  (void)receive();
  EXPECT_TRUE(mem_->sent.empty());
  (void)run_until_idle();
  ASSERT_EQ(mem_->sent.size(), 5u);
  for (uint32_t k = 0; k < 5; ++k) {
    EXPECT_EQ(link_tag_of(mem_->sent[k].bytes), k + 1);
    EXPECT_EQ(mem_->sent[k].bytes, packet(k + 1).bytes);
    EXPECT_EQ(mem_->sent[k].at, t0 + milliseconds(k + 1)) << k;
    EXPECT_EQ(mem_->sent[k].meta.tos, 0x02);  // no RED: never marked
  }
  const device::IoCounters c = io_->io_counters();
  EXPECT_EQ(c.impair_queue_dropped, 0u);
  EXPECT_EQ(c.impair_queue_marked, 0u);
  EXPECT_EQ(c.impair_queue_max_bytes, 5000u);  // all five queued at t0
  EXPECT_EQ(c.impair_delayed, 0u);

  // An idle link starts afresh: a packet sent later leaves one serialization time after it.
  g_now = t0 + milliseconds(20);
  ASSERT_EQ(send(6, 1), 1u);
  (void)run_until_idle();
  ASSERT_EQ(mem_->sent.size(), 6u);
  EXPECT_EQ(mem_->sent[5].at, t0 + milliseconds(21));
}

TEST_F(BottleneckIoTest, SubNanosecondRemaindersCarrySoTheAverageRateIsExact) {
  make("rate=3mbit");  // 375'000 bytes/s: 1000 bytes = 2666666.67 ns
  const TimePoint t0 = g_now;
  ASSERT_EQ(send(1, 3), 3u);
  (void)run_until_idle();
  ASSERT_EQ(mem_->sent.size(), 3u);
  EXPECT_EQ(mem_->sent[0].at, t0 + Nanos(2'666'666));
  EXPECT_EQ(mem_->sent[1].at, t0 + Nanos(5'333'333));
  EXPECT_EQ(mem_->sent[2].at, t0 + Nanos(8'000'000));  // 3000 bytes at 375000 B/s, exactly
}

TEST_F(BottleneckIoTest, TailDropAtExactlyTheQueueLimit) {
  make("rate=8mbit,queue=3000");
  // All four arrive at t0: 1000 + 1000 + 1000 fit exactly, the fourth would make 4000.
  ASSERT_EQ(send(1, 4), 4u);  // a drop consumes the packet: it is not backpressure
  (void)run_until_idle();
  ASSERT_EQ(mem_->sent.size(), 3u);
  for (uint32_t k = 0; k < 3; ++k) EXPECT_EQ(link_tag_of(mem_->sent[k].bytes), k + 1);
  EXPECT_EQ(io_->io_counters().impair_queue_dropped, 1u);
  EXPECT_EQ(io_->io_counters().impair_queue_max_bytes, 3000u);

  // One byte less and only two fit.
  make("rate=8mbit,queue=2999");
  ASSERT_EQ(send(1, 4), 4u);
  (void)run_until_idle();
  EXPECT_EQ(mem_->sent.size(), 2u);
  EXPECT_EQ(io_->io_counters().impair_queue_dropped, 2u);
}

TEST_F(BottleneckIoTest, TheQueueDrainsAsItSendsSoLaterArrivalsFit) {
  make("rate=8mbit,queue=2000");
  const TimePoint t0 = g_now;
  ASSERT_EQ(send(1, 2), 2u);     // 1 starts at once and leaves the buffer; 2 waits (1000 B)
  ASSERT_EQ(send(3, 1), 1u);     // 2000 B queued: fits
  ASSERT_EQ(send(4, 1), 1u);     // 3000 B: dropped
  g_now = t0 + milliseconds(1);  // 2 starts: 1000 B queued
  (void)receive();
  ASSERT_EQ(send(5, 1), 1u);  // fits again
  (void)run_until_idle();
  ASSERT_EQ(mem_->sent.size(), 4u);
  const uint32_t want[] = {1, 2, 3, 5};
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(link_tag_of(mem_->sent[k].bytes), want[k]);
    EXPECT_EQ(mem_->sent[k].at, t0 + milliseconds(k + 1));
  }
  EXPECT_EQ(io_->io_counters().impair_queue_dropped, 1u);
}

TEST_F(BottleneckIoTest, RedMarksEveryEctPacketAboveKmaxAndNoneAtOrBelowKmin) {
  // Marking at dequeue on the bytes left behind: packet k of 10 leaves (10 - k) * 1000 B.
  // Above kmax = 3000 (k = 1..6) p = 1; at 3000 (k = 7) p = pmax = 1; at or below kmin = 2000
  // (k = 8..10) p = 0. No random draw decides any of them.
  make("rate=8mbit,queue=100KB,kmin=2000,kmax=3000,pmax=1");
  ASSERT_EQ(send(1, 10), 10u);
  (void)run_until_idle();
  ASSERT_EQ(mem_->sent.size(), 10u);
  for (uint32_t k = 0; k < 10; ++k) {
    EXPECT_EQ(mem_->sent[k].meta.tos & 3, k < 7 ? 3 : 2) << k;
  }
  EXPECT_EQ(io_->io_counters().impair_queue_marked, 7u);
  EXPECT_EQ(io_->io_counters().impair_ce_marked, 0u);  // ce= marks are counted apart

  // Not ECN-capable: never marked (no WRED), the same packets all pass.
  make("rate=8mbit,queue=100KB,kmin=2000,kmax=3000,pmax=1");
  ASSERT_EQ(send(1, 10, 0x00), 10u);
  (void)run_until_idle();
  ASSERT_EQ(mem_->sent.size(), 10u);
  for (const Packet& p : mem_->sent) EXPECT_EQ(p.meta.tos, 0x00);
  EXPECT_EQ(io_->io_counters().impair_queue_marked, 0u);
}

TEST_F(BottleneckIoTest, RedInTheRampMarksAFixedCountForAFixedSeed) {
  // 200 packets at once, kmin = 0, kmax = 200000: packet k leaves (200 - k) * 1000 B behind,
  // p = 0.5 * (200 - k) / 200; the expected count is 49.75.
  auto marked_with = [&](const char* seed) {
    make(std::string("rate=1gbit,queue=1MB,kmin=0,kmax=200000,pmax=0.5,limit=200,seed=") + seed);
    EXPECT_EQ(send(0, 64) + send(64, 64) + send(128, 64) + send(192, 8), 200u);
    (void)run_until_idle();
    EXPECT_EQ(mem_->sent.size(), 200u);
    uint64_t n = 0;
    for (const Packet& p : mem_->sent) n += (p.meta.tos & 3) == 3 ? 1 : 0;
    EXPECT_EQ(io_->io_counters().impair_queue_marked, n);
    return n;
  };
  const uint64_t a = marked_with("7");
  EXPECT_EQ(a, 40u);
  EXPECT_EQ(marked_with("7"), a);  // replays exactly
  EXPECT_GE(a, 30u);
  EXPECT_LE(a, 70u);
}

TEST_F(BottleneckIoTest, DelayAddsAfterTheQueueLikeAWireAfterASwitch) {
  make("rate=8mbit,delay=10ms");
  const TimePoint t0 = g_now;
  ASSERT_EQ(send(1, 3), 3u);
  (void)run_until_idle();
  ASSERT_EQ(mem_->sent.size(), 3u);
  for (uint32_t k = 0; k < 3; ++k) {
    EXPECT_EQ(mem_->sent[k].at, t0 + milliseconds(k + 1) + milliseconds(10)) << k;
  }
  EXPECT_EQ(io_->io_counters().impair_delayed, 3u);
}

TEST_F(BottleneckIoTest, LossAfterTheQueueStillTookLinkTime) {
  make("rate=8mbit,loss=100%");
  ASSERT_EQ(send(1, 3), 3u);
  (void)run_until_idle();
  EXPECT_TRUE(mem_->sent.empty());
  EXPECT_EQ(io_->io_counters().impair_dropped, 3u);
  EXPECT_EQ(io_->io_counters().impair_queue_dropped, 0u);
}

TEST_F(BottleneckIoTest, ReceiveSideBottleneck) {
  make("rate=8mbit,queue=3000,dir=rx");
  const TimePoint t0 = g_now;
  for (uint32_t k = 1; k <= 4; ++k) mem_->incoming.push_back(packet(k));
  EXPECT_TRUE(receive().empty());  // queued, the first is on the link
  std::vector<Packet> got = run_until_idle();
  ASSERT_EQ(got.size(), 3u);
  for (uint32_t k = 0; k < 3; ++k) {
    EXPECT_EQ(got[k].bytes, packet(k + 1).bytes);
    EXPECT_EQ(got[k].at, t0 + milliseconds(k + 1));
  }
  EXPECT_EQ(io_->io_counters().impair_queue_dropped, 1u);
  // Transmissions pass untouched.
  ASSERT_EQ(send(9, 1), 1u);
  ASSERT_EQ(mem_->sent.size(), 1u);
  EXPECT_EQ(mem_->sent[0].at, g_now);
}

TEST_F(BottleneckIoTest, AFullQueueIsBackpressureOnTransmit) {
  make("rate=8mbit,limit=2");
  // Two slots: the first two are taken, then the first starts and leaves its slot for the
  // line (where it waits for its tx_end).
  EXPECT_EQ(send(1, 5), 2u);
  EXPECT_EQ(send(3, 3), 1u);
  (void)run_until_idle();
  ASSERT_EQ(mem_->sent.size(), 3u);
  EXPECT_EQ(io_->io_counters().impair_queue_dropped, 0u);
  EXPECT_EQ(io_->io_counters().impair_overflow, 0u);
}

}  // namespace
}  // namespace uroce::net
