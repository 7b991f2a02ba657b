// The discrete-event core: a binary min-heap of events ordered by (time, sequence number).
// The sequence number is the order of scheduling, so two events at the same nanosecond run
// in the order they were scheduled and a run replays exactly. An event is plain data (a
// kind and three integers the simulator interprets), never a std::function: scheduling one
// allocates nothing once the heap's vector has grown to the run's high-water mark.
#pragma once

#include <cstdint>
#include <vector>

#include "uroce/vocab/time.hpp"

namespace uroce::sim {

struct Event {
  TimePoint at{};
  uint64_t seq = 0;
  uint32_t kind = 0;
  uint32_t a = 0;
  uint64_t b = 0;
};

class EventQueue {
 public:
  void push(TimePoint at, uint32_t kind, uint32_t a = 0, uint64_t b = 0) {
    heap_.push_back(Event{at, next_seq_++, kind, a, b});
    sift_up(heap_.size() - 1);
  }
  [[nodiscard]] bool empty() const { return heap_.empty(); }
  [[nodiscard]] size_t size() const { return heap_.size(); }
  // Precondition: !empty().
  [[nodiscard]] const Event& top() const { return heap_.front(); }
  Event pop() {
    Event e = heap_.front();
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0);
    return e;
  }
  void reserve(size_t n) { heap_.reserve(n); }

 private:
  static bool before(const Event& x, const Event& y) {
    return x.at != y.at ? x.at < y.at : x.seq < y.seq;
  }
  void sift_up(size_t i) {
    const Event e = heap_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!before(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }
  void sift_down(size_t i) {
    const size_t n = heap_.size();
    const Event e = heap_[i];
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
      if (!before(heap_[child], e)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = e;
  }

  std::vector<Event> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace uroce::sim
