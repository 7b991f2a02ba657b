// ICRC: CRC-32 equivalence with zlib, the GF(2) helpers against zlib's combine, masking,
// byte order, and verification modulo the IPv4 ID.
#include "wire/icrc.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <array>
#include <random>
#include <unordered_set>
#include <vector>

#include "wire/byte_order.hpp"
#include "wire/crc32_algebra.hpp"
#include "wire/packet.hpp"

namespace uroce::wire {
namespace {

std::vector<uint8_t> random_bytes(size_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

uint32_t zlib_crc(std::span<const uint8_t> v) {
  return static_cast<uint32_t>(::crc32(0, v.data(), static_cast<uInt>(v.size())));
}

IpContext v4_ctx() {
  IpContext ctx;
  ctx.src = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 77, 0, 3};
  ctx.dst = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 77, 0, 2};
  ctx.sport = 0xC1A2;
  return ctx;
}

IpContext v6_ctx() {
  IpContext ctx;
  ctx.ipv6 = true;
  ctx.src = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xFF, 0xFE, 0x33, 0x44, 0x55};
  ctx.dst = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x66, 0x77, 0xFF, 0xFE, 0x88, 0x99, 0xAA};
  ctx.sport = 0xE001;
  return ctx;
}

// An IP datagram for `ctx` around `roce` as a kernel would send it, with the variant fields
// set to the given (arbitrary) values.
std::vector<uint8_t> datagram(const IpContext& ctx, std::span<const uint8_t> roce, uint8_t tos,
                              uint8_t ttl, uint16_t ip_csum, uint16_t udp_csum,
                              uint32_t flow_label = 0) {
  std::vector<uint8_t> d;
  const size_t udp_len = 8 + roce.size();
  if (ctx.ipv6) {
    d.resize(40);
    d[0] = static_cast<uint8_t>(0x60 | (tos >> 4));
    d[1] = static_cast<uint8_t>((tos << 4) | ((flow_label >> 16) & 0x0F));
    store_be16(&d[2], static_cast<uint16_t>(flow_label));
    store_be16(&d[4], static_cast<uint16_t>(udp_len));
    d[6] = 17;
    d[7] = ttl;
    std::copy(ctx.src.begin(), ctx.src.end(), d.begin() + 8);
    std::copy(ctx.dst.begin(), ctx.dst.end(), d.begin() + 24);
  } else {
    d.resize(20);
    d[0] = 0x45;
    d[1] = tos;
    store_be16(&d[2], static_cast<uint16_t>(20 + udp_len));
    store_be16(&d[4], ctx.ipv4_id);
    d[6] = ctx.ipv4_df ? 0x40 : 0;
    d[8] = ttl;
    d[9] = 17;
    store_be16(&d[10], ip_csum);
    std::copy(ctx.src.begin() + 12, ctx.src.end(), d.begin() + 12);
    std::copy(ctx.dst.begin() + 12, ctx.dst.end(), d.begin() + 16);
  }
  const size_t u = d.size();
  d.resize(u + 8);
  store_be16(&d[u], ctx.sport);
  store_be16(&d[u + 2], ctx.dport);
  store_be16(&d[u + 4], static_cast<uint16_t>(udp_len));
  store_be16(&d[u + 6], udp_csum);
  d.insert(d.end(), roce.begin(), roce.end());
  return d;
}

std::vector<uint8_t> sample_packet(std::mt19937_64& rng, size_t payload_len,
                                   uint8_t opcode = 0x04) {
  Headers h;
  h.bth.opcode = opcode;
  h.bth.dqpn = 0x27;
  h.bth.psn = Psn(0x654321);
  h.bth.ackreq = true;
  const auto payload = random_bytes(payload_len, rng);
  std::vector<uint8_t> out(packet_size(opcode, payload_len));
  EXPECT_EQ(build_packet(h, payload, out), out.size());
  return out;
}

