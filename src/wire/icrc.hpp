// The RoCE v2 invariant CRC (IBTA Annex A17.3.3): CRC-32 over 8 bytes of 0xFF, the IP header
// and UDP header with their variant fields masked, the BTH with byte 4 masked, and the rest
// of the packet up to the ICRC. Computed with ISA-L (crc32_gzip_refl), which equals zlib's
// crc32. Stored in the packet least-significant byte first.
//
// The IPv4 Identification and flags are NOT masked, and a kernel UDP socket hides them on
// receive. So there are two ways to check: with the full IP header (pcap, raw sockets,
// simulator) the check is exact; with only what a UDP socket sees (addresses, ports,
// lengths) verify_icrc_udp() accepts a packet whose residual can be explained by some
// IPv4 ID and DF value (CRC-32 is linear, so this is a small subspace; a corruption escapes
// with probability about 2^-15). How: for equal-length messages crc(a) ^ crc(b) depends only
// on a ^ b, and each of the 16 ID bits and the DF bit adds a fixed vector x^(8k)*crc(bit)
// mod P (k = bytes after it); verify_icrc_udp() reduces computed ^ carried against a GF(2)
// basis of those 17 vectors, cached per thread and per packet length. On send, uroce's UDP
// driver uses an unconnected socket with IP_PMTUDISC_DO, for which Linux writes ID 0 and DF:
// IpContext's defaults (checked on loopback, docs/wire.md).
//
// The masked pseudo header is built in a stack buffer, once per context and length (a small
// per-thread cache); one CRC call then runs over the packet in place, so no payload is
// copied. Nothing here allocates.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

