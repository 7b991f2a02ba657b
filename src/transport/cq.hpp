// Completion queue: a fixed ring of Wc sized at creation, plus the notification arm of
// ibv_req_notify_cq. push() reports what the engine must turn into events (a completion
// notification for an armed CQ, or a CQ error on overflow, whose completion is lost).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "transport/verbs_types.hpp"

namespace uroce::transport {

class Cq {
 public:
  enum class PushResult : uint8_t { kStored, kStoredNotify, kOverflow };

  explicit Cq(uint32_t capacity) : ring_(capacity) {}

  PushResult push(const Wc& wc, bool solicited);
  int poll(std::span<Wc> out);
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
