// --verify data pattern: see perf_pattern.hpp.
#include "cli/perf_pattern.hpp"

#include <cstring>

namespace uroce::cli {
namespace {

uint64_t pattern_word(uint64_t iteration, uint64_t word) {
  uint64_t v = (iteration + 1) * 0x9E3779B97F4A7C15ull ^ (word + 1) * 0xC2B2AE3D27D4EB4Full;
  v ^= v >> 29;
  v *= 0xBF58476D1CE4E5B9ull;
  v ^= v >> 32;
  return v;
}

}  // namespace

uint8_t pattern_byte(uint64_t iteration, size_t offset) {
  return static_cast<uint8_t>(pattern_word(iteration, offset / 8) >> (8 * (offset % 8)));
}

void fill_pattern(std::span<uint8_t> buf, uint64_t iteration) {
  const size_t words = buf.size() / 8;
  for (size_t w = 0; w < words; ++w) {
    const uint64_t v = pattern_word(iteration, w);
    for (size_t b = 0; b < 8; ++b) buf[w * 8 + b] = static_cast<uint8_t>(v >> (8 * b));
  }
  for (size_t i = words * 8; i < buf.size(); ++i) buf[i] = pattern_byte(iteration, i);
}

std::optional<size_t> check_pattern(std::span<const uint8_t> buf, uint64_t iteration) {
  const size_t words = buf.size() / 8;
  for (size_t w = 0; w < words; ++w) {
    const uint64_t v = pattern_word(iteration, w);
    for (size_t b = 0; b < 8; ++b) {
      if (buf[w * 8 + b] != static_cast<uint8_t>(v >> (8 * b))) return w * 8 + b;
    }
  }
  for (size_t i = words * 8; i < buf.size(); ++i) {
    if (buf[i] != pattern_byte(iteration, i)) return i;
  }
  return std::nullopt;
}

}  // namespace uroce::cli
