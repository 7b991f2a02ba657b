// UDP GSO super-frames cut into datagrams (udp_gso.hpp).
#include "fabric/udp_gso.hpp"

#include <cstring>

#include "fabric/ecn_frame.hpp"
#include "wire/byte_order.hpp"

namespace uroce::fabric {
namespace {

constexpr uint8_t kGsoUdpL4 = 5;  // VIRTIO_NET_HDR_GSO_UDP_L4
constexpr uint8_t kGsoEcn = 0x80;
constexpr uint8_t kUdp = 17;

using wire::load_be16;
using wire::store_be16;

// One's-complement sum of big-endian 16-bit words (an odd last byte padded with zero).
uint64_t sum16(const uint8_t* p, size_t n, uint64_t acc) {
  for (; n >= 2; p += 2, n -= 2) acc += load_be16(p);
  if (n == 1) acc += uint32_t{p[0]} << 8;
  return acc;
}
uint16_t fold(uint64_t s) {
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<uint16_t>(s);
}

}  // namespace

uint32_t UdpGso::segment_bytes(uint32_t k) const {
  const uint32_t chunk = k + 1 < segments ? gso_size : payload - gso_size * (segments - 1);
  return kVnetHdrBytes + l4 + 8 + chunk;
}

UdpGso udp_gso_parse(std::span<const uint8_t> buf) {
  UdpGso g;
  if (buf.size() < kVnetHdrBytes + 14) return g;
  if ((buf[1] & ~kGsoEcn) != kGsoUdpL4) return g;
  uint16_t gso_size = 0;
  std::memcpy(&gso_size, &buf[4], 2);  // virtio fields in the host's byte order (little endian)
  const std::span<const uint8_t> f = buf.subspan(kVnetHdrBytes);
  const IpHeaderAt ip = ip_header_at(f);
  if (!ip.found) return g;
  const uint32_t off = static_cast<uint32_t>(ip.offset);
  if (ip.v4) {
    const uint32_t ihl = (f[off] & 0x0Fu) * 4;
    // Not a fragment (MF or an offset), and UDP.
    if ((load_be16(&f[off + 6]) & 0x3FFF) != 0 || f[off + 9] != kUdp) return g;
    g.v4 = true;
    g.l4 = off + ihl;
  } else {
    if (f[off + 6] != kUdp) return g;
    g.l4 = off + 40;
  }
  g.l3 = off;
  if (f.size() < g.l4 + 8 + 1 || gso_size == 0) return g;
  g.payload = static_cast<uint32_t>(f.size()) - g.l4 - 8;
  g.gso_size = gso_size;
  g.segments = (g.payload + gso_size - 1) / gso_size;
  g.ok = true;
  return g;
}

uint32_t udp_gso_segment(const UdpGso& g, std::span<const uint8_t> buf, uint32_t k,
                         std::span<uint8_t> out) {
  const uint32_t bytes = g.segment_bytes(k);
  if (!g.ok || k >= g.segments || out.size() < bytes) return 0;
  const uint32_t chunk = bytes - kVnetHdrBytes - g.l4 - 8;
  std::memset(out.data(), 0, kVnetHdrBytes);  // no GSO, no partial checksum
  const uint8_t* in = buf.data() + kVnetHdrBytes;
  uint8_t* f = out.data() + kVnetHdrBytes;
  std::memcpy(f, in, g.l4 + 8);
  std::memcpy(f + g.l4 + 8, in + g.l4 + 8 + size_t{k} * g.gso_size, chunk);
  uint8_t* ip = f + g.l3;
  uint8_t* udp = f + g.l4;
  const uint32_t udp_len = 8 + chunk;
  uint64_t pseudo = 0;
  if (g.v4) {
    const uint32_t ihl = g.l4 - g.l3;
    store_be16(ip + 2, static_cast<uint16_t>(ihl + udp_len));
    store_be16(ip + 4, static_cast<uint16_t>(load_be16(ip + 4) + k));
    set_ipv4_header_checksum(ip);
    pseudo = sum16(ip + 12, 8, 0);
  } else {
    store_be16(ip + 4, static_cast<uint16_t>(udp_len));
    pseudo = sum16(ip + 8, 32, 0);
  }
  pseudo += kUdp + udp_len;
  store_be16(udp + 4, static_cast<uint16_t>(udp_len));
  store_be16(udp + 6, 0);
  auto csum = static_cast<uint16_t>(~fold(sum16(udp, udp_len, pseudo)));
  if (csum == 0) csum = 0xFFFF;  // 0 means "no checksum" (and is invalid over IPv6)
  store_be16(udp + 6, csum);
  return bytes;
}

}  // namespace uroce::fabric
