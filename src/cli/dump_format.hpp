// What `uroce dump` prints for one RoCE v2 packet: decode_roce() parses the packet found by
// decap_frame() and checks its ICRC, append_text_line() and append_json_line() render it.
// Rendering appends to a caller-owned buffer, so a dump of a large capture formats every
// packet without allocating (the JSON is written by hand for that reason; see docs/dump.md).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

#include "uroce/vocab/time.hpp"
#include "wire/frame.hpp"
#include "wire/packet.hpp"

namespace uroce::cli {

struct DumpPacket {
  uint64_t frame_number = 0;  // 1-based, counting every frame of the file
  TimePoint time{};           // capture time since the Unix epoch
  wire::RoceFrame frame;
  wire::ParsedPacket packet;  // valid when error is empty
  std::string_view error;     // why the packet could not be decoded; empty when it could
  bool icrc_ok = false;       // exact check over the captured IP datagram
};

// Decodes the RoCE packet of a frame that decap_frame() answered kOk or kRoceCut for.
// `out.frame` keeps views into the captured bytes.
void decode_roce(uint64_t frame_number, TimePoint time, const wire::RoceFrame& frame,
                 wire::FrameError frame_status, DumpPacket& out);

// The ICRC check of decode_roce(): exact for port 4791; on another port (a capture of uroce
// run with UROCE_UDP_PORT) as if the UDP destination port were 4791, which is how uroce
// computes it there.
[[nodiscard]] bool verify_icrc_at_4791(const wire::RoceFrame& frame);

// IP ECN codepoint names (RFC 3168): "Not-ECT", "ECT(1)", "ECT(0)", "CE".
[[nodiscard]] std::string_view ecn_name(uint8_t tos);

// AETH syndrome type names: "ACK", "RNR_NAK", "NAK", "RESERVED".
[[nodiscard]] std::string_view aeth_type_name(wire::AethType type);

// NAK codes as Wireshark and rxe abbreviate them: "PSN_SEQ_ERR", "INV_REQ", "REM_ACCESS_ERR",
// "REM_OP_ERR", "INV_RD_REQ"; empty for a reserved code.
[[nodiscard]] std::string_view nak_code_name(uint8_t code);

// One human-readable line with a trailing newline, e.g.
// "   7 0.000123 10.77.0.3:49152 -> 10.77.0.2:4791 RC_SEND_ONLY dqpn=0x000011 psn=4711
// ackreq len=1024 icrc=ok". `since_first` is the time since the file's first frame.
void append_text_line(fmt::memory_buffer& out, const DumpPacket& p, Nanos since_first);

// One JSON object with a trailing newline (JSON Lines); keys in docs/dump.md.
void append_json_line(fmt::memory_buffer& out, const DumpPacket& p);

}  // namespace uroce::cli
