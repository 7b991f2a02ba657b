#include "telemetry/rtt_tracker.hpp"

#include <algorithm>
#include <cstring>

#include "wire/opcode.hpp"

namespace uroce::telemetry {

namespace {

constexpr size_t kBthLen = 12;
constexpr uint32_t kPsnMask = 0xFFFFFF;

uint32_t be24(const uint8_t* p) {
  return (uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2];
}

// a <= b in 24-bit serial arithmetic (IBTA 9.7.1: PSN comparisons are modulo 2^24 within
// half the space).
bool psn_le(uint32_t a, uint32_t b) {
  return ((b - a) & kPsnMask) < 0x800000;
}

// RC requests: every RC opcode but the responses 0x0d..0x12 (IBTA Table 34).
bool is_rc_request(uint8_t op) {
  return op < 0x20 && !(op >= 0x0d && op <= 0x12);
}

// RC responses that carry an AETH: READ response first/last/only, ACK, atomic ACK.
bool has_aeth(uint8_t op) {
  return op == 0x0d || op == 0x0f || op == 0x10 || op == 0x11 || op == 0x12;
}

uint32_t ip_packet_size(size_t udp_payload, bool ipv6) {
  return static_cast<uint32_t>(udp_payload + (ipv6 ? 48 : 28));
}

}  // namespace

size_t RttTracker::PeerKeyHash::operator()(const PeerKey& k) const {
  uint64_t lo = 0;
  std::memcpy(&lo, k.gid.data() + 8, 8);  // an IPv4 address is in the last four bytes
  return static_cast<size_t>((lo ^ (uint64_t{k.qpn} << 32 | k.qpn)) * 0x9E3779B97F4A7C15ull >> 16);
}

RttTracker::QpRtt* RttTracker::sent_qp(const PeerKey& key) {
  if (last_sent_qp_ != nullptr && last_sent_key_ == key) return last_sent_qp_;
  auto peer = by_peer_.find(key);
  if (peer == by_peer_.end()) return nullptr;
  last_sent_key_ = key;
  last_sent_qp_ = &qps_[peer->second];
  return last_sent_qp_;
}

RttTracker::QpRtt* RttTracker::received_qp(uint32_t local_qpn) {
  if (last_received_qp_ != nullptr && last_received_qpn_ == local_qpn) return last_received_qp_;
  auto it = qps_.find(local_qpn);
  if (it == qps_.end()) return nullptr;
  last_received_qpn_ = local_qpn;
  last_received_qp_ = &it->second;
  return last_received_qp_;
}

void RttTracker::set_peer(uint32_t local_qpn, const std::array<uint8_t, 16>& remote_gid,
                          uint32_t remote_qpn) {
  last_sent_qp_ = nullptr;  // the peer -> QP map changes
  std::erase_if(by_peer_, [&](const auto& kv) { return kv.second == local_qpn; });
  by_peer_[{remote_gid, remote_qpn & kPsnMask}] = local_qpn;
  qps_[local_qpn];
}

void RttTracker::forget(uint32_t local_qpn) {
  last_sent_qp_ = nullptr;  // the QP's entry goes
  last_received_qp_ = nullptr;
  std::erase_if(by_peer_, [&](const auto& kv) { return kv.second == local_qpn; });
  qps_.erase(local_qpn);
}

void RttTracker::on_sent(TimePoint now, const transport::PacketMeta& meta,
                         std::span<const uint8_t> roce) {
  if (roce.size() < kBthLen || !is_rc_request(roce[0])) return;
  QpRtt* found = sent_qp({meta.ip.dst, be24(roce.data() + 5)});
  if (found == nullptr) return;
  QpRtt& q = *found;
  const uint32_t psn = be24(roce.data() + 9);
  const uint32_t size = ip_packet_size(roce.size(), meta.ip.ipv6);
  // The oldest PSN sent at the largest unanswered size: any ACK that covers it proves a
  // packet of that size crossed the path, whichever copy arrived (a resend has the same
  // size), so the proof survives go-back-N rewinds that leave no RTT sample.
  if (size > q.sizes.largest_unanswered) {
    q.sizes.largest_unanswered = size;
    q.unanswered_psn = psn;
  } else if (size == q.sizes.largest_unanswered && !psn_le(q.unanswered_psn, psn)) {
    q.unanswered_psn = psn;
  }
  // Karn: a PSN at or before the last one sent is a retransmission; its samples and the
  // later ones are ambiguous now.
  if (q.any_sent && psn_le(psn, q.last_psn)) {
    while (!q.pending.empty() && psn_le(psn, q.pending.back().psn)) q.pending.pop_back();
    return;  // nor does the resent packet start a sample
  }
  q.any_sent = true;
  q.last_psn = psn;
  if ((roce[8] & 0x80) == 0) return;
  q.pending.push_back(psn, now, size);
}

void RttTracker::on_received(TimePoint now, const transport::PacketMeta& meta,
                             std::span<const uint8_t> roce) {
  if (roce.size() < kBthLen) return;
  QpRtt* found = received_qp(be24(roce.data() + 5));
  if (found == nullptr) return;
  QpRtt& q = *found;
  q.sizes.largest_received =
      std::max(q.sizes.largest_received, ip_packet_size(roce.size(), meta.ip.ipv6));
  if (roce.size() < kBthLen + 4 || !has_aeth(roce[0])) return;
  const uint8_t syndrome = roce[kBthLen];
  if ((syndrome >> 5) != 0) return;  // RNR NAK or NAK: not an answer that ends a sample
  ++q.acks;
  const uint32_t psn = be24(roce.data() + 9);
  // An ACK at or past the newest PSN sent answers every request sent so far; one that
  // covers the oldest PSN sent at the largest unanswered size proves that size crosses the
  // path (a go-back-N stream that rewinds again and again never catches up, nor keeps
  // samples); one that covers AckReq requests answers those. Either way what is still
  // unanswered is what gets sent (or sent again) from now on.
  if (q.any_sent && (psn_le(q.last_psn, psn) ||
                     (q.sizes.largest_unanswered != 0 && psn_le(q.unanswered_psn, psn)))) {
    q.sizes.largest_answered = std::max(q.sizes.largest_answered, q.sizes.largest_unanswered);
    q.sizes.largest_unanswered = 0;
  }
  bool matched = false;
  TimePoint newest{};
  while (!q.pending.empty() && psn_le(q.pending.front().psn, psn)) {
    newest = q.pending.front().sent;
    q.sizes.largest_answered = std::max(q.sizes.largest_answered, q.pending.front().size);
    matched = true;
    q.pending.pop_front();
  }
  if (matched) q.sizes.largest_unanswered = 0;
  // A coalesced ACK answers the newest request it covers; older ones waited for it.
  if (matched) q.hist.add(now - newest);
}

const RttHistogram* RttTracker::histogram(uint32_t local_qpn) const {
  auto it = qps_.find(local_qpn);
  return it == qps_.end() ? nullptr : &it->second.hist;
}

PacketSizes RttTracker::sizes(uint32_t local_qpn) const {
  auto it = qps_.find(local_qpn);
  return it == qps_.end() ? PacketSizes{} : it->second.sizes;
}

uint64_t RttTracker::acks_received(uint32_t local_qpn) const {
  auto it = qps_.find(local_qpn);
  return it == qps_.end() ? 0 : it->second.acks;
}

}  // namespace uroce::telemetry
