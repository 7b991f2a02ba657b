// The RoCE v2 ICRC (IBTA Annex A17.3.3; Linux rxe_icrc.c). The masked pseudo header (8 bytes
// of 0xFF for the absent LRH, IP and UDP headers with variant fields set to ones, the BTH with
// byte 4 set to ones) is built in a small stack buffer; the CRC then continues over the rest
// of the packet in place, so the payload is never copied.
//
// The data path's calls (write_icrc, icrc_mismatch, verify_icrc_udp, icrc_of) build that
// buffer only once per context and length: the CRC state after the LRH stand-in, IP and UDP
// headers is cached per thread, and one CRC call covers the packet from its first byte, with
// BTH byte 4 masked by a correction of the starting state (CRC-32 is linear). A check runs
// that call through the carried ICRC too and undoes its last 4 bytes (kUnshift4).
// icrc_of_ip_datagram() keeps the plain way, and the tests check the two against each other.
#include "wire/icrc.hpp"

#include <isa-l/crc.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "wire/byte_order.hpp"
#include "wire/crc32_algebra.hpp"
#include "wire/header_layout.hpp"
#include "wire/ip_layout.hpp"

namespace uroce::wire {
namespace {

constexpr size_t kLrhStandInLen = 8;  // the IB LRH is replaced by 8 bytes of 0xFF
constexpr size_t kIpv4MaxHeaderLen = 60;
constexpr uint8_t kIpv4DfBit = 0x40;   // in the first flags/fragment-offset byte
constexpr size_t kBthVariantByte = 4;  // FECN, BECN, reserved
constexpr size_t kMaxPrefixLen = kLrhStandInLen + kIpv4MaxHeaderLen + kUdpHeaderLen + kBthLen;
static_assert(kLrhStandInLen + kIpv6HeaderLen + kUdpHeaderLen + kBthLen <= kMaxPrefixLen);

// Offsets of the unmasked IPv4 ID and flags in the pseudo header.
constexpr size_t kIdOffset = kLrhStandInLen + 4;
constexpr size_t kFlagsOffset = kLrhStandInLen + 6;

// Sets the variant fields of an IP header (already copied to `ip`) to all ones.
void mask_ip(uint8_t* ip, bool ipv6) {
  if (ipv6) {
    ip[0] |= 0x0F;                 // traffic class, high nibble
    std::memset(ip + 1, 0xFF, 3);  // traffic class, low nibble; flow label
    ip[7] = 0xFF;                  // hop limit
  } else {
    ip[1] = 0xFF;                   // TOS: DSCP and ECN
    ip[8] = 0xFF;                   // TTL
    std::memset(ip + 10, 0xFF, 2);  // header checksum
  }
}

// Copies UDP header and BTH (as much of it as `rest` holds) after the IP header and masks
// them; returns the prefix length and consumes the copied bytes from `rest`.
size_t append_udp_bth(uint8_t* s, size_t at, std::span<const uint8_t>& rest) {
  std::memcpy(s + at, rest.data(), kUdpHeaderLen);
  std::memset(s + at + 6, 0xFF, 2);  // UDP checksum
  at += kUdpHeaderLen;
  const size_t bth = std::min(kBthLen, rest.size() - kUdpHeaderLen);
  std::memcpy(s + at, rest.data() + kUdpHeaderLen, bth);
  if (bth > kBthVariantByte) s[at + kBthVariantByte] = 0xFF;
  rest = rest.subspan(kUdpHeaderLen + bth);
  return at + bth;
}

// Writes the masked pseudo header for `ctx` and a RoCE packet of `roce_len_with_icrc` bytes
// whose BTH is `bth` (up to 12 bytes); returns its length.
size_t write_ctx_prefix(const IpContext& ctx, size_t roce_len_with_icrc,
                        std::span<const uint8_t> bth, uint8_t* s) {
  std::memset(s, 0xFF, kLrhStandInLen);
  uint8_t* ip = s + kLrhStandInLen;
  const size_t udp_len = kUdpHeaderLen + roce_len_with_icrc;
  size_t at;
  if (ctx.ipv6) {
    ip[0] = 0x60;
    store_be16(ip + 4, static_cast<uint16_t>(udp_len));
    ip[6] = kIpProtoUdp;
    std::memcpy(ip + 8, ctx.src.data(), 16);
    std::memcpy(ip + 24, ctx.dst.data(), 16);
    mask_ip(ip, true);
    at = kLrhStandInLen + kIpv6HeaderLen;
  } else {
    ip[0] = 0x45;
    store_be16(ip + 2, static_cast<uint16_t>(kIpv4MinHeaderLen + udp_len));
    store_be16(ip + 4, ctx.ipv4_id);
    ip[6] = ctx.ipv4_df ? kIpv4DfBit : 0;
    ip[7] = 0;
    ip[9] = kIpProtoUdp;
    std::memcpy(ip + 12, ctx.src.data() + 12, 4);
    std::memcpy(ip + 16, ctx.dst.data() + 12, 4);
    mask_ip(ip, false);
    at = kLrhStandInLen + kIpv4MinHeaderLen;
  }
  uint8_t* udp = s + at;
  store_be16(udp, ctx.sport);
  store_be16(udp + 2, ctx.dport);
  store_be16(udp + 4, static_cast<uint16_t>(udp_len));
  std::memset(udp + 6, 0xFF, 2);
  at += kUdpHeaderLen;
  if (bth.empty()) return at;  // header_state: no BTH (and memcpy must not get its null data)
  std::memcpy(s + at, bth.data(), bth.size());
  if (bth.size() > kBthVariantByte) s[at + kBthVariantByte] = 0xFF;
  return at + bth.size();
}

// Carrying a CRC state across 4 bytes multiplies it by x^32 modulo P, which is invertible (P
// has a constant term). kUnshift4[k][b] is the state that becomes b << 8k four bytes later: the
// preimages of the byte values, found by Gaussian elimination over the images of the 32
// single-bit states. Two uses:
//   - BTH byte 4 is masked (set to 0xFF) in the ICRC. The 4 bytes before it are the BTH's
//     first 4, so XORing the state before the BTH with kUnshift4[0][byte4 ^ 0xFF] has the same
//     effect as the mask, and one CRC call covers the packet as it is.
//   - A CRC over the packet *with* its 4 ICRC bytes, state r after them, had state
//     unshift4(r) ^ icrc before them (a state takes in 4 bytes as one XORed word, then moves
//     on). ISA-L's loop is fastest on lengths near a multiple of 256 bytes and folds the rest
//     16 bytes at a time, so a 4 KiB packet is cheaper whole (4096 bytes) than without its
//     ICRC (4092).
constexpr size_t kWordLen = 4;
constexpr size_t kIsalBlock = 256;  // crc32_gzip_refl's main loop folds this much at a time
static_assert(kBthVariantByte == kWordLen && kIcrcLen == kWordLen);

using Unshift4Tables = std::array<std::array<uint32_t, 256>, 4>;
constexpr Unshift4Tables make_unshift4_tables() {
  Gf2Basis images;  // of the single-bit states, each tagged with its state
  for (int bit = 0; bit < 32; ++bit) images.insert(crc32_shift(1u << bit, kWordLen), 1u << bit);
  Unshift4Tables tables{};
  for (size_t k = 0; k < tables.size(); ++k) {
    for (uint32_t b = 0; b < 256; ++b) tables[k][b] = images.reduce(b << (8 * k)).second;
  }
  return tables;
}
constexpr Unshift4Tables kUnshift4 = make_unshift4_tables();

constexpr uint32_t unshift4(uint32_t v) {
  return kUnshift4[0][v & 0xFF] ^ kUnshift4[1][(v >> 8) & 0xFF] ^ kUnshift4[2][(v >> 16) & 0xFF] ^
         kUnshift4[3][v >> 24];
}
static_assert(crc32_shift(unshift4(0xFF), kWordLen) == 0xFF);
static_assert(crc32_shift(unshift4(0xDEADBEEF), kWordLen) == 0xDEADBEEF);

// ISA-L's value after a packet and its own right ICRC: the state whose ~unshift4(~state) is 0.
constexpr uint32_t kGoodResidue = ~crc32_shift(0xFFFFFFFFu, kWordLen);
static_assert(~unshift4(~kGoodResidue) == 0);

// The CRC state after the LRH stand-in and the masked IP and UDP headers, which depend only on
// the context and the packet's length. Cached per thread, direct-mapped: a sender's QPs and a
// receiver's peers each reuse a context for packet after packet, of a few lengths.
uint32_t header_state(const IpContext& ctx, size_t roce_len_with_icrc) {
  struct Entry {
    IpContext ctx;
    size_t len = 0;  // 0: empty (a RoCE packet is never that short)
    uint32_t state = 0;
  };
  static thread_local std::array<Entry, 64> cache{};
  const uint32_t mix = load_be32(ctx.src.data() + 12) ^ load_be32(ctx.dst.data() + 12) ^
                       (uint32_t{ctx.sport} << 16 | ctx.dport) ^
                       static_cast<uint32_t>(roce_len_with_icrc) * 0x9E3779B1u;
  Entry& e = cache[(mix * 0x85EBCA6Bu) >> 26];
  if (e.len == roce_len_with_icrc && e.ctx == ctx) return e.state;
  uint8_t s[kMaxPrefixLen];
  const size_t n = write_ctx_prefix(ctx, roce_len_with_icrc, {}, s);
  e.ctx = ctx;
  e.len = roce_len_with_icrc;
  e.state = crc32(0, {s, n});
  return e.state;
}

// The subspace of CRC differences that the unknown IPv4 ID (16 bits) and DF bit can cause in
// a pseudo message of a given length, kept as a GF(2) basis in echelon form: basis_[i] is
// zero or has its highest set bit at i.
class IdSubspace {
 public:
  IdSubspace() = default;
  explicit IdSubspace(size_t message_len) {
    // A byte at offset p is followed by message_len - 1 - p bytes.
    auto add_byte_bits = [&](size_t offset, uint8_t bits) {
      const std::array<uint32_t, 8> images = crc32_byte_bit_images(message_len - 1 - offset);
      for (size_t b = 0; b < images.size(); ++b) {
        if (bits & (1u << b)) insert(images[b]);
      }
    };
    add_byte_bits(kIdOffset, 0xFF);
    add_byte_bits(kIdOffset + 1, 0xFF);
    add_byte_bits(kFlagsOffset, kIpv4DfBit);
    span_ = Gf2SpanTest(basis_);
  }

