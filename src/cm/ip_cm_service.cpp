// The cma_hdr codec (ip_cm_service.hpp); layout in docs/cm.md ("The RDMA IP CM Service").
#include "cm/ip_cm_service.hpp"

#include <cstring>

#include "wire/byte_order.hpp"

namespace uroce::cm {

void encode_cma_header(const CmaHeader& h, std::span<uint8_t> private_data) {
  if (private_data.size() < kCmaHeaderSize) return;
  uint8_t* p = private_data.data();
  p[0] = kCmaVersion;
  p[1] = static_cast<uint8_t>(h.ip_version << 4);
  wire::store_be16(p + 2, h.src_port);
  std::memcpy(p + 4, h.src_addr.data(), 16);
  std::memcpy(p + 20, h.dst_addr.data(), 16);
}

std::optional<CmaHeader> decode_cma_header(std::span<const uint8_t> private_data) {
  if (private_data.size() < kCmaHeaderSize) return std::nullopt;
  const uint8_t* p = private_data.data();
  CmaHeader h;
  h.ip_version = static_cast<uint8_t>(p[1] >> 4);
  if (p[0] != kCmaVersion || (h.ip_version != 4 && h.ip_version != 6)) return std::nullopt;
  h.src_port = wire::load_be16(p + 2);
  std::memcpy(h.src_addr.data(), p + 4, 16);
  std::memcpy(h.dst_addr.data(), p + 20, 16);
  return h;
}

}  // namespace uroce::cm
