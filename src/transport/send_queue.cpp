// Send queue storage (see send_queue.hpp).
#include "transport/send_queue.hpp"

#include <algorithm>

namespace uroce::transport {

void SendQueue::init(uint32_t capacity, uint32_t max_sge, uint32_t max_inline) {
  capacity_ = std::max(capacity, 1u);
  max_sge_ = std::max(max_sge, 1u);
  max_inline_ = max_inline;
  slots_ = RingSlots(capacity_);
  const size_t slots = slots_.size();
  head_ = tail_ = 0;
  published_tail_.store(0, std::memory_order_relaxed);
  retired_.store(0, std::memory_order_relaxed);
  wqes_.assign(slots, SendWqe{});
  sges_.assign(slots * max_sge_, Sge{});
  inline_.assign(slots * max_inline_, 0);
}

void SendQueue::reset() {
  std::lock_guard lock(post_mu_);
  accepting_ = false;
  retired_seen_ = 0;
  head_ = tail_ = 0;
  published_tail_.store(0, std::memory_order_relaxed);
  retired_.store(0, std::memory_order_relaxed);
}

}  // namespace uroce::transport
