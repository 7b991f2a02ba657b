// The opcode table: one constexpr entry for each of the 256 BTH opcode values (IBTA Vol 1
// §9.2, Table 35 "OpCode field"; RC SEND with Invalidate from §9.2.1; FLUSH and ATOMIC WRITE
// from IBA 1.5; the RoCE v2 CNP from Annex A17.9). Which headers follow the BTH and what an
// opcode means are written once here, per operation, and reused for every transport that
// carries the operation.
#include "wire/opcode.hpp"

#include <array>
#include <cstddef>

#include "wire/header_layout.hpp"

namespace uroce::wire {
namespace {

struct OpShape {
  uint16_t headers = 0;
  uint16_t flags = 0;
  uint8_t fixed_payload_len = 0;
};

constexpr uint16_t kSendReq = kPayload | kIsSend | kIsRequest;
constexpr uint16_t kWriteReq = kPayload | kIsWrite | kIsRequest;
constexpr uint16_t kReadResp = kPayload | kIsReadResponse | kIsResponse;

// Headers and flags of an RC operation (the transport-independent part of Table 35).
constexpr OpShape rc_shape(uint8_t op) {
  switch (static_cast<Op>(op)) {
    case Op::kSendFirst:
      return {0, kFirst | kSendReq};
    case Op::kSendMiddle:
      return {0, kMiddle | kSendReq};
    case Op::kSendLast:
      return {0, kLast | kSendReq};
    case Op::kSendLastImm:
      return {kHasImmDt, kLast | kSendReq | kImm};
    case Op::kSendOnly:
      return {0, kOnly | kSendReq};
    case Op::kSendOnlyImm:
      return {kHasImmDt, kOnly | kSendReq | kImm};
    case Op::kWriteFirst:
      return {kHasReth, kFirst | kWriteReq};
    case Op::kWriteMiddle:
      return {0, kMiddle | kWriteReq};
    case Op::kWriteLast:
      return {0, kLast | kWriteReq};
    case Op::kWriteLastImm:
      return {kHasImmDt, kLast | kWriteReq | kImm};
    case Op::kWriteOnly:
      return {kHasReth, kOnly | kWriteReq};
    case Op::kWriteOnlyImm:
      return {kHasReth | kHasImmDt, kOnly | kWriteReq | kImm};
    // A READ request is a whole message in one packet; its responses may be many (§9.4.3).
    case Op::kReadRequest:
      return {kHasReth, kOnly | kIsReadRequest | kIsRequest};
    case Op::kReadResponseFirst:
      return {kHasAeth, kFirst | kReadResp};
    case Op::kReadResponseMiddle:
      return {0, kMiddle | kReadResp};
    case Op::kReadResponseLast:
      return {kHasAeth, kLast | kReadResp};
    case Op::kReadResponseOnly:
      return {kHasAeth, kOnly | kReadResp};
    case Op::kAcknowledge:
      return {kHasAeth, kOnly | kIsAck | kIsResponse};
    case Op::kAtomicAcknowledge:
      return {kHasAeth | kHasAtomicAckEth, kOnly | kIsAck | kIsResponse};
    case Op::kCompareSwap:
      return {kHasAtomicEth, kOnly | kIsAtomic | kIsRequest};
    case Op::kFetchAdd:
      return {kHasAtomicEth, kOnly | kIsAtomic | kIsRequest};
    case Op::kSendLastInv:
      return {kHasIeth, kLast | kSendReq | kInv};
    case Op::kSendOnlyInv:
      return {kHasIeth, kOnly | kSendReq | kInv};
    case Op::kFlush:
      return {kHasFeth | kHasReth, kOnly | kIsRequest};
    case Op::kAtomicWrite:
      return {kHasReth, kOnly | kPayload | kIsRequest, kAtomicWritePayloadLen};
  }
  return {};
}

constexpr bool rc_has(uint8_t op) {
  return op <= 0x14 || op == 0x16 || op == 0x17 || op == 0x1C || op == 0x1D;
}

struct Name {
  uint8_t opcode;
  std::string_view name;
};

// Names as `uroce dump --json` prints them (the scapy/Wireshark spelling with a transport
// prefix). RD and XRC are named so a dump can say what it dropped.
constexpr Name kNames[] = {
    {0x00, "RC_SEND_FIRST"},
    {0x01, "RC_SEND_MIDDLE"},
    {0x02, "RC_SEND_LAST"},
    {0x03, "RC_SEND_LAST_WITH_IMMEDIATE"},
    {0x04, "RC_SEND_ONLY"},
    {0x05, "RC_SEND_ONLY_WITH_IMMEDIATE"},
    {0x06, "RC_RDMA_WRITE_FIRST"},
    {0x07, "RC_RDMA_WRITE_MIDDLE"},
    {0x08, "RC_RDMA_WRITE_LAST"},
    {0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE"},
    {0x0A, "RC_RDMA_WRITE_ONLY"},
    {0x0B, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"},
    {0x0C, "RC_RDMA_READ_REQUEST"},
    {0x0D, "RC_RDMA_READ_RESPONSE_FIRST"},
    {0x0E, "RC_RDMA_READ_RESPONSE_MIDDLE"},
    {0x0F, "RC_RDMA_READ_RESPONSE_LAST"},
    {0x10, "RC_RDMA_READ_RESPONSE_ONLY"},
    {0x11, "RC_ACKNOWLEDGE"},
    {0x12, "RC_ATOMIC_ACKNOWLEDGE"},
    {0x13, "RC_COMPARE_SWAP"},
    {0x14, "RC_FETCH_ADD"},
    {0x16, "RC_SEND_LAST_WITH_INVALIDATE"},
    {0x17, "RC_SEND_ONLY_WITH_INVALIDATE"},
    {0x1C, "RC_FLUSH"},
    {0x1D, "RC_ATOMIC_WRITE"},
    {0x20, "UC_SEND_FIRST"},
    {0x21, "UC_SEND_MIDDLE"},
    {0x22, "UC_SEND_LAST"},
    {0x23, "UC_SEND_LAST_WITH_IMMEDIATE"},
    {0x24, "UC_SEND_ONLY"},
    {0x25, "UC_SEND_ONLY_WITH_IMMEDIATE"},
    {0x26, "UC_RDMA_WRITE_FIRST"},
    {0x27, "UC_RDMA_WRITE_MIDDLE"},
    {0x28, "UC_RDMA_WRITE_LAST"},
    {0x29, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE"},
    {0x2A, "UC_RDMA_WRITE_ONLY"},
    {0x2B, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"},
    {0x40, "RD_SEND_FIRST"},
    {0x41, "RD_SEND_MIDDLE"},
    {0x42, "RD_SEND_LAST"},
    {0x43, "RD_SEND_LAST_WITH_IMMEDIATE"},
    {0x44, "RD_SEND_ONLY"},
    {0x45, "RD_SEND_ONLY_WITH_IMMEDIATE"},
    {0x46, "RD_RDMA_WRITE_FIRST"},
    {0x47, "RD_RDMA_WRITE_MIDDLE"},
    {0x48, "RD_RDMA_WRITE_LAST"},
    {0x49, "RD_RDMA_WRITE_LAST_WITH_IMMEDIATE"},
    {0x4A, "RD_RDMA_WRITE_ONLY"},
    {0x4B, "RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE"},
    {0x4C, "RD_RDMA_READ_REQUEST"},
    {0x4D, "RD_RDMA_READ_RESPONSE_FIRST"},
    {0x4E, "RD_RDMA_READ_RESPONSE_MIDDLE"},
    {0x4F, "RD_RDMA_READ_RESPONSE_LAST"},
    {0x50, "RD_RDMA_READ_RESPONSE_ONLY"},
    {0x51, "RD_ACKNOWLEDGE"},
    {0x52, "RD_ATOMIC_ACKNOWLEDGE"},
    {0x53, "RD_COMPARE_SWAP"},
    {0x54, "RD_FETCH_ADD"},
    {0x55, "RD_RESYNC"},
    {0x64, "UD_SEND_ONLY"},
    {0x65, "UD_SEND_ONLY_WITH_IMMEDIATE"},
    {0x81, "CNP"},
    {0xA0, "XRC_SEND_FIRST"},
    {0xA1, "XRC_SEND_MIDDLE"},
    {0xA2, "XRC_SEND_LAST"},
    {0xA3, "XRC_SEND_LAST_WITH_IMMEDIATE"},
    {0xA4, "XRC_SEND_ONLY"},
    {0xA5, "XRC_SEND_ONLY_WITH_IMMEDIATE"},
    {0xA6, "XRC_RDMA_WRITE_FIRST"},
    {0xA7, "XRC_RDMA_WRITE_MIDDLE"},
    {0xA8, "XRC_RDMA_WRITE_LAST"},
    {0xA9, "XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE"},
    {0xAA, "XRC_RDMA_WRITE_ONLY"},
    {0xAB, "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"},
    {0xAC, "XRC_RDMA_READ_REQUEST"},
    {0xAD, "XRC_RDMA_READ_RESPONSE_FIRST"},
    {0xAE, "XRC_RDMA_READ_RESPONSE_MIDDLE"},
    {0xAF, "XRC_RDMA_READ_RESPONSE_LAST"},
    {0xB0, "XRC_RDMA_READ_RESPONSE_ONLY"},
    {0xB1, "XRC_ACKNOWLEDGE"},
    {0xB2, "XRC_ATOMIC_ACKNOWLEDGE"},
    {0xB3, "XRC_COMPARE_SWAP"},
    {0xB4, "XRC_FETCH_ADD"},
    {0xB6, "XRC_SEND_LAST_WITH_INVALIDATE"},
    {0xB7, "XRC_SEND_ONLY_WITH_INVALIDATE"},
};

constexpr OpcodeInfo make_info(uint8_t opcode) {
  OpcodeInfo info;
  for (const Name& n : kNames) {
    if (n.opcode == opcode) info.name = n.name;
  }
  const uint8_t op = opcode & 0x1F;
  OpShape shape;
  switch (transport_of(opcode)) {
    case Transport::kRc:
      if (!rc_has(op)) return info;
      shape = rc_shape(op);
      break;
    case Transport::kUc:
      // UC: SEND and RDMA WRITE only (Table 35), same headers as RC.
      if (op > static_cast<uint8_t>(Op::kWriteOnlyImm)) return info;
      shape = rc_shape(op);
      break;
    case Transport::kUd:
      // UD: SEND Only (with Immediate), each with a DETH before any ImmDt.
      if (op != static_cast<uint8_t>(Op::kSendOnly) &&
          op != static_cast<uint8_t>(Op::kSendOnlyImm)) {
        return info;
      }
      shape = rc_shape(op);
      shape.headers |= kHasDeth;
      break;
    case Transport::kCnp:
      if (opcode != kCnpOpcode) return info;
      shape = {kHasCnpPad, kIsCnp};
      break;
    default:  // RD, XRC and the manufacturer-specific 0xC0-0xFF: not implemented by uroce
      return info;
  }
  info.headers = shape.headers;
  info.flags = shape.flags;
  info.header_len = static_cast<uint8_t>(headers_len(shape.headers));
  info.fixed_payload_len = shape.fixed_payload_len;
  info.valid = true;
  return info;
}

constexpr std::array<OpcodeInfo, 256> make_table() {
  std::array<OpcodeInfo, 256> table{};
  for (size_t i = 0; i < table.size(); ++i) table[i] = make_info(static_cast<uint8_t>(i));
  return table;
}

constexpr std::array<OpcodeInfo, 256> kTable = make_table();

constexpr uint8_t rc(Op op) {
  return make_opcode(Transport::kRc, op);
}
constexpr uint8_t uc(Op op) {
  return make_opcode(Transport::kUc, op);
}
constexpr uint8_t ud(Op op) {
  return make_opcode(Transport::kUd, op);
}

// Header lengths and offsets checked against IBTA Table 35 and Linux rxe_opcode.c.
static_assert(kTable[rc(Op::kSendFirst)].header_len == 12);
static_assert(kTable[rc(Op::kSendLastImm)].header_len == 16);
static_assert(kTable[rc(Op::kWriteFirst)].header_len == 28);
static_assert(kTable[rc(Op::kWriteOnlyImm)].header_len == 32);
static_assert(ext_header_offset(kTable[rc(Op::kWriteOnlyImm)].headers, kHasImmDt) == 28);
static_assert(kTable[rc(Op::kReadRequest)].header_len == 28);
static_assert(kTable[rc(Op::kReadResponseFirst)].header_len == 16);
static_assert(kTable[rc(Op::kReadResponseMiddle)].header_len == 12);
static_assert(kTable[rc(Op::kAcknowledge)].header_len == 16);
static_assert(kTable[rc(Op::kAtomicAcknowledge)].header_len == 24);
static_assert(ext_header_offset(kTable[rc(Op::kAtomicAcknowledge)].headers, kHasAtomicAckEth) ==
              16);
static_assert(kTable[rc(Op::kCompareSwap)].header_len == 40);
static_assert(kTable[rc(Op::kFetchAdd)].header_len == 40);
static_assert(kTable[rc(Op::kSendOnlyInv)].header_len == 16);
static_assert(kTable[rc(Op::kFlush)].header_len == 32);
static_assert(ext_header_offset(kTable[rc(Op::kFlush)].headers, kHasFeth) == 12);
static_assert(ext_header_offset(kTable[rc(Op::kFlush)].headers, kHasReth) == 16);
static_assert(kTable[rc(Op::kAtomicWrite)].header_len == 28);
static_assert(kTable[rc(Op::kAtomicWrite)].fixed_payload_len == 8);
static_assert(kTable[uc(Op::kWriteOnlyImm)].header_len == 32);
static_assert(!kTable[uc(Op::kReadRequest)].valid);
static_assert(kTable[ud(Op::kSendOnly)].header_len == 20);
static_assert(kTable[ud(Op::kSendOnlyImm)].header_len == 24);
static_assert(ext_header_offset(kTable[ud(Op::kSendOnlyImm)].headers, kHasImmDt) == 20);
static_assert(!kTable[ud(Op::kSendFirst)].valid);
static_assert(kTable[kCnpOpcode].header_len == 28 && kTable[kCnpOpcode].name == "CNP");
static_assert(!kTable[0x15].valid && kTable[0x15].name.empty());
static_assert(!kTable[0x40].valid && kTable[0x40].name == "RD_SEND_FIRST");
static_assert(kTable[rc(Op::kSendFirst)].name == "RC_SEND_FIRST");
static_assert(kTable[uc(Op::kWriteOnlyImm)].name == "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE");
static_assert(kTable[ud(Op::kSendOnlyImm)].name == "UD_SEND_ONLY_WITH_IMMEDIATE");

constexpr bool every_valid_entry_named() {
  for (const OpcodeInfo& info : kTable) {
    if (info.valid && info.name.empty()) return false;
  }
  return true;
}
static_assert(every_valid_entry_named());

}  // namespace

const OpcodeInfo& opcode_info(uint8_t opcode) {
  return kTable[opcode];
}

}  // namespace uroce::wire
