// ECN bits (and DSCP) of an Ethernet frame carrying IPv4 or IPv6 (optionally behind one 802.1Q
// tag): read them, and mark a packet Congestion Experienced the way a switch does. Pure byte
// manipulation, no I/O. Marking rewrites only the ECN field (and, for IPv4, the header
// checksum); the UDP checksum covers neither (its pseudo-header has no TOS/traffic class)
// and RoCE v2's ICRC masks the whole TOS/traffic class byte, so a marked RoCE packet stays
// valid end to end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace uroce::fabric {

enum class Ecn : uint8_t { kNotEct = 0, kEct1 = 1, kEct0 = 2, kCe = 3 };

struct FrameEcn {
  bool ip = false;  // IPv4 or IPv6 header found (and long enough)
  Ecn ecn = Ecn::kNotEct;
  uint8_t dscp = 0;  // the upper 6 bits of the IPv4 TOS / IPv6 traffic class
  [[nodiscard]] bool ect() const { return ip && ecn != Ecn::kNotEct; }
};

// Where a frame's IP header starts (after Ethernet and at most one 802.1Q tag), for the
// frame readers of this directory (ECN marks, UDP GSO segmentation).
struct IpHeaderAt {
  size_t offset = 0;  // into the frame
  bool v4 = false;
  bool found = false;  // IPv4 (whole header present) or IPv6 (fixed header present)
};
[[nodiscard]] IpHeaderAt ip_header_at(std::span<const uint8_t> frame);

// Writes the header checksum of the IPv4 header at `ip` (its length from IHL).
void set_ipv4_header_checksum(uint8_t* ip);

[[nodiscard]] FrameEcn frame_ecn(std::span<const uint8_t> frame);

// Sets ECN to CE (11) in an IP frame; false when `frame` is not IP. IPv4's header checksum is
// recomputed.
bool mark_ce(std::span<uint8_t> frame);

}  // namespace uroce::fabric
