// Receive queue ring (see recv_queue.hpp).
#include "transport/recv_queue.hpp"

#include <algorithm>
#include <cerrno>

namespace uroce::transport {

void RecvQueue::init(uint32_t capacity, uint32_t max_sge, Mode mode) {
  capacity_ = std::max(capacity, 1u);
  max_sge_ = std::max(max_sge, 1u);
  mode_ = mode;
  head_seen_ = 0;
  head_.store(0, std::memory_order_relaxed);
  tail_.store(0, std::memory_order_relaxed);
  slots_ = RingSlots(capacity_);
  const size_t slots = slots_.size();
  wr_ids_.assign(slots, 0);
  num_sges_.assign(slots, 0);
  sges_.assign(slots * max_sge_, Sge{});
}

void RecvQueue::set_mode(Mode mode) {
  std::lock_guard lock(post_mu_);
  mode_ = mode;
}

void RecvQueue::grow(uint32_t capacity) {
  std::lock_guard lock(post_mu_);
  if (capacity <= capacity_) return;
  const RingSlots grown(capacity);
  if (grown.size() == slots_.size()) {  // the ring has room for it already
    capacity_ = capacity;
    return;
  }
  std::vector<uint64_t> ids(grown.size(), 0);
  std::vector<uint32_t> nums(grown.size(), 0);
  std::vector<Sge> sges(grown.size() * max_sge_);
  const uint64_t head = head_.load(std::memory_order_relaxed);
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  for (uint64_t seq = head; seq != tail; ++seq) {
    const uint64_t from = slot(seq);
    const uint64_t to = grown(seq);
    ids[to] = wr_ids_[from];
    nums[to] = num_sges_[from];
    std::copy_n(sges_.begin() + static_cast<std::ptrdiff_t>(from * max_sge_), max_sge_,
                sges.begin() + static_cast<std::ptrdiff_t>(to * max_sge_));
  }
  wr_ids_ = std::move(ids);
  num_sges_ = std::move(nums);
  sges_ = std::move(sges);
  capacity_ = capacity;
  slots_ = grown;
}

Status RecvQueue::push(const RecvWr& wr, bool* to_engine) {
  std::lock_guard lock(post_mu_);
  if (mode_ == Mode::kRefuse) return Status(EINVAL, "post_recv: QP is in RESET (rxe refuses too)");
  if (mode_ == Mode::kEngine && to_engine != nullptr) {
    *to_engine = true;
    return Status::ok();
  }
  if (wr.sg_list.size() > max_sge_) return Status(EINVAL, "post_recv: more SGEs than max_recv_sge");
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  if (tail - head_seen_ >= capacity_) {
    head_seen_ = head_.load(std::memory_order_acquire);
    if (tail - head_seen_ >= capacity_) return Status(ENOMEM, "post_recv: receive queue full");
  }
  const uint64_t at = slot(tail);
  wr_ids_[at] = wr.wr_id;
  num_sges_[at] = static_cast<uint32_t>(wr.sg_list.size());
  std::copy(wr.sg_list.begin(), wr.sg_list.end(),
            sges_.begin() + static_cast<std::ptrdiff_t>(at * max_sge_));
  tail_.store(tail + 1, std::memory_order_release);
  return Status::ok();
}

bool RecvQueue::pop(RecvWqe& out) {
  const uint64_t head = head_.load(std::memory_order_relaxed);
  if (tail_.load(std::memory_order_acquire) == head) return false;
  const uint64_t at = slot(head);
  out.wr_id = wr_ids_[at];
  out.num_sge = num_sges_[at];
  out.length = 0;
  for (uint32_t i = 0; i < out.num_sge; ++i) {
    out.sges[i] = sges_[at * max_sge_ + i];
    out.length += out.sges[i].length;
  }
  head_.store(head + 1, std::memory_order_release);
  return true;
}

}  // namespace uroce::transport