TEST(Crc32, EqualsZlibAndChains) {
  std::mt19937_64 rng(1);
  for (size_t n : {0, 1, 7, 64, 1000, 4096, 9001}) {
    const auto v = random_bytes(n, rng);
    EXPECT_EQ(crc32(0, v), zlib_crc(v)) << n;
    const size_t cut = n / 3;
    EXPECT_EQ(crc32(crc32(0, std::span(v).first(cut)), std::span(v).subspan(cut)), zlib_crc(v));
  }
  const uint8_t check[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  EXPECT_EQ(crc32(0, check), 0xCBF43926u);  // the CRC-32 check value
}

TEST(Crc32Algebra, MatchesZlibCombine) {
  for (uint64_t n :
       {0ull, 1ull, 2ull, 3ull, 15ull, 48ull, 1000ull, 4141ull, 1ull << 20, 123456789ull}) {
    EXPECT_EQ(x_pow_8n_mod_p(n),
              static_cast<uint32_t>(crc32_combine_gen64(static_cast<z_off64_t>(n))))
        << n;
    const uint32_t c = 0x9ABCDEF0u ^ static_cast<uint32_t>(n);
    EXPECT_EQ(crc32_shift(c, n), static_cast<uint32_t>(crc32_combine_op(
                                     c, 0, crc32_combine_gen64(static_cast<z_off64_t>(n)))));
  }
  for (int v = 0; v < 256; ++v) {
    const uint8_t one[] = {static_cast<uint8_t>(v)};
    const uint8_t zero[] = {0};
    EXPECT_EQ(crc32_byte_linear(static_cast<uint8_t>(v)), zlib_crc(one) ^ zlib_crc(zero));
  }
}

TEST(Crc32Algebra, SingleByteDifferencePredictsCrcDifference) {
  std::mt19937_64 rng(2);
  auto v = random_bytes(300, rng);
  const uint32_t before = zlib_crc(v);
  v[100] ^= 0x5A;
  EXPECT_EQ(before ^ zlib_crc(v), crc32_shift(crc32_byte_linear(0x5A), 199));
}

// A flip of bit b in a byte followed by n bytes moves zlib's CRC by crc32_byte_bit_images(n)[b].
TEST(Crc32Algebra, ByteBitImagesAreWhatABitFlipDoesToTheCrc) {
  std::mt19937_64 rng(3);
  const auto v = random_bytes(300, rng);
  for (size_t at : {0u, 17u, 299u}) {
    const std::array<uint32_t, 8> images = crc32_byte_bit_images(299 - at);
    for (size_t b = 0; b < 8; ++b) {
      auto w = v;
      w[at] ^= static_cast<uint8_t>(1u << b);
      EXPECT_EQ(zlib_crc(v) ^ zlib_crc(w), images[b]) << at << " bit " << b;
    }
  }
}

// The branch-free span test answers as the echelon walk does, for bases of every rank from
// random vectors and for vectors inside (sums of inserted ones) and mostly outside the span.
TEST(Crc32Algebra, SpanTestAgreesWithReduce) {
  std::mt19937_64 rng(4);
  for (int rank = 0; rank <= 32; ++rank) {
    Gf2Basis basis;
    std::vector<uint32_t> inserted;
    for (int i = 0; i < rank; ++i) {
      inserted.push_back(static_cast<uint32_t>(rng()) >> (rng() % 8));
      basis.insert(inserted.back(), 0);
    }
    const Gf2SpanTest span(basis);
    for (int t = 0; t < 2000; ++t) {
      uint32_t v = static_cast<uint32_t>(rng());
      if (t % 2 == 0) {
        v = 0;
        for (uint32_t x : inserted) v ^= (rng() & 1) != 0 ? x : 0;
        ASSERT_TRUE(span.contains(v)) << rank << " " << v;
      }
      ASSERT_EQ(span.contains(v), basis.reduce(v).first == 0) << rank << " " << v;
    }
  }
}

TEST(Icrc, ContextAndDatagramAgreeAndMaskTheVariantFields) {
  std::mt19937_64 rng(3);
  for (const IpContext& base : {v4_ctx(), v6_ctx()}) {
    for (size_t len : {0, 5, 256, 1024}) {
      auto roce = sample_packet(rng, len);
      IpContext ctx = base;
      ctx.ipv4_id = 0x1234;
      write_icrc(ctx, roce);
      const uint32_t icrc = load_le32(&roce[roce.size() - 4]);
      EXPECT_EQ(icrc, icrc_of(ctx, std::span(roce).first(roce.size() - 4)));
      // TOS/traffic class, TTL/hop limit, IP and UDP checksums and flow label are masked.
      for (int variant = 0; variant < 4; ++variant) {
        auto d = datagram(ctx, roce, static_cast<uint8_t>(rng()), static_cast<uint8_t>(rng()),
                          static_cast<uint16_t>(rng()), static_cast<uint16_t>(rng()),
                          static_cast<uint32_t>(rng()) & 0xFFFFF);
        EXPECT_TRUE(verify_icrc_ip_datagram(d));
        EXPECT_EQ(icrc_of_ip_datagram(std::span(d).first(d.size() - 4)), icrc);
        // FECN/BECN (BTH byte 4) are masked too.
        const size_t bth = ctx.ipv6 ? 48 : 28;
        d[bth + 4] ^= 0xC0;
        EXPECT_TRUE(verify_icrc_ip_datagram(d));
        d[bth + 5] ^= 0x01;  // DestQP is not
        EXPECT_FALSE(verify_icrc_ip_datagram(d));
      }
    }
  }
}

// The ICRC of `roce_with_icrc` (its last 4 bytes ignored) from its whole datagram: the
// masked pseudo header built in full, with no cache.
uint32_t pseudo_header_icrc(const IpContext& ctx, std::span<const uint8_t> roce_with_icrc) {
  const auto d = datagram(ctx, roce_with_icrc, 0, 64, 0, 0);
  return icrc_of_ip_datagram(std::span(d).first(d.size() - 4));
}

// icrc_of() caches the header part of the pseudo header per thread (64 slots) and masks BTH
// byte 4 by correcting the CRC's starting state; icrc_of_ip_datagram() builds the whole masked
// pseudo header. Many contexts and lengths (more than the slots, so entries are replaced and
// slots shared) and every value of byte 4 must give the same ICRC both ways, on the first
// call and on the cached ones.
TEST(Icrc, CachedHeaderStateAgreesWithThePseudoHeaderForEveryContextLengthAndByte4) {
  std::mt19937_64 rng(9);
  std::vector<std::pair<IpContext, std::vector<uint8_t>>> cases;
  for (int i = 0; i < 360; ++i) {
    IpContext ctx = (i % 3 == 0) ? v6_ctx() : v4_ctx();
    ctx.src[15] = static_cast<uint8_t>(rng());
    ctx.dst[13] = static_cast<uint8_t>(rng());
    ctx.sport = static_cast<uint16_t>(rng());
    ctx.dport = (i % 7 == 0) ? static_cast<uint16_t>(rng()) : 4791;
    ctx.ipv4_id = static_cast<uint16_t>(rng());
    ctx.ipv4_df = (rng() & 1) != 0;
    // 240 and 1008: the packet without its ICRC ends 4 bytes short of ISA-L's 256-byte
    // blocks, where write_icrc runs the CRC through the ICRC bytes.
    const size_t payload = std::vector<size_t>{0, 1, 3, 4, 100, 240, 1008, 1024, 4096}[i % 9];
    auto roce = sample_packet(rng, payload);
    roce[4] = static_cast<uint8_t>(i);  // FECN, BECN, reserved: masked
    cases.emplace_back(ctx, std::move(roce));
  }
  for (int round = 0; round < 3; ++round) {
    for (const auto& [ctx, roce] : cases) {
      const uint32_t right = pseudo_header_icrc(ctx, roce);
      EXPECT_EQ(icrc_of(ctx, std::span(roce).first(roce.size() - 4)), right)
          << "round " << round << " length " << roce.size() << " byte 4 " << int{roce[4]};
      // The one-pass forms over the packet with its ICRC: the mismatch is what the carried
      // ICRC is off by, and write_icrc stores the right one whatever the slot held.
      auto sealed = roce;
      const uint32_t garbage = static_cast<uint32_t>(rng());
      store_le32(&sealed[sealed.size() - 4], garbage);
      EXPECT_EQ(icrc_mismatch(ctx, sealed), garbage ^ right);
      write_icrc(ctx, sealed);
      EXPECT_EQ(load_le32(&sealed[sealed.size() - 4]), right);
      EXPECT_EQ(icrc_mismatch(ctx, sealed), 0u);
    }
  }
  // Packets too short for a BTH (cut before byte 4 and after it), which icrc_of_ip_datagram
  // refuses: zlib over the pseudo header written out by hand (an IPv4 header whose variant
  // fields already are all ones).
  for (size_t len : {1u, 4u, 5u, 11u}) {
    auto roce = random_bytes(len, rng);
    std::vector<uint8_t> pseudo(8, 0xFF);
    auto d = datagram(v4_ctx(), roce, 0xFF, 0xFF, 0xFFFF, 0xFFFF);
    for (auto& b : d) pseudo.push_back(b);
    if (len > 4) pseudo[8 + 28 + 4] = 0xFF;
    // The lengths in the headers count the ICRC that follows.
    store_be16(&pseudo[8 + 2], static_cast<uint16_t>(28 + len + 4));
    store_be16(&pseudo[8 + 24], static_cast<uint16_t>(8 + len + 4));
    EXPECT_EQ(icrc_of(v4_ctx(), roce), zlib_crc(pseudo)) << len;
  }
}

// A span of fewer than 4 bytes holds no ICRC: icrc_mismatch must not call it right (0).
TEST(Icrc, ASpanTooShortForAnIcrcIsNeverRight) {
  const uint8_t three[] = {0, 0, 0};
  EXPECT_NE(icrc_mismatch(v4_ctx(), three), 0u);
  EXPECT_NE(icrc_mismatch(v4_ctx(), {}), 0u);
}

// Contexts that differ only where the cache slot is not chosen (the IPv4 ID, DF, the IPv6
// flag with the same address bytes) share a slot; each must still get its own ICRC.
TEST(Icrc, ContextsSharingACacheSlotKeepTheirOwnIcrc) {
  std::mt19937_64 rng(10);
  const auto roce = sample_packet(rng, 256);
  const auto body = std::span(roce).first(roce.size() - 4);
  IpContext a = v4_ctx();
  IpContext b = a;
  b.ipv4_id = 0x0102;
  IpContext c = a;
  c.ipv4_df = false;
  IpContext e = a;
  e.ipv6 = true;
  for (int round = 0; round < 2; ++round) {
    for (const IpContext& ctx : {a, b, c, e, a}) {
      EXPECT_EQ(icrc_of(ctx, body), pseudo_header_icrc(ctx, roce));
    }
  }
  EXPECT_NE(icrc_of(a, body), icrc_of(b, body));
  EXPECT_NE(icrc_of(a, body), icrc_of(c, body));
  EXPECT_NE(icrc_of(a, body), icrc_of(e, body));
}

TEST(Icrc, StoredLeastSignificantByteFirst) {
  std::mt19937_64 rng(4);
  auto roce = sample_packet(rng, 64);
  const IpContext ctx = v4_ctx();
  write_icrc(ctx, roce);
  const uint32_t icrc = icrc_of(ctx, std::span(roce).first(roce.size() - 4));
  const size_t n = roce.size();
  EXPECT_EQ(roce[n - 4], icrc & 0xFF);
  EXPECT_EQ(roce[n - 1], icrc >> 24);
  ParsedPacket p;
  ASSERT_EQ(parse_packet(roce, p), ParseError::kOk);
  EXPECT_EQ(p.icrc, icrc);
}

TEST(Icrc, KnownAnswerFromLinuxRxe) {
  // Frame 11 of imm.pcap: rxe's ACK from 10.77.0.2:50673 (IP ID 0xb3f0, DF) to 10.77.0.3.
  const std::vector<uint8_t> d = {0x45, 0x00, 0x00, 0x30, 0xb3, 0xf0, 0x40, 0x00, 0x40, 0x11,
                                  0x72, 0x2e, 0x0a, 0x4d, 0x00, 0x02, 0x0a, 0x4d, 0x00, 0x03,
                                  0xc5, 0xf1, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00, 0x11, 0x00,
                                  0xff, 0xff, 0x00, 0x00, 0x00, 0x27, 0x00, 0x65, 0x43, 0x21,
                                  0x1f, 0x00, 0x00, 0x01, 0x59, 0x5c, 0xe2, 0x67};
  EXPECT_TRUE(verify_icrc_ip_datagram(d));
  EXPECT_EQ(icrc_of_ip_datagram(std::span(d).first(d.size() - 4)), 0x67E25C59u);
  const auto roce = std::span(d).subspan(28);
  IpContext ctx;
  ctx.src = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 77, 0, 2};
  ctx.dst = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 77, 0, 3};
  ctx.sport = 0xC5F1;
  EXPECT_EQ(verify_icrc_udp(ctx, roce), IcrcResult::kOkModuloIpv4Id);  // ID 0 assumed
  ctx.ipv4_id = 0xB3F0;
  EXPECT_EQ(verify_icrc_udp(ctx, roce), IcrcResult::kOk);
  ParsedPacket p;
  ASSERT_EQ(parse_packet(roce, p), ParseError::kOk);
  EXPECT_EQ(p.info->name, "RC_ACKNOWLEDGE");
  EXPECT_EQ(p.hdr.bth.dqpn, 0x27u);
  EXPECT_EQ(p.hdr.bth.psn, Psn(0x654321));
  EXPECT_EQ(p.hdr.aeth.syndrome, 0x1F);
  EXPECT_EQ(p.hdr.aeth.msn, 1u);
  EXPECT_EQ(p.icrc, 0x67E25C59u);
}

