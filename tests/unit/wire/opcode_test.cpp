// The opcode table against IBTA Table 35: which opcodes exist, their names, headers, lengths.
#include "wire/opcode.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "wire/header_layout.hpp"

namespace uroce::wire {
namespace {

TEST(Opcode, ExactlyTheKnownOpcodesAreValid) {
  std::set<int> valid;
  for (int op = 0; op < 256; ++op) {
    if (opcode_info(static_cast<uint8_t>(op)).valid) valid.insert(op);
  }
  std::set<int> expected;
  for (int op = 0x00; op <= 0x14; ++op) expected.insert(op);  // RC
  expected.insert({0x16, 0x17, 0x1C, 0x1D});
  for (int op = 0x20; op <= 0x2B; ++op) expected.insert(op);  // UC SEND and WRITE
  expected.insert({0x64, 0x65, 0x81});                        // UD SEND only, CNP
  EXPECT_EQ(valid, expected);
}

TEST(Opcode, NamesAsUroceDumpPrintsThem) {
  const std::map<int, std::string> names = {
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
      {0x25, "UC_SEND_ONLY_WITH_IMMEDIATE"},
      {0x2B, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"},
      {0x40, "RD_SEND_FIRST"},
      {0x54, "RD_FETCH_ADD"},
      {0x64, "UD_SEND_ONLY"},
      {0x65, "UD_SEND_ONLY_WITH_IMMEDIATE"},
      {0x81, "CNP"},
      {0xA0, "XRC_SEND_FIRST"},
      {0xB7, "XRC_SEND_ONLY_WITH_INVALIDATE"},
      {0x15, ""},
      {0x2C, ""},
      {0x60, ""},
      {0x80, ""},
      {0xFF, ""},
  };
  for (const auto& [op, name] : names) {
    EXPECT_EQ(opcode_info(static_cast<uint8_t>(op)).name, name) << std::hex << op;
  }
}

TEST(Opcode, UcAndUdShareRcLayouts) {
  for (int op = 0; op <= 0x0B; ++op) {
    const OpcodeInfo& rc = opcode_info(static_cast<uint8_t>(op));
    const OpcodeInfo& uc = opcode_info(static_cast<uint8_t>(0x20 | op));
    EXPECT_EQ(uc.headers, rc.headers) << op;
    EXPECT_EQ(uc.flags, rc.flags) << op;
    EXPECT_EQ(uc.header_len, rc.header_len) << op;
    EXPECT_EQ(uc.name.substr(3), rc.name.substr(3)) << op;
  }
  EXPECT_EQ(opcode_info(0x64).headers, kHasDeth);
  EXPECT_EQ(opcode_info(0x65).headers, kHasDeth | kHasImmDt);
}

TEST(Opcode, HeaderLengthsMatchTable35) {
  const std::map<int, int> lengths = {{0x00, 12}, {0x03, 16}, {0x04, 12}, {0x05, 16}, {0x06, 28},
                                      {0x07, 12}, {0x09, 16}, {0x0A, 28}, {0x0B, 32}, {0x0C, 28},
                                      {0x0D, 16}, {0x0E, 12}, {0x0F, 16}, {0x10, 16}, {0x11, 16},
                                      {0x12, 24}, {0x13, 40}, {0x14, 40}, {0x16, 16}, {0x17, 16},
                                      {0x1C, 32}, {0x1D, 28}, {0x64, 20}, {0x65, 24}, {0x81, 28}};
  for (const auto& [op, len] : lengths) {
    const OpcodeInfo& info = opcode_info(static_cast<uint8_t>(op));
    EXPECT_EQ(info.header_len, len) << std::hex << op;
    EXPECT_EQ(headers_len(info.headers), static_cast<size_t>(len)) << std::hex << op;
  }
}

TEST(Opcode, FlagsDescribePositionAndKind) {
  auto flags = [](int op) { return opcode_info(static_cast<uint8_t>(op)).flags; };
  EXPECT_EQ(flags(0x00), kFirst | kPayload | kIsSend | kIsRequest);
  EXPECT_EQ(flags(0x01), kMiddle | kPayload | kIsSend | kIsRequest);
  EXPECT_EQ(flags(0x03), kLast | kPayload | kIsSend | kIsRequest | kImm);
  EXPECT_EQ(flags(0x17), kOnly | kPayload | kIsSend | kIsRequest | kInv);
  EXPECT_EQ(flags(0x0B), kOnly | kPayload | kIsWrite | kIsRequest | kImm);
  EXPECT_EQ(flags(0x0C), kOnly | kIsReadRequest | kIsRequest);
  EXPECT_EQ(flags(0x0E), kMiddle | kPayload | kIsReadResponse | kIsResponse);
  EXPECT_EQ(flags(0x11), kOnly | kIsAck | kIsResponse);
  EXPECT_EQ(flags(0x12), kOnly | kIsAck | kIsResponse);
  EXPECT_EQ(flags(0x13), kOnly | kIsAtomic | kIsRequest);
  EXPECT_EQ(flags(0x1C), kOnly | kIsRequest);
  EXPECT_EQ(flags(0x1D), kOnly | kPayload | kIsRequest);
  EXPECT_EQ(opcode_info(0x1D).fixed_payload_len, 8);
  EXPECT_EQ(flags(0x81), kIsCnp);
  EXPECT_EQ(opcode_info(0x81).headers, kHasCnpPad);
}

TEST(Opcode, ExtendedHeaderOffsets) {
  EXPECT_EQ(ext_header_offset(opcode_info(0x1C).headers, kHasFeth), 12u);
  EXPECT_EQ(ext_header_offset(opcode_info(0x1C).headers, kHasReth), 16u);
  EXPECT_EQ(ext_header_offset(opcode_info(0x0B).headers, kHasImmDt), 28u);
  EXPECT_EQ(ext_header_offset(opcode_info(0x12).headers, kHasAtomicAckEth), 16u);
  EXPECT_EQ(ext_header_offset(opcode_info(0x65).headers, kHasImmDt), 20u);
  EXPECT_EQ(ext_header_offset(opcode_info(0x81).headers, kHasCnpPad), 12u);
}

TEST(Opcode, TransportOf) {
  EXPECT_EQ(transport_of(0x04), Transport::kRc);
  EXPECT_EQ(transport_of(0x2B), Transport::kUc);
  EXPECT_EQ(transport_of(0x4C), Transport::kRd);
  EXPECT_EQ(transport_of(0x64), Transport::kUd);
  EXPECT_EQ(transport_of(0x81), Transport::kCnp);
  EXPECT_EQ(transport_of(0xA5), Transport::kXrc);
  EXPECT_EQ(make_opcode(Transport::kUd, Op::kSendOnlyImm), 0x65);
}

}  // namespace
}  // namespace uroce::wire
