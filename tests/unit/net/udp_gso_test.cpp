// UDP GSO on send (UdpPortConfig::gso): runs of datagrams to one destination with one TOS and
// one size (the last may be shorter) leave as one UDP_SEGMENT message and arrive as the same
// datagrams, byte-exact and in order; anything else splits the run.
#include <gtest/gtest.h>

#include <chrono>

#include "net/udp_port.hpp"
#include "net_test_util.hpp"
#include "wire/byte_order.hpp"

namespace uroce::net {
namespace {

using namespace std::chrono_literals;
using testing::bth_packet;
using testing::receive;
using testing::to;
using testing::to_all;
using testing::unshared;

UdpPortConfig with_gso(bool on) {
  UdpPortConfig c = unshared("127.0.0.1");
  c.gso = on;
  return c;
}

// What a datagram sent as segment `k` of a GSO message carries over IPv4: the kernel gives the
// segment IPv4 ID k, so the port corrects the ICRC (the last 4 bytes) for it; the rest is as
// sent.
std::vector<uint8_t> as_segment(std::vector<uint8_t> bytes, uint16_t k) {
  const size_t at = bytes.size() - wire::kIcrcLen;
  wire::store_le32(&bytes[at],
                   wire::load_le32(&bytes[at]) ^ wire::Ipv4IdIcrcDelta(bytes.size())(k));
  return bytes;
}

// 15 datagrams of 4112 bytes (a 4096-MTU RDMA WRITE packet) and a 1000-byte last one.
std::vector<std::vector<uint8_t>> write_run() {
  std::vector<std::vector<uint8_t>> p;
  for (uint32_t i = 0; i < 15; ++i) p.push_back(bth_packet(0x100, 4100, static_cast<uint8_t>(i)));
  p.push_back(bth_packet(0x100, 988, 0xEE));
  return p;
}

// With TxDatagram::icrc_writable the corrected ICRC is written into the caller's buffer for
// the call (one iovec per packet) and taken out again: the same bytes arrive, and the buffers
// are as sealed afterwards.
TEST(UdpGso, OneRunIsOneMessageAndArrivesByteExact) {
  for (const bool writable : {false, true}) {
    auto a = UdpPort::open(with_gso(true));
    auto b = UdpPort::open(with_gso(false));
    ASSERT_TRUE(a.ok() && b.ok());
    const auto payloads = write_run();
    std::vector<std::vector<uint8_t>> slots = payloads;
    std::vector<TxDatagram> burst = to_all(*b.value(), payloads, 0x02);
    for (size_t i = 0; i < burst.size(); ++i) {
      burst[i].data = slots[i];
      burst[i].icrc_writable = writable;
    }
    ASSERT_EQ(a.value()->send_burst(burst), payloads.size());
    EXPECT_EQ(slots, payloads) << "writable " << writable;
    EXPECT_EQ(a.value()->counters().tx_gso_messages, 1u);
    EXPECT_EQ(a.value()->counters().tx_gso_fallback, 0u);
    EXPECT_EQ(a.value()->counters().tx_packets, payloads.size());
    EXPECT_EQ(a.value()->counters().tx_bytes, 15u * 4112 + 1000);
    auto got = receive(*b.value(), payloads.size(), 2s);
    ASSERT_EQ(got.size(), payloads.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].bytes, as_segment(payloads[i], static_cast<uint16_t>(i)))
          << "writable " << writable << " datagram " << i;
      EXPECT_NE(i == 0, got[i].bytes != payloads[i]) << i;  // only the first leaves as sealed
      EXPECT_EQ(got[i].meta.tos, 0x02) << i;
      EXPECT_EQ(got[i].meta.ip.sport, a.value()->port()) << i;
    }
    EXPECT_EQ(b.value()->counters().rx_packets, payloads.size());
  }
}

