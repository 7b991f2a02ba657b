// One queue pair: its attributes, queues and the three protocol machines that IBTA splits a
// QP's transport into (IBA 9.7, 9.8; rxe_req.c / rxe_comp.c / rxe_resp.c):
//   Requester  turns send WQEs into request packets (segmentation, PSNs, AckReq, window,
//              go-back-N rewinds);
//   Completer  consumes ACK/NAK/READ-response/atomic-ACK packets, completes send WQEs,
//              drives retries and the retransmit/RNR timers;
//   Responder  consumes request packets (PSN check, duplicates, access checks, execute,
//              receive completions) and produces ACK/NAK/READ-response/atomic-ACK packets.
// Each machine keeps its own explicit state; the engine owns the QPs and calls them.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "transport/congestion.hpp"
#include "transport/peer_clock.hpp"
#include "transport/recv_queue.hpp"
#include "transport/send_queue.hpp"
#include "uroce/vocab/counters.hpp"
#include "uroce/vocab/psn.hpp"
#include "uroce/vocab/recovery.hpp"
#include "uroce/vocab/time.hpp"
#include "uroce/vocab/verbs_types.hpp"
#include "wire/packet.hpp"

namespace uroce::transport {

class EngineImpl;
struct Qp;
struct TxSlot;
struct PacketMeta;

// Every per-QP timer; each has its own slot in the engine's TimerHeap (qp.index *
// kTimerCount + kind) and on_timer dispatches on the kind.
enum class TimerKind : uint8_t {
  kRetransmit,  // ACK timeout (completer)
  kRnr,         // RNR NAK wait (completer)
  kPacing,      // "not before": the requester may send again (congestion control's pacer)
  kCc,          // the controller's own deadline (CongestionControl::next_timer)
  kCnpGap,      // end of the notification point's min_time_between_cnps window
  kCount,
};
inline constexpr uint32_t kTimerCount = static_cast<uint32_t>(TimerKind::kCount);

// What a producer did with a TX slot.
enum class FillResult : uint8_t { kProduced, kNothing, kNoRoom };

// rxe RXE_MAX_UNACKED_PSNS: the requester stops while req.psn is past comp.psn + 128.
inline constexpr int32_t kMaxUnackedPsns = 128;
// The smallest payload a packet sends by reference (Engine::set_payload_by_reference): below
// it the copy costs less than the extra iovecs and CRC calls (64-byte WRITEs: 8 % fewer per
// second by reference; 1 KiB even, 4 KiB and up 3-6 % more; docs/performance.md).
inline constexpr uint32_t kPayloadByReferenceMin = 1024;
// rxe RXE_MAX_PKT_PER_ACK: AckReq on an interior packet once 65 went without it.
inline constexpr uint32_t kMaxPktPerAck = 64;

class Requester {
 public:
  void reset(Psn psn, uint64_t seq);
  FillResult fill(EngineImpl& e, Qp& qp, TimePoint now, TxSlot& slot);
  // Go-back-N (IBA 9.7.5.1.x, rxe req_retry): resend from `psn`, the oldest unacked PSN.
  void rewind(Qp& qp, Psn psn);
  // The completer saw `psn` (after psn()) acknowledged: packets sent before a rewind
  // arrived after all. Skip resending what is already acknowledged.
  void fast_forward(Qp& qp, Psn psn);
  // After a timeout's rewind (Completer::on_retransmit_timeout): only the packet at `psn` may
  // leave until the completer ends the probe. A rewind ends it.
  void start_probe(Psn psn) {
    probe_ = true;
    probe_psn_ = psn;
  }
  void end_probe() { probe_ = false; }
  [[nodiscard]] bool probing() const { return probe_; }
  [[nodiscard]] Psn probe_psn() const { return probe_psn_; }
  // The probe has left: nothing more may until the completer ends it.
  [[nodiscard]] bool held_by_probe() const { return probe_ && psn_ != probe_psn_; }
  // Whether fill() could produce a packet now (ignoring slot room).
  [[nodiscard]] bool ready(const Qp& qp) const;
  // Selective repeat: the responder placed `sacked` out of order (its NAK said so). The
  // unsacked PSNs below it are holes, each resent once (fill) before new data.
  void sr_sack(const Qp& qp, Psn sacked);

