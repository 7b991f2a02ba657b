// Several UdpPorts of one process sharing 127.0.0.1:<port>: each datagram must reach exactly
// the port owning its destination QPN's slot, also after members leave.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>

#include "net/udp_port.hpp"
#include "net_test_util.hpp"

namespace uroce::net {
namespace {

using namespace std::chrono_literals;
using testing::bth_packet;
using testing::dqpn_of;
using testing::ip;
using testing::receive;
using testing::send_one;
using testing::shared;
using testing::unshared;

// Sends `per_slot` datagrams into the range of every member and checks that each member gets
// exactly its own (and nothing else).
void expect_exact_steering(UdpPort& sender, std::vector<UdpPort*> members, uint16_t port,
                           int per_slot = 8) {
  std::map<UdpPort*, size_t> expected;
  for (UdpPort* m : members) {
    const QpnRange r = m->qpn_range();
    for (int i = 0; i < per_slot; ++i) {
      const uint32_t qpn =
          r.base + static_cast<uint32_t>(i) * (r.count / static_cast<uint32_t>(per_slot));
      ASSERT_EQ(send_one(sender, bth_packet(qpn), ip("127.0.0.1"), port), 1u);
      ++expected[m];
    }
  }
  for (UdpPort* m : members) {
    auto got = receive(*m, expected[m] + 1, 150ms);  // +1: wait a little for strays
    EXPECT_EQ(got.size(), expected[m]) << "slot " << *m->slot();
    for (const auto& g : got) {
      EXPECT_TRUE(m->qpn_range().contains(dqpn_of(g.bytes))) << std::hex << dqpn_of(g.bytes);
    }
    EXPECT_EQ(m->counters().rx_drop_misdelivered, 0u);
  }
}

TEST(ReuseportSteering, TwoMembersEachGetTheirSlot) {
  testing::TempDir dir;
  constexpr uint16_t kPort = 24811;
  auto a = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  ASSERT_TRUE(a.ok()) << a.error().message;
  auto b = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(a.value()->slot(), 0u);
  EXPECT_EQ(b.value()->slot(), 1u);
  EXPECT_EQ(a.value()->position(), 0u);
  EXPECT_EQ(b.value()->position(), 1u);
  EXPECT_EQ(a.value()->qpn_range(), qpn_range_of_slot(0));
  EXPECT_EQ(b.value()->qpn_range(), qpn_range_of_slot(1));
  auto s = UdpPort::open(unshared("127.0.0.1"));
  ASSERT_TRUE(s.ok());
  expect_exact_steering(*s.value(), {a.value().get(), b.value().get()}, kPort);
}

TEST(ReuseportSteering, ThreeMembersAndTheMiddleOneLeaves) {
  testing::TempDir dir;
  constexpr uint16_t kPort = 24812;
  auto a = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  auto b = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  auto c = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  auto s = UdpPort::open(unshared("127.0.0.1"));
  ASSERT_TRUE(s.ok());
  expect_exact_steering(*s.value(), {a.value().get(), b.value().get(), c.value().get()}, kPort);

  b.value().reset();  // leaves cleanly: c moves into position 1
  a.value()->maintain();
  c.value()->maintain();
  EXPECT_EQ(c.value()->position(), 1u);
  expect_exact_steering(*s.value(), {a.value().get(), c.value().get()}, kPort);
  // The left slot has no owner now: its datagrams are dropped (by whoever the kernel picks).
  ASSERT_EQ(send_one(*s.value(), bth_packet(qpn_range_of_slot(1).base), ip("127.0.0.1"), kPort),
            1u);
  (void)receive(*a.value(), 1, 50ms);
  (void)receive(*c.value(), 1, 50ms);
  EXPECT_EQ(a.value()->counters().rx_drop_no_owner + c.value()->counters().rx_drop_no_owner, 1u);
  EXPECT_EQ(a.value()->rx_no_owner() + c.value()->rx_no_owner(), 1u);

  a.value().reset();  // the first one leaves: c moves into position 0
  EXPECT_EQ(receive(*c.value(), 1, 10ms).size(), 0u);
  EXPECT_EQ(c.value()->position(), 0u);
  expect_exact_steering(*s.value(), {c.value().get()}, kPort);

  // A newcomer takes the lowest free slot and the next position.
  auto d = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.value()->slot(), 0u);
  EXPECT_EQ(d.value()->position(), 1u);
  expect_exact_steering(*s.value(), {c.value().get(), d.value().get()}, kPort);
}

TEST(ReuseportSteering, RequestedSlotAndConflicts) {
  testing::TempDir dir;
  constexpr uint16_t kPort = 24813;
  auto a = UdpPort::open(shared("127.0.0.1", kPort, dir.path(), 9));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value()->slot(), 9u);
  EXPECT_EQ(a.value()->qpn_range().base, 9u << 18);
  auto b = UdpPort::open(shared("127.0.0.1", kPort, dir.path(), 9));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, EBUSY);
  EXPECT_NE(b.error().message.find("QPN slot 9 on 127.0.0.1:24813 is taken"), std::string::npos)
      << b.error().message;
  auto c = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value()->slot(), 0u);
  auto s = UdpPort::open(unshared("127.0.0.1"));
  ASSERT_TRUE(s.ok());
  expect_exact_steering(*s.value(), {a.value().get(), c.value().get()}, kPort);
}

