// The RDMA IP CM Service (IBA Annex A11) as rdma_cm uses it: the service ID a connection to
// an IP port asks for, and the header (Linux's struct cma_hdr) at the start of a REQ's or
// SIDR_REQ's private data that carries the IP addresses and the source port.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

namespace uroce::cm {

// rdma_cm port spaces (enum rdma_ucm_port_space; they already carry Annex A11's 0x01).
inline constexpr uint16_t kPsIpoib = 0x0002;
inline constexpr uint16_t kPsTcp = 0x0106;  // RC connections (rping, perftest -R)
inline constexpr uint16_t kPsUdp = 0x0111;  // UD (SIDR)
inline constexpr uint16_t kPsIb = 0x013F;

[[nodiscard]] constexpr uint64_t ip_service_id(uint16_t port_space, uint16_t port) {
  return uint64_t{port_space} << 16 | port;
}
[[nodiscard]] constexpr uint16_t service_port(uint64_t service_id) {
  return static_cast<uint16_t>(service_id);
}
[[nodiscard]] constexpr uint16_t service_port_space(uint64_t service_id) {
  return static_cast<uint16_t>(service_id >> 16);
}
// An RDMA IP CM service ID: 0x0000000001PPpppp, PP naming one of the port spaces above and
// pppp the port.
[[nodiscard]] constexpr bool is_ip_service_id(uint64_t service_id) {
  const uint16_t ps = service_port_space(service_id);
  return (service_id >> 32) == 0 && (ps == kPsTcp || ps == kPsUdp || ps == kPsIb || ps == kPsIpoib);
}

inline constexpr size_t kCmaHeaderSize = 36;
inline constexpr uint8_t kCmaVersion = 0x00;
// What a REQ / SIDR_REQ leaves the application after the header (rdma_connect's limits).
inline constexpr size_t kReqUserPrivateData = 92 - kCmaHeaderSize;       // 56
inline constexpr size_t kSidrReqUserPrivateData = 216 - kCmaHeaderSize;  // 180

// An address as cma_hdr holds it: IPv4 in bytes 12..15 with bytes 0..11 zero (not the
// ::ffff: mapped form a GID uses), IPv6 in all 16.
struct CmaHeader {
  uint8_t ip_version = 4;  // 4 or 6
  uint16_t src_port = 0;   // the active side's source port
  std::array<uint8_t, 16> src_addr{};
  std::array<uint8_t, 16> dst_addr{};

  friend bool operator==(const CmaHeader&, const CmaHeader&) = default;
};

// Writes the 36-byte header at the start of `private_data`.
void encode_cma_header(const CmaHeader& h, std::span<uint8_t> private_data);
// nullopt when the version is not 0 or the IP version neither 4 nor 6 (rdma_cm rejects such
// a REQ), or `private_data` is shorter than the header.
[[nodiscard]] std::optional<CmaHeader> decode_cma_header(std::span<const uint8_t> private_data);

}  // namespace uroce::cm
