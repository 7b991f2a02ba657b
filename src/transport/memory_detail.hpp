// What the MR table (memory.cpp) and the window table (memory_window.cpp) share: the range
// test and the round function of their key permutations.
#pragma once

#include <cstdint>

namespace uroce::transport::detail {

// Both ranges as [start, start+len): true when the inner one lies in the outer one and
// does not wrap the address space.
inline bool range_inside(uint64_t outer, uint64_t outer_len, uint64_t inner, uint64_t inner_len) {
  if (inner + inner_len < inner) return false;
  return inner >= outer && inner + inner_len <= outer + outer_len;
}

// One Feistel round over a 16-bit half (callers mask it to narrower halves).
inline uint32_t feistel_round(uint32_t half, uint32_t key) {
  uint32_t x = (half ^ key) * 0x45D9F3Bu;
  x ^= x >> 16;
  x *= 0x45D9F3Bu;
  x ^= x >> 16;
  return x & 0xFFFF;
}

}  // namespace uroce::transport::detail