TEST(ReuseportSteering, Ipv6LoopbackGroup) {
  testing::TempDir dir;
  constexpr uint16_t kPort = 24815;
  auto a = UdpPort::open(shared("::1", kPort, dir.path()));
  if (!a.ok() && a.error().code == EADDRNOTAVAIL) GTEST_SKIP() << "no ::1 on this host";
  ASSERT_TRUE(a.ok()) << a.error().message;
  auto b = UdpPort::open(shared("::1", kPort, dir.path()));
  auto v4 = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  ASSERT_TRUE(b.ok() && v4.ok());
  EXPECT_EQ(b.value()->position(), 1u);
  EXPECT_EQ(v4.value()->slot(), 2u);      // slots are unique across the port's addresses...
  EXPECT_EQ(v4.value()->position(), 0u);  // ...positions are per address (one group each)
  auto s = UdpPort::open(unshared("::1"));
  ASSERT_TRUE(s.ok());
  for (UdpPort* m : {a.value().get(), b.value().get()}) {
    for (uint32_t i = 0; i < 4; ++i) {
      ASSERT_EQ(send_one(*s.value(), bth_packet(m->qpn_range().base + i), ip("::1"), kPort), 1u);
    }
  }
  for (UdpPort* m : {a.value().get(), b.value().get()}) {
    auto got = receive(*m, 5, 100ms);
    ASSERT_EQ(got.size(), 4u);
    for (const auto& g : got) {
      EXPECT_TRUE(m->qpn_range().contains(dqpn_of(g.bytes)));
      EXPECT_TRUE(g.meta.ip.ipv6);
      EXPECT_EQ(g.meta.ip.dst, ip("::1").bytes);
    }
  }
}

TEST(ReuseportSteering, DataArrivingDuringAPositionProbeIsKept) {
  testing::TempDir dir;
  constexpr uint16_t kPort = 24816;
  auto a = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  auto b = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  ASSERT_TRUE(a.ok() && b.ok());
  auto s = UdpPort::open(unshared("127.0.0.1"));
  ASSERT_TRUE(s.ok());
  // Queue data for b, then make b prove its position: a new epoch (as after a crash).
  for (uint32_t i = 0; i < 5; ++i) {
    ASSERT_EQ(send_one(*s.value(), bth_packet(b.value()->qpn_range().base + i), ip("127.0.0.1"),
                       kPort, 0x02),
              1u);
  }
  {
    auto reg = RegistryFile::open(dir.path(), kPort);
    ASSERT_TRUE(reg.ok());
    auto lock = reg.value().lock();
    RegistryState st = reg.value().load();
    ++st.epoch;
    reg.value().store(st);
  }
  b.value()->maintain();
  EXPECT_EQ(b.value()->counters().reuseport_probes, 1u);
  EXPECT_EQ(b.value()->counters().reuseport_probe_failures, 0u);
  EXPECT_EQ(b.value()->position(), 1u);
  auto got = receive(*b.value(), 6, 100ms);
  ASSERT_EQ(got.size(), 5u);
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(dqpn_of(got[i].bytes), b.value()->qpn_range().base + i);
    EXPECT_EQ(got[i].meta.tos, 0x02);
    EXPECT_EQ(got[i].meta.ip.sport, s.value()->port());
  }
  EXPECT_EQ(b.value()->counters().rx_drop_repair, 0u);
  expect_exact_steering(*s.value(), {a.value().get(), b.value().get()}, kPort);
}