// A payload by reference (TxDatagram::payload: a registered buffer, nothing copied into the
// slot) leaves from where it lies, between the slot's headers and its pad and ICRC, whether
// the datagrams form a GSO message (the ICRC from the per-segment scratch word, or corrected
// in the slot) or not.
TEST(UdpGso, PayloadsByReferenceArriveAsIfTheyHadBeenInTheSlot) {
  for (const auto& [gso, writable] : {std::pair{true, false}, {true, true}, {false, false}}) {
    auto a = UdpPort::open(with_gso(gso));
    auto b = UdpPort::open(with_gso(false));
    ASSERT_TRUE(a.ok() && b.ok());
    const auto payloads = write_run();
    // The slots: the packets with their payload bytes overwritten; the "MR": the real ones.
    std::vector<std::vector<uint8_t>> slots = payloads;
    std::vector<std::vector<uint8_t>> sources;
    std::vector<TxDatagram> burst = to_all(*b.value(), payloads, 0x02);
    for (size_t i = 0; i < burst.size(); ++i) {
      const size_t at = 12;
      const size_t len = payloads[i].size() - at - wire::kIcrcLen - (i % 3);  // some pad
      sources.emplace_back(payloads[i].begin() + at, payloads[i].begin() + at + len);
      std::fill_n(slots[i].begin() + at, len, 0xA5);
      burst[i].data = slots[i];
      burst[i].payload = sources.back();
      burst[i].payload_at = at;
      burst[i].icrc_writable = writable;
    }
    const auto slots_before = slots;
    ASSERT_EQ(a.value()->send_burst(burst), payloads.size());
    EXPECT_EQ(slots, slots_before) << "writable " << writable;
    EXPECT_EQ(a.value()->counters().tx_gso_messages, gso ? 1u : 0u);
    auto got = receive(*b.value(), payloads.size(), 2s);
    ASSERT_EQ(got.size(), payloads.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].bytes, gso ? as_segment(payloads[i], static_cast<uint16_t>(i)) : payloads[i])
          << "gso " << gso << " writable " << writable << " datagram " << i;
    }
  }
}

// Destination, TOS and size changes cut the runs; a shorter datagram ends its run; more than
// 64 segments or 65507 bytes start a new message.
TEST(UdpGso, MixedBurstSplitsIntoRuns) {
  auto a = UdpPort::open(with_gso(true));
  auto b = UdpPort::open(with_gso(false));
  auto c = UdpPort::open(with_gso(false));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  std::vector<std::vector<uint8_t>> p;
  for (uint32_t i = 0; i < 14; ++i) p.push_back(bth_packet(0x20, 988, static_cast<uint8_t>(i)));
  p[7] = bth_packet(0x20, 500, 7);
  p[11] = bth_packet(0x20, 100, 11);
  p[12] = bth_packet(0x20, 988, 12);  // after a shorter one: a new run
  std::vector<TxDatagram> burst;
  const UdpPort* dst[14] = {b.value().get(), b.value().get(), b.value().get(), c.value().get(),
                            c.value().get(), b.value().get(), b.value().get(), b.value().get(),
                            b.value().get(), b.value().get(), b.value().get(), b.value().get(),
                            b.value().get(), b.value().get()};
  const uint8_t tos[14] = {0, 0, 0, 0, 0, 3, 3, 3, 0, 0, 0, 0, 0, 0};
  const uint16_t segment[14] = {0, 1, 2, 0, 1, 0, 1, 2, 0, 1, 2, 3, 0, 1};
  for (size_t i = 0; i < p.size(); ++i) burst.push_back(to(*dst[i], p[i], tos[i]));
  // Messages: {0,1,2} {3,4} {5,6,7: 7 shorter, same flow} {8,9,10,11: 11 shorter} {12,13}.
  ASSERT_EQ(a.value()->send_burst(burst), p.size());
  EXPECT_EQ(a.value()->counters().tx_gso_messages, 5u);
  auto got_b = receive(*b.value(), 12, 2s);
  auto got_c = receive(*c.value(), 2, 2s);
  ASSERT_EQ(got_b.size(), 12u);
  ASSERT_EQ(got_c.size(), 2u);
  size_t kb = 0, kc = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const testing::Got& g = dst[i] == c.value().get() ? got_c[kc++] : got_b[kb++];
    EXPECT_EQ(g.bytes, as_segment(p[i], segment[i])) << i;
    EXPECT_EQ(g.meta.tos, tos[i]) << i;
  }

  // 70 equal datagrams: 64 segments at most per message -> 2 messages; 17 of 4112 bytes
  // exceed 65507 bytes -> 15 + 2.
  std::vector<std::vector<uint8_t>> small(70, bth_packet(0x300, 100, 1));
  const std::vector<TxDatagram> many = to_all(*b.value(), small);
  ASSERT_EQ(a.value()->send_burst(many), 64u + 6u);
  EXPECT_EQ(a.value()->counters().tx_gso_messages, 5u + 2u);
  auto got_many = receive(*b.value(), 70, 2s);
  ASSERT_EQ(got_many.size(), 70u);
  for (size_t i = 0; i < got_many.size(); ++i) {
    EXPECT_EQ(got_many[i].bytes, as_segment(small[i], static_cast<uint16_t>(i < 64 ? i : i - 64)))
        << i;
  }
  std::vector<std::vector<uint8_t>> big(17, bth_packet(0x301, 4100, 2));
  const std::vector<TxDatagram> bigs = to_all(*b.value(), big);
  ASSERT_EQ(a.value()->send_burst(bigs), 17u);
  EXPECT_EQ(a.value()->counters().tx_gso_messages, 5u + 2u + 2u);
  auto got_big = receive(*b.value(), 17, 2s);
  ASSERT_EQ(got_big.size(), 17u);
  for (size_t i = 0; i < got_big.size(); ++i) {
    EXPECT_EQ(got_big[i].bytes, as_segment(big[i], static_cast<uint16_t>(i < 15 ? i : i - 15)))
        << i;
  }
}