TEST(Icrc, VerifyUdpExactWithTheRightIdAndModuloIdOtherwise) {
  std::mt19937_64 rng(5);
  for (size_t len : {0, 3, 100, 1024, 4096}) {
    auto roce = sample_packet(rng, len);
    IpContext sent = v4_ctx();
    sent.ipv4_id = static_cast<uint16_t>(rng());
    sent.ipv4_df = (rng() & 1) != 0;
    write_icrc(sent, roce);
    EXPECT_EQ(verify_icrc_udp(sent, roce), IcrcResult::kOk);
    for (int i = 0; i < 64; ++i) {
      IpContext guess = v4_ctx();
      guess.ipv4_id = static_cast<uint16_t>(rng());
      guess.ipv4_df = (rng() & 1) != 0;
      if (guess.ipv4_id == sent.ipv4_id && guess.ipv4_df == sent.ipv4_df) continue;
      EXPECT_EQ(verify_icrc_udp(guess, roce), IcrcResult::kOkModuloIpv4Id) << len;
    }
    // Anything the ID cannot explain fails: other address, port, or length.
    IpContext other = sent;
    other.dst[15] ^= 1;
    EXPECT_EQ(verify_icrc_udp(other, roce), IcrcResult::kBad);
    other = sent;
    other.sport ^= 0x100;
    EXPECT_EQ(verify_icrc_udp(other, roce), IcrcResult::kBad);
  }
}

