// RoCE v2 transport headers (BTH and every extended header) and the pure codec that parses
// and builds the UDP payload of a RoCE v2 packet: BTH | ext. headers | payload | pad | ICRC.
// Parsing returns views into the caller's bytes; building writes into the caller's buffer.
// Nothing here allocates. The ICRC needs the IP/UDP headers too: see icrc.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "uroce/vocab/psn.hpp"
#include "wire/header_layout.hpp"  // kBthLen, kIcrcLen, kCnpPadLen and the other header sizes
#include "wire/opcode.hpp"

namespace uroce::wire {

inline constexpr uint16_t kRoceV2Port = 4791;
inline constexpr uint16_t kDefaultPkey = 0xFFFF;
inline constexpr uint32_t kGsiQkey = 0x80010000;

struct Bth {
  uint8_t opcode = 0;
  bool se = false;
  bool migreq = false;
  uint8_t padcnt = 0;  // parse: as carried; build: computed from the payload length
  uint8_t tver = 0;
  uint16_t pkey = kDefaultPkey;
  bool fecn = false;
  bool becn = false;
  uint32_t dqpn = 0;  // 24 bits
  bool ackreq = false;
  Psn psn;

  bool operator==(const Bth&) const = default;
};

struct Reth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;  // length of the whole message

  bool operator==(const Reth&) const = default;
};

enum class AethType : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };

enum class NakCode : uint8_t {
  kPsnSequenceError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOperationalError = 3,
  kInvalidRdRequest = 4,
};

inline constexpr uint8_t kCreditInvalid = 0x1F;  // "no credit information", what rxe sends

struct Aeth {
  uint8_t syndrome = 0;  // type << 5 | value
  uint32_t msn = 0;      // 24 bits

  [[nodiscard]] constexpr AethType type() const {
    return static_cast<AethType>((syndrome >> 5) & 3);
  }
  [[nodiscard]] constexpr uint8_t value() const { return syndrome & 0x1F; }
  static constexpr uint8_t ack(uint8_t credit = kCreditInvalid) { return credit & 0x1F; }
  static constexpr uint8_t rnr_nak(uint8_t timer_code) { return 0x20 | (timer_code & 0x1F); }
  static constexpr uint8_t nak(NakCode code) { return 0x60 | static_cast<uint8_t>(code); }

  bool operator==(const Aeth&) const = default;
};

struct AtomicEth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint64_t swap_add = 0;
  uint64_t compare = 0;

  bool operator==(const AtomicEth&) const = default;
};

struct AtomicAckEth {
  uint64_t orig = 0;

  bool operator==(const AtomicAckEth&) const = default;
};

struct Deth {
  uint32_t qkey = 0;
  uint32_t src_qp = 0;  // 24 bits

  bool operator==(const Deth&) const = default;
};

struct Feth {
  uint32_t bits = 0;  // FLUSH selectivity level / placement type (IBA 1.5), kept raw

  // rxe_hdr.h FETH_PLT_MASK / FETH_SEL_MASK: placement type bits 0..3, selectivity 4..5;
  // the other bits are reserved.
  static constexpr uint32_t kPlacementMask = 0x0F;
  static constexpr uint32_t kSelectivityShift = 4;
  static constexpr uint32_t kSelectivityMask = 0x30;
  [[nodiscard]] static constexpr Feth make(uint32_t placement, uint32_t selectivity) {
    return Feth{(placement & kPlacementMask) |
                ((selectivity << kSelectivityShift) & kSelectivityMask)};
  }
  [[nodiscard]] constexpr uint32_t placement() const { return bits & kPlacementMask; }
  [[nodiscard]] constexpr uint32_t selectivity() const {
    return (bits & kSelectivityMask) >> kSelectivityShift;
  }

  bool operator==(const Feth&) const = default;
};

// Every header a RoCE packet can carry. Only those the opcode's table entry names are
// written by build_packet() and filled by parse_packet(); the others are left as they are.
struct Headers {
  Bth bth;
  Deth deth;
  Feth feth;
  Reth reth;
  AtomicEth atomic_eth;
  Aeth aeth;
  AtomicAckEth atomic_ack_eth;
  uint32_t immdt = 0;  // big endian on the wire, host order here
  uint32_t ieth_rkey = 0;

  bool operator==(const Headers&) const = default;
};

// All headers zero, for a packet built from scratch: `Headers h = kNoHeaders;`. A copy of this
// object is a few vector moves; `Headers h{}` is zeroed by `rep stos`, whose start-up cost
// showed in the profile of every packet built. Defined out of line so that the compiler
// cannot turn the copy back into that zeroing.
extern const Headers kNoHeaders;

// Why a packet was rejected. Each value maps to a drop counter (see parse_error_name).
// parse_packet() checks in this order and reports the first failure: BTH present, TVer,
// opcode, headers and ICRC present, PadCnt, length.
enum class ParseError : uint8_t {
  kOk = 0,
  kTruncated,              // shorter than BTH + headers + ICRC
  kUnknownOpcode,          // no table entry (RD, XRC, CNP transport other than 0x81, reserved)
  kOpcodeNotForTransport,  // an RC operation under UC or UD that those transports lack
  kBadTver,                // TVer != 0
  kBadPadCnt,              // pad on an opcode without payload, or pad longer than the payload
  kLengthMismatch,         // payload where none is allowed, a CNP or ATOMIC WRITE of the wrong
                           // size, or payload + pad not a multiple of 4 bytes
  kBadIcrc,                // reported by verify_icrc(), never by parse_packet()
};

[[nodiscard]] std::string_view parse_error_name(ParseError e);  // "truncated", "bad_icrc", …

struct ParsedPacket {
  Headers hdr;
  const OpcodeInfo* info = nullptr;
  std::span<const uint8_t> payload;  // without pad and ICRC
  uint32_t icrc = 0;                 // as carried (little-endian on the wire)
  size_t header_len = 0;             // BTH + extended headers
};

// Parses the UDP payload of a RoCE v2 packet (BTH .. ICRC). Never reads outside `bytes`.
// Does not check the ICRC. On success every header the opcode carries is filled (the
// others in out.hdr are left as they were). On failure out.hdr.bth is filled when the
// packet holds a whole BTH and out.info points at the opcode's entry once it was looked up
// (so a dump can still name what it dropped); out.payload stays empty.
[[nodiscard]] ParseError parse_packet(std::span<const uint8_t> bytes, ParsedPacket& out);

// Bytes build_packet() will write for this opcode and payload (headers+payload+pad+ICRC);
// 0 for an unknown opcode or a payload length the opcode cannot carry.
[[nodiscard]] size_t packet_size(uint8_t opcode, size_t payload_len);

// Writes BTH, the opcode's extended headers, the payload, zero pad (PadCnt computed) and a
// zero ICRC placeholder into `out`. Returns the bytes written, 0 when `out` is too small,
// the opcode is unknown or cannot carry this payload (see packet_size()). Reserved bits are
// written as zero; TVer as given (0 unless a test wants a bad one). `payload` may alias
// `out`. Fill the ICRC afterwards with icrc.hpp.
[[nodiscard]] size_t build_packet(const Headers& hdr, std::span<const uint8_t> payload,
                                  std::span<uint8_t> out);

// Writes only the headers (payload follows at out[header_len]); returns header_len. For
// callers that copy the payload themselves (scatter-gather); they also write the zero pad
// and the ICRC. PadCnt is computed from payload_len. Returns 0 in the cases build_packet()
// does.
[[nodiscard]] size_t build_headers(const Headers& hdr, size_t payload_len, std::span<uint8_t> out);

}  // namespace uroce::wire