  [[nodiscard]] Psn psn() const { return psn_; }
  [[nodiscard]] Psn high_psn() const { return high_psn_; }
  [[nodiscard]] uint64_t seq() const { return seq_; }
  [[nodiscard]] bool rnr_wait() const { return rnr_wait_; }
  void set_rnr_wait(bool v) { rnr_wait_ = v; }
  void rd_atomic_done() { --rd_atomic_; }
  [[nodiscard]] uint32_t rd_atomic() const { return rd_atomic_; }

 private:
  // Starts the WQE at seq_: local checks, PSN assignment. False when it must wait.
  bool start_wqe(EngineImpl& e, Qp& qp, bool* completed);
  // LOCAL_INV / BIND_MW at seq_: once it is the oldest WR, performs and completes it.
  bool run_local_op(EngineImpl& e, Qp& qp, bool* completed);
  // Builds the packet at psn_ of the WQE at seq_ (its packet pkts_sent) and moves on.
  FillResult emit(EngineImpl& e, Qp& qp, TimePoint now, TxSlot& slot, bool retransmit_hole);
  // Selective repeat: resends the next hole, if any (kNothing: none left).
  FillResult fill_hole(EngineImpl& e, Qp& qp, TimePoint now, TxSlot& slot);

  Psn psn_;       // PSN of the next packet to send
  Psn high_psn_;  // one past the highest PSN ever sent (retransmission accounting)
  bool sent_any_ = false;
  uint64_t seq_ = 0;  // WQE being sent
  uint32_t noack_pkts_ = 0;
  uint32_t rd_atomic_ = 0;  // READ/atomic WQEs started and not completed
  bool rnr_wait_ = false;
  bool probe_ = false;  // start_probe: nothing after probe_psn_ leaves
  Psn probe_psn_;
  // Selective repeat (Qp::sr()): PSNs the responder reported placed, and the holes still to
  // resend: unsacked PSNs in [sr_next_, sr_limit_) while sr_pending_.
  PsnBitmap sack_;
  Psn sr_next_;
  Psn sr_limit_;
  Psn sr_pass_high_;         // high_psn_ when the last hole was resent
  bool sr_pending_ = false;  // holes may be left in [sr_next_, sr_limit_)
  bool sr_episode_ = false;  // a recovery episode is open (holes below sr_limit_)
  bool sr_resent_ = false;   // a hole was resent since the scan last started
};

class Completer {
 public:
  void reset(Psn psn, uint8_t retry_cnt, uint8_t rnr_retry);
  void on_response(EngineImpl& e, Qp& qp, TimePoint now, const wire::ParsedPacket& pkt);
  void on_retransmit_timeout(EngineImpl& e, Qp& qp, TimePoint now);
  void on_rnr_timer(EngineImpl& e, Qp& qp, TimePoint now);
  void reset_retry_counters(uint8_t retry_cnt, uint8_t rnr_retry);
  // Arms the retransmit timer: the adaptive deadline (RTO from the measured RTT) or the end
  // of the configured-timeout period, whichever is first; `new_period` restarts that period
  // (first packet sent from idle, progress).
  void arm_retransmit(EngineImpl& e, Qp& qp, TimePoint now, bool new_period);
  // The requester sent `psn` with AckReq (its ACK is what the adaptive timer waits for);
  // `timed`: its ACK may be an RTT sample (Karn's rule). Returns true when it is the only
  // AckReq packet awaited: the adaptive deadline then starts from it (re-arm the timer).
  bool on_ackreq_sent(TimePoint now, Psn psn, bool timed);
  // Karn's rule: resending a PSN at or before a timed one makes the cumulative ACK that would
  // end that sample ambiguous (it may wait for the resend): drop those samples.
  void on_resend(Psn psn) {
    for (uint8_t i = 0; i < awaited_count_; ++i) {
      if (!awaited_[i].psn.before(psn)) awaited_[i].timed = false;
    }
  }
  [[nodiscard]] const RttEstimator& rtt() const { return rtt_; }
  // The last go-back was started by a timer, not a NAK: its resends are not timed (Karn's
  // rule: their ACK may answer the original, which a NAK-started resend's cannot).
  [[nodiscard]] bool timer_rewind() const { return timer_rewind_; }

