// Completion queue: a fixed ring of Wc sized at creation, plus the notification arm of
// ibv_req_notify_cq. push() reports what the engine must turn into events (a completion
// notification for an armed CQ, or a CQ error on overflow, whose completion is lost).
//
// Two sides, so that an application's poll never waits for the engine's lock (which the
// progress thread holds for a whole pass over the sockets):
//   - the producer is the engine: push, arm, remove_qp and resize run inside engine calls,
//     which the device serialises, so there is one producer at a time;
//   - the consumers are the application's threads: poll() is safe against the producer at any
//     moment and takes no engine lock. An empty poll (a busy poller's usual case) reads two
//     atomics and takes no lock at all; one that finds completions takes the CQ's own poll
//     lock, so that several threads may poll one CQ as ibverbs allows (mlx5's provider takes
//     its CQ's lock the same way). The producer takes that lock only to rewrite queued entries
//     (remove_qp, resize), never in push.
// The ring's indices count up from 0 and never wrap in practice (2^64 completions); a slot is
// written only while it lies outside [head, tail), and published by the release store of tail.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "transport/ring_slots.hpp"
#include "uroce/vocab/verbs_types.hpp"

namespace uroce::transport {

class Cq {
 public:
  enum class PushResult : uint8_t { kStored, kStoredNotify, kOverflow };

  explicit Cq(uint32_t capacity) { set_ring(capacity); }

  // Producer side. Stores `wc` stamped with `at` (Wc::timestamp_ns).
  PushResult push(const Wc& wc, bool solicited, TimePoint at);
  // Consumer side, from any thread. Up to out.size() completions, oldest first.
  int poll(std::span<Wc> out);
  // Producer side. Drops the completions of QP `qpn` still in the ring, keeping the others in
  // order (a QP moved to RESET: its stale completions, flush errors among them, must not reach
  // the new connection's polls; mlx5's provider cleans the CQ the same way). Returns how many.
  uint32_t remove_qp(uint32_t qpn);
  // Producer side. ibv_resize_cq: a ring of `capacity` entries holding the queued completions
  // in order; false (nothing changed) when more are queued than it would hold.
  bool resize(uint32_t capacity);
  // Producer side (the device arms under the engine's lock).
  void arm(bool solicited_only) { notify_ = solicited_only ? Notify::kSolicited : Notify::kNext; }

  // Producer side: only the engine changes the capacity.
  [[nodiscard]] uint32_t capacity() const { return capacity_; }
  // How many completions are queued: a snapshot, since a poller may take some at any moment.
  [[nodiscard]] uint32_t size() const {
    return static_cast<uint32_t>(tail_.load(std::memory_order_acquire) -
                                 head_.load(std::memory_order_acquire));
  }

  uint32_t users = 0;  // QPs that use this CQ (producer side)

 private:
  enum class Notify : uint8_t { kNone, kNext, kSolicited };

  [[nodiscard]] Wc& slot(uint64_t index) { return ring_[slots_(index)]; }
  void set_ring(uint32_t capacity);

  std::vector<Wc> ring_;
  uint32_t capacity_ = 0;  // producer side; changed only with poll_mu_ held (resize)
  RingSlots slots_;        // read by a poller holding poll_mu_
  // Consumed up to here; written by a consumer holding poll_mu_ (or by the producer holding
  // it, in remove_qp and resize).
  alignas(64) std::atomic<uint64_t> head_{0};
  // Produced up to here; written by the producer only. Apart from head_ so that a poller's
  // store and the producer's do not share a cache line.
  alignas(64) std::atomic<uint64_t> tail_{0};
  std::mutex poll_mu_;
  Notify notify_ = Notify::kNone;
};

}  // namespace uroce::transport
