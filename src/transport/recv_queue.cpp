// Receive queue ring (see recv_queue.hpp).
#include "transport/recv_queue.hpp"

#include <algorithm>
#include <cerrno>

namespace uroce::transport {

void RecvQueue::init(uint32_t capacity, uint32_t max_sge) {
  capacity_ = std::max(capacity, 1u);
  max_sge_ = std::max(max_sge, 1u);
  head_ = count_ = 0;
  wr_ids_.assign(capacity_, 0);
  num_sges_.assign(capacity_, 0);
  sges_.assign(size_t{capacity_} * max_sge_, Sge{});
}

void RecvQueue::grow(uint32_t capacity) {
  if (capacity <= capacity_) return;
  std::vector<uint64_t> ids(capacity, 0);
  std::vector<uint32_t> nums(capacity, 0);
  std::vector<Sge> sges(size_t{capacity} * max_sge_);
  for (uint32_t i = 0; i < count_; ++i) {
    const uint32_t from = (head_ + i) % capacity_;
    ids[i] = wr_ids_[from];
    nums[i] = num_sges_[from];
    std::copy_n(sges_.begin() + size_t{from} * max_sge_, max_sge_,
                sges.begin() + size_t{i} * max_sge_);
  }
  wr_ids_ = std::move(ids);
  num_sges_ = std::move(nums);
  sges_ = std::move(sges);
  capacity_ = capacity;
  head_ = 0;
}

Status RecvQueue::push(const RecvWr& wr) {
  if (wr.sg_list.size() > max_sge_) return Status(EINVAL, "post_recv: more SGEs than max_recv_sge");
  if (count_ == capacity_) return Status(ENOMEM, "post_recv: receive queue full");
  const uint32_t slot = (head_ + count_) % capacity_;
  wr_ids_[slot] = wr.wr_id;
  num_sges_[slot] = static_cast<uint32_t>(wr.sg_list.size());
  std::copy(wr.sg_list.begin(), wr.sg_list.end(), sges_.begin() + size_t{slot} * max_sge_);
  ++count_;
  return Status::ok();
}

bool RecvQueue::pop(RecvWqe& out) {
  if (count_ == 0) return false;
  out.wr_id = wr_ids_[head_];
  out.num_sge = num_sges_[head_];
  out.length = 0;
  for (uint32_t i = 0; i < out.num_sge; ++i) {
    out.sges[i] = sges_[size_t{head_} * max_sge_ + i];
    out.length += out.sges[i].length;
  }
  head_ = (head_ + 1) % capacity_;
  --count_;
  return true;
}

}  // namespace uroce::transport
