// What the responder at one destination address has processed, seen from every RC QP of
// this engine that sends to it: when the newest AckReq packet was sent (and by which QP),
// and the send time of the newest packet it answered. Sans-IO: times come from the caller.
//
// Why (docs/congestion.md "Loss recovery"): the QPs of one sender to one peer share that
// peer's receive queue, and a peer that stalls (a descheduled process, a deep socket
// backlog) delays every QP at once. Each QP's adaptive timer then fires, and a whole-window
// go-back per QP puts 64 windows of duplicates (32 MiB) behind the originals still queued.
// A packet another QP sent after ours and the peer has not answered either says the peer has
// not reached ours yet; a later one it answered says ours is lost. Completer::
// on_retransmit_timeout sends one probe in the first case and goes back in the second.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "uroce/vocab/time.hpp"
#include "wire/icrc.hpp"

namespace uroce::transport {

class PeerClocks {
 public:
  static constexpr uint16_t kNone = 0xFFFF;
  // Peers tracked per engine; QPs to further addresses keep the plain go-back.
  static constexpr size_t kMaxPeers = 1024;

  // The index for `gid`, added if new (kNone once kMaxPeers are tracked). Entries are
  // never removed: one costs 48 bytes, and a QP that goes away leaves only old times.
  uint16_t index_of(const std::array<uint8_t, 16>& gid) {
    for (size_t i = 0; i < peers_.size(); ++i) {
      if (wire::same_address(peers_[i].gid, gid)) return static_cast<uint16_t>(i);
    }
    if (peers_.size() >= kMaxPeers) return kNone;
    peers_.push_back(Peer{gid});
    return static_cast<uint16_t>(peers_.size() - 1);
  }

  // QP `qpn` sent an AckReq packet to the peer at `at`.
  void note_sent(uint16_t peer, uint32_t qpn, TimePoint at) {
    if (peer == kNone) return;
    Peer& p = peers_[peer];
    if (qpn != p.newest_qpn) {
      // Sends come in time order: the newest send of any QP but the new newest one's is
      // the newest send of the QP it replaces.
      p.newest_other_sent = p.newest_sent;
      p.newest_qpn = qpn;
    }
    p.newest_sent = at;
  }

  // The peer answered (an ACK covered) a packet sent at `sent`.
  void note_answered(uint16_t peer, TimePoint sent) {
    if (peer == kNone) return;
    Peer& p = peers_[peer];
    if (p.answered_sent < sent) p.answered_sent = sent;
  }

  // True when another QP sent to the peer no sooner than `sent` and the peer answered
  // nothing sent since: the peer has not got as far as the packet sent at `sent`. (A
  // device stamps a whole burst with one time: the same time is "no sooner", and an answer
  // to a packet of that burst counts as the peer having got that far.)
  [[nodiscard]] bool not_reached(uint16_t peer, uint32_t qpn, TimePoint sent) const {
    if (peer == kNone) return false;
    const Peer& p = peers_[peer];
    const TimePoint other = qpn == p.newest_qpn ? p.newest_other_sent : p.newest_sent;
    return !(other < sent) && p.answered_sent < sent;
  }

 private:
  struct Peer {
    std::array<uint8_t, 16> gid{};
    uint32_t newest_qpn = 0xFFFFFFFFu;
    // min(): none yet.
    TimePoint newest_sent = TimePoint::min();        // the newest AckReq packet to the peer
    TimePoint newest_other_sent = TimePoint::min();  // the newest sent by a QP but newest_qpn
    TimePoint answered_sent = TimePoint::min();      // the send time of the newest answered
  };
  std::vector<Peer> peers_;
};

}  // namespace uroce::transport