  [[nodiscard]] Psn psn() const { return psn_; }

 private:
  // Positive progress: comp.psn moved to `psn`.
  void advance(EngineImpl& e, Qp& qp, TimePoint now, Psn psn);
  void start_retry(EngineImpl& e, Qp& qp, TimePoint now, bool from_nak);
  void complete_head(EngineImpl& e, Qp& qp, WcStatus status);
  void fail_head(EngineImpl& e, Qp& qp, WcStatus status);
  // A go-back may resend one packet first and wait for its answer (Requester::start_probe).
  [[nodiscard]] bool can_probe(const Qp& qp) const;
  // Only the oldest unacknowledged packet leaves until the first positive response
  // (on_response); `adaptive_go_back`: an adaptive expiry's, not the configured timeout's.
  void start_probe(Qp& qp, TimePoint now, bool adaptive_go_back);

  Psn psn_;  // oldest unacknowledged PSN
  uint8_t retry_left_ = 0;
  uint8_t rnr_retry_left_ = 0;
  bool nak_retry_running_ = false;  // a NAK-started retry made no progress yet
  // Adaptive retransmission: the end of the configured timeout (counted retries happen
  // only there, so retry_cnt means what it always meant) and the RTT estimator.
  TimePoint period_end_{};
  bool adp_fired_ = false;  // the adaptive timer went back in this period
  // Spurious early resends (docs/congestion.md "Loss recovery"): the gap between the last
  // progress before an adaptive go-back and the first progress after it; a duplicate ACK
  // after that progress shows the peer had the packets already, and the gap becomes an RTT
  // sample so the next RTO covers a stall as long.
  TimePoint progress_at_{};
  bool adp_rewound_ = false;  // an adaptive go-back since the last progress
  // When it went back and what had been sent then: what proves it spurious (on_response).
  TimePoint adp_rewound_at_{};
  Psn adp_high_psn_;
  bool adp_gap_ready_ = false;  // progress came after it: a duplicate ACK proves it spurious
  bool timer_rewind_ = false;
  TimePoint probe_at_{};    // when the last probe was sent (Requester::start_probe)
  bool adp_probe_ = false;  // that probe is an adaptive go-back's, not the configured timeout's
  Nanos adp_gap_{0};
  RttEstimator rtt_;
  // AckReq packets sent and not yet acknowledged, in send order (docs/congestion.md "Loss
  // recovery"): every ACK that covers one sent once is an RTT sample, and the adaptive RTO
  // runs from the send of the oldest one, not from the last progress, so a message end that
  // a pacer or a full window sends long after the last ACK is not "late" before it left.
  // Fixed size; an AckReq packet that finds it full is not recorded (untracked_).
  struct AwaitedAck {
    Psn psn;
    TimePoint sent_at{};
    bool timed = false;
  };
  static constexpr uint8_t kAwaitedAcks = 8;
  std::array<AwaitedAck, kAwaitedAcks> awaited_{};
  uint8_t awaited_count_ = 0;
  // PSNs in flight whose AckReq packets are not in awaited_ (it was full, or a go-back
  // forgot them): then the adaptive RTO runs from when it is armed, as it always did, until
  // the cumulative ACK reaches untracked_until_ (after a go-back: everything then in flight
  // is acknowledged; in recovery the timer behaves as before).
  bool untracked_ = false;
  Psn untracked_until_;
  void forget_awaited() {
    awaited_count_ = 0;
    untracked_ = false;
  }
  void forget_awaited_for_rewind(Psn high) {
    awaited_count_ = 0;
    untracked_ = true;
    untracked_until_ = high;
  }
  // When the adaptive RTO starts: the last progress, or the send of the oldest awaited AckReq
  // packet if later; kNever when nothing asked for an ACK yet (only the configured timeout).
  // A sentinel, not std::optional: GCC built the optional on the stack, inline or not, with a
  // byte store and an 8-byte store read back by one 16-byte load, a store-forwarding stall
  // on every packet that arms the timer (two thirds of arm_retransmit's time, `perf annotate`).
  [[nodiscard]] TimePoint adaptive_anchor(TimePoint now) const {
    if (untracked_) return now;
    if (awaited_count_ == 0) return kNever;
    return std::max(progress_at_, awaited_[0].sent_at);
  }
  // A go-back proved spurious (its originals are arriving): the requester resumes after the
  // highest PSN sent instead of resending them.
  void resume_after_spurious_go_back(Qp& qp);
};

// A READ, atomic, FLUSH or ATOMIC WRITE the responder executed, kept for duplicates (IBA
// 9.7.5.1.3 C9-114.., IBA 1.5 oA19-14/15: a duplicate FLUSH or ATOMIC WRITE is answered
// again, never executed twice).
struct RdAtomicResource {
  enum class Kind : uint8_t { kFree, kRead, kAtomic, kFlushOrAtomicWrite };
  Kind kind = Kind::kFree;
  Psn first_psn;
  Psn last_psn;
  uint64_t orig = 0;  // atomic: the value returned the first time
  uint64_t va = 0;    // READ: the original request, which a retry may only narrow
  uint32_t rkey = 0;
  uint32_t length = 0;
};

// One queued response: an ACK/NAK, an atomic ACK, or a READ reply streamed packet by packet.
struct RespItem {
  enum class Kind : uint8_t { kAck, kAtomicAck, kRead };
  Kind kind = Kind::kAck;
  uint8_t syndrome = 0;
  Psn psn;
  uint32_t msn = 0;
  // kRead
  uint32_t rkey = 0;
  uint32_t length = 0;
  uint32_t sent = 0;  // packets of the reply already sent
  // One field for two kinds (an item is one or the other): every RC QP holds a whole ring
  // of these, so 8 bytes an item count in the memory of an idle QP.
  union {
    uint64_t orig = 0;  // kAtomicAck: the value the atomic read
    uint64_t va;        // kRead: where the reply's data starts
  };
};
static_assert(sizeof(RespItem) == 32);

class Responder {
 public:
  void init(uint32_t out_capacity, uint32_t max_resources, uint32_t max_sge);
  void reset(Psn epsn);
  void on_request(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt);
  FillResult fill(EngineImpl& e, Qp& qp, TxSlot& slot);
  [[nodiscard]] bool has_output() const { return out_count_ != 0; }
  void resize_resources(uint32_t n);
  // Completes the receive WQE in progress (if any) with `status` (flush, errors).
  void abort_wqe(EngineImpl& e, Qp& qp, WcStatus status);
  [[nodiscard]] Psn epsn() const { return epsn_; }

