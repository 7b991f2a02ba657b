// UDP GSO super-frames cut into datagrams (fabric/udp_gso.hpp): segment count and lengths,
// payload bytes in order, IPv4 ID/total length/header checksum, IPv6 payload length, UDP
// length and a UDP checksum that verifies (the receiver's check: the one's-complement sum over
// pseudo-header and datagram is 0xFFFF); a VLAN tag kept; TCP GSO and plain frames refused.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "fabric/udp_gso.hpp"

namespace uroce::fabric {
namespace {

uint32_t be16(const uint8_t* p) {
  return uint32_t{p[0]} << 8 | p[1];
}
uint16_t fold(uint64_t s) {
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<uint16_t>(s);
}
uint64_t sum(const uint8_t* p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i + 1 < n; i += 2) s += be16(p + i);
  if (n % 2 != 0) s += uint32_t{p[n - 1]} << 8;
  return s;
}

// vnet header (gso_type, gso_size), Ethernet (optional VLAN), IPv4 (ID 0x1234, DF) or IPv6,
// UDP with a bogus checksum (a partial sum, as the sender's kernel leaves it), payload i & 0xFF.
std::vector<uint8_t> super_frame(bool v6, bool vlan, uint8_t gso_type, uint16_t gso_size,
                                 uint32_t payload) {
  std::vector<uint8_t> b(kVnetHdrBytes, 0);
  b[0] = 1;  // NEEDS_CSUM
  b[1] = gso_type;
  std::memcpy(&b[4], &gso_size, 2);
  const std::vector<uint8_t> eth = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1};
  b.insert(b.end(), eth.begin(), eth.end());
  if (vlan) b.insert(b.end(), {0x81, 0x00, 0x00, 0x05});
  if (v6) {
    b.insert(b.end(), {0x86, 0xDD, 0x60, 0, 0, 0, 0xFF, 0xFF, 17, 64});
    for (int i = 0; i < 32; ++i) b.push_back(static_cast<uint8_t>(0xFD + i));
  } else {
    b.insert(b.end(), {0x08, 0x00, 0x45, 0x02, 0xFF, 0xFF, 0x12, 0x34, 0x40, 0, 64,
                       17,   0xAA, 0xAA, 10,   0,    0,    1,    10,   0,    0, 2});
  }
  b.insert(b.end(), {0x30, 0x39, 0x12, 0xB7, 0xFF, 0xFF, 0x55, 0x55});
  for (uint32_t i = 0; i < payload; ++i) b.push_back(static_cast<uint8_t>(i * 7));
  return b;
}

void check(bool v6, bool vlan) {
  constexpr uint16_t kGso = 1000;
  constexpr uint32_t kPayload = 4500;  // 4 full segments and one of 500
  const std::vector<uint8_t> b = super_frame(v6, vlan, 5, kGso, kPayload);
  const UdpGso g = udp_gso_parse(b);
  ASSERT_TRUE(g.ok);
  EXPECT_EQ(g.segments, 5u);
  const uint32_t l3 = 14 + (vlan ? 4 : 0);
  EXPECT_EQ(g.l3, l3);
  EXPECT_EQ(g.l4, l3 + (v6 ? 40 : 20));
  uint32_t offset = 0;
  for (uint32_t k = 0; k < g.segments; ++k) {
    std::vector<uint8_t> out(2048, 0xEE);
    const uint32_t n = udp_gso_segment(g, b, k, out);
    const uint32_t chunk = k < 4 ? kGso : 500;
    ASSERT_EQ(n, kVnetHdrBytes + g.l4 + 8 + chunk) << k;
    EXPECT_EQ(n, g.segment_bytes(k));
    for (uint32_t i = 0; i < kVnetHdrBytes; ++i) EXPECT_EQ(out[i], 0) << i;
    const uint8_t* f = out.data() + kVnetHdrBytes;
    EXPECT_EQ(std::memcmp(f, b.data() + kVnetHdrBytes, g.l3), 0);  // Ethernet (+ VLAN) kept
    const uint8_t* ip = f + g.l3;
    const uint8_t* udp = f + g.l4;
    uint64_t pseudo = 17 + 8 + chunk;
    if (v6) {
      EXPECT_EQ(be16(ip + 4), 8 + chunk);
      pseudo += sum(ip + 8, 32);
    } else {
      EXPECT_EQ(be16(ip + 2), 20 + 8 + chunk);
      EXPECT_EQ(be16(ip + 4), 0x1234 + k);
      EXPECT_EQ(ip[1], 0x02);
      EXPECT_EQ(fold(sum(ip, 20)), 0xFFFF) << "IPv4 header checksum, segment " << k;
      pseudo += sum(ip + 12, 8);
    }
    EXPECT_EQ(be16(udp), 0x3039u);
    EXPECT_EQ(be16(udp + 2), 0x12B7u);
    EXPECT_EQ(be16(udp + 4), 8 + chunk);
    EXPECT_EQ(fold(pseudo + sum(udp, 8 + chunk)), 0xFFFF) << "UDP checksum, segment " << k;
    for (uint32_t i = 0; i < chunk; ++i)
      ASSERT_EQ(udp[8 + i], static_cast<uint8_t>((offset + i) * 7)) << k << " " << i;
    offset += chunk;
  }
  std::vector<uint8_t> small(100);
  EXPECT_EQ(udp_gso_segment(g, b, 0, small), 0u);
}

TEST(UdpGso, Ipv4SegmentsAreCompleteDatagrams) {
  check(false, false);
}
TEST(UdpGso, Ipv4BehindAVlanTag) {
  check(false, true);
}
TEST(UdpGso, Ipv6SegmentsAreCompleteDatagrams) {
  check(true, false);
}

TEST(UdpGso, OnlyUdpL4SuperFramesAreCut) {
  EXPECT_FALSE(udp_gso_parse(super_frame(false, false, 1, 1000, 4500)).ok);        // TCPV4
  EXPECT_FALSE(udp_gso_parse(super_frame(true, false, 4, 1000, 4500)).ok);         // TCPV6
  EXPECT_FALSE(udp_gso_parse(super_frame(false, false, 0, 1000, 4500)).ok);        // no GSO
  EXPECT_FALSE(udp_gso_parse(super_frame(false, false, 5, 0, 4500)).ok);           // gso_size 0
  EXPECT_TRUE(udp_gso_parse(super_frame(false, false, 5 | 0x80, 1000, 4500)).ok);  // ECN bit
}

}  // namespace
}  // namespace uroce::fabric