TEST(Icrc, EveryIdAndDfIsAcceptedAndTheyTouch2To17Residuals) {
  std::mt19937_64 rng(6);
  auto roce = sample_packet(rng, 40);
  IpContext sent = v4_ctx();
  sent.ipv4_id = 0xBEEF;
  write_icrc(sent, roce);
  const uint32_t carried = load_le32(&roce[roce.size() - 4]);
  std::unordered_set<uint32_t> residuals;
  for (uint32_t v = 0; v < (1u << 17); ++v) {
    IpContext guess = sent;
    guess.ipv4_id = static_cast<uint16_t>(v);
    guess.ipv4_df = (v >> 16) != 0;
    const IcrcResult r = verify_icrc_udp(guess, roce);
    const bool exact = guess.ipv4_id == sent.ipv4_id && guess.ipv4_df == sent.ipv4_df;
    ASSERT_EQ(r, exact ? IcrcResult::kOk : IcrcResult::kOkModuloIpv4Id) << v;
    residuals.insert(carried ^ icrc_of(guess, std::span(roce).first(roce.size() - 4)));
  }
  // The 17 contributions are independent: a corruption escapes with probability 2^17/2^32.
  EXPECT_EQ(residuals.size(), 1u << 17);
}

TEST(Icrc, AnyFlippedBitFailsVerification) {
  std::mt19937_64 rng(7);
  for (const IpContext& base : {v4_ctx(), v6_ctx()}) {
    auto roce = sample_packet(rng, 52);
    IpContext sent = base;
    sent.ipv4_id = 0x4321;
    write_icrc(sent, roce);
    IpContext receiver = base;  // the ID is unknown to a UDP socket
    ASSERT_NE(verify_icrc_udp(receiver, roce), IcrcResult::kBad);
    for (size_t bit = 0; bit < roce.size() * 8; ++bit) {
      if (bit / 8 == 4) continue;  // BTH byte 4 (FECN, BECN) is masked by design
      auto bad = roce;
      bad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      EXPECT_EQ(verify_icrc_udp(receiver, bad), IcrcResult::kBad) << "bit " << bit;
    }
    auto masked = roce;
    masked[4] ^= 0xC0;
    EXPECT_NE(verify_icrc_udp(receiver, masked), IcrcResult::kBad);
  }
}

