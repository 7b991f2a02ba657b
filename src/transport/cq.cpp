// Completion queue ring and notification arming (see cq.hpp).
#include "transport/cq.hpp"

namespace uroce::transport {

Cq::PushResult Cq::push(const Wc& wc, bool solicited, TimePoint at) {
  // Like rxe (rxe_cq_post): a full CQ loses the completion and raises IBV_EVENT_CQ_ERR.
  if (count_ == ring_.size()) return PushResult::kOverflow;
  Wc& slot = ring_[(head_ + count_) % ring_.size()];
  slot = wc;
  slot.timestamp_ns = at.count();
  ++count_;
  if (notify_ == Notify::kNext || (notify_ == Notify::kSolicited && solicited)) {
    notify_ = Notify::kNone;
    return PushResult::kStoredNotify;
  }
  return PushResult::kStored;
}

int Cq::poll(std::span<Wc> out) {
  int n = 0;
  while (count_ > 0 && static_cast<size_t>(n) < out.size()) {
    out[n++] = ring_[head_];
    head_ = (head_ + 1) % static_cast<uint32_t>(ring_.size());
    --count_;
  }
  return n;
}

bool Cq::resize(uint32_t capacity) {
  if (capacity == 0 || capacity < count_) return false;
  std::vector<Wc> ring(capacity);
  for (uint32_t i = 0; i < count_; ++i) ring[i] = ring_[(head_ + i) % ring_.size()];
  ring_ = std::move(ring);
  head_ = 0;
  return true;
}

uint32_t Cq::remove_qp(uint32_t qpn) {
  const auto size = static_cast<uint32_t>(ring_.size());
  uint32_t kept = 0;
  for (uint32_t i = 0; i < count_; ++i) {
    const Wc& wc = ring_[(head_ + i) % size];
    if (wc.qp_num == qpn) continue;
    if (kept != i) ring_[(head_ + kept) % size] = wc;
    ++kept;
  }
  const uint32_t removed = count_ - kept;
  count_ = kept;
  return removed;
}

}  // namespace uroce::transport