namespace uroce::wire {

// Two 16-byte addresses equal? Two 8-byte compares: std::array's == is a memcmp call, and the
// send path compares addresses several times per datagram.
[[nodiscard]] inline bool same_address(const std::array<uint8_t, 16>& a,
                                       const std::array<uint8_t, 16>& b) {
  uint64_t a0, a1, b0, b1;
  std::memcpy(&a0, a.data(), 8);
  std::memcpy(&a1, a.data() + 8, 8);
  std::memcpy(&b0, b.data(), 8);
  std::memcpy(&b1, b.data() + 8, 8);
  return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

// What the ICRC needs to know of the IP and UDP headers.
struct IpContext {
  bool ipv6 = false;
  std::array<uint8_t, 16> src{};  // IPv6 address, or IPv4 in the last 4 bytes (::ffff:a.b.c.d)
  std::array<uint8_t, 16> dst{};
  uint16_t sport = 0;
  uint16_t dport = 4791;
  uint16_t ipv4_id = 0;  // as the kernel writes it for an unconnected DF socket
  bool ipv4_df = true;

  bool operator==(const IpContext& o) const {
    return same_address(src, o.src) && same_address(dst, o.dst) && sport == o.sport &&
           dport == o.dport && ipv4_id == o.ipv4_id && ipv6 == o.ipv6 && ipv4_df == o.ipv4_df;
  }
};

// ICRC of a RoCE packet given as its full IP datagram without the trailing 4 ICRC bytes
// (IPv4 header with any options, or the 40-byte IPv6 header; UDP header; BTH .. pad). The IP
// header's own lengths are used as carried. Returns 0 when the bytes cannot hold an IP, UDP
// and BTH header (verify_icrc_ip_datagram() rejects those).
[[nodiscard]] uint32_t icrc_of_ip_datagram(std::span<const uint8_t> ip_datagram_without_icrc);

// ICRC of `roce` (BTH .. pad, without ICRC) sent with the given IP/UDP context.
[[nodiscard]] uint32_t icrc_of(const IpContext& ctx, std::span<const uint8_t> roce_without_icrc);

// The same for a packet in three pieces, roce = head ++ middle ++ tail (without ICRC): a
// payload sent from where it lies (a registered buffer) between headers and pad built
// elsewhere, with no copy to put them side by side.
[[nodiscard]] uint32_t icrc_of(const IpContext& ctx, std::span<const uint8_t> head,
                               std::span<const uint8_t> middle, std::span<const uint8_t> tail);

// The ICRC carried in the last 4 bytes of `roce_with_icrc` XOR the right one for `ctx`: 0 when
// it is right (nonzero for a span too short to hold an ICRC). One CRC pass over the whole
// packet, ICRC included.
[[nodiscard]] uint32_t icrc_mismatch(const IpContext& ctx, std::span<const uint8_t> roce_with_icrc);

// Computes and stores the ICRC in the last 4 bytes of `roce_with_icrc`.
void write_icrc(const IpContext& ctx, std::span<uint8_t> roce_with_icrc);
// The same for the packet whose bytes [middle_at, middle_at + middle.size()) are `middle`
// rather than what roce_with_icrc holds there (its payload left where it lies).
void write_icrc(const IpContext& ctx, std::span<uint8_t> roce_with_icrc, size_t middle_at,
                std::span<const uint8_t> middle);

enum class IcrcResult : uint8_t { kOk, kOkModuloIpv4Id, kBad };

// Checks a received packet's ICRC (last 4 bytes of `roce_with_icrc`) knowing only what a
// UDP socket sees. Exact for IPv6; for IPv4 accepts any ID/DF (see the file comment).
[[nodiscard]] IcrcResult verify_icrc_udp(const IpContext& ctx,
                                         std::span<const uint8_t> roce_with_icrc);

// Exact check with the full IP datagram (IP header .. ICRC); false also for a datagram that
// is not IPv4/IPv6 carrying UDP, or too short for IP + UDP + BTH + ICRC.
[[nodiscard]] bool verify_icrc_ip_datagram(std::span<const uint8_t> ip_datagram_with_icrc);

// The IPv4 ID and DF bit that the sender's header must have had for `roce_with_icrc`'s ICRC to
// be right, knowing only what a UDP socket sees (ctx's own ID and DF are ignored); nullopt
// for IPv6 or when no ID and DF explain it (a corrupted packet). For captures of received
// packets: the header they record is then the one the ICRC was computed over.
struct Ipv4IdAndDf {
  uint16_t id = 0;
  bool df = false;
};
[[nodiscard]] std::optional<Ipv4IdAndDf> solve_ipv4_id(const IpContext& ctx,
                                                       std::span<const uint8_t> roce_with_icrc);

// What the ICRC of a packet sealed for IPv4 ID 0 must be XORed with to be right for ID `id`
// (same packet, same length): the kernel numbers the datagrams it cuts from one UDP GSO
// message 0, 1, 2, ... (see Ipv4IdIcrcDelta). CRC-32 is affine, so the change depends only on
// the ID bits and how many bytes follow them.
class Ipv4IdIcrcDelta {
 public:
  Ipv4IdIcrcDelta() = default;
  // For RoCE packets of `roce_len_with_icrc` bytes (BTH .. ICRC) over IPv4 without options.
  explicit Ipv4IdIcrcDelta(size_t roce_len_with_icrc);
  [[nodiscard]] size_t roce_len() const { return roce_len_; }
  // XOR for the ICRC as a number (store_le32 it into the packet's last 4 bytes).
  // A table load for IDs below 256 (a GSO message has at most 64 segments): the sender asks
  // once per datagram, and two GF(2) products per ID were 5 % of a 64-byte WRITE's send.
  [[nodiscard]] uint32_t operator()(uint16_t id) const {
    const auto high = static_cast<uint8_t>(id >> 8);
    const uint32_t low = low_[static_cast<uint8_t>(id)];
    if (high == 0) return low;
    uint32_t delta = low;
    for (int b = 0; b < 8; ++b) {
      if ((high >> b) & 1) delta ^= high_bits_[b];
    }
    return delta;
  }

 private:
  size_t roce_len_ = 0;
  std::array<uint32_t, 256> low_{};      // the XOR for each value of the ID's low byte
  std::array<uint32_t, 8> high_bits_{};  // ... for each bit of its high byte
};

// Plain CRC-32 (zlib-compatible) through ISA-L; `crc` chains calls (start with 0). Clears the
// upper vector state after ISA-L's AVX-512 kernel (see icrc.cpp): call ISA-L through this.
[[nodiscard]] uint32_t crc32(uint32_t crc, std::span<const uint8_t> bytes);

}  // namespace uroce::wire
