// CE marking of Ethernet frames: IPv4 (checksum recomputed to the value a fresh header would
// have), IPv6, behind an 802.1Q tag, and frames that are not IP left alone. And the MAC
// table's learning, lookup and ageing.
#include <gtest/gtest.h>

#include <vector>

#include "fabric/ecn_frame.hpp"
#include "fabric/mac_table.hpp"

namespace uroce::fabric {
namespace {

using namespace std::chrono_literals;

uint16_t ipv4_checksum(const uint8_t* ip) {
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) {
    if (i == 10) continue;
    sum += static_cast<uint32_t>(ip[i] << 8 | ip[i + 1]);
  }
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// dst, src, type 0x0800, then a 20-byte IPv4 header (TOS 0x02 = ECT(0), UDP, 10.0.0.1 ->
// 10.0.0.2) with its correct checksum.
std::vector<uint8_t> ipv4_frame(uint8_t tos) {
  std::vector<uint8_t> f = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00};
  const std::vector<uint8_t> ip = {0x45, tos, 0,  48, 0x12, 0x34, 0x40, 0, 64, 17,
                                   0,    0,   10, 0,  0,    1,    10,   0, 0,  2};
  f.insert(f.end(), ip.begin(), ip.end());
  const uint16_t c = ipv4_checksum(&f[14]);
  f[24] = static_cast<uint8_t>(c >> 8);
  f[25] = static_cast<uint8_t>(c);
  f.resize(f.size() + 28, 0xAB);  // UDP header and payload, untouched
  return f;
}

TEST(EcnFrame, Ipv4EctBecomesCeWithAValidChecksum) {
  std::vector<uint8_t> f = ipv4_frame(0x02 | (26 << 2));  // DSCP 26, ECT(0)
  EXPECT_TRUE(frame_ecn(f).ect());
  EXPECT_EQ(frame_ecn(f).ecn, Ecn::kEct0);
  EXPECT_EQ(frame_ecn(f).dscp, 26);
  const std::vector<uint8_t> before = f;
  ASSERT_TRUE(mark_ce(f));
  EXPECT_EQ(frame_ecn(f).ecn, Ecn::kCe);
  EXPECT_EQ(f[15], (26 << 2) | 3);  // DSCP kept
  EXPECT_EQ(f[24] << 8 | f[25], ipv4_checksum(&f[14]));
  // Only the TOS and checksum bytes changed.
  for (size_t i = 0; i < f.size(); ++i) {
    if (i != 15 && i != 24 && i != 25) {
      EXPECT_EQ(f[i], before[i]) << i;
    }
  }
  // The same header built with TOS already CE has the same checksum.
  EXPECT_EQ(f, ipv4_frame((26 << 2) | 3));
}

TEST(EcnFrame, Ipv4NotEctIsReadAsSuch) {
  const std::vector<uint8_t> f = ipv4_frame(0);
  EXPECT_TRUE(frame_ecn(f).ip);
  EXPECT_FALSE(frame_ecn(f).ect());
}

TEST(EcnFrame, Ipv6TrafficClassEcnBits) {
  std::vector<uint8_t> f = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xDD};
  // version 6, traffic class 0xB6 (DSCP 45, ECN 10), flow label 0x12345.
  std::vector<uint8_t> ip(40, 0);
  ip[0] = 0x6B;
  ip[1] = 0x61;
  ip[2] = 0x23;
  ip[3] = 0x45;
  f.insert(f.end(), ip.begin(), ip.end());
  EXPECT_EQ(frame_ecn(f).ecn, Ecn::kEct0);
  EXPECT_EQ(frame_ecn(f).dscp, 45);
  ASSERT_TRUE(mark_ce(f));
  EXPECT_EQ(frame_ecn(f).ecn, Ecn::kCe);
  EXPECT_EQ(f[14], 0x6B);  // version and DSCP's high bits kept
  EXPECT_EQ(f[15], 0x71);  // traffic class 0xB7, flow label nibble 1 kept
  EXPECT_EQ(f[16], 0x23);
}

TEST(EcnFrame, VlanTaggedIpv4) {
  std::vector<uint8_t> plain = ipv4_frame(0x01);  // ECT(1)
  std::vector<uint8_t> f(plain.begin(), plain.begin() + 12);
  f.insert(f.end(), {0x81, 0x00, 0x00, 0x64});
  f.insert(f.end(), plain.begin() + 12, plain.end());
  EXPECT_EQ(frame_ecn(f).ecn, Ecn::kEct1);
  EXPECT_EQ(frame_ecn(f).dscp, 0);
  ASSERT_TRUE(mark_ce(f));
  EXPECT_EQ(f[19], 0x03);
  EXPECT_EQ(f[28] << 8 | f[29], ipv4_checksum(&f[18]));
}

TEST(EcnFrame, NonIpAndShortFramesAreLeftAlone) {
  std::vector<uint8_t> arp = {255, 255, 255, 255, 255, 255, 2, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1};
  arp.resize(60, 0);
  const std::vector<uint8_t> before = arp;
  EXPECT_FALSE(frame_ecn(arp).ip);
  EXPECT_FALSE(mark_ce(arp));
  EXPECT_EQ(arp, before);
  std::vector<uint8_t> truncated = ipv4_frame(2);
  truncated.resize(14 + 19);
  EXPECT_FALSE(frame_ecn(truncated).ip);
  EXPECT_FALSE(mark_ce(truncated));
}

TEST(MacTable, LearnsLooksUpAndAges) {
  MacTable t(2, 10s);
  const Mac a{2, 0, 0, 0, 0, 1}, b{2, 0, 0, 0, 0, 2}, c{2, 0, 0, 0, 0, 3};
  const Mac broadcast{255, 255, 255, 255, 255, 255};
  EXPECT_FALSE(t.lookup(a, 0s));
  t.learn(a, 1, 0s);
  t.learn(b, 2, 0s);
  t.learn(broadcast, 3, 0s);  // never learnt
  EXPECT_EQ(t.lookup(a, 1s), 1u);
  EXPECT_EQ(t.lookup(b, 1s), 2u);
  EXPECT_FALSE(t.lookup(broadcast, 1s));
  t.learn(c, 3, 1s);  // full, nothing aged: not learnt (flooded)
  EXPECT_FALSE(t.lookup(c, 1s));
  t.learn(a, 4, 5s);  // moved
  EXPECT_EQ(t.lookup(a, 5s), 4u);
  EXPECT_FALSE(t.lookup(b, 11s));  // aged out
  t.learn(c, 3, 11s);              // takes b's entry
  EXPECT_EQ(t.lookup(c, 11s), 3u);
  EXPECT_EQ(t.size(), 2u);
}

}  // namespace
}  // namespace uroce::fabric
