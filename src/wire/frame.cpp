// Link-layer (de)capsulation of RoCE v2 packets. Every read is bounds-checked against the
// captured bytes first: captures are untrusted input (a damaged file, a snap length cut, a
// fuzzer), and a RoCE decoder that reads past a frame is a security bug in a capture tool.
#include "wire/frame.hpp"

#include <algorithm>

#include "wire/ip_layout.hpp"
#include "wire/packet.hpp"

namespace uroce::wire {
namespace {

constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
constexpr uint16_t kEtherTypeVlan = 0x8100;     // IEEE 802.1Q customer tag
constexpr uint16_t kEtherTypeQinQ = 0x88A8;     // IEEE 802.1ad service tag
constexpr uint16_t kEtherTypeQinQOld = 0x9100;  // pre-802.1ad service tag, still in use

constexpr size_t kMacLen = 6;
constexpr size_t kEthernetHeaderLen = 14;
constexpr size_t kEtherTypeOffset = 12;
constexpr size_t kVlanTagLen = 4;     // TCI (2) + inner EtherType (2)
constexpr size_t kSllHeaderLen = 16;  // LINKTYPE_LINUX_SLL
constexpr size_t kSllProtocolOffset = 14;
constexpr size_t kSll2HeaderLen = 20;  // LINKTYPE_LINUX_SLL2; protocol at offset 0
constexpr uint16_t kIpv4FlagDf = 0x4000;
constexpr uint16_t kIpv4FlagMf = 0x2000;
constexpr uint16_t kIpv4FragOffsetMask = 0x1FFF;

uint16_t load_be16_at(std::span<const uint8_t> b, size_t off) {
  return static_cast<uint16_t>(b[off] << 8 | b[off + 1]);
}

void store_be16_at(std::span<uint8_t> b, size_t off, uint16_t v) {
  b[off] = static_cast<uint8_t>(v >> 8);
  b[off + 1] = static_cast<uint8_t>(v);
}

bool is_vlan_tag(uint16_t ether_type) {
  return ether_type == kEtherTypeVlan || ether_type == kEtherTypeQinQ ||
         ether_type == kEtherTypeQinQOld;
}

// The UDP part, common to IPv4 and IPv6. `l3` is everything captured from the IP header
// on; `datagram_len` is the IP datagram's length as its header states it.
FrameError decap_udp(std::span<const uint8_t> l3, size_t ip_header_len, size_t datagram_len,
                     RoceFrame& out) {
  if (datagram_len < ip_header_len + kUdpHeaderLen) return FrameError::kMalformed;
  if (l3.size() < ip_header_len + kUdpHeaderLen) return FrameError::kTruncated;
  const auto udp = l3.subspan(ip_header_len);
  out.ip.sport = load_be16_at(udp, 0);
  out.ip.dport = load_be16_at(udp, 2);
  if (out.ip.dport != out.roce_port) return FrameError::kNotRoce;
  if (l3.size() < datagram_len) {
    // A snap length cut: report what was captured so a dump can still say "this was RoCE".
    out.ip_datagram = l3;
    out.roce = l3.subspan(ip_header_len + kUdpHeaderLen);
    return FrameError::kRoceCut;
  }
  // The IP payload must be exactly one UDP datagram: the ICRC sits at the end of both.
  const size_t udp_len = load_be16_at(udp, 4);
  if (udp_len != datagram_len - ip_header_len) return FrameError::kMalformed;
  out.ip_datagram = l3.first(datagram_len);
  out.roce = out.ip_datagram.subspan(ip_header_len + kUdpHeaderLen);
  return FrameError::kOk;
}

FrameError decap_ipv4(std::span<const uint8_t> l3, RoceFrame& out) {
  if (l3.empty()) return FrameError::kTruncated;
  if ((l3[0] >> 4) != 4) return FrameError::kNotIp;
  if (l3.size() < kIpv4MinHeaderLen) return FrameError::kTruncated;
  const size_t header_len = static_cast<size_t>(l3[0] & 0x0F) * 4;
  const size_t total_len = load_be16_at(l3, 2);
  if (header_len < kIpv4MinHeaderLen || total_len < header_len) return FrameError::kMalformed;
  if (l3.size() < header_len) return FrameError::kTruncated;
  const uint16_t flags_frag = load_be16_at(l3, 6);
  // A fragment carries no complete UDP datagram, and RoCE v2 senders set DF (Annex A17.4):
  // reassembling is not a dump tool's job.
  if ((flags_frag & kIpv4FlagMf) != 0 || (flags_frag & kIpv4FragOffsetMask) != 0) {
    return FrameError::kNotUdp;
  }
  if (l3[9] != kIpProtoUdp) return FrameError::kNotUdp;
  out.ip.ipv6 = false;
  out.ip.src = {};
  out.ip.dst = {};
  out.ip.src[10] = out.ip.src[11] = 0xFF;
  out.ip.dst[10] = out.ip.dst[11] = 0xFF;
  std::copy_n(l3.begin() + 12, 4, out.ip.src.begin() + 12);
  std::copy_n(l3.begin() + 16, 4, out.ip.dst.begin() + 12);
  out.ip.ipv4_id = load_be16_at(l3, 4);
  out.ip.ipv4_df = (flags_frag & kIpv4FlagDf) != 0;
  out.tos = l3[1];
  out.ttl = l3[8];
  return decap_udp(l3, header_len, total_len, out);
}

FrameError decap_ipv6(std::span<const uint8_t> l3, RoceFrame& out) {
  if (l3.empty()) return FrameError::kTruncated;
  if ((l3[0] >> 4) != 6) return FrameError::kNotIp;
  if (l3.size() < kIpv6HeaderLen) return FrameError::kTruncated;
  // Only UDP directly after the fixed header: RoCE v2 senders add no extension headers,
  // and walking them is not needed to find a RoCE packet.
  if (l3[6] != kIpProtoUdp) return FrameError::kNotUdp;
  out.ip.ipv6 = true;
  std::copy_n(l3.begin() + 8, 16, out.ip.src.begin());
  std::copy_n(l3.begin() + 24, 16, out.ip.dst.begin());
  out.ip.ipv4_id = 0;
  out.ip.ipv4_df = false;
  out.tos = static_cast<uint8_t>((l3[0] & 0x0F) << 4 | l3[1] >> 4);
  out.ttl = l3[7];
  return decap_udp(l3, kIpv6HeaderLen, kIpv6HeaderLen + load_be16_at(l3, 4), out);
}

// `ether_type` announces what starts at `payload_off`; VLAN tags may be stacked (QinQ).
FrameError decap_ether_payload(std::span<const uint8_t> frame, uint16_t ether_type,
                               size_t payload_off, RoceFrame& out) {
  while (is_vlan_tag(ether_type)) {
    if (frame.size() < payload_off + kVlanTagLen) return FrameError::kTruncated;
    ether_type = load_be16_at(frame, payload_off + 2);
    payload_off += kVlanTagLen;
  }
  if (ether_type == kEtherTypeIpv4) return decap_ipv4(frame.subspan(payload_off), out);
  if (ether_type == kEtherTypeIpv6) return decap_ipv6(frame.subspan(payload_off), out);
  return FrameError::kNotIp;
}

FrameError decap_raw_ip(std::span<const uint8_t> frame, RoceFrame& out) {
  if (frame.empty()) return FrameError::kTruncated;
  switch (frame[0] >> 4) {
    case 4:
      return decap_ipv4(frame, out);
    case 6:
      return decap_ipv6(frame, out);
    default:
      return FrameError::kNotIp;
  }
}

// 02:00 + the low 4 address bytes: locally administered, unicast, stable per address.
void write_mac(std::span<uint8_t> out, const std::array<uint8_t, 16>& addr) {
  out[0] = 0x02;
  out[1] = 0x00;
  std::copy_n(addr.begin() + 12, 4, out.begin() + 2);
}

uint16_t ipv4_header_checksum(std::span<const uint8_t> header) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < header.size(); i += 2) sum += load_be16_at(header, i);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

}  // namespace