// A packet sealed for ID 0 and corrected with Ipv4IdIcrcDelta carries exactly the ICRC of
// the same packet sealed for the ID the kernel gives a GSO segment, and the exact check over a
// full IP header with that ID (as rxe or an RNIC does it) accepts it.
TEST(Icrc, IdDeltaTurnsAnId0IcrcIntoTheIcrcForThatId) {
  std::mt19937_64 rng(11);
  for (size_t len : {0, 1, 256, 1024, 4096}) {
    auto roce = sample_packet(rng, len);
    IpContext ctx = v4_ctx();
    write_icrc(ctx, roce);
    const uint32_t sealed_for_0 = load_le32(&roce[roce.size() - 4]);
    const Ipv4IdIcrcDelta delta(roce.size());
    EXPECT_EQ(delta(0), 0u);
    for (uint32_t id : {1u, 2u, 3u, 63u, 64u, 255u, 256u, 0x1234u, 0xFFFFu}) {
      IpContext with_id = ctx;
      with_id.ipv4_id = static_cast<uint16_t>(id);
      const uint32_t want = icrc_of(with_id, std::span(roce).first(roce.size() - 4));
      ASSERT_EQ(sealed_for_0 ^ delta(static_cast<uint16_t>(id)), want) << len << " id " << id;
      auto fixed = roce;
      store_le32(&fixed[fixed.size() - 4], want);
      EXPECT_TRUE(verify_icrc_ip_datagram(datagram(with_id, fixed, 0x02, 64, 0xABCD, 0x1234)));
      EXPECT_FALSE(verify_icrc_ip_datagram(datagram(with_id, roce, 0x02, 64, 0xABCD, 0x1234)));
    }
  }
}

