// Deadlines of every QP timer in one indexed binary min-heap: arming, re-arming and
// disarming a timer are O(log n), the earliest deadline is O(1), and nothing allocates after
// reserve() (one slot per QP timer, sized when the engine is built).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "uroce/vocab/time.hpp"

namespace uroce::transport {

class TimerHeap {
 public:
  static constexpr uint32_t kNotQueued = UINT32_MAX;

  void reserve(uint32_t slots) {
    pos_.assign(slots, kNotQueued);
    heap_.reserve(slots);
  }

  // Arms (or moves) the timer of `slot` to `deadline`.
  void set(uint32_t slot, TimePoint deadline) {
    uint32_t i = pos_[slot];
    if (i == kNotQueued) {
      i = static_cast<uint32_t>(heap_.size());
      heap_.push_back({deadline, slot});
      pos_[slot] = i;
      up(i);
      return;
    }
    const TimePoint old = heap_[i].deadline;
    heap_[i].deadline = deadline;
    if (deadline < old) {
      up(i);
    } else {
      down(i);
    }
  }

  void clear(uint32_t slot) {
    const uint32_t i = pos_[slot];
    if (i == kNotQueued) return;
    const uint32_t last = static_cast<uint32_t>(heap_.size() - 1);
    swap_nodes(i, last);
    heap_.pop_back();
    pos_[slot] = kNotQueued;
    if (i < heap_.size()) {
      up(i);
      down(i);
    }
  }

  [[nodiscard]] bool armed(uint32_t slot) const { return pos_[slot] != kNotQueued; }
  [[nodiscard]] TimePoint deadline(uint32_t slot) const {
    return armed(slot) ? heap_[pos_[slot]].deadline : kNever;
  }
  [[nodiscard]] bool empty() const { return heap_.empty(); }
  [[nodiscard]] TimePoint top_deadline() const {
    return heap_.empty() ? kNever : heap_[0].deadline;
  }
  [[nodiscard]] uint32_t top_slot() const { return heap_[0].slot; }

 private:
  struct Node {
    TimePoint deadline;
    uint32_t slot;
  };

  void swap_nodes(uint32_t a, uint32_t b) {
    std::swap(heap_[a], heap_[b]);
    pos_[heap_[a].slot] = a;
    pos_[heap_[b].slot] = b;
  }
  void up(uint32_t i) {
    while (i > 0) {
      const uint32_t parent = (i - 1) / 2;
      if (!(heap_[i].deadline < heap_[parent].deadline)) break;
      swap_nodes(i, parent);
      i = parent;
    }
  }
  void down(uint32_t i) {
    const uint32_t n = static_cast<uint32_t>(heap_.size());
    for (;;) {
      uint32_t best = i;
      const uint32_t l = 2 * i + 1;
      const uint32_t r = l + 1;
      if (l < n && heap_[l].deadline < heap_[best].deadline) best = l;
      if (r < n && heap_[r].deadline < heap_[best].deadline) best = r;
      if (best == i) break;
      swap_nodes(i, best);
      i = best;
    }
  }

  std::vector<Node> heap_;
  std::vector<uint32_t> pos_;
};

}  // namespace uroce::transport