TEST(ReuseportSteering, ProbesAreNotData) {
  testing::TempDir dir;
  constexpr uint16_t kPort = 24814;
  auto a = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  ASSERT_TRUE(a.ok());
  auto s = UdpPort::open(unshared("127.0.0.1"));
  ASSERT_TRUE(s.ok());
  auto probe = make_probe(0, 0x1234);
  ASSERT_EQ(send_one(*s.value(), std::vector<uint8_t>(probe.begin(), probe.end()), ip("127.0.0.1"),
                     kPort),
            1u);
  EXPECT_TRUE(receive(*a.value(), 1, 50ms).empty());
  EXPECT_EQ(a.value()->counters().rx_probes, 1u);
}

// A registry whose positions are wrong without a new epoch (edited by hand, or written by a
// uroce that got them wrong): nobody has a reason to probe, so the program steers each
// member's datagrams to the other. The first misdelivery must make the registry suspect for
// every member (a new epoch), so each proves its position and the steering heals instead of
// dropping every datagram for good.
TEST(ReuseportSteering, WrongPositionsWithoutANewEpochHealAfterTheFirstMisdelivery) {
  testing::TempDir dir;
  constexpr uint16_t kPort = 24817;
  auto a = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  auto b = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  ASSERT_TRUE(a.ok() && b.ok());
  UdpPort& pa = *a.value();
  UdpPort& pb = *b.value();
  auto s = UdpPort::open(unshared("127.0.0.1"));
  ASSERT_TRUE(s.ok());
  {
    auto reg = RegistryFile::open(dir.path(), kPort);
    ASSERT_TRUE(reg.ok());
    auto lock = reg.value().lock();
    RegistryState st = reg.value().load();
    ASSERT_EQ(st.members.size(), 2u);
    std::swap(st.members[0].position, st.members[1].position);
    reg.value().store(st);
  }
  pa.maintain();                 // reads the swapped file and attaches the program it implies
  EXPECT_EQ(pa.position(), 1u);  // what the registry says, not the kernel
  // One datagram for each: each lands at the other and is counted misdelivered.
  ASSERT_EQ(send_one(*s.value(), bth_packet(pa.qpn_range().base), ip("127.0.0.1"), kPort), 1u);
  ASSERT_EQ(send_one(*s.value(), bth_packet(pb.qpn_range().base), ip("127.0.0.1"), kPort), 1u);
  EXPECT_TRUE(receive(pa, 1, 50ms).empty());
  EXPECT_TRUE(receive(pb, 1, 50ms).empty());
  EXPECT_EQ(pa.counters().rx_drop_misdelivered + pb.counters().rx_drop_misdelivered, 2u);
  // What the device publishes as rx_misdelivered (readable from any thread).
  EXPECT_EQ(pa.rx_misdelivered(), pa.counters().rx_drop_misdelivered);
  EXPECT_EQ(pb.rx_misdelivered(), pb.counters().rx_drop_misdelivered);
  // The misdeliveries started a new epoch; each member proves its place at its next look.
  pa.maintain();
  pb.maintain();
  EXPECT_EQ(pa.position(), 0u);
  EXPECT_EQ(pb.position(), 1u);
  EXPECT_EQ(pa.counters().reuseport_probe_failures + pb.counters().reuseport_probe_failures, 0u);
  const uint64_t before_a = pa.counters().rx_drop_misdelivered;
  const uint64_t before_b = pb.counters().rx_drop_misdelivered;
  for (UdpPort* m : {&pa, &pb}) {
    const QpnRange r = m->qpn_range();
    for (uint32_t i = 0; i < 4; ++i) {
      ASSERT_EQ(send_one(*s.value(), bth_packet(r.base + i), ip("127.0.0.1"), kPort), 1u);
    }
  }
  for (UdpPort* m : {&pa, &pb}) {
    auto got = receive(*m, 5, 150ms);
    EXPECT_EQ(got.size(), 4u) << "slot " << *m->slot();
    for (const auto& g : got) EXPECT_TRUE(m->qpn_range().contains(dqpn_of(g.bytes)));
  }
  EXPECT_EQ(pa.counters().rx_drop_misdelivered, before_a);
  EXPECT_EQ(pb.counters().rx_drop_misdelivered, before_b);
}

}  // namespace
}  // namespace uroce::net
