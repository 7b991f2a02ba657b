// poll_tx's round robin: each QP builds up to 64 packets per turn, so the driver sends each
// turn with one system call (its QP's socket) whatever the packet size, and QPs with work
// take turns.
#include <gtest/gtest.h>

#include "engine_harness.hpp"

namespace uroce::test {
namespace {

using transport::Mtu;
using transport::QpType;
using transport::SendWr;
using transport::Sge;
using transport::TxSlot;
using transport::WrOpcode;

// Posts `count` RDMA WRITEs of `size` bytes on pair `p` (engine 0 to engine 1).
void post_writes(EngineHarness& h, const QpPair& p, size_t count, uint32_t size) {
  for (size_t i = 0; i < count; ++i) {
    const Sge sge = p.a.sge(0, size);
    SendWr wr;
    wr.wr_id = i;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.sg_list = std::span<const Sge>(&sge, 1);
    wr.rdma.remote_addr = p.b.addr(0);
    wr.rdma.rkey = p.b.mr.rkey;
    ASSERT_TRUE(h.engine(0).post_send(h.now(), p.a.qpn, wr));
  }
}

// The destination QPN of each packet engine 0 builds into `burst` slots, turn after turn.
std::vector<uint32_t> build(EngineHarness& h, size_t burst) {
  std::vector<std::vector<uint8_t>> bufs(burst, std::vector<uint8_t>(4096 + 128));
  std::vector<TxSlot> slots(burst);
  for (size_t i = 0; i < burst; ++i) slots[i].buf = bufs[i];
  const size_t n = h.engine(0).poll_tx(h.now(), slots);
  std::vector<uint32_t> dqpns;
  for (size_t i = 0; i < n; ++i) {
    wire::ParsedPacket pkt;
    EXPECT_EQ(wire::parse_packet(std::span<const uint8_t>(slots[i].buf.data(), slots[i].len), pkt),
              wire::ParseError::kOk);
    dqpns.push_back(pkt.hdr.bth.dqpn);
  }
  return dqpns;
}

std::vector<uint32_t> runs(uint32_t first, size_t n1, uint32_t second, size_t n2) {
  std::vector<uint32_t> v(n1, first);
  v.insert(v.end(), n2, second);
  return v;
}

// Two QPs with `posts` WRITEs of `size` bytes each (one packet per WRITE): a burst of 128
// slots takes 64 of the first QP, then 64 of the second; the next, each one's rest.
void expect_turns_of_64(uint32_t size, size_t posts) {
  EngineHarness h;
  const QpPair p1 = h.connect({.type = QpType::kRc, .mtu = Mtu::k4096});
  const QpPair p2 = h.connect({.type = QpType::kRc, .mtu = Mtu::k4096});
  post_writes(h, p1, posts, size);
  post_writes(h, p2, posts, size);
  EXPECT_EQ(build(h, 128), runs(p1.b.qpn, 64, p2.b.qpn, 64));
  EXPECT_EQ(build(h, 128), runs(p1.b.qpn, posts - 64, p2.b.qpn, posts - 64));
}

TEST(TxTurns, SmallPacketsTakeTurnsOfSixtyFour) {
  expect_turns_of_64(64, 100);
}

TEST(TxTurns, FullSizePacketsTakeTurnsOfSixtyFourToo) {
  expect_turns_of_64(4096, 80);
}

}  // namespace
}  // namespace uroce::test
