// Cutting a UDP GSO super-frame (a virtio_net_hdr with gso_type UDP_L4, as a packet socket
// with PACKET_VNET_HDR reads it from a veth whose sender used UDP_SEGMENT) into the datagrams
// the kernel would have sent, so `uroce switch` can queue, mark, drop or pause each one.
// Pure byte manipulation, no I/O.
//
// Each segment: the super-frame's Ethernet (+ one 802.1Q tag), IP and UDP headers, then
// gso_size bytes of payload (the last: the rest). As the kernel's inet_gso_segment does for
// UDP_L4 (net/ipv4/af_inet.c: no fixed ID, which only TCP_FIXEDID asks for), the IPv4 ID is
// the super-frame's plus the segment's index, the total length and header checksum are
// recomputed; IPv6's payload length is rewritten. The UDP length is the segment's and its
// checksum is computed in full in software (vnet header: no NEEDS_CSUM), so the segment is
// valid as it leaves, whatever the egress offloads do.
#pragma once

#include <cstdint>
#include <span>

namespace uroce::fabric {

inline constexpr uint32_t kVnetHdrBytes = 10;  // sizeof(struct virtio_net_hdr)

struct UdpGso {
  bool ok = false;  // a UDP_L4 super-frame over IPv4 or IPv6 (next header UDP)
  bool v4 = false;
  uint32_t l3 = 0;        // IP header offset in the frame (after the vnet header)
  uint32_t l4 = 0;        // UDP header offset in the frame
  uint32_t payload = 0;   // UDP payload bytes of the super-frame
  uint32_t gso_size = 0;  // payload bytes per segment
  uint32_t segments = 0;
  // Bytes of segment `k` (vnet header included).
  [[nodiscard]] uint32_t segment_bytes(uint32_t k) const;
};

// `buf`: vnet header + frame, as read.
[[nodiscard]] UdpGso udp_gso_parse(std::span<const uint8_t> buf);

// Writes segment k < g.segments (vnet header + frame) into `out`; returns its length, or 0 when
// `out` is too small.
uint32_t udp_gso_segment(const UdpGso& g, std::span<const uint8_t> buf, uint32_t k,
                         std::span<uint8_t> out);

}  // namespace uroce::fabric