// Another destination QP cuts the run: the receiver steers a message by its first datagram's
// QPN (processes sharing a port), so a message must not mix QPs.
TEST(UdpGso, ADestinationQpChangeCutsTheRun) {
  auto a = UdpPort::open(with_gso(true));
  auto b = UdpPort::open(with_gso(false));
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<std::vector<uint8_t>> p;
  for (uint32_t i = 0; i < 3; ++i) p.push_back(bth_packet(0x51, 1000, uint8_t(i)));
  for (uint32_t i = 0; i < 3; ++i) p.push_back(bth_packet(0x52, 1000, uint8_t(i)));
  const std::vector<TxDatagram> burst = to_all(*b.value(), p);
  ASSERT_EQ(a.value()->send_burst(burst), p.size());
  EXPECT_EQ(a.value()->counters().tx_gso_messages, 2u);
  auto got = receive(*b.value(), p.size(), 2s);
  ASSERT_EQ(got.size(), p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_EQ(got[i].bytes, as_segment(p[i], static_cast<uint16_t>(i % 3))) << i;
  }
}

// QP1 datagrams (CM MADs) of one size to one address never merge: a shared port steers each
// by its content (a REQ's Service ID, a reply's Comm ID), and the receiving kernel would steer
// a whole GSO message by its first MAD alone.
TEST(UdpGso, Qp1DatagramsAreNeverMerged) {
  auto a = UdpPort::open(with_gso(true));
  auto b = UdpPort::open(with_gso(false));
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<std::vector<uint8_t>> p;
  for (uint32_t i = 0; i < 4; ++i) p.push_back(bth_packet(kGsiQpn, 256, uint8_t(i)));
  const std::vector<TxDatagram> burst = to_all(*b.value(), p);
  ASSERT_EQ(a.value()->send_burst(burst), p.size());
  EXPECT_EQ(a.value()->counters().tx_gso_messages, 0u);
  EXPECT_EQ(a.value()->counters().tx_packets, p.size());
  auto got = receive(*b.value(), p.size(), 2s);
  ASSERT_EQ(got.size(), p.size());
  for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(got[i].bytes, p[i]) << i;  // each its own ID 0
}

