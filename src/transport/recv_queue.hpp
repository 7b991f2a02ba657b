// Receive queue: a ring of receive WQEs with their SGE lists stored inline (capacity x
// max_sge, sized at creation, so posting never allocates). Used for a QP's own receive
// queue and inside an SRQ. Also defines RecvWqe, the copy the responder works on.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

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
  void init(uint32_t capacity, uint32_t max_sge);
  // Grows the ring (setup path only; keeps the queued WQEs in order).
  void grow(uint32_t capacity);

  Status push(const RecvWr& wr);
  // Copies the oldest WQE into `out` (whose sges must hold max_sge()) and removes it.
  bool pop(RecvWqe& out);
  void clear() { head_ = count_ = 0; }

  [[nodiscard]] uint32_t size() const { return count_; }
  [[nodiscard]] bool empty() const { return count_ == 0; }
  [[nodiscard]] uint32_t capacity() const { return capacity_; }
  [[nodiscard]] uint32_t max_sge() const { return max_sge_; }
  // wr_id of the i-th queued WQE (0 = oldest), for flushing.
  [[nodiscard]] uint64_t wr_id_at(uint32_t i) const { return wr_ids_[(head_ + i) % capacity_]; }

 private:
  uint32_t capacity_ = 0;
  uint32_t max_sge_ = 0;
  uint32_t head_ = 0;
  uint32_t count_ = 0;
  std::vector<uint64_t> wr_ids_;
  std::vector<uint32_t> num_sges_;
  std::vector<Sge> sges_;  // capacity_ * max_sge_
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
