// The engine's internals: resource tables, the TX ready list, timers, events and counters,
// plus the helpers the requester, completer and responder call (completions, entering the
// error state, arming timers). Private to src/transport; users include engine.hpp.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "transport/cq.hpp"
#include "transport/engine.hpp"
#include "transport/memory.hpp"
#include "transport/qp.hpp"
#include "transport/recv_queue.hpp"
#include "transport/timer_heap.hpp"

namespace uroce::transport {

class EngineImpl {
 public:
  explicit EngineImpl(const EngineConfig& config);

  // ---- helpers for the protocol machines
  PeerClocks& peers() { return peers_; }
  void count(Qp& qp, Counter c, uint64_t n = 1) {
    counters_.add(c, n);
    qp.counters.add(c, n);
  }
  void count(Counter c, uint64_t n = 1) { counters_.add(c, n); }

  // Completes the send WQE at the head of qp's send queue with `status` and pops it.
  void complete_send_head(Qp& qp, WcStatus status);
  // Pushes a receive completion to qp's receive CQ.
  void complete_recv(Qp& qp, const Wc& wc, bool solicited);
  // Pushes wc to one of qp's CQs, raising the completion or overflow event it calls for.
  void push_completion(Qp& qp, CqId cq_id, const Wc& wc, bool solicited);
  // Moves the QP to ERR and flushes every outstanding WR (IBA 10.3.1: "Error" state).
  void enter_error(Qp& qp);
  // Takes a receive WQE from the QP's RQ or SRQ into `out`; false when none. Raises the
  // SRQ limit event when an armed SRQ drops below its limit.
  bool take_recv_wqe(Qp& qp, RecvWqe& out);
  // Scratch receive WQE for paths that complete at once (UD receive).
  RecvWqe& ud_wqe(Qp& /*qp*/) { return scratch_wqe_; }

  void arm_timer(Qp& qp, TimerKind t, TimePoint deadline) {
    timers_.set(qp.index * kTimerCount + static_cast<uint32_t>(t), deadline);
  }
  void disarm_timer(Qp& qp, TimerKind t) {
    timers_.clear(qp.index * kTimerCount + static_cast<uint32_t>(t));
  }
  [[nodiscard]] bool timer_armed(const Qp& qp, TimerKind t) const {
    return timers_.armed(qp.index * kTimerCount + static_cast<uint32_t>(t));
  }
  // Puts the QP on the ready list if it has something to send now (a requester held by its
  // pacing "not before" timer does not count).
  void schedule_tx(Qp& qp);
  // As schedule_tx, first holding a requester whose controller says "not before now".
  void schedule_tx(Qp& qp, TimePoint now);
  // Re-arms the QP's kCc timer at its controller's next_timer() and a held requester's kPacing
  // timer at its next_send_time() (after every call into the controller).
  void sync_cc_timer(Qp& qp);
  void disarm_all_timers(Qp& qp);
  // Installs the engine's controller for qp.cc_algorithm (create, reset, detach).
  void install_controller(Qp& qp);
  void push_event(EventType type, uint32_t element);
  // Called after send completions: finishes an SQD drain.
  void check_drained(Qp& qp);

  MemoryTable& memory() { return memory_; }
  [[nodiscard]] const EngineConfig& config() const { return config_; }
  void set_payload_by_reference(bool on) { payload_by_reference_ = on; }
  // Whether an RC packet's payload of `len` bytes, held whole by one registered buffer, leaves
  // by reference (Engine::set_payload_by_reference): the one rule for requests and READ
  // responses.
  [[nodiscard]] bool payload_by_reference(size_t len) const {
    return payload_by_reference_ && len >= kPayloadByReferenceMin;
  }
  Srq* srq(SrqId id);
  Cq* cq(CqId id);
  Qp* qp_by_qpn(uint32_t qpn);
  [[nodiscard]] const Qp* qp_by_qpn(uint32_t qpn) const;