// A WRITE's First packet (with a RETH) is 16 bytes longer than its Middles: it goes alone and
// the Middles form the run, rather than the First taking one Middle and closing the run.
TEST(UdpGso, LongerHeadGoesAloneAndTheRestIsOneRun) {
  auto a = UdpPort::open(with_gso(true));
  auto b = UdpPort::open(with_gso(false));
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<std::vector<uint8_t>> p;
  p.push_back(bth_packet(0x10, 4116, 0xF0));
  for (uint32_t i = 0; i < 10; ++i) p.push_back(bth_packet(0x10, 4100, static_cast<uint8_t>(i)));
  const std::vector<TxDatagram> burst = to_all(*b.value(), p);
  ASSERT_EQ(a.value()->send_burst(burst), p.size());
  EXPECT_EQ(a.value()->counters().tx_gso_messages, 1u);
  auto got = receive(*b.value(), p.size(), 2s);
  ASSERT_EQ(got.size(), p.size());
  EXPECT_EQ(got[0].bytes, p[0]);
  for (size_t i = 1; i < p.size(); ++i) {
    EXPECT_EQ(got[i].bytes, as_segment(p[i], static_cast<uint16_t>(i - 1))) << i;
  }
}

// GSO on and off deliver the same packets; off sends no GSO message, and on, each segment's
// ICRC is the one for the IPv4 ID the kernel gives it.
TEST(UdpGso, OffAndOnReceiveTheSameBytes) {
  const auto payloads = write_run();
  std::vector<std::vector<std::vector<uint8_t>>> seen;
  for (bool on : {false, true}) {
    auto a = UdpPort::open(with_gso(on));
    auto b = UdpPort::open(with_gso(false));
    ASSERT_TRUE(a.ok() && b.ok());
    const std::vector<TxDatagram> burst = to_all(*b.value(), payloads);
    ASSERT_EQ(a.value()->send_burst(burst), payloads.size());
    EXPECT_EQ(a.value()->counters().tx_gso_messages, on ? 1u : 0u);
    auto got = receive(*b.value(), payloads.size(), 2s);
    std::vector<std::vector<uint8_t>> bytes;
    for (auto& g : got) bytes.push_back(g.bytes);
    seen.push_back(bytes);
  }
  EXPECT_EQ(seen[0], payloads);
  ASSERT_EQ(seen[1].size(), payloads.size());
  for (size_t i = 0; i < payloads.size(); ++i) {
    EXPECT_EQ(seen[1][i], as_segment(payloads[i], static_cast<uint16_t>(i))) << i;
  }
}

UdpPortConfig receiving(bool gro) {
  UdpPortConfig c = unshared("127.0.0.1");
  c.gro = gro;
  return c;
}

// Receives with room for `room` datagrams per recv_burst until `count` arrived or 2 s passed.
std::vector<testing::Got> receive_in(UdpPort& port, size_t count, size_t room) {
  std::vector<testing::Got> out;
  std::vector<std::vector<uint8_t>> bufs(room, std::vector<uint8_t>(4096 + 64));
  std::vector<RxDatagram> rx(room);
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < room; ++i) rx[i].buf = bufs[i];
    const size_t n = port.recv_burst(rx);
    for (size_t i = 0; i < n; ++i) {
      // Where the datagram is: the caller's buffer, or (UDP GRO) the port's own memory.
      const std::span<const uint8_t> bytes = rx[i].buf.first(rx[i].len);
      EXPECT_EQ(rx[i].in_port, bytes.data() != bufs[i].data()) << i;
      out.push_back({std::vector<uint8_t>(bytes.begin(), bytes.end()), rx[i]});
    }
    if (n == 0) (void)port.wait(std::chrono::milliseconds(5));
  }
  return out;
}

