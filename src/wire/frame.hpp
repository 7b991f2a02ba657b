// Link-layer framing around RoCE v2 packets: find the IP datagram and the RoCE payload in a
// captured frame (Ethernet with or without 802.1Q/802.1ad tags, Linux cooked capture v1/v2,
// raw IP), and wrap a RoCE payload into an Ethernet/IP/UDP frame for pcap output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "wire/icrc.hpp"
#include "wire/packet.hpp"

namespace uroce::wire {

// pcap LINKTYPE_* values uroce understands.
enum class LinkType : uint32_t {
  kEthernet = 1,
  kRawIp = 101,
  kLinuxSll = 113,
  kLinuxSll2 = 276,
  kIpv4 = 228,
  kIpv6 = 229
};

struct RoceFrame {
  // In: the UDP destination port that carries RoCE (4791; another one for a capture of uroce
  // devices run with UROCE_UDP_PORT, `uroce dump --port`). Kept across decap_frame calls.
  uint16_t roce_port = kRoceV2Port;
  IpContext ip;                          // addresses, ports, IPv4 ID and DF as carried
  uint8_t tos = 0;                       // IPv4 TOS / IPv6 traffic class (DSCP << 2 | ECN)
  uint8_t ttl = 0;                       // TTL / hop limit
  std::span<const uint8_t> ip_datagram;  // IP header .. end of ICRC (trailers cut off)
  std::span<const uint8_t> roce;         // UDP payload: BTH .. ICRC
};

enum class FrameError : uint8_t {
  kOk = 0,
  kTruncated,  // a header is cut short
  kNotIp,      // not IPv4/IPv6 (ARP, LLDP, …)
  kNotUdp,     // IP but not UDP, or a fragment
  kNotRoce,    // UDP but destination port is not roce_port (4791)
  kUnsupportedLink,
  kMalformed,  // an IP/UDP length field contradicts itself (IHL < 5, UDP length < 8, …)
  kRoceCut,    // UDP port 4791, but the capture's snap length cut the datagram: `ip`, `tos`,
               // `ttl` are filled, `ip_datagram` and `roce` hold the captured part only
};

[[nodiscard]] std::string_view frame_error_name(FrameError e);

// Finds the RoCE v2 packet in one captured frame. Never reads outside `frame`.
[[nodiscard]] FrameError decap_frame(LinkType link, std::span<const uint8_t> frame, RoceFrame& out);

// Bytes encap_frame() writes: Ethernet(14) + IPv4(20)/IPv6(40) + UDP(8) + roce.size().
[[nodiscard]] size_t frame_size(const IpContext& ip, size_t roce_len);

// Writes an Ethernet II frame (zero-based locally administered MACs derived from the IPs),
// an IPv4 header (DF, ID and TOS/TTL as given, correct header checksum) or IPv6 header, a
// UDP header (checksum 0) and `roce` into `out`. Returns bytes written, 0 if `out` is too
// small. The ICRC inside `roce` must already match `ip` (icrc.hpp).
[[nodiscard]] size_t encap_frame(const IpContext& ip, uint8_t tos, uint8_t ttl,
                                 std::span<const uint8_t> roce, std::span<uint8_t> out);

}  // namespace uroce::wire