  // ---- the public API, implemented in engine.cpp / engine_setup.cpp
  Result<CqId> create_cq(uint32_t cqe);
  Status destroy_cq(CqId cq);
  Result<SrqId> create_srq(PdId pd, const SrqInitAttr& attr);
  Status modify_srq(SrqId id, const SrqAttr& attr, uint32_t mask);
  Status query_srq(SrqId id, SrqAttr& attr) const;
  Status destroy_srq(SrqId id);
  Result<QpInfo> create_qp(PdId pd, const QpInitAttr& attr);
  Status modify_qp(uint32_t qpn, const QpAttr& attr, uint32_t mask);
  Status query_qp(uint32_t qpn, QpAttr& attr, QpInitAttr& init) const;
  Status destroy_qp(uint32_t qpn);
  Status post_send(TimePoint now, uint32_t qpn, const SendWr& wr);
  // Any thread (Engine::submit_send). was_idle: every WR posted before had completed (UD, UC:
  // and a CQ was polled since the QP's last post).
  Status submit_send(uint32_t qpn, const SendWr& wr, bool* was_idle);
  // Engine side: takes every WQE submitted since (schedules its QP, or flushes it in ERR).
  // Every call that reads or changes send queues as the application sees them runs it first.
  void take_posts(TimePoint now);
  void set_time(TimePoint now) { now_ = now; }
  Status post_recv(uint32_t qpn, const RecvWr& wr);
  // Any thread (Engine::submit_recv).
  Status submit_recv(uint32_t qpn, const RecvWr& wr, bool* to_engine);
  Status post_srq_recv(SrqId id, const RecvWr& wr);
  int poll_cq(CqId id, std::span<Wc> out);
  Status req_notify_cq(CqId id, bool solicited_only);
  void on_packet(TimePoint now, const PacketMeta& meta, std::span<const uint8_t> roce);
  void on_timer(TimePoint now);
  [[nodiscard]] TimePoint next_deadline() const { return timers_.top_deadline(); }
  // Packets one QP may build per round-robin turn (poll_tx). A QP's packets leave through
  // its own socket (its UDP source port), so every turn costs the driver one sendmmsg,
  // whatever it holds: 64 packets are up to four GSO messages of full 4 KiB packets, or one
  // of small ones, for one system call. With 16 (one GSO message of full packets), eight
  // QPs paid three times the system calls of one QP for the same bytes.
  static constexpr size_t kTxTurnPackets = 64;
  size_t poll_tx(TimePoint now, std::span<TxSlot> slots);
  [[nodiscard]] bool has_tx() const {
    return tx_count_ != 0 || posted_qps_.load(std::memory_order_seq_cst) != nullptr;
  }
  size_t poll_events(std::span<AsyncEvent> out);
  [[nodiscard]] bool has_events() const { return ev_count_ != 0; }
  [[nodiscard]] const Counters& counters() const { return counters_; }
  [[nodiscard]] const Counters* qp_counters(uint32_t qpn) const;
  [[nodiscard]] std::optional<Psn> qp_acked_psn(uint32_t qpn) const;
  Status set_congestion_control(uint32_t qpn, CongestionControl* cc);

  // The packet being received (UD needs the IP metadata and the packet length for the GRH).
  const PacketMeta* rx_meta = nullptr;
  size_t rx_len = 0;

 private:
  void reset_qp(Qp& qp);
  void apply_attrs(Qp& qp, const QpAttr& attr, uint32_t mask);
  void dispatch(TimePoint now, Qp& qp, const wire::ParsedPacket& pkt);
  FillResult fill_one(TimePoint now, Qp& qp, TxSlot& slot);
  // The requester's controller holds it until its next send time: arms kPacing.
  bool pacing_holds(Qp& qp, TimePoint now);
  // Notification point: a CE-marked packet arrived for qp; the CNP gap timer ended.
  void on_ce(Qp& qp, TimePoint now);
  void on_cnp_gap_end(Qp& qp, TimePoint now);
  FillResult fill_cnp(Qp& qp, TxSlot& slot);
  void tx_list_push(Qp& qp);

  EngineConfig config_;
  // The time of the call in progress (post_send, on_packet, on_timer, poll_tx): completions
  // are stamped with it. Setup calls that flush (modify_qp to ERR) reuse the last one.
  TimePoint now_{};
  MemoryTable memory_;
  // max_cq slots, sized once at construction: poll_cq looks a CQ up without the device's
  // engine lock (Cq's consumer side), so the table must never reallocate under it.
  std::vector<std::unique_ptr<Cq>> cqs_;
  // max_srq slots, sized once too: post_srq_recv looks an SRQ up without the lock.
  std::vector<std::unique_ptr<Srq>> srqs_;
  std::vector<std::unique_ptr<Qp>> qps_;  // [0, qpn_count): qpn_base + i; [qpn_count]: QP1
  uint32_t next_qp_ = 0;
  uint32_t qp_count_ = 0;

  TimerHeap timers_;
  PeerClocks peers_;
  bool payload_by_reference_ = false;

  // QPs with submitted WQEs not yet taken, newest first (Qp::posts_next): producers push
  // with a compare-exchange, take_posts takes the whole list with one exchange.
  std::atomic<Qp*> posted_qps_{nullptr};
  // Counts poll_cq calls (any CQ, any thread). Racing pollers may lose an increment; a
  // reader only asks whether it changed. Relaxed load and store: an increment by a locked
  // instruction on every busy poll would cost more than the hint is worth.
  std::atomic<uint64_t> cq_polls_{0};

  std::vector<uint32_t> tx_ring_;  // QP table indices with something to send, FIFO
  uint32_t tx_head_ = 0;
  uint32_t tx_count_ = 0;

  std::vector<AsyncEvent> events_;
  uint32_t ev_head_ = 0;
  uint32_t ev_count_ = 0;

  Counters counters_;
  RecvWqe scratch_wqe_;
};

}  // namespace uroce::transport
