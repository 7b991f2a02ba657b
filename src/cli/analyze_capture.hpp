// `uroce dump --analyze FILE`: a per-connection summary of a RoCE v2 capture, from uroce
// (--capture) or from any RoCE host (tcpdump on an rxe or hardware NIC's netdev).
//
// Requests are grouped by (source address, destination address, destination QPN); each
// response (ACK, NAK, RNR NAK, READ response, atomic ACK) is paired with the request flow
// running the other way whose PSN window holds its PSN, which also names the requester's QPN.
// Per connection it reports messages and bytes, retransmissions grouped into episodes with
// their likely cause — "NAK sequence error" (a NAK PSN sequence error came back first), "RNR
// NAK" (the responder had no receive WQE; the RNR wait is the time until the resend), or
// "timeout" (no ACK/NAK in between: a guess, the capture cannot see the timer) — NAKs by code,
// PSN gaps (packets the capture never saw), CNPs, and throughput over time.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "wire/pcap_file.hpp"

namespace uroce::cli {

struct RetransmitEpisode {
  uint64_t frame = 0;  // first retransmitted frame
  double time_s = 0;   // since the first packet of the capture
  uint32_t psn = 0;
  uint64_t packets = 0;
  std::string cause;  // "nak_seq_err", "rnr_nak", "timeout"
  double wait_s = 0;  // from the first send of that PSN (timeout) or the RNR NAK to the resend
};

struct ConnectionSummary {
  std::string src, dst;   // requester and responder addresses
  uint32_t dst_qpn = 0;   // responder QPN (the requests' destination QP)
  int64_t src_qpn = -1;   // requester QPN, -1 until a response named it
  std::string transport;  // "RC", "UC", "UD"
  uint64_t request_packets = 0, request_bytes = 0, messages = 0;
  std::map<std::string, uint64_t> messages_by_kind;  // SEND, WRITE, READ, ATOMIC, ...
  uint64_t retransmitted_packets = 0;
  std::vector<RetransmitEpisode> episodes;
  uint64_t psn_gaps = 0, psn_gap_packets = 0;
  uint64_t acks = 0, read_responses = 0, atomic_acks = 0, read_response_bytes = 0;
  std::map<std::string, uint64_t> naks;  // by code name
  uint64_t rnr_naks = 0;
  double rnr_wait_s = 0;
  uint64_t cnps = 0;
  uint64_t duplicate_copies = 0;  // the same packet captured leaving and arriving (one host)
  double first_s = 0, last_s = 0;
  std::vector<double> throughput_mbps;  // request + READ response payload per time bucket
  double bucket_s = 0;
};

struct CaptureAnalysis {
  uint64_t frames = 0, roce_packets = 0, other_frames = 0, undecodable = 0;
  double duration_s = 0;
  std::vector<ConnectionSummary> connections;
  std::string error;  // non-empty: the file is damaged after `frames`
};

// Reads and analyses the whole file; false when it cannot be opened (error set). RoCE is
// looked for on UDP port `roce_port`.
[[nodiscard]] bool analyze_capture(const std::string& path, CaptureAnalysis& out,
                                   uint16_t roce_port = 4791);

[[nodiscard]] std::string format_analysis_text(const CaptureAnalysis& a);
[[nodiscard]] nlohmann::json analysis_json(const CaptureAnalysis& a);

// The `uroce dump --analyze FILE [--json]` command body; returns the exit status.
int run_analyze(const std::string& path, bool json, uint16_t roce_port = 4791);

}  // namespace uroce::cli
