// The one RoCE v2 opcode table (IBTA Vol 1 §9.2, Table 35; RoCE v2 CNP from Annex A17).
// Parsing, building, validation and naming all read this table; nothing else in uroce may
// hard-code which extended headers an opcode carries.
#pragma once

#include <cstdint>
#include <string_view>

namespace uroce::wire {

// Transport prefix: upper 3 bits of the BTH opcode.
enum class Transport : uint8_t {
  kRc = 0x00,
  kUc = 0x20,
  kRd = 0x40,
  kUd = 0x60,
  kCnp = 0x80,
  kXrc = 0xA0
};

// Operation: lower 5 bits of the BTH opcode.
enum class Op : uint8_t {
  kSendFirst = 0x00,
  kSendMiddle = 0x01,
  kSendLast = 0x02,
  kSendLastImm = 0x03,
  kSendOnly = 0x04,
  kSendOnlyImm = 0x05,
  kWriteFirst = 0x06,
  kWriteMiddle = 0x07,
  kWriteLast = 0x08,
  kWriteLastImm = 0x09,
  kWriteOnly = 0x0A,
  kWriteOnlyImm = 0x0B,
  kReadRequest = 0x0C,
  kReadResponseFirst = 0x0D,
  kReadResponseMiddle = 0x0E,
  kReadResponseLast = 0x0F,
  kReadResponseOnly = 0x10,
  kAcknowledge = 0x11,
  kAtomicAcknowledge = 0x12,
  kCompareSwap = 0x13,
  kFetchAdd = 0x14,
  kSendLastInv = 0x16,
  kSendOnlyInv = 0x17,
  kFlush = 0x1C,
  kAtomicWrite = 0x1D,
};

inline constexpr uint8_t kCnpOpcode = 0x81;

constexpr uint8_t make_opcode(Transport t, Op op) {
  return static_cast<uint8_t>(static_cast<uint8_t>(t) | static_cast<uint8_t>(op));
}

// Which headers follow the BTH, in wire order: DETH, FETH, RETH, AtomicETH, AETH,
// AtomicAckETH, ImmDt, IETH (no opcode carries a combination that reorders these).
enum HeaderBit : uint16_t {
  kHasDeth = 1 << 0,
  kHasFeth = 1 << 1,
  kHasReth = 1 << 2,
  kHasAtomicEth = 1 << 3,
  kHasAeth = 1 << 4,
  kHasAtomicAckEth = 1 << 5,
  kHasImmDt = 1 << 6,
  kHasIeth = 1 << 7,
  kHasCnpPad = 1 << 8,  // the CNP's 16 reserved bytes
};

// Message position and kind, used by requester/responder decision lists.
enum OpFlag : uint16_t {
  kFirst = 1 << 0,
  kMiddle = 1 << 1,
  kLast = 1 << 2,
  kOnly = kFirst | kLast,
  kPayload = 1 << 3,  // the packet may carry payload
  kIsSend = 1 << 4,
  kIsWrite = 1 << 5,
  kIsReadRequest = 1 << 6,
  kIsReadResponse = 1 << 7,
  kIsAtomic = 1 << 8,
  kIsAck = 1 << 9,        // ACK or atomic ACK
  kIsRequest = 1 << 10,   // sent by a requester (SEND/WRITE/READ req/atomic/flush)
  kIsResponse = 1 << 11,  // sent by a responder (ACK, READ response, atomic ACK)
  kImm = 1 << 12,
  kInv = 1 << 13,
  kIsCnp = 1 << 14,
};

// FLUSH and ATOMIC WRITE (IBA 1.5) carry kIsRequest and position flags only, no kind flag:
// they are neither ordinary writes nor AtomicETH atomics, so the transport must match their
// opcodes explicitly (Linux >= 6.2 answers both with a plain ACK).
struct OpcodeInfo {
  // e.g. "RC_SEND_FIRST", "UD_SEND_ONLY", "CNP" (uroce dump's names). RD and XRC opcodes are
  // named although invalid; reserved opcodes have an empty name.
  std::string_view name;
  uint16_t headers = 0;    // HeaderBit mask
  uint16_t flags = 0;      // OpFlag mask
  uint8_t header_len = 0;  // bytes of BTH + extended headers (payload starts here)
  bool valid = false;
  uint8_t fixed_payload_len = 0;  // nonzero: payload must be exactly this long (ATOMIC WRITE: 8)
};

// Info for any 8-bit opcode; `.valid == false` for opcodes uroce does not know (RD, XRC,
// reserved), which are dropped and counted as unknown_opcode.
[[nodiscard]] const OpcodeInfo& opcode_info(uint8_t opcode);

[[nodiscard]] constexpr Transport transport_of(uint8_t opcode) {
  return static_cast<Transport>(opcode & 0xE0);
}

}  // namespace uroce::wire
