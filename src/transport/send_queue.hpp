// Send queue: a ring of send WQEs sized at QP creation, with each WQE's SGE list and inline
// data stored in flat arrays beside it (capacity x max_sge, capacity x max_inline), so
// posting never allocates. WQEs are named by a 64-bit sequence number that only grows:
// [head, tail) are posted and not yet completed; the requester and completer keep their
// own positions inside that range.
//
// Two sides, so that a post never waits for the engine's lock (which the progress thread
// holds for a whole pass over the sockets), as a NIC's send queue is written by the
// application and read by the NIC:
//   - producers are the application's threads (Engine::submit_send). They take the queue's
//     own post lock (ibverbs lets several threads post to one QP; mlx5's provider takes a
//     per-QP lock the same way), write the WQE at published_tail, and publish it by a store
//     of published_tail. A full queue is judged against retired, the engine's head as it
//     last published it, so a slot is never rewritten while the engine may read it;
//   - the consumer is the engine. It sees only [head, tail): take() moves its tail up to what
//     producers published (published()), inside an engine call, and pop() publishes retired.
// The engine takes the post lock only to change whether posts are accepted (the QP's state)
// and to empty the queue (RESET), never on the data path.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "transport/post_lock.hpp"
#include "transport/ring_slots.hpp"
#include "uroce/vocab/psn.hpp"
#include "uroce/vocab/verbs_types.hpp"

namespace uroce::transport {

enum class WqeState : uint8_t {
  kPosted,   // not started by the requester (or rewound by a retry)
  kStarted,  // PSNs assigned, packets (partly) sent
};

struct SendWqe {
  // The work request as posted.
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t send_flags = 0;
  bool signaled = false;
  bool is_inline = false;
  uint32_t num_sge = 0;
  uint32_t length = 0;  // message length in bytes (atomics: 8)
  uint32_t imm_data = 0;
  uint32_t invalidate_rkey = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;  // ATOMIC_WRITE: its 8 bytes (memcpy, wire order as posted)
  uint64_t swap = 0;
  uint8_t flush_type = 0;   // FLUSH: FlushType bits
  uint8_t flush_level = 0;  // FLUSH: FlushLevel
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
  AhAttr ah;
  MwBind bind;  // BIND_MW

  // Progress.
  WqeState state = WqeState::kPosted;
  Psn first_psn;
  Psn last_psn;
  uint32_t npkts = 0;      // PSNs the message consumes (a READ: its response packets)
  uint32_t pkts_sent = 0;  // packets of the message sent so far (the next is first_psn+pkts_sent)
  WcStatus error = WcStatus::kSuccess;  // a local error found before the WQE completed
};

class SendQueue {
 public:
  void init(uint32_t capacity, uint32_t max_sge, uint32_t max_inline);

  // ---- Consumer side (the engine). [head, tail) is what the engine has taken.
  [[nodiscard]] bool empty() const { return tail_ == head_; }
  [[nodiscard]] uint64_t head() const { return head_; }
  [[nodiscard]] uint64_t tail() const { return tail_; }
  [[nodiscard]] uint32_t capacity() const { return capacity_; }

  SendWqe& at(uint64_t seq) { return wqes_[slot(seq)]; }
  [[nodiscard]] const SendWqe& at(uint64_t seq) const { return wqes_[slot(seq)]; }

  // Storage of the WQE at `seq`: its SGE array (max_sge) and its inline buffer (max_inline).
  // The producer fills them for the WQE it is posting; the engine reads them afterwards.
  std::span<Sge> sge_storage(uint64_t seq) {
    return {sges_.data() + slot(seq) * max_sge_, max_sge_};
  }
  std::span<uint8_t> inline_storage(uint64_t seq) {
    return {inline_.data() + slot(seq) * max_inline_, max_inline_};
  }
  [[nodiscard]] std::span<const Sge> sges(uint64_t seq) const {
    return {sges_.data() + slot(seq) * max_sge_, at(seq).num_sge};
  }
  [[nodiscard]] std::span<const uint8_t> inline_data(uint64_t seq) const {
    return {inline_.data() + slot(seq) * max_inline_, at(seq).length};
  }

  // WQEs published and not yet taken. The engine clears the QP's doorbell flag before this
  // read, and a producer publishes before it sets the flag, both by exchanges: whichever comes
  // second sees the other (EngineImpl::submit_send and take_posts).
  [[nodiscard]] uint64_t published() const {
    return published_tail_.load(std::memory_order_acquire) - tail_;
  }
  // Takes the next published WQE into [head, tail); returns its sequence number.
  uint64_t take() { return tail_++; }
  void pop() {
    ++head_;
    retired_.store(head_, std::memory_order_release);
  }
  // Whether producers may post: false below RTS (RESET, INIT, RTR). Takes the post lock, so
  // a post that found the queue accepting has published before the change.
  void set_accepting(bool on) {
    std::lock_guard lock(post_mu_);
    accepting_ = on;
  }
  // RESET: refuses posts and drops every WQE, taken or only published.
  void reset();

  // ---- Producer side (any thread), with the lock of lock_posts() held.
  [[nodiscard]] std::unique_lock<PostLock> lock_posts() { return std::unique_lock(post_mu_); }
  [[nodiscard]] bool accepting() const { return accepting_; }
  // The sequence number the next post fills.
  [[nodiscard]] uint64_t post_seq() const {
    return published_tail_.load(std::memory_order_relaxed);
  }
  // Every WQE posted has completed (the post lock held: no post is half written).
  [[nodiscard]] bool post_empty() const {
    return post_seq() == retired_.load(std::memory_order_acquire);
  }
  // The engine's head is read only when the one last read says full: it sits on the
  // engine's cache line, which the engine writes at every completion.
  [[nodiscard]] bool post_full() {
    if (post_seq() - retired_seen_ < capacity_) return false;
    retired_seen_ = retired_.load(std::memory_order_acquire);
    return post_seq() - retired_seen_ >= capacity_;
  }
  // The WQE at post_seq() is written: the engine may take it.
  void publish() { published_tail_.store(post_seq() + 1, std::memory_order_release); }

 private:
  [[nodiscard]] size_t slot(uint64_t seq) const { return slots_(seq); }

  uint32_t capacity_ = 0;
  RingSlots slots_;
  uint32_t max_sge_ = 0;
  uint32_t max_inline_ = 0;
  // The engine's side, on a cache line of its own: a producer on another core reads it only
  // to find room (retired_) or whether the queue is idle.
  alignas(64) uint64_t head_ = 0;
  uint64_t tail_ = 0;
  std::atomic<uint64_t> retired_{0};
  // The producers' side, on another: the engine reads published_tail_ once per take.
  alignas(64) std::atomic<uint64_t> published_tail_{0};
  PostLock post_mu_;
  bool accepting_ = false;     // guarded by post_mu_
  uint64_t retired_seen_ = 0;  // guarded by post_mu_: retired_ as last read
  std::vector<SendWqe> wqes_;
  std::vector<Sge> sges_;
  std::vector<uint8_t> inline_;
};

}  // namespace uroce::transport
