// The data pattern of `uroce perf --verify`: every iteration's message has its own content,
// different at every 8-byte position, so a byte that is stale (from an earlier iteration),
// misplaced (shifted) or corrupted is caught by whoever receives it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace uroce::cli {

// Byte `offset` of iteration `iteration`'s message.
[[nodiscard]] uint8_t pattern_byte(uint64_t iteration, size_t offset);
void fill_pattern(std::span<uint8_t> buf, uint64_t iteration);
// The offset of the first byte that is not the pattern of `iteration`, nullopt if all are.
[[nodiscard]] std::optional<size_t> check_pattern(std::span<const uint8_t> buf, uint64_t iteration);

}  // namespace uroce::cli
