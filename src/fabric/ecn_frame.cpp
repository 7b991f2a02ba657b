// ECN bits of Ethernet frames (ecn_frame.hpp).
#include "fabric/ecn_frame.hpp"

#include <cstddef>

#include "wire/byte_order.hpp"

namespace uroce::fabric {
namespace {

constexpr uint16_t kEthIpv4 = 0x0800;
constexpr uint16_t kEthIpv6 = 0x86DD;
constexpr uint16_t kEthVlan = 0x8100;

}  // namespace

IpHeaderAt ip_header_at(std::span<const uint8_t> f) {
  IpHeaderAt l3;
  if (f.size() < 14) return l3;
  size_t off = 12;
  uint16_t type = wire::load_be16(&f[off]);
  if (type == kEthVlan) {
    if (f.size() < 18) return l3;
    off += 4;
    type = wire::load_be16(&f[off]);
  }
  off += 2;
  if (type == kEthIpv4 && f.size() >= off + 20 && (f[off] >> 4) == 4 && (f[off] & 0x0F) >= 5 &&
      f.size() >= off + (f[off] & 0x0Fu) * 4) {
    l3 = {.offset = off, .v4 = true, .found = true};
  } else if (type == kEthIpv6 && f.size() >= off + 40 && (f[off] >> 4) == 6) {
    l3 = {.offset = off, .v4 = false, .found = true};
  }
  return l3;
}

void set_ipv4_header_checksum(uint8_t* ip) {
  const size_t ihl = (ip[0] & 0x0Fu) * 4;
  ip[10] = ip[11] = 0;
  uint32_t sum = 0;
  for (size_t i = 0; i < ihl; i += 2) sum += wire::load_be16(&ip[i]);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  wire::store_be16(ip + 10, static_cast<uint16_t>(~sum));
}

FrameEcn frame_ecn(std::span<const uint8_t> frame) {
  const IpHeaderAt l3 = ip_header_at(frame);
  if (!l3.found) return {};
  const uint8_t* ip = &frame[l3.offset];
  // IPv4: TOS byte 1, ECN its low 2 bits. IPv6: traffic class spans bytes 0-1, ECN is bits
  // 5-4 of byte 1.
  const uint8_t tos = l3.v4 ? ip[1] : static_cast<uint8_t>((ip[0] & 0x0F) << 4 | ip[1] >> 4);
  return {.ip = true, .ecn = static_cast<Ecn>(tos & 0x03), .dscp = static_cast<uint8_t>(tos >> 2)};
}

bool mark_ce(std::span<uint8_t> frame) {
  const IpHeaderAt l3 = ip_header_at(frame);
  if (!l3.found) return false;
  uint8_t* ip = &frame[l3.offset];
  if (!l3.v4) {
    ip[1] |= 0x30;
    return true;
  }
  ip[1] |= 0x03;
  set_ipv4_header_checksum(ip);
  return true;
}

}  // namespace uroce::fabric
