#include "cli/dump_format.hpp"

#include <arpa/inet.h>

#include <array>
#include <vector>

#include "wire/icrc.hpp"

namespace uroce::cli {
namespace {

using wire::AethType;
using wire::OpcodeInfo;

constexpr int64_t kNanosPerSecond = 1'000'000'000;

// What a dump reports for a RoCE packet the capture holds only in part.
constexpr std::string_view kCutBySnaplen = "cut_by_snaplen";

// fmt::appender writes straight into the buffer (a std::back_inserter would stage each call
// in a temporary buffer first).
using Out = fmt::appender;

void append_ip(Out it, const std::array<uint8_t, 16>& addr, bool ipv6) {
  if (!ipv6) {
    fmt::format_to(it, "{}.{}.{}.{}", addr[12], addr[13], addr[14], addr[15]);
    return;
  }
  std::array<char, INET6_ADDRSTRLEN> text{};
  inet_ntop(AF_INET6, addr.data(), text.data(), text.size());
  fmt::format_to(it, "{}", text.data());
}

void append_endpoint(Out it, const std::array<uint8_t, 16>& addr, bool ipv6, uint16_t port) {
  if (ipv6) *it++ = '[';
  append_ip(it, addr, ipv6);
  if (ipv6) *it++ = ']';
  fmt::format_to(it, ":{}", port);
}

void append_aeth_text(Out it, const wire::Aeth& aeth) {
  const uint8_t value = aeth.value();
  switch (aeth.type()) {
    case AethType::kAck:
      if (value == wire::kCreditInvalid) {
        fmt::format_to(it, " aeth=ACK");
      } else {
        fmt::format_to(it, " aeth=ACK(credit={})", value);
      }
      break;
    case AethType::kRnrNak:
      fmt::format_to(it, " aeth=RNR_NAK(timer={})", value);
      break;
    case AethType::kNak:
      if (const auto name = nak_code_name(value); !name.empty()) {
        fmt::format_to(it, " aeth=NAK({})", name);
      } else {
        fmt::format_to(it, " aeth=NAK(code={})", value);
      }
      break;
    case AethType::kReserved:
      fmt::format_to(it, " aeth=RESERVED(0x{:02x})", aeth.syndrome);
      break;
  }
  fmt::format_to(it, " msn={}", aeth.msn);
}

// The opcode's name for a packet that failed to parse, once the parser got as far as the
// opcode (RD and XRC opcodes are named although uroce does not decode them).
std::string_view known_name(const DumpPacket& p) {
  return p.packet.info != nullptr ? p.packet.info->name : std::string_view{};
}

std::string_view json_bool(bool b) {
  return b ? "true" : "false";
}

}  // namespace

std::string_view ecn_name(uint8_t tos) {
  static constexpr std::array<std::string_view, 4> kNames = {"Not-ECT", "ECT(1)", "ECT(0)", "CE"};
  return kNames[tos & 3];
}

std::string_view aeth_type_name(AethType type) {
  switch (type) {
    case AethType::kAck:
      return "ACK";
    case AethType::kRnrNak:
      return "RNR_NAK";
    case AethType::kNak:
      return "NAK";
    case AethType::kReserved:
      return "RESERVED";
  }
  return "RESERVED";
}

std::string_view nak_code_name(uint8_t code) {
  static constexpr std::array<std::string_view, 5> kNames = {
      "PSN_SEQ_ERR", "INV_REQ", "REM_ACCESS_ERR", "REM_OP_ERR", "INV_RD_REQ"};
  return code < kNames.size() ? kNames[code] : std::string_view{};
}

bool verify_icrc_at_4791(const wire::RoceFrame& frame) {
  if (frame.ip.dport == wire::kRoceV2Port) return wire::verify_icrc_ip_datagram(frame.ip_datagram);
  // uroce on another UDP port computes the ICRC as for 4791 (src/net/udp_device.hpp): check
  // a copy whose UDP destination port says 4791. Reused buffer: no allocation per packet.
  static thread_local std::vector<uint8_t> copy;
  copy.assign(frame.ip_datagram.begin(), frame.ip_datagram.end());
  const size_t ip_len =
      frame.ip.ipv6 ? 40 : static_cast<size_t>(copy.empty() ? 0 : (copy[0] & 0xf) * 4);
  if (copy.size() < ip_len + 8) return false;
  copy[ip_len + 2] = static_cast<uint8_t>(wire::kRoceV2Port >> 8);
  copy[ip_len + 3] = static_cast<uint8_t>(wire::kRoceV2Port & 0xff);
  return wire::verify_icrc_ip_datagram(copy);
}

void decode_roce(uint64_t frame_number, TimePoint time, const wire::RoceFrame& frame,
                 wire::FrameError frame_status, DumpPacket& out) {
  out.frame_number = frame_number;
  out.time = time;
  out.frame = frame;
  out.packet = wire::ParsedPacket{};
  out.error = {};
  out.icrc_ok = false;
  if (frame_status == wire::FrameError::kRoceCut) {
    out.error = kCutBySnaplen;
    return;
  }
  const wire::ParseError e = wire::parse_packet(frame.roce, out.packet);
  if (e != wire::ParseError::kOk) {
    out.error = wire::parse_error_name(e);
    return;
  }
  out.icrc_ok = verify_icrc_at_4791(frame);
}

void append_text_line(fmt::memory_buffer& out, const DumpPacket& p, Nanos since_first) {
  Out it(out);
  const int64_t ns = since_first.count();
  const uint64_t abs_ns = ns < 0 ? static_cast<uint64_t>(-ns) : static_cast<uint64_t>(ns);
  fmt::format_to(it, "{:>4} {}{}.{:06} ", p.frame_number, ns < 0 ? "-" : "",
                 abs_ns / kNanosPerSecond, abs_ns % kNanosPerSecond / 1000);
  const auto& ip = p.frame.ip;
  append_endpoint(it, ip.src, ip.ipv6, ip.sport);
  fmt::format_to(it, " -> ");
  append_endpoint(it, ip.dst, ip.ipv6, ip.dport);

  if (!p.error.empty()) {
    if (const auto name = known_name(p); !name.empty()) {
      fmt::format_to(it, " {}", name);
    } else if (!p.frame.roce.empty()) {
      fmt::format_to(it, " opcode=0x{:02x}", p.frame.roce[0]);
    }
    fmt::format_to(it, " error={}\n", p.error);
    return;
  }

  const wire::Headers& h = p.packet.hdr;
  const wire::Bth& bth = h.bth;
  const OpcodeInfo& info = *p.packet.info;
  fmt::format_to(it, " {} dqpn=0x{:06x} psn={}", info.name, bth.dqpn, bth.psn.value());
  if (bth.se) fmt::format_to(it, " se");
  if (bth.migreq) fmt::format_to(it, " migreq");
  if (bth.ackreq) fmt::format_to(it, " ackreq");
  if (bth.fecn) fmt::format_to(it, " fecn");
  if (bth.becn) fmt::format_to(it, " becn");
  if (bth.pkey != wire::kDefaultPkey) fmt::format_to(it, " pkey=0x{:04x}", bth.pkey);
  if ((p.frame.tos & 3) != 0) fmt::format_to(it, " ecn={}", ecn_name(p.frame.tos));
  if ((p.frame.tos >> 2) != 0) fmt::format_to(it, " dscp={}", p.frame.tos >> 2);

  if (info.headers & wire::kHasDeth) {
    fmt::format_to(it, " qkey=0x{:08x} src_qp=0x{:06x}", h.deth.qkey, h.deth.src_qp);
  }
  if (info.headers & wire::kHasFeth) fmt::format_to(it, " feth=0x{:08x}", h.feth.bits);
  if (info.headers & wire::kHasReth) {
    fmt::format_to(it, " va=0x{:x} rkey=0x{:08x} dma_len={}", h.reth.va, h.reth.rkey,
                   h.reth.dma_len);
  }
  if (info.headers & wire::kHasAtomicEth) {
    fmt::format_to(it, " va=0x{:x} rkey=0x{:08x} swap_add=0x{:x} compare=0x{:x}", h.atomic_eth.va,
                   h.atomic_eth.rkey, h.atomic_eth.swap_add, h.atomic_eth.compare);
  }
  if (info.headers & wire::kHasAeth) append_aeth_text(it, h.aeth);
  if (info.headers & wire::kHasAtomicAckEth) {
    fmt::format_to(it, " orig=0x{:x}", h.atomic_ack_eth.orig);
  }
  if (info.headers & wire::kHasImmDt) fmt::format_to(it, " imm=0x{:08x}", h.immdt);
  if (info.headers & wire::kHasIeth) fmt::format_to(it, " inv_rkey=0x{:08x}", h.ieth_rkey);

  fmt::format_to(it, " len={}", p.packet.payload.size());
  if (p.icrc_ok) {
    fmt::format_to(it, " icrc=ok\n");
  } else {
    fmt::format_to(it, " icrc=BAD(0x{:08x})\n", p.packet.icrc);
  }
}

void append_json_line(fmt::memory_buffer& out, const DumpPacket& p) {
  Out it(out);
  const int64_t ns = p.time.count();
  fmt::format_to(it, R"({{"frame":{},"time":{}.{:09},"src":")", p.frame_number,
                 ns / kNanosPerSecond, ns % kNanosPerSecond);
  const auto& ip = p.frame.ip;
  append_ip(it, ip.src, ip.ipv6);
  fmt::format_to(it, R"(","dst":")");
  append_ip(it, ip.dst, ip.ipv6);
  fmt::format_to(it, R"(","sport":{},"dport":{},"ecn":"{}","dscp":{})", ip.sport, ip.dport,
                 ecn_name(p.frame.tos), p.frame.tos >> 2);

  if (!p.error.empty()) {
    if (const auto name = known_name(p); !name.empty()) {
      fmt::format_to(it, R"(,"opcode":"{}")", name);
    }
    if (!p.frame.roce.empty()) fmt::format_to(it, R"(,"opcode_value":{})", p.frame.roce[0]);
    fmt::format_to(it,
                   R"(,"error":"{}"}})"
                   "\n",
                   p.error);
    return;
  }

  const wire::Headers& h = p.packet.hdr;
  const wire::Bth& bth = h.bth;
  const OpcodeInfo& info = *p.packet.info;
  fmt::format_to(it,
                 R"(,"opcode":"{}","opcode_value":{},"se":{},"migreq":{},"ackreq":{},)"
                 R"("fecn":{},"becn":{},"padcnt":{},"pkey":{},"dqpn":{},"psn":{})",
                 info.name, bth.opcode, json_bool(bth.se), json_bool(bth.migreq),
                 json_bool(bth.ackreq), json_bool(bth.fecn), json_bool(bth.becn), bth.padcnt,
                 bth.pkey, bth.dqpn, bth.psn.value());
  if (info.headers & wire::kHasDeth) {
    fmt::format_to(it, R"(,"deth":{{"qkey":{},"src_qp":{}}})", h.deth.qkey, h.deth.src_qp);
  }
  if (info.headers & wire::kHasFeth) fmt::format_to(it, R"(,"feth":{{"bits":{}}})", h.feth.bits);
  if (info.headers & wire::kHasReth) {
    fmt::format_to(it, R"(,"reth":{{"va":{},"rkey":{},"dma_len":{}}})", h.reth.va, h.reth.rkey,
                   h.reth.dma_len);
  }
  if (info.headers & wire::kHasAtomicEth) {
    fmt::format_to(it, R"(,"atomic_eth":{{"va":{},"rkey":{},"swap_add":{},"compare":{}}})",
                   h.atomic_eth.va, h.atomic_eth.rkey, h.atomic_eth.swap_add, h.atomic_eth.compare);
  }
  if (info.headers & wire::kHasAeth) {
    fmt::format_to(it, R"(,"aeth":{{"syndrome":{},"type":"{}","value":{},"msn":{}}})",
                   h.aeth.syndrome, aeth_type_name(h.aeth.type()), h.aeth.value(), h.aeth.msn);
  }
  if (info.headers & wire::kHasAtomicAckEth) {
    fmt::format_to(it, R"(,"atomic_ack_eth":{{"orig":{}}})", h.atomic_ack_eth.orig);
  }
  if (info.headers & wire::kHasImmDt) fmt::format_to(it, R"(,"immdt":{})", h.immdt);
  if (info.headers & wire::kHasIeth) fmt::format_to(it, R"(,"ieth":{{"rkey":{}}})", h.ieth_rkey);
  fmt::format_to(it,
                 R"(,"payload_len":{},"icrc":{},"icrc_ok":{}}})"
                 "\n",
                 p.packet.payload.size(), p.packet.icrc, json_bool(p.icrc_ok));
}

}  // namespace uroce::cli