 private:
  enum class InMsg : uint8_t { kNone, kSend, kWrite };

  void on_rc(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt);
  void on_uc(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt);
  void duplicate(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt);
  // Selective repeat: places a WRITE Only ahead of ePSN and SACKs it. False when the packet
  // is not placeable (the go-back-N path NAKs it).
  bool place_out_of_order(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt, int32_t ahead);
  // Selective repeat: moves ePSN over PSNs already placed and acknowledges them.
  void advance_over_placed(Qp& qp);
  // Executes an in-sequence request; returns false when it ended in an error already handled.
  bool execute(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt, bool rc);
  // The executors execute() dispatches to, one per operation (IBA 9.7.5.1 steps 5..6).
  bool execute_send(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt, bool rc);
  bool execute_write(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt, bool rc);
  bool execute_read(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt);
  bool execute_atomic(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt);
  bool execute_flush(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt);
  bool execute_atomic_write(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt);
  // The answer to an executed (or duplicate) FLUSH / ATOMIC WRITE: a zero-length RDMA READ
  // Response Only with an ACK AETH (IBA 1.5, rxe send_read_response_ack).
  void queue_empty_read_response(Psn psn);
  bool take_wqe(EngineImpl& e, Qp& qp);
  void class_c_error(EngineImpl& e, Qp& qp, wire::NakCode code, WcStatus recv_status, Psn psn);
  // The one reject path (returns false): counts `counter`; RC: NAK `code`, the receive WQE
  // in progress completes `recv_status`, QP to ERR (IBA 9.9.2 class A/C); UC: the message is
  // dropped (class D), after completing the WQE with `recv_status` if `uc_completes`.
  bool reject(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt, bool rc, Counter counter,
              wire::NakCode code, WcStatus recv_status, bool uc_completes = false);
  void complete_recv(EngineImpl& e, Qp& qp, const Wc& wc, bool solicited);
  void drop_message();
  bool queue(const RespItem& item);
  void pop_out();  // drops out_[out_head_]
  RdAtomicResource& new_resource();