std::string_view frame_error_name(FrameError e) {
  switch (e) {
    case FrameError::kOk:
      return "ok";
    case FrameError::kTruncated:
      return "truncated";
    case FrameError::kNotIp:
      return "not_ip";
    case FrameError::kNotUdp:
      return "not_udp";
    case FrameError::kNotRoce:
      return "not_roce";
    case FrameError::kUnsupportedLink:
      return "unsupported_link";
    case FrameError::kMalformed:
      return "malformed";
    case FrameError::kRoceCut:
      return "roce_cut";
  }
  return "unknown";
}

FrameError decap_frame(LinkType link, std::span<const uint8_t> frame, RoceFrame& out) {
  const uint16_t roce_port = out.roce_port;
  out = RoceFrame{};
  out.roce_port = roce_port;
  switch (link) {
    case LinkType::kEthernet:
      if (frame.size() < kEthernetHeaderLen) return FrameError::kTruncated;
      return decap_ether_payload(frame, load_be16_at(frame, kEtherTypeOffset), kEthernetHeaderLen,
                                 out);
    case LinkType::kLinuxSll:
      if (frame.size() < kSllHeaderLen) return FrameError::kTruncated;
      return decap_ether_payload(frame, load_be16_at(frame, kSllProtocolOffset), kSllHeaderLen,
                                 out);
    case LinkType::kLinuxSll2:
      if (frame.size() < kSll2HeaderLen) return FrameError::kTruncated;
      return decap_ether_payload(frame, load_be16_at(frame, 0), kSll2HeaderLen, out);
    case LinkType::kRawIp:
      return decap_raw_ip(frame, out);
    case LinkType::kIpv4:
      return decap_ipv4(frame, out);
    case LinkType::kIpv6:
      return decap_ipv6(frame, out);
  }
  return FrameError::kUnsupportedLink;
}

