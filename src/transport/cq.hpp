// Completion queue: a fixed ring of Wc sized at creation, plus the notification arm of
// ibv_req_notify_cq. push() reports what the engine must turn into events (a completion
// notification for an armed CQ, or a CQ error on overflow, whose completion is lost).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "uroce/vocab/verbs_types.hpp"

namespace uroce::transport {

class Cq {
 public:
  enum class PushResult : uint8_t { kStored, kStoredNotify, kOverflow };

  explicit Cq(uint32_t capacity) : ring_(capacity) {}

  // Stores `wc` stamped with `at` (Wc::timestamp_ns).
  PushResult push(const Wc& wc, bool solicited, TimePoint at);
  int poll(std::span<Wc> out);
  // Drops the completions of QP `qpn` still in the ring, keeping the others in order (a QP
  // moved to RESET: its stale completions, flush errors among them, must not reach the new
  // connection's polls; mlx5's provider cleans the CQ the same way). Returns how many.
  uint32_t remove_qp(uint32_t qpn);
  // ibv_resize_cq: a ring of `capacity` entries holding the queued completions in order;
  // false (nothing changed) when more are queued than it would hold.
  bool resize(uint32_t capacity);
  void arm(bool solicited_only) { notify_ = solicited_only ? Notify::kSolicited : Notify::kNext; }

  [[nodiscard]] uint32_t capacity() const { return static_cast<uint32_t>(ring_.size()); }
  [[nodiscard]] uint32_t size() const { return count_; }

  uint32_t users = 0;  // QPs that use this CQ

 private:
  enum class Notify : uint8_t { kNone, kNext, kSolicited };

  std::vector<Wc> ring_;
  uint32_t head_ = 0;
  uint32_t count_ = 0;
  Notify notify_ = Notify::kNone;
};

}  // namespace uroce::transport