  Psn epsn_;
  uint32_t msn_ = 0;
  bool sent_nak_ = false;  // a NAK (sequence or RNR) went out for epsn_: silent until it arrives
  PsnBitmap placed_;       // selective repeat: PSNs ahead of epsn_ already placed
  bool drop_msg_ = false;  // UC: drop until the next First/Only
  InMsg in_msg_ = InMsg::kNone;
  bool have_wqe_ = false;
  RecvWqe wqe_;
  uint64_t recv_offset_ = 0;
  uint64_t write_va_ = 0;
  uint32_t write_rkey_ = 0;
  uint32_t write_len_ = 0;
  uint32_t write_resid_ = 0;

  std::vector<RdAtomicResource> resources_;
  uint32_t max_resources_ = 1;  // the device's max_qp_rd_atom
  uint32_t res_used_ = 0;       // max_dest_rd_atomic in effect
  uint32_t res_next_ = 0;

  std::vector<RespItem> out_;
  uint32_t out_head_ = 0;
  uint32_t out_count_ = 0;
};

struct Qp {
  uint32_t qpn = 0;
  uint32_t index = 0;  // slot in the engine's QP table (timer slots derive from it)
  QpType type = QpType::kRc;
  PdId pd{};
  CqId send_cq{};
  CqId recv_cq{};
  std::optional<SrqId> srq;
  QpCap cap;
  bool sq_sig_all = false;

  QpState state = QpState::kReset;
  bool sq_draining = false;
  QpAttr attr;          // the attributes as last set (query_qp)
  uint16_t sport = 0;   // UDP source port (rxe §2f)
  uint32_t mtu = 1024;  // path MTU in bytes (UD: the port's active MTU)

  SendQueue sq;
  RecvQueue rq;
  Requester req;
  Completer comp;
  Responder resp;

  Counters counters;
  // Congestion control: the engine's controller for this QP (null for kNone) and the one in
  // use (own_cc, or an external one attached by set_congestion_control).
  CcAlgorithm cc_algorithm = CcAlgorithm::kNone;
  std::unique_ptr<CongestionControl> own_cc;
  CongestionControl* cc = nullptr;
  // Notification point: a CNP waits for a TX slot; a CE mark arrived inside the CNP gap.
  bool cnp_due = false;
  bool ce_in_gap = false;
  bool in_tx_list = false;
  // The engine's list of QPs with WQEs posted and not yet taken (EngineImpl::take_posts):
  // a producer that sets posts_queued from false links the QP in; the engine clears it
  // before it takes the QP's WQEs.
  std::atomic<bool> posts_queued{false};
  Qp* posts_next = nullptr;
  // EngineImpl::cq_polls_ at this QP's last post (under the send queue's post lock): for
  // submit_send's was_idle on UD and UC.
  uint64_t cq_polls_at_last_post = UINT64_MAX;
  uint16_t peer = PeerClocks::kNone;  // the engine's PeerClocks entry for the AV's address (RC)

  [[nodiscard]] bool is_rc() const { return type == QpType::kRc; }
  // Selective repeat in use: both ends agreed (QpAttr::recovery) and the QP is RC.
  [[nodiscard]] bool sr() const {
    return type == QpType::kRc && attr.recovery == Recovery::kSelectiveRepeat;
  }
  [[nodiscard]] bool is_ud() const { return type == QpType::kUd || type == QpType::kGsi; }
};

}  // namespace uroce::transport
