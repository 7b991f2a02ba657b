// GF(2) algebra of the reflected CRC-32 (the zlib / Ethernet polynomial), for reasoning
// about how bit flips move a CRC without recomputing it. CRC-32 is affine: for two messages
// of equal length, crc(a) ^ crc(b) depends only on a ^ b, and a single byte v followed by n
// bytes contributes crc32_shift(crc32_byte_linear(v), n). zlib's crc32_combine_gen64 and
// crc32_combine_op are the same operations (the tests check that); having them here keeps
// uroce_wire free of a zlib dependency and makes them constexpr.
#pragma once

#include <array>
#include <cstdint>
#include <utility>

namespace uroce::wire {

inline constexpr uint32_t kCrc32PolyReflected = 0xEDB88320;

// a * b modulo the CRC polynomial, both in reflected bit order (bit 31 is x^0).
[[nodiscard]] constexpr uint32_t gf2_multiply_mod_p(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if (a & m) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kCrc32PolyReflected : b >> 1;
  }
  return product;
}

namespace detail {
// x^(2^k) mod P for k = 0..63.
constexpr std::array<uint32_t, 64> make_x2n_table() {
  std::array<uint32_t, 64> table{};
  uint32_t p = 1u << 30;  // x^1
  for (uint32_t& entry : table) {
    entry = p;
    p = gf2_multiply_mod_p(p, p);
  }
  return table;
}
inline constexpr std::array<uint32_t, 64> kX2n = make_x2n_table();
}  // namespace detail

// x^(8 * n) mod P: the operator that appends n zero bytes (zlib: crc32_combine_gen64(n)).
[[nodiscard]] constexpr uint32_t x_pow_8n_mod_p(uint64_t n) {
  uint32_t p = 1u << 31;  // x^0
  for (unsigned k = 3; n != 0; n >>= 1, ++k) {
    if (n & 1) p = gf2_multiply_mod_p(detail::kX2n[k & 63], p);
  }
  return p;
}

// The linear CRC state `c` carried across n more zero bytes
// (zlib: crc32_combine_op(c, 0, crc32_combine_gen64(n))).
[[nodiscard]] constexpr uint32_t crc32_shift(uint32_t c, uint64_t n) {
  return gf2_multiply_mod_p(x_pow_8n_mod_p(n), c);
}

// The linear part of the CRC of the single byte v (no initial value, no final xor):
// crc32 of {v} xor crc32 of {0}; the classic table entry for v.
[[nodiscard]] constexpr uint32_t crc32_byte_linear(uint8_t v) {
  uint32_t c = v;
  for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ kCrc32PolyReflected : c >> 1;
  return c;
}

// A GF(2) basis of 32-bit vectors in echelon form (vector i is zero or has its highest set
// bit at i). Each inserted vector carries a tag; a basis vector keeps the XOR of the tags of
// the inserted vectors it is made of, so reduce() tells which inserted vectors sum to v:
// solving a linear system over GF(2), e.g. inverting a CRC operator.
class Gf2Basis {
 public:
  constexpr void insert(uint32_t v, uint32_t tag) {
    for (int i = 31; i >= 0 && v != 0; --i) {
      if (((v >> i) & 1) == 0) continue;
      if (basis_[i] == 0) {
        basis_[i] = v;
        tags_[i] = tag;
        return;
      }
      v ^= basis_[i];
      tag ^= tags_[i];
    }
  }

  // The basis vector with its highest set bit at i, or 0.
  [[nodiscard]] constexpr uint32_t vector(int i) const { return basis_[static_cast<size_t>(i)]; }

  // (what is left of v, the XOR of the tags taken away): v is in the span iff the first is 0,
  // and then the second names the inserted vectors that sum to it.
  [[nodiscard]] constexpr std::pair<uint32_t, uint32_t> reduce(uint32_t v) const {
    uint32_t taken = 0;
    for (int i = 31; i >= 0 && v != 0; --i) {
      if (((v >> i) & 1) == 0) continue;
      if (basis_[i] == 0) return {v, taken};  // no basis vector with this pivot: outside
      v ^= basis_[i];
      taken ^= tags_[i];
    }
    return {v, taken};
  }

 private:
  std::array<uint32_t, 32> basis_{};
  std::array<uint32_t, 32> tags_{};
};

// Membership in a Gf2Basis's span without data-dependent branches, for a hot path that only
// asks "in or out" (reduce() walks 32 bits with a branch each). Built from the reduced echelon
// form, where each vector keeps its pivot bit and has no other pivot bit set: v is in the span
// iff it equals the XOR of the vectors whose pivot bits v has set.
class Gf2SpanTest {
 public:
  constexpr Gf2SpanTest() = default;
  constexpr explicit Gf2SpanTest(const Gf2Basis& b) {
    // Lower pivots first: r_q has no bit above q, so clearing bit q of a higher vector keeps
    // the pivots above q that it already cleared clear.
    for (int p = 0; p < 32; ++p) {
      uint32_t r = b.vector(p);
      if (r == 0) continue;
      for (size_t j = count_; j-- > 0;) {
        if ((r >> pivot_[j]) & 1) r ^= reduced_[j];
      }
      pivot_[count_] = static_cast<uint8_t>(p);
      reduced_[count_++] = r;
    }
  }
  [[nodiscard]] constexpr bool contains(uint32_t v) const {
    uint32_t rest = v;
    for (size_t j = 0; j < count_; ++j) rest ^= reduced_[j] & (0u - ((v >> pivot_[j]) & 1u));
    return rest == 0;
  }

 private:
  std::array<uint32_t, 32> reduced_{};  // pivots ascending
  std::array<uint8_t, 32> pivot_{};
  size_t count_ = 0;
};

// What each bit of a byte followed by `n` bytes adds to the CRC of a message (bit b of the
// result's entry b): the images a bit flip there XORs into the CRC.
[[nodiscard]] constexpr std::array<uint32_t, 8> crc32_byte_bit_images(uint64_t n) {
  std::array<uint32_t, 8> images{};
  const uint32_t op = x_pow_8n_mod_p(n);
  for (size_t b = 0; b < images.size(); ++b) {
    images[b] = gf2_multiply_mod_p(op, crc32_byte_linear(static_cast<uint8_t>(1u << b)));
  }
  return images;
}

static_assert(crc32_byte_linear(1) == 0x77073096, "zlib crc_table[1]");
static_assert(crc32_byte_linear(0x80) == 0xEDB88320, "zlib crc_table[128]");
static_assert(crc32_shift(crc32_byte_linear(1), 0) == 0x77073096);

}  // namespace uroce::wire
