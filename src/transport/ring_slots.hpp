// RingSlots: how a queue's ring maps its ever-growing sequence numbers to slots. The ring has
// a power of two of slots, at least the capacity asked for, so a slot is found with a mask: a
// 64-bit division costs tens of cycles, and a post and each packet sent or completed look
// slots up several times. The capacity the application asked for stays the queue's own
// (when it is full, when a CQ overflows); the extra slots are never used at once.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace uroce::transport {

class RingSlots {
 public:
  RingSlots() = default;
  explicit RingSlots(uint32_t capacity)
      : mask_(std::bit_ceil(size_t{std::max(capacity, 1u)}) - 1) {}

  [[nodiscard]] size_t size() const { return mask_ + 1; }
  [[nodiscard]] size_t operator()(uint64_t seq) const { return seq & mask_; }

 private:
  uint64_t mask_ = 0;
};

}  // namespace uroce::transport
