// wire::is_ipv4_mapped, the one test of "is this 16-byte address an IPv4 address" that the
// packet path, the CLI, telemetry and the rdma_cm drop-in share.
#include "wire/ip_layout.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>

namespace uroce::wire {
namespace {

std::array<uint8_t, 16> v6(const char* text) {
  std::array<uint8_t, 16> a{};
  in6_addr parsed{};
  EXPECT_EQ(inet_pton(AF_INET6, text, &parsed), 1) << text;
  std::memcpy(a.data(), &parsed, a.size());
  return a;
}

TEST(IpLayout, Ipv4MappedIsExactlyTheFfffPrefix) {
  EXPECT_TRUE(is_ipv4_mapped(v6("::ffff:10.77.0.1")));
  EXPECT_TRUE(is_ipv4_mapped(v6("::ffff:0.0.0.0")));
  EXPECT_TRUE(is_ipv4_mapped(v6("::ffff:255.255.255.255")));
  // The deprecated IPv4-compatible form, a link-local and a ULA address, an IPv4-translated
  // (::ffff:0:a.b.c.d) one: all IPv6 to the wire.
  EXPECT_FALSE(is_ipv4_mapped(v6("::10.77.0.1")));
  EXPECT_FALSE(is_ipv4_mapped(v6("fe80::ffff:a4d:1")));
  EXPECT_FALSE(is_ipv4_mapped(v6("fd00::ffff:a4d:1")));
  EXPECT_FALSE(is_ipv4_mapped(v6("::ffff:0:10.77.0.1")));
  EXPECT_FALSE(is_ipv4_mapped(v6("::")));
  // Any one bit set in the ten leading zero bytes, or cleared in the two 0xFF bytes, makes it
  // IPv6.
  const std::array<uint8_t, 16> mapped = v6("::ffff:192.0.2.7");
  for (size_t byte = 0; byte < 12; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::array<uint8_t, 16> a = mapped;
      a[byte] ^= static_cast<uint8_t>(1u << bit);
      EXPECT_FALSE(is_ipv4_mapped(a)) << "byte " << byte << " bit " << bit;
    }
  }
}

}  // namespace
}  // namespace uroce::wire
