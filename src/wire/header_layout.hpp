// Sizes and offsets of the RoCE v2 transport headers (IBTA Vol 1 §9.2 and §9.3; the CNP of
// Annex A17.9; FETH of IBA 1.5). The opcode table (opcode.cpp) derives every opcode's header
// length from these; the codec (packet.cpp) finds each extended header with
// ext_header_offset(). Offsets count from the first byte of the BTH.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/opcode.hpp"

namespace uroce::wire {

inline constexpr size_t kBthLen = 12;
inline constexpr size_t kIcrcLen = 4;
inline constexpr size_t kCnpPadLen = 16;  // Annex A17.9: 16 reserved bytes after the BTH
inline constexpr size_t kDethLen = 8;
inline constexpr size_t kFethLen = 4;
inline constexpr size_t kRethLen = 16;
inline constexpr size_t kAtomicEthLen = 28;
inline constexpr size_t kAethLen = 4;
inline constexpr size_t kAtomicAckEthLen = 8;
inline constexpr size_t kImmDtLen = 4;
inline constexpr size_t kIethLen = 4;
// ATOMIC WRITE (IBA 1.5) carries exactly 8 bytes of payload after its RETH.
inline constexpr size_t kAtomicWritePayloadLen = 8;

// Length of one extended header; `h` must be a single HeaderBit.
[[nodiscard]] constexpr size_t ext_header_len(HeaderBit h) {
  switch (h) {
    case kHasDeth:
      return kDethLen;
    case kHasFeth:
      return kFethLen;
    case kHasReth:
      return kRethLen;
    case kHasAtomicEth:
      return kAtomicEthLen;
    case kHasAeth:
      return kAethLen;
    case kHasAtomicAckEth:
      return kAtomicAckEthLen;
    case kHasImmDt:
      return kImmDtLen;
    case kHasIeth:
      return kIethLen;
    case kHasCnpPad:
      return kCnpPadLen;
  }
  return 0;
}

// Offset of header `which` in a packet whose opcode carries `headers`: the HeaderBit order
// is the wire order, so it is the BTH plus every present header with a lower bit.
[[nodiscard]] constexpr size_t ext_header_offset(uint16_t headers, HeaderBit which) {
  size_t offset = kBthLen;
  for (uint16_t bit = 1; bit < which; bit = static_cast<uint16_t>(bit << 1)) {
    if (headers & bit) offset += ext_header_len(static_cast<HeaderBit>(bit));
  }
  return offset;
}

// BTH plus every extended header in `headers`: where the payload starts.
[[nodiscard]] constexpr size_t headers_len(uint16_t headers) {
  size_t len = kBthLen;
  for (uint16_t bit = 1; bit <= kHasCnpPad; bit = static_cast<uint16_t>(bit << 1)) {
    if (headers & bit) len += ext_header_len(static_cast<HeaderBit>(bit));
  }
  return len;
}

}  // namespace uroce::wire
