// ImpairedPacketIo over an in-memory driver with a virtual clock: held packets leave exactly
// when due (also when the device sends nothing new), wait() sleeps no longer than the next
// release, reordering really reorders, duplicates and corruptions reach the driver as such,
// CE is set in the metadata, a full line is backpressure on transmit and a drop on receive.
#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "memory_io.hpp"
#include "net/impaired_packet_io.hpp"
#include "wire/icrc.hpp"

namespace uroce::net {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

using test::g_now;
using test::MemoryIo;
using test::Packet;
using test::virtual_now;

// A packet whose ICRC is right for `meta`, tagged by its first payload byte.
Packet sealed_packet(uint32_t tag, uint8_t tos = 0x02, size_t len = 64) {
  Packet p;
  p.bytes.assign(len, 0);
  for (size_t i = 0; i < len; ++i) p.bytes[i] = static_cast<uint8_t>(i * 7 + tag);
  p.bytes[12] = static_cast<uint8_t>(tag);
  p.bytes[13] = static_cast<uint8_t>(tag >> 8);
  p.meta.ip.src[15] = 1;
  p.meta.ip.dst[15] = 2;
  p.meta.ip.sport = 50000;
  p.meta.tos = tos;
  wire::write_icrc(p.meta.ip, p.bytes);
  return p;
}

uint32_t sealed_tag_of(const std::vector<uint8_t>& b) {
  return b[12] | uint32_t{b[13]} << 8;
}

class ImpairedIoTest : public ::testing::Test {
 protected:
  void make(const std::string& text) {
    fault::ImpairSpec spec;
    ASSERT_EQ(fault::parse_impair_spec("UROCE_IMPAIR", text, spec), "");
    auto inner = std::make_unique<MemoryIo>();
    mem_ = inner.get();
    inner->counters.icmp_too_big = 7;  // the driver's own: io_counters() passes them on
    io_ = std::make_unique<ImpairedPacketIo>(std::move(inner), spec, 1, &virtual_now);
  }

