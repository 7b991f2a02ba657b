#include "cli/analyze_capture.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "wire/frame.hpp"
#include "wire/packet.hpp"

namespace uroce::cli {

namespace {

using Addr = std::array<uint8_t, 16>;
constexpr uint32_t kPsnMask = 0xFFFFFF;
constexpr size_t kThroughputBuckets = 10;
// A packet seen twice within this time and with no NAK or RNR NAK in between is one packet
// captured on its way out and on its way in (both ends on this host), not a retransmission:
// a real one needs a NAK first or an ACK timeout (67 ms at the usual timeout 14).
constexpr double kCopyWindowS = 0.010;

uint32_t psn_diff(uint32_t a, uint32_t b) {
  return (a - b) & kPsnMask;
}  // a - b mod 2^24

std::string addr_text(const Addr& a, bool ipv6) {
  char text[INET6_ADDRSTRLEN] = {};
  if (ipv6) {
    inet_ntop(AF_INET6, a.data(), text, sizeof(text));
  } else {
    inet_ntop(AF_INET, a.data() + 12, text, sizeof(text));
  }
  return text;
}

std::string nak_name(uint8_t value) {
  switch (value) {
    case 0:
      return "psn_sequence_error";
    case 1:
      return "invalid_request";
    case 2:
      return "remote_access_error";
    case 3:
      return "remote_operational_error";
    case 4:
      return "invalid_rd_request";
    default:
      return fmt::format("reserved_{}", value);
  }
}

std::string message_kind(const wire::OpcodeInfo& info) {
  if ((info.flags & wire::kIsSend) != 0) return "SEND";
  if ((info.flags & wire::kIsWrite) != 0) return "WRITE";
  if ((info.flags & wire::kIsReadRequest) != 0) return "READ";
  if ((info.flags & wire::kIsAtomic) != 0) return "ATOMIC";
  return std::string(info.name);
}

enum class RespKind { kNone, kAck, kNakSeq, kNakOther, kRnr };

struct ReqFlow {
  ConnectionSummary sum;
  Addr src{}, dst{};
  bool any = false;
  uint32_t first_psn = 0, next_psn = 0;
  bool after_read = false;
  bool in_episode = false;
  std::unordered_map<uint32_t, double> first_sent;  // PSN -> time of its first send
  RespKind last_resp = RespKind::kNone;
  double last_resp_t = 0;
  double last_nak_t = -1;  // last NAK or RNR NAK (not reset by an episode)
  std::vector<std::pair<double, uint64_t>> samples;  // (time, payload bytes) of new packets
  struct LastResp {
    uint8_t opcode = 0xff;
    uint32_t psn = 0;
    uint8_t syndrome = 0;
    bool operator==(const LastResp&) const = default;
  };
  LastResp last_resp_key;
  double last_resp_key_t = -1;
};

using FlowKey = std::tuple<Addr, Addr, uint32_t>;

struct Cnp {
  Addr src, dst;
  uint32_t dqpn;
};

void on_request(ReqFlow& f, uint64_t frame, double t, const wire::ParsedPacket& p) {
  ConnectionSummary& s = f.sum;
  const uint32_t psn = p.hdr.bth.psn.value();
  const uint16_t flags = p.info->flags;
  ++s.request_packets;
  s.request_bytes += p.payload.size();
  if (s.request_packets == 1) s.first_s = t;
  s.last_s = t;
  bool fresh = true;
  if (!f.any) {
    f.any = true;
    f.first_psn = psn;
  } else if (s.transport != "UD") {
    const uint32_t d = psn_diff(psn, f.next_psn);
    auto first = f.first_sent.find(psn);
    const bool nak_since = first != f.first_sent.end() && f.last_nak_t > first->second;
    if (d >= 0x800000 && first != f.first_sent.end() && t - first->second < kCopyWindowS &&
        !nak_since) {
      // The same packet again within 10 ms and no NAK in between: a capture
      // on a host running both ends sees it sent and received, not retransmitted.
      --s.request_packets;
      s.request_bytes -= p.payload.size();
      ++s.duplicate_copies;
      return;
    }
    if (d >= 0x800000) {
      fresh = false;  // before the next expected PSN: sent again
      ++s.retransmitted_packets;
      if (!f.in_episode) {
        f.in_episode = true;
        RetransmitEpisode e;
        e.frame = frame;
        e.time_s = t;
        e.psn = psn;
        auto sent = f.first_sent.find(psn);
        switch (f.last_resp) {
          case RespKind::kNakSeq:
            e.cause = "nak_seq_err";
            e.wait_s = t - f.last_resp_t;
            break;
          case RespKind::kRnr:
            e.cause = "rnr_nak";
            e.wait_s = t - f.last_resp_t;
            s.rnr_wait_s += e.wait_s;
            break;
          default:
            e.cause = "timeout";
            e.wait_s = sent != f.first_sent.end() ? t - sent->second : 0;
            break;
        }
        f.last_resp = RespKind::kNone;
        s.episodes.push_back(e);
      }
      ++s.episodes.back().packets;
    } else if (d != 0 && !f.after_read) {
      // A READ request consumes one PSN per response packet, so a jump after one is normal.
      ++s.psn_gaps;
      s.psn_gap_packets += d;
    }
  }
  if (fresh) {
    f.in_episode = false;
    f.next_psn = (psn + 1) & kPsnMask;
    f.first_sent.emplace(psn, t);
    f.samples.emplace_back(t, p.payload.size());
    if ((flags & (wire::kLast | wire::kIsReadRequest | wire::kIsAtomic)) != 0 ||
        s.transport == "UD") {
      ++s.messages;
      ++s.messages_by_kind[message_kind(*p.info)];
    }
  }
  f.after_read = (flags & wire::kIsReadRequest) != 0;
}

void on_response(ReqFlow& f, double t, const wire::ParsedPacket& p) {
  ConnectionSummary& s = f.sum;
  const uint16_t flags = p.info->flags;
  const ReqFlow::LastResp key{p.hdr.bth.opcode, p.hdr.bth.psn.value(), p.hdr.aeth.syndrome};
  if (key == f.last_resp_key && t - f.last_resp_key_t < kCopyWindowS) {
    ++s.duplicate_copies;  // the same response seen sent and received (see on_request)
    return;
  }
  f.last_resp_key = key;
  f.last_resp_key_t = t;
  if ((flags & wire::kIsReadResponse) != 0) {
    s.read_response_bytes += p.payload.size();
    s.last_s = std::max(s.last_s, t);
    f.samples.emplace_back(t, p.payload.size());
  }
  if ((p.info->headers & wire::kHasAeth) == 0) {  // READ response middle
    ++s.read_responses;
    return;
  }
  const wire::Aeth& aeth = p.hdr.aeth;
  switch (aeth.type()) {
    case wire::AethType::kAck:
      if ((flags & wire::kIsReadResponse) != 0) {
        ++s.read_responses;
      } else if ((p.hdr.bth.opcode & 0x1F) == static_cast<uint8_t>(wire::Op::kAtomicAcknowledge)) {
        ++s.atomic_acks;
      } else {
        ++s.acks;
      }
      f.last_resp = RespKind::kAck;
      break;
    case wire::AethType::kRnrNak:
      f.last_nak_t = t;
      ++s.rnr_naks;
      f.last_resp = RespKind::kRnr;
      break;
    case wire::AethType::kNak:
      f.last_nak_t = t;
      ++s.naks[nak_name(aeth.value())];
      f.last_resp = aeth.value() == 0 ? RespKind::kNakSeq : RespKind::kNakOther;
      break;
    case wire::AethType::kReserved:
      ++s.naks["reserved_syndrome"];
      break;
  }
  f.last_resp_t = t;
}

// The request flow a response from `src` to `dst` for QP `dqpn` with `psn` answers.
ReqFlow* pair_response(std::map<FlowKey, ReqFlow>& flows, const Addr& src, const Addr& dst,
                       uint32_t dqpn, uint32_t psn) {
  ReqFlow* best = nullptr;
  for (auto& [key, f] : flows) {
    if (std::get<0>(key) != dst || std::get<1>(key) != src || !f.any) continue;
    if (f.sum.src_qpn >= 0 && static_cast<uint32_t>(f.sum.src_qpn) != dqpn) continue;
    // In the window [first PSN, next PSN] (a NAK names the next expected PSN); READ
    // responses run ahead of next_psn, so allow what the last READ may have asked for.
    const uint32_t span = psn_diff(f.next_psn, f.first_psn);
    const uint32_t off = psn_diff(psn, f.first_psn);
    const bool inside = off <= span || (f.after_read && off < span + 0x10000);
    if (!inside) continue;
    if (best == nullptr || f.sum.src_qpn >= 0 || f.sum.last_s > best->sum.last_s) best = &f;
  }
  if (best != nullptr) best->sum.src_qpn = dqpn;
  return best;
}

void finish(ReqFlow& f, double capture_start) {
  ConnectionSummary& s = f.sum;
  const double span = s.last_s - s.first_s;
  s.bucket_s = std::max(span / kThroughputBuckets, 0.001);
  const size_t n = std::min<size_t>(kThroughputBuckets, static_cast<size_t>(span / s.bucket_s) + 1);
  std::vector<double> bytes(n, 0);
  for (const auto& [t, b] : f.samples) {
    size_t i = static_cast<size_t>((t - s.first_s) / s.bucket_s);
    bytes[std::min(i, n - 1)] += static_cast<double>(b);
  }
  for (double b : bytes) s.throughput_mbps.push_back(b * 8 / s.bucket_s / 1e6);
  s.first_s -= capture_start;
  s.last_s -= capture_start;
  for (RetransmitEpisode& e : s.episodes) e.time_s -= capture_start;
}

}  // namespace

bool analyze_capture(const std::string& path, CaptureAnalysis& out, uint16_t roce_port) {
  wire::PcapReader reader;
  if (!reader.open(path)) {
    out.error = reader.error();
    return false;
  }
  const wire::LinkType link = reader.link_type();
  std::map<FlowKey, ReqFlow> flows;
  std::vector<Cnp> cnps;
  wire::CapturedFrame frame;
  double start = -1, last = 0;
  while (reader.next(frame)) {
    ++out.frames;
    const double t = std::chrono::duration<double>(frame.time).count();
    if (start < 0) start = t;
    last = t;
    wire::RoceFrame rf;
    rf.roce_port = roce_port;
    if (wire::decap_frame(link, frame.bytes, rf) != wire::FrameError::kOk) {
      ++out.other_frames;
      continue;
    }
    wire::ParsedPacket p;
    if (wire::parse_packet(rf.roce, p) != wire::ParseError::kOk) {
      ++out.undecodable;
      continue;
    }
    ++out.roce_packets;
    const uint16_t flags = p.info->flags;
    const uint32_t dqpn = p.hdr.bth.dqpn;
    if ((flags & wire::kIsCnp) != 0) {
      cnps.push_back({rf.ip.src, rf.ip.dst, dqpn});
    } else if ((flags & wire::kIsResponse) != 0) {
      if (ReqFlow* f = pair_response(flows, rf.ip.src, rf.ip.dst, dqpn, p.hdr.bth.psn.value())) {
        on_response(*f, t, p);
      }
    } else {
      auto [it, added] = flows.try_emplace(FlowKey{rf.ip.src, rf.ip.dst, dqpn});
      ReqFlow& f = it->second;
      if (added) {
        f.src = rf.ip.src;
        f.dst = rf.ip.dst;
        f.sum.src = addr_text(rf.ip.src, rf.ip.ipv6);
        f.sum.dst = addr_text(rf.ip.dst, rf.ip.ipv6);
        f.sum.dst_qpn = dqpn;
        switch (wire::transport_of(p.hdr.bth.opcode)) {
          case wire::Transport::kUc:
            f.sum.transport = "UC";
            break;
          case wire::Transport::kUd:
            f.sum.transport = "UD";
            f.sum.src_qpn = p.hdr.deth.src_qp;
            break;
          default:
            f.sum.transport = "RC";
            break;
        }
      }
      on_request(f, out.frames, t, p);
    }
  }
  out.error = reader.error();
  out.duration_s = start < 0 ? 0 : last - start;
  // A CNP names the QP whose packets were marked: the requester QP of a connection whose
  // requester is the CNP's destination (RoCE v2 A17.9.3).
  for (const Cnp& c : cnps) {
    for (auto& [key, f] : flows) {
      if (f.src == c.dst && f.sum.src_qpn == static_cast<int64_t>(c.dqpn)) {
        ++f.sum.cnps;
        break;
      }
    }
  }
  for (auto& [key, f] : flows) {
    finish(f, start < 0 ? 0 : start);
    out.connections.push_back(std::move(f.sum));
  }
  return true;
}

std::string format_analysis_text(const CaptureAnalysis& a) {
  std::string out;
  auto b = std::back_inserter(out);
  fmt::format_to(b, "{} frames: {} RoCE v2 packets, {} other, {} undecodable; {:.6f} s\n", a.frames,
                 a.roce_packets, a.other_frames, a.undecodable, a.duration_s);
  for (const ConnectionSummary& c : a.connections) {
    const std::string src_qp =
        c.src_qpn >= 0 ? fmt::format("QP {:#08x}", c.src_qpn) : std::string("QP ?");
    fmt::format_to(b, "{} {} {} -> {} QP {:#08x}: {} messages", c.transport, c.src, src_qp, c.dst,
                   c.dst_qpn, c.messages);
    if (!c.messages_by_kind.empty()) {
      std::string kinds;
      for (const auto& [k, n] : c.messages_by_kind)
        kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", k, n);
      fmt::format_to(b, " ({})", kinds);
    }
    fmt::format_to(b, ", {} packets, {} payload bytes, {:.6f} .. {:.6f} s\n", c.request_packets,
                   c.request_bytes, c.first_s, c.last_s);
    fmt::format_to(b, "  retransmissions: {} packets in {} episodes\n", c.retransmitted_packets,
                   c.episodes.size());
    for (const RetransmitEpisode& e : c.episodes) {
      std::string why;
      if (e.cause == "nak_seq_err") {
        why = fmt::format("after a NAK PSN sequence error, resent {:.3f} ms later", e.wait_s * 1e3);
      } else if (e.cause == "rnr_nak") {
        why = fmt::format("after an RNR NAK, resent {:.3f} ms later (RNR wait)", e.wait_s * 1e3);
      } else {
        why = fmt::format("timeout (guess: no ACK/NAK seen; resent {:.3f} ms after the first send)",
                          e.wait_s * 1e3);
      }
      fmt::format_to(b, "    frame {} at {:.6f} s PSN {:#08x}, {} packets: {}\n", e.frame, e.time_s,
                     e.psn, e.packets, why);
    }
    std::string naks;
    for (const auto& [k, n] : c.naks) naks += fmt::format(" {} {}", k, n);
    fmt::format_to(b, "  responses: ACKs {}, READ responses {}, atomic ACKs {}; NAKs{}\n", c.acks,
                   c.read_responses, c.atomic_acks, naks.empty() ? " none" : naks);
    fmt::format_to(b,
                   "  RNR NAKs {} (waited {:.3f} ms); CNPs {}; PSN gaps {} ({} packets missing)\n",
                   c.rnr_naks, c.rnr_wait_s * 1e3, c.cnps, c.psn_gaps, c.psn_gap_packets);
    if (c.duplicate_copies != 0) {
      fmt::format_to(b,
                     "  {} packets captured twice (sent and received on this host), counted once\n",
                     c.duplicate_copies);
    }
    std::string rates;
    for (double r : c.throughput_mbps) rates += fmt::format(" {:.1f}", r);
    fmt::format_to(b, "  throughput (request and READ response payload) Mbit/s per {:.3f} ms:{}\n",
                   c.bucket_s * 1e3, rates);
  }
  if (!a.error.empty()) fmt::format_to(b, "error: {}\n", a.error);
  return out;
}

nlohmann::json analysis_json(const CaptureAnalysis& a) {
  nlohmann::json j;
  j["frames"] = a.frames;
  j["roce_packets"] = a.roce_packets;
  j["other_frames"] = a.other_frames;
  j["undecodable"] = a.undecodable;
  j["duration_s"] = a.duration_s;
  j["connections"] = nlohmann::json::array();
  for (const ConnectionSummary& c : a.connections) {
    nlohmann::json jc;
    jc["transport"] = c.transport;
    jc["src"] = c.src;
    jc["dst"] = c.dst;
    jc["src_qpn"] = c.src_qpn;
    jc["dst_qpn"] = c.dst_qpn;
    jc["messages"] = c.messages;
    jc["messages_by_kind"] = c.messages_by_kind;
    jc["request_packets"] = c.request_packets;
    jc["request_bytes"] = c.request_bytes;
    jc["retransmitted_packets"] = c.retransmitted_packets;
    jc["episodes"] = nlohmann::json::array();
    for (const RetransmitEpisode& e : c.episodes) {
      jc["episodes"].push_back({{"frame", e.frame},
                                {"time_s", e.time_s},
                                {"psn", e.psn},
                                {"packets", e.packets},
                                {"cause", e.cause},
                                {"wait_s", e.wait_s}});
    }
    jc["acks"] = c.acks;
    jc["read_responses"] = c.read_responses;
    jc["read_response_bytes"] = c.read_response_bytes;
    jc["atomic_acks"] = c.atomic_acks;
    jc["naks"] = c.naks;
    jc["rnr_naks"] = c.rnr_naks;
    jc["rnr_wait_s"] = c.rnr_wait_s;
    jc["cnps"] = c.cnps;
    jc["duplicate_copies"] = c.duplicate_copies;
    jc["psn_gaps"] = c.psn_gaps;
    jc["psn_gap_packets"] = c.psn_gap_packets;
    jc["throughput_mbps"] = c.throughput_mbps;
    jc["bucket_s"] = c.bucket_s;
    j["connections"].push_back(std::move(jc));
  }
  if (!a.error.empty()) j["error"] = a.error;
  return j;
}

}  // namespace uroce::cli
