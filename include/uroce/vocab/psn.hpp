// Psn: the 24-bit packet sequence number of the IBTA Base Transport Header, with the
// serial-number arithmetic the transport needs at the wrap (IBTA 9.7.1). Compare PSNs only
// through these helpers: a plain `<` on the raw values is wrong near 0xFFFFFF.
#pragma once

#include <cstdint>

namespace uroce {

class Psn {
 public:
  static constexpr uint32_t kMask = 0xFFFFFF;

  constexpr Psn() = default;
  constexpr explicit Psn(uint32_t value) : value_(value & kMask) {}

  [[nodiscard]] constexpr uint32_t value() const { return value_; }

  // Signed distance a - b in [-2^23, 2^23): positive when a is after b. PSNs exactly 2^23
  // apart are ambiguous; the transport never lets that many be outstanding.
  [[nodiscard]] static constexpr int32_t distance(Psn a, Psn b) {
    return static_cast<int32_t>(((a.value_ - b.value_) & kMask) << 8) >> 8;
  }

  constexpr Psn operator+(uint32_t n) const { return Psn(value_ + n); }
  constexpr Psn operator-(uint32_t n) const { return Psn(value_ - n); }
  constexpr Psn& operator+=(uint32_t n) { return *this = *this + n; }
  constexpr Psn& operator++() { return *this += 1; }
  constexpr bool operator==(const Psn&) const = default;

  [[nodiscard]] constexpr bool before(Psn other) const { return distance(*this, other) < 0; }
  [[nodiscard]] constexpr bool after(Psn other) const { return distance(*this, other) > 0; }

 private:
  uint32_t value_ = 0;
};

static_assert(Psn::distance(Psn(0), Psn(0xFFFFFF)) == 1, "wrap must count forward");
static_assert(Psn::distance(Psn(0xFFFFFF), Psn(0)) == -1, "wrap must count backward");

}  // namespace uroce
