// The rdma-core pingpong address message: exact bytes of what ibv_rc_pingpong writes, and
// the round trip through our parser.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "cli/pingpong_dest.hpp"

namespace uroce::cli {
namespace {

GidBytes loopback_v4_gid() {
  GidBytes g{};
  g[10] = 0xff;
  g[11] = 0xff;
  g[12] = 127;
  g[15] = 1;
  return g;
}

TEST(PingpongDest, FormatsLikeRdmaCoreSprintf) {
  const PingpongDest d{0, 0x11, 0xabcdef, loopback_v4_gid()};
  const PingpongMsg msg = format_pingpong_dest(d);
  // rdma-core: sprintf(msg, "%04x:%06x:%06x:%s", lid, qpn, psn, gid) into a 52-byte buffer.
  char expected[52] = {};
  std::snprintf(expected, sizeof expected, "%04x:%06x:%06x:%s", 0, 0x11, 0xabcdef,
                "00000000000000000000ffff7f000001");
  EXPECT_EQ(std::memcmp(msg.data(), expected, sizeof expected), 0);
  EXPECT_EQ(std::string(msg.data()), "0000:000011:abcdef:00000000000000000000ffff7f000001");
  EXPECT_EQ(msg[51], '\0');
  EXPECT_EQ(kPingpongMsgSize, sizeof "0000:000000:000000:00000000000000000000000000000000");
}

TEST(PingpongDest, RoundTrip) {
  GidBytes gid{};
  for (size_t i = 0; i < gid.size(); ++i) gid[i] = static_cast<uint8_t>(0xf0 + i);
  const PingpongDest d{0x1234, 0xffffff, 0x000001, gid};
  const auto parsed = parse_pingpong_dest(format_pingpong_dest(d));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, d);
}

TEST(PingpongDest, ParsesUppercaseAndRejectsGarbage) {
  const std::string upper = "0000:0000AB:00000C:FE800000000000000000000000000001";
  const auto p = parse_pingpong_dest(std::span<const char>(upper.data(), upper.size()));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->qpn, 0xabu);
  EXPECT_EQ(p->psn, 0xcu);
  EXPECT_EQ(p->gid[0], 0xfe);
  EXPECT_EQ(p->gid[15], 0x01);
  for (const std::string bad : {"", "done", "0000:000011:abcdef", "0000:000011:abcdef:0000",
                                "0000:1000000:000001:00000000000000000000ffff7f000001",
                                "0000:000011:abcdef:00000000000000000000ffff7f00000g",
                                "zz00:000011:abcdef:00000000000000000000ffff7f000001"}) {
    EXPECT_FALSE(parse_pingpong_dest(std::span<const char>(bad.data(), bad.size())).has_value())
        << bad;
  }
}

TEST(PingpongDest, WireGidIsBytesInOrder) {
  GidBytes g{};
  g[0] = 0xfe;
  g[1] = 0x80;
  g[15] = 0x42;
  EXPECT_EQ(gid_to_wire(g), "fe800000000000000000000000000042");
  EXPECT_EQ(wire_to_gid("fe800000000000000000000000000042"), g);
  EXPECT_FALSE(wire_to_gid("fe80").has_value());
}

TEST(PingpongDest, AddressLinesMatchRdmaCore) {
  const PingpongDest d{0, 0x11, 0x5c1a2b, loopback_v4_gid()};
  EXPECT_EQ(format_address_line("local", d),
            "  local address:  LID 0x0000, QPN 0x000011, PSN 0x5c1a2b, GID ::ffff:127.0.0.1");
  EXPECT_EQ(format_address_line("remote", d),
            "  remote address: LID 0x0000, QPN 0x000011, PSN 0x5c1a2b, GID ::ffff:127.0.0.1");
  EXPECT_EQ(gid_to_text(GidBytes{}), "::");
}

}  // namespace
}  // namespace uroce::cli
