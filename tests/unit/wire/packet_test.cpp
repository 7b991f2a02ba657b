// The header codec: exact bytes, build -> parse round trips for every opcode, every
// ParseError, and no out-of-bounds read on any truncation (run under ASan too).
#include "wire/packet.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "wire/header_layout.hpp"

namespace uroce::wire {
namespace {

std::vector<int> valid_opcodes() {
  std::vector<int> ops;
  for (int op = 0; op < 256; ++op) {
    if (opcode_info(static_cast<uint8_t>(op)).valid) ops.push_back(op);
  }
  return ops;
}

Headers random_headers(uint8_t opcode, std::mt19937_64& rng) {
  auto u32 = [&] { return static_cast<uint32_t>(rng()); };
  Headers h;
  h.bth = {opcode,
           (rng() & 1) != 0,
           (rng() & 1) != 0,
           0,
           0,
           static_cast<uint16_t>(rng()),
           (rng() & 1) != 0,
           (rng() & 1) != 0,
           u32() & 0xFFFFFF,
           (rng() & 1) != 0,
           Psn(u32())};
  h.deth = {u32(), u32() & 0xFFFFFF};
  h.feth.bits = u32();
  h.reth = {rng(), u32(), u32()};
  h.atomic_eth = {rng(), u32(), rng(), rng()};
  h.aeth = {static_cast<uint8_t>(rng()), u32() & 0xFFFFFF};
  h.atomic_ack_eth.orig = rng();
  h.immdt = u32();
  h.ieth_rkey = u32();
  return h;
}

// Copies only the headers `headers` names, i.e. what a parse of a fresh Headers fills.
Headers only(uint16_t headers, const Headers& h) {
  Headers r;
  r.bth = h.bth;
  if (headers & kHasDeth) r.deth = h.deth;
  if (headers & kHasFeth) r.feth = h.feth;
  if (headers & kHasReth) r.reth = h.reth;
  if (headers & kHasAtomicEth) r.atomic_eth = h.atomic_eth;
  if (headers & kHasAeth) r.aeth = h.aeth;
  if (headers & kHasAtomicAckEth) r.atomic_ack_eth = h.atomic_ack_eth;
  if (headers & kHasImmDt) r.immdt = h.immdt;
  if (headers & kHasIeth) r.ieth_rkey = h.ieth_rkey;
  return r;
}

std::vector<uint8_t> build(const Headers& h, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out(packet_size(h.bth.opcode, payload.size()));
  EXPECT_EQ(build_packet(h, payload, out), out.size());
  return out;
}

// Parses from a heap buffer of exactly bytes.size() so ASan sees any overread.
ParseError parse_exact(const std::vector<uint8_t>& bytes, ParsedPacket& out) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size()]);
  std::copy(bytes.begin(), bytes.end(), copy.get());
  const ParseError e = parse_packet({copy.get(), bytes.size()}, out);
  out.payload = {};  // the copy dies here
  return e;
}

TEST(Packet, ExactBytesWriteOnlyWithImmediate) {
  Headers h;
  h.bth.opcode = make_opcode(Transport::kRc, Op::kWriteOnlyImm);
  h.bth.se = true;
  h.bth.becn = true;
  h.bth.dqpn = 0x123456;
  h.bth.ackreq = true;
  h.bth.psn = Psn(0xABCDEF);
  h.reth = {0x0102030405060708, 0x11223344, 5};
  h.immdt = 0xDEADBEEF;
  const std::vector<uint8_t> payload = {'a', 'b', 'c', 'd', 'e'};
  const std::vector<uint8_t> expected = {
      0x0B, 0xB0, 0xFF, 0xFF, 0x40, 0x12, 0x34, 0x56, 0x80, 0xAB, 0xCD, 0xEF,  // BTH
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x11, 0x22, 0x33, 0x44,  // RETH
      0x00, 0x00, 0x00, 0x05,                                                  //
      0xDE, 0xAD, 0xBE, 0xEF,                                                  // ImmDt
      'a',  'b',  'c',  'd',  'e',  0x00, 0x00, 0x00,                          // payload, pad
      0x00, 0x00, 0x00, 0x00};                                                 // ICRC slot
  EXPECT_EQ(build(h, payload), expected);

  ParsedPacket p;
  ASSERT_EQ(parse_packet(expected, p), ParseError::kOk);
  EXPECT_EQ(p.hdr.bth.padcnt, 3);
  EXPECT_EQ(p.header_len, 32u);
  EXPECT_EQ(std::vector<uint8_t>(p.payload.begin(), p.payload.end()), payload);
  EXPECT_EQ(p.info, &opcode_info(0x0B));
}