  // Offers packets to tx_burst; returns how many it consumed.
  size_t send(const std::vector<Packet>& pkts) {
    std::vector<transport::TxSlot> slots(pkts.size());
    for (size_t i = 0; i < pkts.size(); ++i) {
      slots[i].buf =
          std::span<uint8_t>(const_cast<uint8_t*>(pkts[i].bytes.data()), pkts[i].bytes.size());
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

  void SetUp() override { g_now = milliseconds(10); }

  MemoryIo* mem_ = nullptr;
  std::unique_ptr<ImpairedPacketIo> io_;
};

TEST_F(ImpairedIoTest, DelayedTransmissionsLeaveWhenDueFromRxBurst) {
  make("delay=100us");
  const TimePoint t0 = g_now;
  ASSERT_EQ(send({sealed_packet(1), sealed_packet(2), sealed_packet(3)}), 3u);
  EXPECT_TRUE(mem_->sent.empty());
  EXPECT_EQ(io_->next_release(), t0 + microseconds(100));
  // wait() sleeps at most until the release, whatever the device asked.
  g_now = t0 + microseconds(30);
  io_->wait(std::chrono::seconds(1), false);
  EXPECT_EQ(mem_->last_timeout, microseconds(70));
  io_->wait(Nanos(-1), false);
  EXPECT_EQ(mem_->last_timeout, microseconds(70));
  io_->wait(microseconds(5), false);
  EXPECT_EQ(mem_->last_timeout, microseconds(5));
  g_now = t0 + microseconds(99);
  EXPECT_TRUE(receive().empty());
  EXPECT_TRUE(mem_->sent.empty());
  g_now = t0 + microseconds(100);
  EXPECT_TRUE(receive().empty());  // nothing received, but the held packets left
  ASSERT_EQ(mem_->sent.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(mem_->sent[i].bytes, sealed_packet(i + 1).bytes);
    EXPECT_EQ(mem_->sent[i].at, t0 + microseconds(100));
  }
  EXPECT_EQ(io_->next_release(), kNever);
  io_->wait(std::chrono::seconds(1), false);
  EXPECT_EQ(mem_->last_timeout, std::chrono::seconds(1));
  EXPECT_EQ(io_->impair_counters().delayed, 3u);
  const device::IoCounters c = io_->io_counters();
  EXPECT_EQ(c.impair_delayed, 3u);
  EXPECT_EQ(c.icmp_too_big, 7u);  // the driver's own counters pass through
}

TEST_F(ImpairedIoTest, AnEarlierReleaseWakesTheSleepingProgressThread) {
  // An application thread's post reaches tx_burst while the progress thread sleeps with a
  // timeout computed before: only a wake makes it sleep no longer than the new release.
  make("delay=100us");
  ASSERT_EQ(send({sealed_packet(1)}), 1u);
  EXPECT_EQ(mem_->wakes, 1);  // the line was empty
  g_now += microseconds(10);
  ASSERT_EQ(send({sealed_packet(2)}), 1u);
  EXPECT_EQ(mem_->wakes, 1);  // released after the first: the sleeper's timeout still holds
  g_now += microseconds(90);
  (void)receive();
  EXPECT_EQ(mem_->sent.size(), 1u);
  EXPECT_EQ(mem_->wakes, 1);  // the release moved later, not closer
}

TEST_F(ImpairedIoTest, ReorderingReallyReorders) {
  make("delay=1ms,reorder=20%,seed=3");
  const TimePoint t0 = g_now;
  constexpr uint32_t kCount = 200;
  for (uint32_t i = 0; i < kCount; ++i) {
    g_now = t0 + microseconds(10 * i);
    ASSERT_EQ(send({sealed_packet(i)}), 1u);
    (void)receive();
  }
  for (int step = 0; step < 200; ++step) {
    g_now += microseconds(10);
    (void)receive();
  }
  ASSERT_EQ(mem_->sent.size(), kCount);
  const uint64_t reordered = io_->impair_counters().reordered;
  EXPECT_GT(reordered, 20u);
  EXPECT_LT(reordered, 60u);
  // A reordered packet leaves when it is sent, ahead of the ~100 held before it.
  uint64_t early = 0;
  uint32_t inversions = 0;
  for (size_t k = 0; k < mem_->sent.size(); ++k) {
    const uint32_t tag = sealed_tag_of(mem_->sent[k].bytes);
    const TimePoint sent_at = t0 + microseconds(10 * tag);
    if (mem_->sent[k].at == sent_at) {
      ++early;
    } else {
      EXPECT_EQ(mem_->sent[k].at, sent_at + milliseconds(1));
    }
    if (k > 0 && tag < sealed_tag_of(mem_->sent[k - 1].bytes)) ++inversions;
  }
  EXPECT_EQ(early, reordered);
  EXPECT_GT(inversions, 10u);
}

TEST_F(ImpairedIoTest, DuplicatesAndCorruptionsReachTheDriver) {
  make("dup=100%,corrupt=100%");
  std::vector<Packet> pkts;
  for (uint32_t i = 0; i < 50; ++i) pkts.push_back(sealed_packet(i, 0x02, 40 + i * 30));
  ASSERT_EQ(send(pkts), pkts.size());
  ASSERT_EQ(mem_->sent.size(), 2 * pkts.size());
  for (size_t i = 0; i < pkts.size(); ++i) {
    const Packet& original = mem_->sent[2 * i];
    const Packet& dup = mem_->sent[2 * i + 1];
    // The first copy has one bit flipped after the BTH and fails the receiver's check.
    EXPECT_EQ(wire::verify_icrc_udp(original.meta.ip, original.bytes), wire::IcrcResult::kBad);
    ASSERT_EQ(original.bytes.size(), pkts[i].bytes.size());
    int flipped = 0;
    for (size_t b = 0; b < original.bytes.size(); ++b) {
      const auto x = static_cast<uint8_t>(original.bytes[b] ^ pkts[i].bytes[b]);
      flipped += __builtin_popcount(x);
      if (x != 0) {
        EXPECT_GE(b, 12u);
      }
    }
    EXPECT_EQ(flipped, 1);
    // The duplicate is the packet as the engine built it.
    EXPECT_EQ(dup.bytes, pkts[i].bytes);
  }
  EXPECT_EQ(io_->impair_counters().duplicated, 50u);
  EXPECT_EQ(io_->impair_counters().corrupted, 50u);
}

TEST_F(ImpairedIoTest, CeIsSetOnEcnCapablePacketsOnly) {
  make("ce=100%");
  ASSERT_EQ(send({sealed_packet(1, 0x02), sealed_packet(2, 0x00), sealed_packet(3, 0xB9)}), 3u);
  ASSERT_EQ(mem_->sent.size(), 3u);
  EXPECT_EQ(mem_->sent[0].meta.tos, 0x03);
  EXPECT_EQ(mem_->sent[1].meta.tos, 0x00);
  EXPECT_EQ(mem_->sent[2].meta.tos, 0xBB);                       // DSCP kept, ECT(1) -> CE
  EXPECT_EQ(mem_->sent[0].bytes, sealed_packet(1, 0x02).bytes);  // ECN is not in the ICRC
  EXPECT_EQ(io_->impair_counters().ce_marked, 2u);
}

TEST_F(ImpairedIoTest, LossOnTransmit) {
  make("loss=100%");
  ASSERT_EQ(send({sealed_packet(1), sealed_packet(2)}), 2u);
  EXPECT_TRUE(mem_->sent.empty());
  EXPECT_EQ(io_->io_counters().impair_dropped, 2u);
}

TEST_F(ImpairedIoTest, AFullLineIsBackpressureOnTransmit) {
  make("delay=1ms,limit=4");
  std::vector<Packet> pkts;
  for (uint32_t i = 0; i < 10; ++i) pkts.push_back(sealed_packet(i));
  EXPECT_EQ(send(pkts), 4u);
  EXPECT_EQ(send(pkts), 0u);
  // wait() does not poll for writability over a full line: only the release wakes it.
  io_->wait(std::chrono::seconds(1), true);
  EXPECT_FALSE(mem_->last_want_write);
  EXPECT_EQ(mem_->last_timeout, milliseconds(1));
  g_now += milliseconds(1);
  EXPECT_EQ(send(std::vector<Packet>(pkts.begin() + 4, pkts.end())), 4u);
  EXPECT_EQ(mem_->sent.size(), 4u);
  EXPECT_EQ(io_->impair_counters().overflow, 0u);
}

TEST_F(ImpairedIoTest, ADriverThatTakesFewerKeepsTheRestInOrder) {
  make("dup=0.0000001%");  // active, but in effect a plain copy
  mem_->accept_per_call = 2;
  std::vector<Packet> pkts;
  for (uint32_t i = 0; i < 5; ++i) pkts.push_back(sealed_packet(i));
  EXPECT_EQ(send(pkts), 5u);  // all taken into the line, 2 sent
  EXPECT_EQ(mem_->sent.size(), 2u);
  io_->wait(std::chrono::seconds(1), false);
  EXPECT_TRUE(mem_->last_want_write);  // the socket is what blocks: wake when writable
  EXPECT_EQ(mem_->last_timeout, Nanos::zero());
  (void)receive();
  (void)receive();
  ASSERT_EQ(mem_->sent.size(), 5u);
  for (uint32_t i = 0; i < 5; ++i) EXPECT_EQ(sealed_tag_of(mem_->sent[i].bytes), i);
  io_->wait(std::chrono::seconds(1), false);
  EXPECT_FALSE(mem_->last_want_write);
}

TEST_F(ImpairedIoTest, ReceiveSideDelayLossAndOverflow) {
  make("delay=50us,dir=rx,limit=2");
  const TimePoint t0 = g_now;
  for (uint32_t i = 0; i < 3; ++i) mem_->incoming.push_back(sealed_packet(i));
  EXPECT_TRUE(receive().empty());
  EXPECT_EQ(io_->impair_counters().overflow, 1u);  // the third found both slots taken
  g_now = t0 + microseconds(50);
  const auto got = receive();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].bytes, sealed_packet(0).bytes);
  EXPECT_EQ(got[1].bytes, sealed_packet(1).bytes);
  EXPECT_EQ(got[0].meta.tos, 0x02);
  EXPECT_EQ(got[0].meta.ip.sport, 50000);
  // Transmit is not impaired with dir=rx.
  ASSERT_EQ(send({sealed_packet(9)}), 1u);
  ASSERT_EQ(mem_->sent.size(), 1u);
  EXPECT_EQ(mem_->sent[0].at, g_now);
}

TEST_F(ImpairedIoTest, ReceiveSideLossDupCorruptAndCe) {
  make("loss=50%,dup=20%,corrupt=10%,ce=30%,dir=rx,seed=8");
  constexpr uint32_t kCount = 1000;
  size_t delivered = 0, bad = 0, ce = 0;
  for (uint32_t i = 0; i < kCount; ++i) {
    mem_->incoming.push_back(sealed_packet(i));
    for (const Packet& p : receive()) {
      ++delivered;
      bad += wire::verify_icrc_udp(p.meta.ip, p.bytes) == wire::IcrcResult::kBad;
      ce += (p.meta.tos & 3) == 3;
    }
  }
  for (const Packet& p : receive()) {  // a duplicate of the last one may still be held
    ++delivered;
    bad += wire::verify_icrc_udp(p.meta.ip, p.bytes) == wire::IcrcResult::kBad;
    ce += (p.meta.tos & 3) == 3;
  }
  const fault::ImpairCounters c = io_->impair_counters();
  EXPECT_EQ(delivered, kCount - c.dropped + c.duplicated);
  EXPECT_EQ(bad, c.corrupted);
  // A duplicate of a CE-marked packet is CE-marked too.
  EXPECT_GE(ce, c.ce_marked);
  EXPECT_NEAR(static_cast<double>(c.dropped) / kCount, 0.5, 0.05);
  EXPECT_GT(c.corrupted, 20u);
}

TEST_F(ImpairedIoTest, TransmitOnlyLeavesReceptionUntouched) {
  make("loss=100%,corrupt=100%");
  for (uint32_t i = 0; i < 5; ++i) mem_->incoming.push_back(sealed_packet(i, 0x02));
  const auto got = receive();
  ASSERT_EQ(got.size(), 5u);
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(got[i].bytes, sealed_packet(i).bytes);
    EXPECT_EQ(got[i].meta.tos, 0x02);
  }
}

}  // namespace
}  // namespace uroce::net
