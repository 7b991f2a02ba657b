// RttTracker: round-trip times of RC requests measured from the packets the device sends
// and receives, without touching the engine. A request sent with AckReq (IBTA 9.7.5.1.1:
// the responder must acknowledge it) starts a sample; the first ACK, atomic ACK or READ
// response carrying an AETH whose PSN covers it ends the sample. Like TCP's Karn rule, a
// PSN sent again (go-back-N retransmission) cancels the samples from that PSN on, so a
// retransmission never passes for a long round trip.
//
// Sent packets name the remote QPN; the tracker maps (remote address, remote QPN) to the
// local QP from the address vector given to set_peer(). Not thread-safe.
//
// It also keeps the sizes that tell a path MTU problem from a lost peer (PacketSizes): the
// largest request answered by an ACK, the largest sent since the last ACK that covered
// everything, and the largest packet the peer sent to the QP.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "telemetry/snapshot.hpp"
#include "transport/engine.hpp"
#include "uroce/vocab/time.hpp"
#include "wire/icrc.hpp"

namespace uroce::telemetry {

// IP packet sizes in bytes (UDP payload + 28 for IPv4, + 48 for IPv6).
struct PacketSizes {
  uint32_t largest_answered = 0;    // largest request a later ACK covered
  uint32_t largest_unanswered = 0;  // largest request (or retransmission) since then
  uint32_t largest_received = 0;    // largest packet received from the peer QP
};

class RttTracker {
 public:
  static constexpr size_t kMaxPending = 256;  // per QP; beyond that the oldest is dropped

  void set_peer(uint32_t local_qpn, const std::array<uint8_t, 16>& remote_gid, uint32_t remote_qpn);
  void forget(uint32_t local_qpn);

  void on_sent(TimePoint now, const transport::PacketMeta& meta, std::span<const uint8_t> roce);
  void on_received(TimePoint now, const transport::PacketMeta& meta, std::span<const uint8_t> roce);

  [[nodiscard]] const RttHistogram* histogram(uint32_t local_qpn) const;
  [[nodiscard]] uint64_t acks_received(uint32_t local_qpn) const;
  [[nodiscard]] PacketSizes sizes(uint32_t local_qpn) const;

 private:
  struct Pending {
    uint32_t psn;
    TimePoint sent;
    uint32_t size;  // IP packet bytes
  };
  // The AckReq requests awaiting their ACK, oldest first and so in PSN order (a resend
  // starts no sample). A ring whose room is allocated at the QP's first sample, never per
  // packet; when full the oldest is dropped.
  class PendingRing {
   public:
    [[nodiscard]] bool empty() const { return count_ == 0; }
    [[nodiscard]] const Pending& front() const { return buf_[head_]; }
    [[nodiscard]] const Pending& back() const { return buf_[(head_ + count_ - 1) % kMaxPending]; }
    void pop_front() {
      head_ = (head_ + 1) % kMaxPending;
      --count_;
    }
    void pop_back() { --count_; }
    // Field by field into the slot: a Pending built on the stack and copied was a 16-byte
    // load over a 4- and an 8-byte store, a store-forwarding stall per AckReq packet sent.
    void push_back(uint32_t psn, TimePoint sent, uint32_t size) {
      if (buf_.empty()) buf_.resize(kMaxPending);
      if (count_ == kMaxPending) pop_front();
      Pending& p = buf_[(head_ + count_) % kMaxPending];
      p.psn = psn;
      p.sent = sent;
      p.size = size;
      ++count_;
    }

   private:
    std::vector<Pending> buf_;
    size_t head_ = 0;
    size_t count_ = 0;
  };
  struct QpRtt {
    PendingRing pending;
    bool any_sent = false;
    uint32_t last_psn = 0;
    uint32_t unanswered_psn = 0;  // oldest PSN sent at sizes.largest_unanswered
    uint64_t acks = 0;
    PacketSizes sizes;
    RttHistogram hist;
  };
  // Looked up for every request packet sent: a hash and two 8-byte compares (an ordered
  // map's array compares were memcmp calls, 2 % of a 64-byte WRITE's send).
  struct PeerKey {
    std::array<uint8_t, 16> gid{};
    uint32_t qpn = 0;
    bool operator==(const PeerKey& o) const {
      return qpn == o.qpn && wire::same_address(gid, o.gid);
    }
  };
  struct PeerKeyHash {
    size_t operator()(const PeerKey& k) const;
  };

  // The QP a packet is for, looked up in the maps only when it differs from the last
  // packet's: a burst holds runs of one QP's packets (the engine's send turns), and two hash
  // lookups per packet were 4 % of a 64-byte WRITE's sender.
  QpRtt* sent_qp(const PeerKey& key);
  QpRtt* received_qp(uint32_t local_qpn);

  std::unordered_map<PeerKey, uint32_t, PeerKeyHash> by_peer_;  // -> local QPN
  std::unordered_map<uint32_t, QpRtt> qps_;  // elements stay put until erased (forget)
  PeerKey last_sent_key_{};
  QpRtt* last_sent_qp_ = nullptr;  // null: look up again (nothing cached, or a miss)
  uint32_t last_received_qpn_ = 0;
  QpRtt* last_received_qp_ = nullptr;
};

}  // namespace uroce::telemetry
