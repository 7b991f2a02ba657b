// Small classification helpers over WrOpcode shared by requester, completer and engine.
#pragma once

#include <chrono>

#include "uroce/vocab/time.hpp"
#include "uroce/vocab/verbs_types.hpp"

namespace uroce::transport {

[[nodiscard]] constexpr bool is_send_op(WrOpcode op) {
  return op == WrOpcode::kSend || op == WrOpcode::kSendWithImm || op == WrOpcode::kSendWithInv;
}
[[nodiscard]] constexpr bool is_write_op(WrOpcode op) {
  return op == WrOpcode::kRdmaWrite || op == WrOpcode::kRdmaWriteWithImm;
}
[[nodiscard]] constexpr bool is_atomic_op(WrOpcode op) {
  return op == WrOpcode::kAtomicCmpAndSwp || op == WrOpcode::kAtomicFetchAndAdd;
}
// FLUSH and ATOMIC WRITE are answered by a zero-length READ response (IBA 1.5 oA19-14,
// rxe send_read_response_ack) and hold a responder resource: they count as READ/atomic
// for max_rd_atomic, fences and implied NAKs.
[[nodiscard]] constexpr bool is_flush_or_atomic_write(WrOpcode op) {
  return op == WrOpcode::kFlush || op == WrOpcode::kAtomicWrite;
}
[[nodiscard]] constexpr bool is_rd_atomic_op(WrOpcode op) {
  return op == WrOpcode::kRdmaRead || is_atomic_op(op) || is_flush_or_atomic_write(op);
}
// Memory operations the requester performs itself, in order, without a packet (IBA 10.6.7).
[[nodiscard]] constexpr bool is_local_op(WrOpcode op) {
  return op == WrOpcode::kLocalInv || op == WrOpcode::kBindMw;
}
[[nodiscard]] constexpr bool has_imm(WrOpcode op) {
  return op == WrOpcode::kSendWithImm || op == WrOpcode::kRdmaWriteWithImm;
}

[[nodiscard]] constexpr WcOpcode wc_opcode_of(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return WcOpcode::kRdmaWrite;
    case WrOpcode::kRdmaRead:
      return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCmpAndSwp:
      return WcOpcode::kCompSwap;
    case WrOpcode::kAtomicFetchAndAdd:
      return WcOpcode::kFetchAdd;
    case WrOpcode::kLocalInv:
      return WcOpcode::kLocalInv;
    case WrOpcode::kFlush:
      return WcOpcode::kFlush;
    case WrOpcode::kAtomicWrite:
      return WcOpcode::kAtomicWrite;
    case WrOpcode::kBindMw:
      return WcOpcode::kBindMw;
    default:
      return WcOpcode::kSend;
  }
}

// Local ACK timeout (IBA 9.7.6.1.3): 4.096 us * 2^timeout; 0 means no timer.
[[nodiscard]] constexpr Nanos ack_timeout(uint8_t timeout) {
  return Nanos(int64_t{4096} << timeout);
}

// RNR NAK timer field (IBA Table 45, docs/rxe-facts.md §2a), exact values in ns (rxe's
// copy has 61410 us for code 25, a typo; rxe also rounds up to 4 ms jiffies, we do not).
[[nodiscard]] constexpr Nanos rnr_timeout(uint8_t code) {
  constexpr int64_t kUs[32] = {655360, 10,    20,    30,     40,     60,     80,     120,
                               160,    240,   320,   480,    640,    960,    1280,   1920,
                               2560,   3840,  5120,  7680,   10240,  15360,  20480,  30720,
                               40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return Nanos(kUs[code & 31] * 1000);
}

}  // namespace uroce::transport
