// Completion queue ring and notification arming (see cq.hpp).
#include "transport/cq.hpp"

#include <algorithm>

namespace uroce::transport {

Cq::PushResult Cq::push(const Wc& wc, bool solicited, TimePoint at) {
  // Like rxe (rxe_cq_post): a full CQ loses the completion and raises IBV_EVENT_CQ_ERR.
  // Acquire on head_: the slot about to be written is one a poller has finished reading.
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  if (tail - head_.load(std::memory_order_acquire) == capacity_) return PushResult::kOverflow;
  Wc& s = slot(tail);
  s = wc;
  s.timestamp_ns = at.count();
  tail_.store(tail + 1, std::memory_order_release);
  if (notify_ == Notify::kNext || (notify_ == Notify::kSolicited && solicited)) {
    notify_ = Notify::kNone;
    return PushResult::kStoredNotify;
  }
  return PushResult::kStored;
}

int Cq::poll(std::span<Wc> out) {
  // No lock for an empty CQ: what a busy poller finds most of the time.
  if (out.empty() ||
      tail_.load(std::memory_order_acquire) == head_.load(std::memory_order_relaxed)) {
    return 0;
  }
  std::lock_guard lock(poll_mu_);
  const uint64_t head = head_.load(std::memory_order_relaxed);
  const uint64_t queued = tail_.load(std::memory_order_acquire) - head;
  const auto n = static_cast<uint64_t>(std::min<size_t>(out.size(), queued));
  for (uint64_t i = 0; i < n; ++i) out[i] = slot(head + i);
  // Release: the producer may reuse these slots only after the reads above.
  head_.store(head + n, std::memory_order_release);
  return static_cast<int>(n);
}

bool Cq::resize(uint32_t capacity) {
  std::lock_guard lock(poll_mu_);
  const uint64_t head = head_.load(std::memory_order_relaxed);
  const uint64_t queued = tail_.load(std::memory_order_relaxed) - head;
  if (capacity == 0 || capacity < queued) return false;
  std::vector<Wc> old;
  old.swap(ring_);
  const RingSlots old_slots = slots_;
  set_ring(capacity);
  for (uint64_t i = 0; i < queued; ++i) ring_[i] = old[old_slots(head + i)];
  head_.store(0, std::memory_order_relaxed);
  tail_.store(queued, std::memory_order_release);
  return true;
}

void Cq::set_ring(uint32_t capacity) {
  capacity_ = capacity;
  slots_ = RingSlots(capacity);
  ring_.assign(slots_.size(), Wc{});
}

uint32_t Cq::remove_qp(uint32_t qpn) {
  std::lock_guard lock(poll_mu_);
  const uint64_t head = head_.load(std::memory_order_relaxed);
  const uint64_t queued = tail_.load(std::memory_order_relaxed) - head;
  uint64_t kept = 0;
  for (uint64_t i = 0; i < queued; ++i) {
    const Wc& wc = slot(head + i);
    if (wc.qp_num == qpn) continue;
    if (kept != i) slot(head + kept) = wc;
    ++kept;
  }
  tail_.store(head + kept, std::memory_order_release);
  return static_cast<uint32_t>(queued - kept);
}

}  // namespace uroce::transport