// The ID and DF a sender used come back out of the ICRC alone; a corrupted packet has none.
TEST(Icrc, SolveIpv4IdFindsTheSendersIdAndDf) {
  std::mt19937_64 rng(12);
  for (size_t len : {0, 7, 1024, 4096}) {
    for (int i = 0; i < 200; ++i) {
      auto roce = sample_packet(rng, len);
      IpContext sent = v4_ctx();
      sent.ipv4_id = static_cast<uint16_t>(rng());
      sent.ipv4_df = (rng() & 1) != 0;
      write_icrc(sent, roce);
      IpContext seen = v4_ctx();  // what a socket knows: no ID, no DF
      seen.ipv4_id = 0x5555;
      const auto got = solve_ipv4_id(seen, roce);
      ASSERT_TRUE(got.has_value()) << len;
      EXPECT_EQ(got->id, sent.ipv4_id) << len;
      EXPECT_EQ(got->df, sent.ipv4_df) << len;
      roce[roce.size() / 2] ^= 0x10;
      EXPECT_FALSE(solve_ipv4_id(seen, roce).has_value()) << len;
    }
  }
  std::mt19937_64 rng6(13);
  auto v6 = sample_packet(rng6, 64);
  write_icrc(v6_ctx(), v6);
  EXPECT_FALSE(solve_ipv4_id(v6_ctx(), v6).has_value());
}