TEST(Packet, ExactBytesUdSendOnlyImmAndCnpAndAtomicAck) {
  Headers ud;
  ud.bth.opcode = 0x65;
  ud.bth.dqpn = 1;
  ud.bth.psn = Psn(7);
  ud.deth = {kGsiQkey, 0x00ABCD};
  ud.immdt = 0x01020304;
  EXPECT_EQ(build(ud, {}),
            (std::vector<uint8_t>{0x65, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
                                  0x00, 0x07, 0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0xAB, 0xCD,
                                  0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00}));

  Headers cnp;
  cnp.bth.opcode = kCnpOpcode;
  cnp.bth.becn = true;
  cnp.bth.dqpn = 0x11;
  std::vector<uint8_t> expected_cnp(32, 0);
  expected_cnp[0] = 0x81;
  expected_cnp[2] = expected_cnp[3] = 0xFF;
  expected_cnp[4] = 0x40;
  expected_cnp[7] = 0x11;
  EXPECT_EQ(build(cnp, {}), expected_cnp);

  Headers ack;
  ack.bth.opcode = 0x12;
  ack.bth.dqpn = 0x19;
  ack.bth.psn = Psn(0xB31434);
  ack.aeth = {Aeth::ack(), 1};
  ack.atomic_ack_eth.orig = 0xD4E5D39F0F8B1A41;
  EXPECT_EQ(build(ack, {}),
            (std::vector<uint8_t>{0x12, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x19, 0x00, 0xB3,
                                  0x14, 0x34, 0x1F, 0x00, 0x00, 0x01, 0xD4, 0xE5, 0xD3, 0x9F,
                                  0x0F, 0x8B, 0x1A, 0x41, 0x00, 0x00, 0x00, 0x00}));
}

TEST(Packet, AethHelpers) {
  EXPECT_EQ(Aeth::ack(), 0x1F);
  EXPECT_EQ(Aeth::rnr_nak(14), 0x2E);
  EXPECT_EQ(Aeth::nak(NakCode::kRemoteAccessError), 0x62);
  Aeth a{Aeth::nak(NakCode::kPsnSequenceError), 3};
  EXPECT_EQ(a.type(), AethType::kNak);
  EXPECT_EQ(a.value(), 0);
  EXPECT_EQ(Aeth{Aeth::rnr_nak(31)}.type(), AethType::kRnrNak);
}

TEST(Packet, EveryOpcodeRoundTripsEveryField) {
  std::mt19937_64 rng(0x5eed);
  for (int op : valid_opcodes()) {
    const OpcodeInfo& info = opcode_info(static_cast<uint8_t>(op));
    std::vector<size_t> lengths = {0};
    if (info.fixed_payload_len) {
      lengths = {info.fixed_payload_len};
    } else if (info.flags & kPayload) {
      lengths = {0, 1, 2, 3, 4, 5, 6, 7, 8, 63, 256, 1024, 4093, 4096};
    }
    for (size_t len : lengths) {
      SCOPED_TRACE(testing::Message() << info.name << " payload " << len);
      Headers h = random_headers(static_cast<uint8_t>(op), rng);
      std::vector<uint8_t> payload(len);
      for (auto& b : payload) b = static_cast<uint8_t>(rng());
      const std::vector<uint8_t> bytes = build(h, payload);
      const size_t pad = (4 - len % 4) % 4;
      ASSERT_EQ(bytes.size(), info.header_len + len + pad + kIcrcLen);
      EXPECT_EQ(bytes.size() % 4, 0u);

      ParsedPacket p;
      ASSERT_EQ(parse_packet(bytes, p), ParseError::kOk);
      Headers expected = only(info.headers, h);
      expected.bth.padcnt = static_cast<uint8_t>(pad);
      EXPECT_EQ(p.hdr, expected);
      EXPECT_EQ(p.info, &info);
      EXPECT_EQ(p.header_len, info.header_len);
      EXPECT_EQ(std::vector<uint8_t>(p.payload.begin(), p.payload.end()), payload);
      EXPECT_EQ(p.icrc, 0u);
      for (size_t i = 0; i < pad; ++i) EXPECT_EQ(bytes[info.header_len + len + i], 0);

      // build_headers + the caller's own payload copy give the same bytes.
      std::vector<uint8_t> sg(bytes.size(), 0);
      ASSERT_EQ(build_headers(h, len, sg), info.header_len);
      std::copy(payload.begin(), payload.end(), sg.begin() + info.header_len);
      EXPECT_EQ(sg, bytes);
    }
  }
}

TEST(Packet, ParseLeavesHeadersTheOpcodeLacksAlone) {
  Headers h;
  h.bth.opcode = 0x11;
  h.aeth = {Aeth::ack(), 9};
  const auto bytes = build(h, {});
  ParsedPacket p;
  p.hdr.reth = {1, 2, 3};
  p.hdr.immdt = 77;
  ASSERT_EQ(parse_packet(bytes, p), ParseError::kOk);
  EXPECT_EQ(p.hdr.reth, (Reth{1, 2, 3}));
  EXPECT_EQ(p.hdr.immdt, 77u);
  EXPECT_EQ(p.hdr.aeth.msn, 9u);
}

