// perftest's out-of-band messages: the exact bytes perftest 4.5 writes (its sprintf formats,
// copied here as the reference), the round trip through our parsers, and what they reject.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "cli/perftest_wire.hpp"

namespace uroce::cli::perftest {
namespace {

// perftest_communication.h KEY_PRINT_FMT_GID.
constexpr const char* kPerftestKeyFormat =
    "%04x:%04x:%06x:%06x:%08x:%016llx:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:"
    "%02x:%02x:%02x:%02x:%02x:%08x:";

Keys example() {
  Keys k;
  k.out_reads = 1;
  k.qpn = 0x11;
  k.psn = 0xabcdef;
  k.rkey = 0x1234;
  k.vaddr = 0x7f0000001000;
  k.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 1, 2};
  return k;
}

TEST(PerftestWire, KeysAreWhatPerftestSprintfs) {
  const Keys k = example();
  char expected[kKeySize] = {};
  const auto& g = k.gid;
  std::snprintf(expected, sizeof expected, kPerftestKeyFormat, k.lid, k.out_reads, k.qpn, k.psn,
                k.rkey, static_cast<unsigned long long>(k.vaddr), g[0], g[1], g[2], g[3], g[4],
                g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15], k.srqn);
  const KeyMsg msg = encode_keys(k);
  EXPECT_EQ(std::memcmp(msg.data(), expected, kKeySize), 0);
  EXPECT_EQ(std::string(msg.data()),
            "0000:0001:000011:abcdef:00001234:00007f0000001000:00:00:00:00:00:00:00:00:00:00:ff:"
            "ff:c0:a8:01:02:00000000:");
  EXPECT_EQ(std::strlen(msg.data()), kKeySize - 1);
}

TEST(PerftestWire, KeysRoundTripAndParseWhatPerftestSends) {
  Keys k = example();
  k.out_reads = 128;
  k.qpn = 0xffffff;
  k.rkey = 0xdeadbeef;
  k.vaddr = 0xffffffffffffffff;
  k.srqn = 7;
  EXPECT_EQ(decode_keys(encode_keys(k)), k);
  KeyMsg raw{};
  std::snprintf(raw.data(), raw.size(), kPerftestKeyFormat, 0, 16, 0x40000, 0x10b469, 0x655a2000u,
                0x7fccc72ea000ull, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 127, 0, 0, 1, 0);
  const auto parsed = decode_keys(raw);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->out_reads, 16u);
  EXPECT_EQ(parsed->qpn, 0x40000u);
  EXPECT_EQ(parsed->psn, 0x10b469u);
  EXPECT_EQ(parsed->rkey, 0x655a2000u);
  EXPECT_EQ(parsed->vaddr, 0x7fccc72ea000u);
  EXPECT_EQ(parsed->gid[10], 0xff);
  EXPECT_EQ(parsed->gid[12], 127);
  EXPECT_EQ(parsed->gid[15], 1);
}

TEST(PerftestWire, KeysRejectAnythingElse) {
  const KeyMsg good = encode_keys(example());
  auto with = [&](size_t at, char c) {
    KeyMsg m = good;
    m[at] = c;
    return decode_keys(m);
  };
  EXPECT_FALSE(with(0, 'g').has_value());             // not hex
  EXPECT_FALSE(with(4, '0').has_value());             // field separator missing
  EXPECT_FALSE(with(kKeySize - 2, '0').has_value());  // trailing ':' after srqn missing
  EXPECT_FALSE(with(kKeySize - 1, 'x').has_value());  // no NUL
  EXPECT_FALSE(with(50, '-').has_value());            // GID byte not hex
  KeyMsg json{};
  std::memcpy(json.data(), "{\"test\":\"write_bw\"}", 19);
  EXPECT_FALSE(decode_keys(json).has_value());
}

TEST(PerftestWire, VersionIsPerftestsWithOurMarkerAfterTheNul) {
  const VersionMsg plain = encode_version(false);
  const VersionMsg marked = encode_version(true);
  EXPECT_EQ(std::string(plain.data(), plain.size()),
            std::string("6.06", 4) + std::string(12, '\0'));
  EXPECT_EQ(std::string(marked.data(), marked.size()), std::string("6.06\0uroce-perf\0", 16));
  // What perftest sees: a C string "6.06" either way.
  EXPECT_STREQ(marked.data(), "6.06");

  const auto a = decode_version(plain);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->text, "6.06");
  EXPECT_DOUBLE_EQ(a->number, 6.06);
  EXPECT_FALSE(a->uroce);
  const auto b = decode_version(marked);
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->uroce);

  VersionMsg old{};
  std::memcpy(old.data(), "5.5", 3);
  EXPECT_DOUBLE_EQ(decode_version(old)->number, 5.5);
  VersionMsg json{};
  std::memcpy(json.data(), "{\"test\":\"write_", 15);
  EXPECT_FALSE(decode_version(json).has_value());
  VersionMsg unterminated;
  unterminated.fill('6');
  EXPECT_FALSE(decode_version(unterminated).has_value());
  EXPECT_FALSE(decode_version(VersionMsg{}).has_value());
}

TEST(PerftestWire, IntegersMtuAndReportsAreBigEndian) {
  const IntMsg page = encode_int(4096);
  EXPECT_EQ(std::string(page.data(), 4), std::string("\x00\x00\x10\x00", 4));
  EXPECT_EQ(decode_int(page), 4096);
  EXPECT_EQ(decode_int(encode_int(-2)), -2);

  EXPECT_EQ(std::string(encode_mtu(3).data(), 2), std::string("3\0", 2));
  EXPECT_EQ(decode_mtu(encode_mtu(5)), 5);
  EXPECT_FALSE(decode_mtu(MtuMsg{'0', '\0'}).has_value());
  EXPECT_FALSE(decode_mtu(MtuMsg{'6', '\0'}).has_value());
  EXPECT_FALSE(decode_mtu(MtuMsg{'3', '4'}).has_value());

  EXPECT_EQ(std::string(encode_u64(65536).data(), 8), std::string("\0\0\0\0\0\x01\0\0", 8));
  EXPECT_EQ(decode_u64(encode_u64(0x0102030405060708)), 0x0102030405060708u);
  // 1.5 = 0x3ff8000000000000, sent most significant byte first (perftest's hton_double).
  EXPECT_EQ(std::string(encode_double(1.5).data(), 8), std::string("\x3f\xf8\0\0\0\0\0\0", 8));
  EXPECT_DOUBLE_EQ(decode_double(encode_double(653.10)), 653.10);
}

}  // namespace
}  // namespace uroce::cli::perftest
