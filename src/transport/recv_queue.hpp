// Receive queue: a ring of receive WQEs with their SGE lists stored inline (capacity x
// max_sge, sized at creation, so posting never allocates). Used for a QP's own receive
// queue and inside an SRQ. Also defines RecvWqe, the copy the responder works on.
//
// Two sides, as the send queue (send_queue.hpp): producers are the application's threads
// (Engine::submit_recv, post_srq_recv), which take the queue's post lock, write the WQE at
// tail and publish it by a release store of tail; the consumer is the engine, which pops at
// head and publishes head the same way, so a producer never rewrites a slot the engine may
// still read. The engine takes the post lock only to change the queue's mode (the QP's
// state), to empty it and to grow it, never on the data path. WQEs are numbered by 64-bit
// sequence numbers that only grow; a slot is the number modulo the ring's size.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "transport/post_lock.hpp"
#include "transport/ring_slots.hpp"
#include "uroce/vocab/verbs_types.hpp"

namespace uroce::transport {

// A receive WQE taken off a queue; sges has room for max_sge entries, num_sge are used.
struct RecvWqe {
  uint64_t wr_id = 0;
  uint32_t num_sge = 0;
  uint64_t length = 0;  // sum of the SGE lengths
  std::vector<Sge> sges;

  [[nodiscard]] std::span<const Sge> sge_list() const { return {sges.data(), num_sge}; }
};

class RecvQueue {
 public:
  // What a post finds: refused below INIT (EINVAL, as rxe refuses in RESET), taken, or left
  // to the engine's own post_recv (a QP in ERR, whose post completes at once with a flush).
  enum class Mode : uint8_t { kRefuse, kAccept, kEngine };

  void init(uint32_t capacity, uint32_t max_sge, Mode mode = Mode::kRefuse);

  // ---- Producer side (any thread; takes the post lock).
  // EINVAL: refused, or more SGEs than max_sge; ENOMEM: full. In kEngine mode a producer's
  // WR is not queued: *to_engine is set (a call without to_engine, the engine's, queues it).
  Status push(const RecvWr& wr, bool* to_engine = nullptr);

  // ---- Consumer side (the engine).
  // Copies the oldest WQE into `out` (whose sges must hold max_sge()) and removes it.
  bool pop(RecvWqe& out);
  [[nodiscard]] uint32_t size() const {
    return static_cast<uint32_t>(tail_.load(std::memory_order_acquire) -
                                 head_.load(std::memory_order_relaxed));
  }
  [[nodiscard]] bool empty() const { return size() == 0; }
  [[nodiscard]] uint32_t capacity() const { return capacity_; }
  [[nodiscard]] uint32_t max_sge() const { return max_sge_; }
  // Sets the mode; takes the post lock, so a post that found the old mode has published.
  void set_mode(Mode mode);
  // Sets the mode, then calls flush(wr_id) for every queued WQE, oldest first, and empties
  // the queue (ERR; RESET with a callback that does nothing), all under the post lock.
  template <typename F>
  void drain(Mode mode, F&& flush) {
    std::lock_guard lock(post_mu_);
    mode_ = mode;
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    uint64_t head = head_.load(std::memory_order_relaxed);
    for (; head != tail; ++head) flush(wr_ids_[slot(head)]);
    head_.store(head, std::memory_order_release);
  }
  // Grows the ring (setup path only; keeps the queued WQEs in order). Takes the post lock.
  void grow(uint32_t capacity);

 private:
  [[nodiscard]] uint64_t slot(uint64_t seq) const { return slots_(seq); }

  uint32_t capacity_ = 0;
  uint32_t max_sge_ = 0;
  RingSlots slots_;
  // The engine's head, on a cache line of its own: a producer reads it only when the head it
  // last read says the queue is full.
  alignas(64) std::atomic<uint64_t> head_{0};
  // The producers' side, on another.
  alignas(64) std::atomic<uint64_t> tail_{0};
  PostLock post_mu_;
  Mode mode_ = Mode::kRefuse;  // guarded by post_mu_
  uint64_t head_seen_ = 0;     // guarded by post_mu_: head_ as last read
  std::vector<uint64_t> wr_ids_;
  std::vector<uint32_t> num_sges_;
  std::vector<Sge> sges_;  // slots * max_sge_
};

// Shared receive queue (IBA 10.2.9): a receive queue plus the limit event arm.
struct Srq {
  PdId pd{};
  RecvQueue queue;
  uint32_t max_wr = 0;
  uint32_t limit = 0;  // armed when nonzero: fire once when size() drops below it
  uint32_t users = 0;  // QPs attached
};

}  // namespace uroce::transport