TEST(Packet, BuildRejectsWhatCannotBeSent) {
  Headers h;
  std::vector<uint8_t> out(8192);
  const std::vector<uint8_t> four(4, 1);
  h.bth.opcode = 0x15;  // reserved
  EXPECT_EQ(packet_size(0x15, 0), 0u);
  EXPECT_EQ(build_packet(h, {}, out), 0u);
  EXPECT_EQ(build_headers(h, 0, out), 0u);
  h.bth.opcode = 0x11;  // ACK carries no payload
  EXPECT_EQ(packet_size(0x11, 4), 0u);
  EXPECT_EQ(build_packet(h, four, out), 0u);
  EXPECT_EQ(packet_size(0x11, 0), 20u);
  h.bth.opcode = 0x1D;  // ATOMIC WRITE carries exactly 8 bytes
  EXPECT_EQ(packet_size(0x1D, 4), 0u);
  EXPECT_EQ(packet_size(0x1D, 8), 40u);
  EXPECT_EQ(build_packet(h, four, out), 0u);
  h.bth.opcode = 0x04;  // too small an output buffer
  EXPECT_EQ(packet_size(0x04, 4), 20u);
  EXPECT_EQ(build_packet(h, four, std::span<uint8_t>(out).first(19)), 0u);
  EXPECT_EQ(build_headers(h, 4, std::span<uint8_t>(out).first(11)), 0u);
  EXPECT_EQ(build_packet(h, four, std::span<uint8_t>(out).first(20)), 20u);
}

TEST(Packet, BuildAcceptsPayloadAlreadyInPlace) {
  Headers h;
  h.bth.opcode = 0x04;
  std::vector<uint8_t> buf(12 + 8 + 4, 0);
  for (int i = 0; i < 6; ++i) buf[12 + i] = static_cast<uint8_t>(i + 1);
  ASSERT_EQ(build_packet(h, std::span<const uint8_t>(buf).subspan(12, 6), buf), 24u);
  EXPECT_EQ(buf[1], 0x20);  // PadCnt 2
  EXPECT_EQ((std::vector<uint8_t>(buf.begin() + 12, buf.end())),
            (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0}));
}