  // Branch-free (Gf2SpanTest): the echelon walk's 32 data-dependent branches were most of a
  // 64-byte packet's ICRC check on a socket, where every GSO segment after the first has an
  // ID != 0.
  [[nodiscard]] bool contains(uint32_t v) const { return span_.contains(v); }

  // Which of the 17 generators (bit g: generator g in insertion order: the ID's high byte
  // bits 0..7, its low byte bits 0..7, DF) XOR to `v`; nullopt when none do. Unique: the 17
  // are independent (icrc_test checks all 2^17 combinations differ).
  [[nodiscard]] std::optional<uint32_t> solve(uint32_t v) const {
    const auto [rest, generators] = basis_.reduce(v);
    if (rest != 0) return std::nullopt;
    return generators;
  }

 private:
  void insert(uint32_t v) { basis_.insert(v, 1u << inserted_++); }

  Gf2Basis basis_;  // tagged with the generators, one bit each
  int inserted_ = 0;
  Gf2SpanTest span_;
};

// Per-thread cache of subspaces by pseudo message length: a receiver sees few distinct
// lengths (ACKs, full-MTU packets, a few tails), and a hit costs one reduction.
const IdSubspace& id_subspace(size_t message_len) {
  struct Entry {
    size_t len = 0;
    IdSubspace space;
  };
  static thread_local std::array<Entry, 16> cache{};
  Entry& e = cache[message_len % cache.size()];
  if (e.len != message_len) {
    e.space = IdSubspace(message_len);
    e.len = message_len;
  }
  return e.space;
}

// ISA-L picks an AVX-512 kernel (crc32_gzip_refl_by16_10) where it can, and it behaves as if it
// returned with the upper vector state dirty (measured, not read in its source): the legacy-SSE
// code compiled around it (memcpy, the header code) then pays an SSE/AVX transition penalty: on
// this project's Xeon VM a 48-byte CRC of a stack buffer took 724 ns instead of 59 ns with
// VZEROUPPER after the call. VZEROUPPER exists only with AVX, hence the CPU check (ISA-L uses no
// AVX without it).
void clear_upper_vector_state() {
#if defined(__x86_64__)
  static const bool has_avx = __builtin_cpu_supports("avx");
  if (has_avx) asm volatile("vzeroupper" ::: "memory");
#endif
}

}  // namespace

uint32_t crc32(uint32_t crc, std::span<const uint8_t> bytes) {
  if (bytes.empty()) return crc;
  const uint32_t result = crc32_gzip_refl(crc, bytes.data(), bytes.size());
  clear_upper_vector_state();
  return result;
}

uint32_t icrc_of_ip_datagram(std::span<const uint8_t> d) {
  if (d.empty()) return 0;
  const uint8_t version = d[0] >> 4;
  size_t ip_len;
  if (version == 4) {
    ip_len = size_t{d[0] & 0x0Fu} * 4;
    if (ip_len < kIpv4MinHeaderLen) return 0;
  } else if (version == 6) {
    ip_len = kIpv6HeaderLen;
  } else {
    return 0;
  }
  if (d.size() < ip_len + kUdpHeaderLen + kBthLen) return 0;
  uint8_t s[kMaxPrefixLen];
  std::memset(s, 0xFF, kLrhStandInLen);
  std::memcpy(s + kLrhStandInLen, d.data(), ip_len);
  mask_ip(s + kLrhStandInLen, version == 6);
  std::span<const uint8_t> rest = d.subspan(ip_len);
  const size_t prefix = append_udp_bth(s, kLrhStandInLen + ip_len, rest);
  return crc32(crc32(0, {s, prefix}), rest);
}

// The state before the BTH, corrected so that a CRC over the packet as it is masks byte 4.
static uint32_t start_state(const IpContext& ctx, size_t roce_len_with_icrc, uint8_t bth_byte4) {
  return header_state(ctx, roce_len_with_icrc) ^ kUnshift4[0][bth_byte4 ^ 0xFFu];
}

uint32_t icrc_of(const IpContext& ctx, std::span<const uint8_t> roce) {
  if (roce.size() > kBthVariantByte) {
    return crc32(start_state(ctx, roce.size() + kIcrcLen, roce[kBthVariantByte]), roce);
  }
  uint8_t s[kMaxPrefixLen];
  const auto bth = roce.first(std::min(kBthLen, roce.size()));
  const size_t prefix = write_ctx_prefix(ctx, roce.size() + kIcrcLen, bth, s);
  return crc32(crc32(0, {s, prefix}), roce.subspan(bth.size()));
}

uint32_t icrc_of(const IpContext& ctx, std::span<const uint8_t> head,
                 std::span<const uint8_t> middle, std::span<const uint8_t> tail) {
  const size_t len = head.size() + middle.size() + tail.size();
  if (len <= kBthVariantByte) {
    // Shorter than a BTH (not a packet the engine builds): the flat path's own handling.
    uint8_t joined[kBthVariantByte];
    std::copy(tail.begin(), tail.end(),
              std::copy(middle.begin(), middle.end(), std::copy(head.begin(), head.end(), joined)));
    return icrc_of(ctx, {joined, len});
  }
  // The BTH byte that start_state masks, in whichever piece holds it.
  const uint8_t variant = kBthVariantByte < head.size() ? head[kBthVariantByte]
                          : kBthVariantByte < head.size() + middle.size()
                              ? middle[kBthVariantByte - head.size()]
                              : tail[kBthVariantByte - head.size() - middle.size()];
  // ISA-L's CRC continues from the value it returned: one pass, piece after piece.
  return crc32(crc32(crc32(start_state(ctx, len + kIcrcLen, variant), head), middle), tail);
}

// ISA-L's value after one pass over a packet of more than kIcrcLen + kBthVariantByte bytes
// and the 4 bytes in its ICRC field (see kUnshift4).
static uint32_t value_through_icrc(const IpContext& ctx, std::span<const uint8_t> roce_with_icrc) {
  return crc32(start_state(ctx, roce_with_icrc.size(), roce_with_icrc[kBthVariantByte]),
               roce_with_icrc);
}

// The state before the ICRC bytes, XORed with them, is unshift4 of the state after; ISA-L's
// values are the states complemented.
static uint32_t mismatch_of_value(uint32_t after) {
  return ~unshift4(~after);
}

uint32_t icrc_mismatch(const IpContext& ctx, std::span<const uint8_t> roce_with_icrc) {
  const size_t n = roce_with_icrc.size();
  if (n <= kIcrcLen + kBthVariantByte) {
    if (n < kIcrcLen) return ~0u;  // no ICRC at all: never right (0 would say "right")
    return icrc_of(ctx, roce_with_icrc.first(n - kIcrcLen)) ^
           load_le32(roce_with_icrc.data() + n - kIcrcLen);
  }
  const uint32_t after = value_through_icrc(ctx, roce_with_icrc);
  // A right ICRC leaves the one value whose mismatch is 0: every good packet's check is one
  // compare, and the four table lookups wait for a bad (or modulo-ID) one.
  if (after == kGoodResidue) return 0;
  return mismatch_of_value(after);
}

void write_icrc(const IpContext& ctx, std::span<uint8_t> roce_with_icrc) {
  if (roce_with_icrc.size() < kIcrcLen) return;
  const size_t n = roce_with_icrc.size() - kIcrcLen;
  uint8_t* icrc = roce_with_icrc.data() + n;
  // Through the ICRC field only where it completes one of ISA-L's 256-byte blocks (a 4 KiB
  // packet): elsewhere the CRC without it is as fast.
  if (n % kIsalBlock < kIsalBlock - kIcrcLen) {
    store_le32(icrc, icrc_of(ctx, roce_with_icrc.first(n)));
    return;
  }
  // Through whatever the field holds, not through zeros stored first: the CRC would read a
  // 4-byte store back inside a vector load, which cannot be forwarded and waits for the store
  // to retire. The mismatch against the old bytes, XORed with them, is the ICRC.
  const uint32_t old = load_le32(icrc);
  store_le32(icrc, mismatch_of_value(value_through_icrc(ctx, roce_with_icrc)) ^ old);
}

void write_icrc(const IpContext& ctx, std::span<uint8_t> roce_with_icrc, size_t middle_at,
                std::span<const uint8_t> middle) {
  const size_t n = roce_with_icrc.size() - kIcrcLen;
  const size_t middle_end = middle_at + middle.size();
  store_le32(roce_with_icrc.data() + n,
             icrc_of(ctx, roce_with_icrc.first(middle_at), middle,
                     roce_with_icrc.subspan(middle_end, n - middle_end)));
}

IcrcResult verify_icrc_udp(const IpContext& ctx, std::span<const uint8_t> roce_with_icrc) {
  if (roce_with_icrc.size() < kBthLen + kIcrcLen) return IcrcResult::kBad;
  const uint32_t mismatch = icrc_mismatch(ctx, roce_with_icrc);
  if (mismatch == 0) return IcrcResult::kOk;
  if (ctx.ipv6) return IcrcResult::kBad;
  // Same-length messages: the CRC difference is the linear image of the bit difference. If
  // it lies in the span of what the ID and DF bits can contribute, some ID/DF explains it.
  const size_t n = roce_with_icrc.size() - kIcrcLen;
  const size_t message_len = kLrhStandInLen + kIpv4MinHeaderLen + kUdpHeaderLen + n;
  return id_subspace(message_len).contains(mismatch) ? IcrcResult::kOkModuloIpv4Id
                                                     : IcrcResult::kBad;
}

std::optional<Ipv4IdAndDf> solve_ipv4_id(const IpContext& ctx,
                                         std::span<const uint8_t> roce_with_icrc) {
  if (ctx.ipv6 || roce_with_icrc.size() < kBthLen + kIcrcLen) return std::nullopt;
  const size_t n = roce_with_icrc.size() - kIcrcLen;
  IpContext zero = ctx;
  zero.ipv4_id = 0;
  zero.ipv4_df = false;
  const uint32_t residual = icrc_mismatch(zero, roce_with_icrc);
  const size_t message_len = kLrhStandInLen + kIpv4MinHeaderLen + kUdpHeaderLen + n;
  const auto g = id_subspace(message_len).solve(residual);
  if (!g) return std::nullopt;
  // Generators 0..7 are the ID's high byte bits, 8..15 its low byte bits, 16 DF.
  return Ipv4IdAndDf{.id = static_cast<uint16_t>(((*g & 0xFF) << 8) | ((*g >> 8) & 0xFF)),
                     .df = ((*g >> 16) & 1) != 0};
}

Ipv4IdIcrcDelta::Ipv4IdIcrcDelta(size_t roce_len_with_icrc) : roce_len_(roce_len_with_icrc) {
  // The pseudo message is the LRH stand-in, IPv4 and UDP headers and the packet without its
  // ICRC; a byte at offset p is followed by message_len - 1 - p bytes. The XOR is linear in
  // the ID's bits: the table entry for a low byte is the XOR of its bits' images.
  const size_t n = roce_len_with_icrc < kIcrcLen ? 0 : roce_len_with_icrc - kIcrcLen;
  const size_t message_len = kLrhStandInLen + kIpv4MinHeaderLen + kUdpHeaderLen + n;
  high_bits_ = crc32_byte_bit_images(message_len - 1 - kIdOffset);
  const std::array<uint32_t, 8> low_bits = crc32_byte_bit_images(message_len - 2 - kIdOffset);
  for (size_t v = 1; v < low_.size(); ++v) {
    // v without its lowest set bit is already filled.
    low_[v] = low_[v & (v - 1)] ^ low_bits[static_cast<size_t>(std::countr_zero(v))];
  }
}

bool verify_icrc_ip_datagram(std::span<const uint8_t> d) {
  if (d.empty()) return false;
  const uint8_t version = d[0] >> 4;
  size_t ip_len;
  uint8_t proto;
  if (version == 4 && d.size() >= kIpv4MinHeaderLen) {
    ip_len = size_t{d[0] & 0x0Fu} * 4;
    proto = d[9];
  } else if (version == 6 && d.size() >= kIpv6HeaderLen) {
    ip_len = kIpv6HeaderLen;
    proto = d[6];
  } else {
    return false;
  }
  if (proto != kIpProtoUdp || ip_len < kIpv4MinHeaderLen ||
      d.size() < ip_len + kUdpHeaderLen + kBthLen + kIcrcLen) {
    return false;
  }
  const size_t n = d.size() - kIcrcLen;
  return icrc_of_ip_datagram(d.first(n)) == load_le32(d.data() + n);
}

}  // namespace uroce::wire
