// The RoCE v2 transport codec: BTH and extended headers (IBTA Vol 1 §9.2-§9.3) to and from
// the structs of packet.hpp. Every header position comes from the opcode table; every
// access is bounds-checked against the caller's span before it happens.
#include "wire/packet.hpp"

#include <cstring>

#include "wire/byte_order.hpp"
#include "wire/header_layout.hpp"

namespace uroce::wire {
namespace {

// BTH bit layout (§9.2): byte 1 = SE | M | PadCnt(2) | TVer(4); byte 4 = FECN | BECN |
// reserved(6); byte 8 = AckReq | reserved(7).
constexpr uint8_t kSeBit = 0x80;
constexpr uint8_t kMigReqBit = 0x40;
constexpr int kPadCntShift = 4;
constexpr uint8_t kTverMask = 0x0F;
constexpr uint8_t kFecnBit = 0x80;
constexpr uint8_t kBecnBit = 0x40;
constexpr uint8_t kAckReqBit = 0x80;

constexpr uint8_t pad_for(size_t payload_len) {
  return static_cast<uint8_t>((4 - (payload_len & 3)) & 3);
}

void parse_bth(const uint8_t* p, Bth& bth) {
  bth.opcode = p[0];
  bth.se = (p[1] & kSeBit) != 0;
  bth.migreq = (p[1] & kMigReqBit) != 0;
  bth.padcnt = (p[1] >> kPadCntShift) & 3;
  bth.tver = p[1] & kTverMask;
  bth.pkey = load_be16(p + 2);
  bth.fecn = (p[4] & kFecnBit) != 0;
  bth.becn = (p[4] & kBecnBit) != 0;
  bth.dqpn = load_be24(p + 5);
  bth.ackreq = (p[8] & kAckReqBit) != 0;
  bth.psn = Psn(load_be24(p + 9));
}

void write_bth(const Bth& bth, uint8_t padcnt, uint8_t* p) {
  p[0] = bth.opcode;
  p[1] = static_cast<uint8_t>((bth.se ? kSeBit : 0) | (bth.migreq ? kMigReqBit : 0) |
                              (padcnt << kPadCntShift) | (bth.tver & kTverMask));
  store_be16(p + 2, bth.pkey);
  p[4] = static_cast<uint8_t>((bth.fecn ? kFecnBit : 0) | (bth.becn ? kBecnBit : 0));
  store_be24(p + 5, bth.dqpn);
  p[8] = bth.ackreq ? kAckReqBit : 0;
  store_be24(p + 9, bth.psn.value());
}

// Reads the extended headers named by `headers`; the caller checked that they fit.
void parse_ext(uint16_t headers, const uint8_t* p, Headers& h) {
  if (headers & kHasDeth) {
    const uint8_t* d = p + ext_header_offset(headers, kHasDeth);
    h.deth.qkey = load_be32(d);
    h.deth.src_qp = load_be24(d + 5);  // byte 4 is reserved
  }
  if (headers & kHasFeth) h.feth.bits = load_be32(p + ext_header_offset(headers, kHasFeth));
  if (headers & kHasReth) {
    const uint8_t* r = p + ext_header_offset(headers, kHasReth);
    h.reth.va = load_be64(r);
    h.reth.rkey = load_be32(r + 8);
    h.reth.dma_len = load_be32(r + 12);
  }
  if (headers & kHasAtomicEth) {
    const uint8_t* a = p + ext_header_offset(headers, kHasAtomicEth);
    h.atomic_eth.va = load_be64(a);
    h.atomic_eth.rkey = load_be32(a + 8);
    h.atomic_eth.swap_add = load_be64(a + 12);
    h.atomic_eth.compare = load_be64(a + 20);
  }
  if (headers & kHasAeth) {
    const uint8_t* a = p + ext_header_offset(headers, kHasAeth);
    h.aeth.syndrome = a[0];
    h.aeth.msn = load_be24(a + 1);
  }
  if (headers & kHasAtomicAckEth) {
    h.atomic_ack_eth.orig = load_be64(p + ext_header_offset(headers, kHasAtomicAckEth));
  }
  if (headers & kHasImmDt) h.immdt = load_be32(p + ext_header_offset(headers, kHasImmDt));
  if (headers & kHasIeth) h.ieth_rkey = load_be32(p + ext_header_offset(headers, kHasIeth));
}

void write_ext(uint16_t headers, const Headers& h, uint8_t* p) {
  if (headers & kHasDeth) {
    uint8_t* d = p + ext_header_offset(headers, kHasDeth);
    store_be32(d, h.deth.qkey);
    d[4] = 0;
    store_be24(d + 5, h.deth.src_qp);
  }
  if (headers & kHasFeth) store_be32(p + ext_header_offset(headers, kHasFeth), h.feth.bits);
  if (headers & kHasReth) {
    uint8_t* r = p + ext_header_offset(headers, kHasReth);
    store_be64(r, h.reth.va);
    store_be32(r + 8, h.reth.rkey);
    store_be32(r + 12, h.reth.dma_len);
  }
  if (headers & kHasAtomicEth) {
    uint8_t* a = p + ext_header_offset(headers, kHasAtomicEth);
    store_be64(a, h.atomic_eth.va);
    store_be32(a + 8, h.atomic_eth.rkey);
    store_be64(a + 12, h.atomic_eth.swap_add);
    store_be64(a + 20, h.atomic_eth.compare);
  }
  if (headers & kHasAeth) {
    uint8_t* a = p + ext_header_offset(headers, kHasAeth);
    a[0] = h.aeth.syndrome;
    store_be24(a + 1, h.aeth.msn);
  }
  if (headers & kHasAtomicAckEth) {
    store_be64(p + ext_header_offset(headers, kHasAtomicAckEth), h.atomic_ack_eth.orig);
  }
  if (headers & kHasImmDt) store_be32(p + ext_header_offset(headers, kHasImmDt), h.immdt);
  if (headers & kHasIeth) store_be32(p + ext_header_offset(headers, kHasIeth), h.ieth_rkey);
  if (headers & kHasCnpPad) {
    std::memset(p + ext_header_offset(headers, kHasCnpPad), 0, kCnpPadLen);
  }
}

// Why an opcode without a table entry is rejected: an operation RC has, carried by UC or
// UD, is a transport mismatch; anything else (RD, XRC, reserved) is simply unknown.
ParseError classify_invalid(uint8_t opcode) {
  const Transport t = transport_of(opcode);
  if ((t == Transport::kUc || t == Transport::kUd) && opcode_info(opcode & 0x1F).valid) {
    return ParseError::kOpcodeNotForTransport;
  }
  return ParseError::kUnknownOpcode;
}

// Whether `info` can carry `payload_len` bytes of payload.
bool payload_allowed(const OpcodeInfo& info, size_t payload_len) {
  if (info.fixed_payload_len != 0) return payload_len == info.fixed_payload_len;
  return (info.flags & kPayload) != 0 || payload_len == 0;
}

}  // namespace

const Headers kNoHeaders{};

std::string_view parse_error_name(ParseError e) {
  switch (e) {
    case ParseError::kOk:
      return "ok";
    case ParseError::kTruncated:
      return "truncated";
    case ParseError::kUnknownOpcode:
      return "unknown_opcode";
    case ParseError::kOpcodeNotForTransport:
      return "opcode_not_for_transport";
    case ParseError::kBadTver:
      return "bad_tver";
    case ParseError::kBadPadCnt:
      return "bad_padcnt";
    case ParseError::kLengthMismatch:
      return "length_mismatch";
    case ParseError::kBadIcrc:
      return "bad_icrc";
  }
  return "unknown";
}

ParseError parse_packet(std::span<const uint8_t> bytes, ParsedPacket& out) {
  out.info = nullptr;
  out.payload = {};
  out.icrc = 0;
  out.header_len = 0;
  if (bytes.size() < kBthLen) return ParseError::kTruncated;
  const uint8_t* p = bytes.data();
  parse_bth(p, out.hdr.bth);
  // TVer 0 is the only BTH version (§9.2); a later one is not ours to interpret (rxe drops it too).
  if (out.hdr.bth.tver != 0) return ParseError::kBadTver;
  const OpcodeInfo& info = opcode_info(out.hdr.bth.opcode);
  out.info = &info;
  if (!info.valid) return classify_invalid(out.hdr.bth.opcode);
  if (bytes.size() < size_t{info.header_len} + kIcrcLen) return ParseError::kTruncated;

  // What lies between the headers and the ICRC is payload plus PadCnt bytes of pad, and
  // every RoCE packet is a whole number of 4-byte words (§9.2: PadCnt aligns the payload).
  const size_t body = bytes.size() - info.header_len - kIcrcLen;
  const uint8_t padcnt = out.hdr.bth.padcnt;
  if (info.fixed_payload_len != 0) {
    if (padcnt != 0) return ParseError::kBadPadCnt;
    if (body != info.fixed_payload_len) return ParseError::kLengthMismatch;
  } else if ((info.flags & kPayload) == 0) {
    if (padcnt != 0) return ParseError::kBadPadCnt;
    if (body != 0) return ParseError::kLengthMismatch;
  } else {
    if (padcnt > body) return ParseError::kBadPadCnt;
    if ((body & 3) != 0) return ParseError::kLengthMismatch;
  }

  parse_ext(info.headers, p, out.hdr);
  out.header_len = info.header_len;
  out.payload = bytes.subspan(info.header_len, body - padcnt);
  out.icrc = load_le32(p + bytes.size() - kIcrcLen);
  return ParseError::kOk;
}

size_t packet_size(uint8_t opcode, size_t payload_len) {
  const OpcodeInfo& info = opcode_info(opcode);
  if (!info.valid || !payload_allowed(info, payload_len)) return 0;
  return info.header_len + payload_len + pad_for(payload_len) + kIcrcLen;
}

size_t build_headers(const Headers& hdr, size_t payload_len, std::span<uint8_t> out) {
  const OpcodeInfo& info = opcode_info(hdr.bth.opcode);
  if (!info.valid || !payload_allowed(info, payload_len) || out.size() < info.header_len) {
    return 0;
  }
  write_bth(hdr.bth, pad_for(payload_len), out.data());
  write_ext(info.headers, hdr, out.data());
  return info.header_len;
}

size_t build_packet(const Headers& hdr, std::span<const uint8_t> payload, std::span<uint8_t> out) {
  const size_t size = packet_size(hdr.bth.opcode, payload.size());
  if (size == 0 || out.size() < size) return 0;
  const size_t header_len = build_headers(hdr, payload.size(), out);
  uint8_t* p = out.data() + header_len;
  // memmove: a caller may have placed the payload in `out` already.
  if (!payload.empty()) std::memmove(p, payload.data(), payload.size());
  std::memset(p + payload.size(), 0, size - header_len - payload.size());  // pad + ICRC
  return size;
}

}  // namespace uroce::wire