// One packet for each ParseError, and the exact error it must produce.
TEST(Packet, EveryParseError) {
  Headers send;
  send.bth.opcode = 0x04;
  const std::vector<uint8_t> good = build(send, {1, 2, 3, 4, 5});  // PadCnt 3
  ParsedPacket p;
  ASSERT_EQ(parse_packet(good, p), ParseError::kOk);

  auto with = [&](std::vector<uint8_t> v, size_t i, uint8_t b) {
    v[i] = b;
    return v;
  };
  auto parse = [&](const std::vector<uint8_t>& v) { return parse_exact(v, p); };

  // kTruncated: no whole BTH; BTH but extended headers cut; headers but no ICRC.
  EXPECT_EQ(parse(std::vector<uint8_t>(good.begin(), good.begin() + 11)), ParseError::kTruncated);
  Headers write_first;
  write_first.bth.opcode = 0x06;
  const auto wf = build(write_first, {});
  EXPECT_EQ(parse(std::vector<uint8_t>(wf.begin(), wf.begin() + 27)), ParseError::kTruncated);
  EXPECT_EQ(parse(std::vector<uint8_t>(wf.begin(), wf.begin() + 31)), ParseError::kTruncated);
  EXPECT_EQ(parse(wf), ParseError::kOk);

  // kUnknownOpcode: reserved RC, RD, XRC, CNP transport but not 0x81, vendor space.
  for (int op : {0x15, 0x18, 0x1E, 0x1F, 0x35, 0x40, 0x55, 0xA0, 0xB7, 0x80, 0x82, 0xC0, 0xFF}) {
    EXPECT_EQ(parse(with(good, 0, static_cast<uint8_t>(op))), ParseError::kUnknownOpcode) << op;
  }
  // kOpcodeNotForTransport: RC operations UC or UD do not have.
  for (int op : {0x2C, 0x31, 0x36, 0x3C, 0x60, 0x66, 0x71, 0x73, 0x7D}) {
    EXPECT_EQ(parse(with(good, 0, static_cast<uint8_t>(op))), ParseError::kOpcodeNotForTransport)
        << op;
  }
  EXPECT_EQ(p.info, &opcode_info(0x7D));  // still named for the drop counter / dump
  EXPECT_EQ(p.hdr.bth.opcode, 0x7D);

  // kBadTver, checked before the opcode.
  EXPECT_EQ(parse(with(good, 1, 0x31)), ParseError::kBadTver);
  EXPECT_EQ(parse(with(with(good, 1, 0x38), 0, 0x15)), ParseError::kBadTver);

  // kBadPadCnt: pad on an opcode without payload; pad longer than what follows the headers.
  Headers ack;
  ack.bth.opcode = 0x11;
  const auto a = build(ack, {});
  EXPECT_EQ(parse(a), ParseError::kOk);
  EXPECT_EQ(parse(with(a, 1, 0x10)), ParseError::kBadPadCnt);
  const auto empty_send = build(send, {});
  EXPECT_EQ(parse(with(empty_send, 1, 0x20)), ParseError::kBadPadCnt);
  Headers aw;
  aw.bth.opcode = 0x1D;
  const auto atomic_write = build(aw, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_EQ(parse(atomic_write), ParseError::kOk);
  EXPECT_EQ(parse(with(atomic_write, 1, 0x10)), ParseError::kBadPadCnt);

  // kLengthMismatch: payload on an ACK, a long CNP, a misaligned packet, ATOMIC WRITE size.
  auto grow = [](std::vector<uint8_t> v, size_t n) {
    v.insert(v.end() - 4, n, 0);
    return v;
  };
  EXPECT_EQ(parse(grow(a, 4)), ParseError::kLengthMismatch);
  Headers cnp;
  cnp.bth.opcode = kCnpOpcode;
  const auto c = build(cnp, {});
  EXPECT_EQ(parse(c), ParseError::kOk);
  EXPECT_EQ(parse(grow(c, 4)), ParseError::kLengthMismatch);
  EXPECT_EQ(parse(std::vector<uint8_t>(c.begin(), c.end() - 4)), ParseError::kTruncated);
  EXPECT_EQ(parse(grow(good, 1)), ParseError::kLengthMismatch);
  EXPECT_EQ(parse(grow(atomic_write, 4)), ParseError::kLengthMismatch);
}

TEST(Packet, ParseErrorNames) {
  EXPECT_EQ(parse_error_name(ParseError::kOk), "ok");
  EXPECT_EQ(parse_error_name(ParseError::kTruncated), "truncated");
  EXPECT_EQ(parse_error_name(ParseError::kUnknownOpcode), "unknown_opcode");
  EXPECT_EQ(parse_error_name(ParseError::kOpcodeNotForTransport), "opcode_not_for_transport");
  EXPECT_EQ(parse_error_name(ParseError::kBadTver), "bad_tver");
  EXPECT_EQ(parse_error_name(ParseError::kBadPadCnt), "bad_padcnt");
  EXPECT_EQ(parse_error_name(ParseError::kLengthMismatch), "length_mismatch");
  EXPECT_EQ(parse_error_name(ParseError::kBadIcrc), "bad_icrc");
}

// Every prefix of every opcode's packet parses without reading past its end (ASan build).
TEST(Packet, EveryTruncationOfEveryOpcodeStaysInBounds) {
  std::mt19937_64 rng(7);
  for (int op : valid_opcodes()) {
    const OpcodeInfo& info = opcode_info(static_cast<uint8_t>(op));
    const size_t len =
        info.fixed_payload_len ? info.fixed_payload_len : ((info.flags & kPayload) ? 13 : 0);
    const auto full =
        build(random_headers(static_cast<uint8_t>(op), rng), std::vector<uint8_t>(len, 0xAB));
    for (size_t n = 0; n < full.size(); ++n) {
      ParsedPacket p;
      const std::vector<uint8_t> cut(full.begin(), full.begin() + n);
      const ParseError e = parse_exact(cut, p);
      if (n < info.header_len + kIcrcLen) {
        EXPECT_EQ(e, ParseError::kTruncated) << info.name << " " << n;
      } else {
        // A cut inside the payload: what is left is a shorter, misaligned or mis-padded
        // packet, never a crash.
        EXPECT_NE(e, ParseError::kTruncated) << info.name << " " << n;
      }
    }
  }
}

TEST(Packet, RandomBytesUnderEveryOpcodeStayInBounds) {
  std::mt19937_64 rng(11);
  for (int op = 0; op < 256; ++op) {
    for (size_t n = 0; n <= 72; ++n) {
      std::vector<uint8_t> v(n);
      for (auto& b : v) b = static_cast<uint8_t>(rng());
      if (n > 0) v[0] = static_cast<uint8_t>(op);
      if (n > 1 && (rng() & 1)) v[1] &= 0xF0;  // TVer 0 half of the time
      ParsedPacket p;
      const ParseError e = parse_exact(v, p);
      if (e == ParseError::kOk) {
        EXPECT_EQ(p.header_len, opcode_info(static_cast<uint8_t>(op)).header_len);
      }
    }
  }
}

}  // namespace
}  // namespace uroce::wire