// A GSO message reaches a GRO socket on loopback whole, as one received message, and is cut
// back into its datagrams, byte-exact and in order, into caller buffers of one datagram each.
TEST(UdpGro, AGsoMessageIsReceivedAsOneAndCutIntoItsDatagrams) {
  auto a = UdpPort::open(with_gso(true));
  auto b = UdpPort::open(receiving(true));
  ASSERT_TRUE(a.ok() && b.ok());
  const auto payloads = write_run();
  const std::vector<TxDatagram> burst = to_all(*b.value(), payloads, 0x02);
  ASSERT_EQ(a.value()->send_burst(burst), payloads.size());
  ASSERT_EQ(a.value()->counters().tx_gso_messages, 1u);
  const auto got = receive_in(*b.value(), payloads.size(), UdpPort::kMaxBurst);
  ASSERT_EQ(got.size(), payloads.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].bytes, as_segment(payloads[i], static_cast<uint16_t>(i))) << i;
    EXPECT_EQ(got[i].meta.tos, 0x02) << i;
    EXPECT_EQ(got[i].meta.ip.sport, a.value()->port()) << i;
    EXPECT_EQ(got[i].meta.ip.dst, b.value()->local().bytes) << i;
    EXPECT_TRUE(got[i].meta.in_port) << i;  // handed out where it was received, not copied
  }
  EXPECT_EQ(b.value()->counters().rx_gro_messages, 1u);
  EXPECT_EQ(b.value()->counters().rx_packets, payloads.size());
  EXPECT_EQ(b.value()->counters().rx_bytes, 15u * 4112 + 1000);
  EXPECT_FALSE(b.value()->has_pending());
}

// With room for 3 datagrams per call, the rest of a GRO message waits in the port (and wait()
// does not sleep on it) until later calls hand it out, in order, nothing lost.
TEST(UdpGro, WhatDoesNotFitWaitsForTheNextCall) {
  auto a = UdpPort::open(with_gso(true));
  auto b = UdpPort::open(receiving(true));
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<std::vector<uint8_t>> first, second;
  for (uint32_t i = 0; i < 10; ++i) first.push_back(bth_packet(0x40, 1000, uint8_t(i)));
  for (uint32_t i = 0; i < 4; ++i) second.push_back(bth_packet(0x80, 500, uint8_t(i)));
  for (const auto* run : {&first, &second}) {
    std::vector<TxDatagram> burst;
    for (const auto& p : *run) burst.push_back(to(*b.value(), p, run == &first ? 0 : 0x6A));
    ASSERT_EQ(a.value()->send_burst(burst), run->size());
  }
  ASSERT_EQ(a.value()->counters().tx_gso_messages, 2u);
  std::vector<std::vector<uint8_t>> bufs(3, std::vector<uint8_t>(4160));
  std::vector<RxDatagram> rx(3);
  for (size_t i = 0; i < 3; ++i) rx[i].buf = bufs[i];
  ASSERT_TRUE(b.value()->wait(std::chrono::seconds(2)).readable);
  ASSERT_EQ(b.value()->recv_burst(rx), 3u);
  EXPECT_TRUE(b.value()->has_pending());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(b.value()->wait(std::chrono::seconds(5)).readable);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s) << "slept on data it already had";
  auto rest = receive_in(*b.value(), 11, 3);
  ASSERT_EQ(rest.size(), 11u);
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(rest[i].bytes, as_segment(first[3 + i], uint16_t(3 + i))) << i;
    EXPECT_EQ(rest[i].meta.tos, 0) << i;
  }
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(rest[7 + i].bytes, as_segment(second[i], uint16_t(i))) << i;
    EXPECT_EQ(rest[7 + i].meta.tos, 0x6A) << i;
  }
  EXPECT_EQ(b.value()->counters().rx_gro_messages, 2u);
  EXPECT_EQ(b.value()->counters().rx_packets, 14u);
  EXPECT_FALSE(b.value()->has_pending());
}

// Plain datagrams (no GSO sender) reach a GRO socket one by one, as before.
TEST(UdpGro, PlainDatagramsArriveAsThemselves) {
  auto a = UdpPort::open(with_gso(false));
  auto b = UdpPort::open(receiving(true));
  ASSERT_TRUE(a.ok() && b.ok());
  const auto payloads = write_run();
  const std::vector<TxDatagram> burst = to_all(*b.value(), payloads);
  ASSERT_EQ(a.value()->send_burst(burst), payloads.size());
  const auto got = receive_in(*b.value(), payloads.size(), UdpPort::kMaxBurst);
  ASSERT_EQ(got.size(), payloads.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].bytes, payloads[i]) << i;
    EXPECT_TRUE(got[i].meta.in_port) << i;
  }
  EXPECT_EQ(b.value()->counters().rx_gro_messages, 0u);
}

}  // namespace
}  // namespace uroce::net
