#include "fault/corrupt.hpp"

#include "wire/header_layout.hpp"

namespace uroce::fault {

bool corrupt_packet(const wire::IpContext& ip, std::span<uint8_t> roce, uint64_t random) {
  if (roce.size() < wire::kBthLen + wire::kIcrcLen) return false;
  const uint64_t bits = (roce.size() - wire::kBthLen) * 8;
  uint64_t bit = random % bits;
  for (uint64_t tries = 0; tries < bits; ++tries) {
    const size_t byte = wire::kBthLen + bit / 8;
    const auto mask = static_cast<uint8_t>(1u << (bit % 8));
    roce[byte] ^= mask;
    if (wire::verify_icrc_udp(ip, roce) == wire::IcrcResult::kBad) return true;
    roce[byte] ^= mask;  // undo: this one the receiver would take for an IP ID difference
    bit = (bit + 1) % bits;
  }
  return false;
}

}  // namespace uroce::fault