size_t frame_size(const IpContext& ip, size_t roce_len) {
  return kEthernetHeaderLen + (ip.ipv6 ? kIpv6HeaderLen : kIpv4MinHeaderLen) + kUdpHeaderLen +
         roce_len;
}

size_t encap_frame(const IpContext& ip, uint8_t tos, uint8_t ttl, std::span<const uint8_t> roce,
                   std::span<uint8_t> out) {
  const size_t ip_header_len = ip.ipv6 ? kIpv6HeaderLen : kIpv4MinHeaderLen;
  const size_t udp_len = kUdpHeaderLen + roce.size();
  const size_t ip_len_field = ip.ipv6 ? udp_len : ip_header_len + udp_len;
  const size_t total = frame_size(ip, roce.size());
  if (ip_len_field > 0xFFFF || out.size() < total) return 0;

  auto eth = out.first(kEthernetHeaderLen);
  write_mac(eth.first(kMacLen), ip.dst);
  write_mac(eth.subspan(kMacLen, kMacLen), ip.src);
  store_be16_at(eth, kEtherTypeOffset, ip.ipv6 ? kEtherTypeIpv6 : kEtherTypeIpv4);

  auto l3 = out.subspan(kEthernetHeaderLen, ip_header_len);
  if (ip.ipv6) {
    l3[0] = static_cast<uint8_t>(0x60 | tos >> 4);
    l3[1] = static_cast<uint8_t>((tos & 0x0F) << 4);  // flow label 0
    l3[2] = l3[3] = 0;
    store_be16_at(l3, 4, static_cast<uint16_t>(udp_len));
    l3[6] = kIpProtoUdp;
    l3[7] = ttl;
    std::copy(ip.src.begin(), ip.src.end(), l3.begin() + 8);
    std::copy(ip.dst.begin(), ip.dst.end(), l3.begin() + 24);
  } else {
    l3[0] = 0x45;
    l3[1] = tos;
    store_be16_at(l3, 2, static_cast<uint16_t>(ip_len_field));
    store_be16_at(l3, 4, ip.ipv4_id);
    store_be16_at(l3, 6, ip.ipv4_df ? kIpv4FlagDf : 0);
    l3[8] = ttl;
    l3[9] = kIpProtoUdp;
    store_be16_at(l3, 10, 0);
    std::copy_n(ip.src.begin() + 12, 4, l3.begin() + 12);
    std::copy_n(ip.dst.begin() + 12, 4, l3.begin() + 16);
    store_be16_at(l3, 10, ipv4_header_checksum(l3));
  }

  auto udp = out.subspan(kEthernetHeaderLen + ip_header_len, kUdpHeaderLen);
  store_be16_at(udp, 0, ip.sport);
  store_be16_at(udp, 2, ip.dport);
  store_be16_at(udp, 4, static_cast<uint16_t>(udp_len));
  store_be16_at(udp, 6, 0);  // the ICRC protects the payload (Annex A17.3.3)

  std::copy(roce.begin(), roce.end(),
            out.begin() + kEthernetHeaderLen + ip_header_len + kUdpHeaderLen);
  return total;
}

}  // namespace uroce::wire
