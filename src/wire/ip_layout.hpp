// Sizes and fields of the IP and UDP headers a RoCE v2 packet travels in (RFC 791, RFC 8200,
// RFC 768; IP protocol 17 is UDP). The frame codec, the ICRC's pseudo header and the UD
// receive path's GRH all need them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uroce::wire {

inline constexpr size_t kIpv4MinHeaderLen = 20;  // without options
inline constexpr size_t kIpv6HeaderLen = 40;
inline constexpr size_t kUdpHeaderLen = 8;
inline constexpr uint8_t kIpProtoUdp = 17;

}  // namespace uroce::wire