TEST(Icrc, Ipv6HasNoModuloPath) {
  std::mt19937_64 rng(8);
  auto roce = sample_packet(rng, 16);
  IpContext ctx = v6_ctx();
  write_icrc(ctx, roce);
  EXPECT_EQ(verify_icrc_udp(ctx, roce), IcrcResult::kOk);
  ctx.ipv4_id = 99;  // meaningless for IPv6: not part of the pseudo header
  EXPECT_EQ(verify_icrc_udp(ctx, roce), IcrcResult::kOk);
  ctx.src[0] ^= 0x80;
  EXPECT_EQ(verify_icrc_udp(ctx, roce), IcrcResult::kBad);
}

TEST(Icrc, MalformedInputIsRejectedWithoutReadingPastIt) {
  const IpContext ctx = v4_ctx();
  for (size_t n = 0; n < 16; ++n) {
    std::vector<uint8_t> v(n, 0x11);
    EXPECT_EQ(verify_icrc_udp(ctx, v), IcrcResult::kBad) << n;
  }
  std::mt19937_64 rng(9);
  auto roce = sample_packet(rng, 8);
  write_icrc(ctx, roce);
  const auto d = datagram(ctx, roce, 0, 64, 0, 0);
  ASSERT_TRUE(verify_icrc_ip_datagram(d));
  for (size_t n = 0; n < d.size(); ++n) {
    std::vector<uint8_t> cut(d.begin(), d.begin() + n);
    EXPECT_FALSE(verify_icrc_ip_datagram(cut)) << n;
    (void)icrc_of_ip_datagram(cut);
  }
  auto not_udp = d;
  not_udp[9] = 6;
  EXPECT_FALSE(verify_icrc_ip_datagram(not_udp));
  auto bad_ihl = d;
  bad_ihl[0] = 0x44;
  EXPECT_FALSE(verify_icrc_ip_datagram(bad_ihl));
  EXPECT_EQ(icrc_of_ip_datagram(bad_ihl), 0u);
  auto not_ip = d;
  not_ip[0] = 0x15;
  EXPECT_FALSE(verify_icrc_ip_datagram(not_ip));
}

// A packet in three pieces (headers, a payload sent from where it lies, pad) has the ICRC of
// the same bytes side by side, wherever the pieces are cut and whatever the context.
TEST(Icrc, ThreePiecesHaveTheIcrcOfTheJoinedPacket) {
  std::mt19937_64 rng(12);
  IpContext v6 = v4_ctx();
  v6.ipv6 = true;
  for (const IpContext& ctx : {v4_ctx(), v6}) {
    for (size_t len : {16u, 64u, 300u, 4128u}) {
      const auto roce = sample_packet(rng, len);
      const auto body = std::span(roce).first(roce.size() - 4);
      const uint32_t joined = icrc_of(ctx, body);
      for (size_t head : {1u, 4u, 5u, 12u, 28u}) {
        for (size_t tail : {0u, 3u}) {
          if (head + tail > body.size()) continue;
          const auto middle = body.subspan(head, body.size() - head - tail);
          EXPECT_EQ(icrc_of(ctx, body.first(head), middle, body.last(tail)), joined)
              << "len " << len << " head " << head << " tail " << tail;
          // The packet with a hole where the middle was: the same ICRC lands in its last bytes.
          if (head < 5) continue;
          std::vector<uint8_t> holed = roce;
          std::fill_n(holed.begin() + static_cast<std::ptrdiff_t>(head), middle.size(), 0xA5);
          write_icrc(ctx, holed, head, middle);
          EXPECT_EQ(load_le32(holed.data() + holed.size() - 4), joined);
        }
      }
    }
  }
}

}  // namespace
}  // namespace uroce::wire
