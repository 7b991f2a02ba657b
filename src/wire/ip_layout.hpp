// Sizes and fields of the IP and UDP headers a RoCE v2 packet travels in (RFC 791, RFC 8200,
// RFC 768; IP protocol 17 is UDP). The frame codec, the ICRC's pseudo header and the UD
// receive path's GRH all need them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace uroce::wire {

inline constexpr size_t kIpv4MinHeaderLen = 20;  // without options
inline constexpr size_t kIpv6HeaderLen = 40;
inline constexpr size_t kUdpHeaderLen = 8;
inline constexpr uint8_t kIpProtoUdp = 17;

// A RoCE v2 GID, and every address uroce keeps, is 16 bytes: an IPv4 address is stored
// IPv4-mapped, ::ffff:a.b.c.d (RFC 4291 2.5.5.2). True when `addr` is one of those.
[[nodiscard]] inline bool is_ipv4_mapped(const std::array<uint8_t, 16>& addr) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  return std::memcmp(addr.data(), kPrefix, sizeof(kPrefix)) == 0;
}

}  // namespace uroce::wire
