// DelayLine: the packets an impairment holds until their release time, in a fixed number of
// preallocated slots (no allocation per packet). Packets leave in release order, ties in the
// order they came, so a jitter wider than the packet spacing reorders them as netem does.
//
//   DelayLine<Meta> line(limit, max_len);
//   line.push(release, bytes, meta);          // false when full
//   while (line.due(now)) { auto p = line.front(); ...; line.pop(); }
//
// A sender that may take fewer than it is offered (a full socket buffer) takes a batch of due
// packets, sends what it can and settles: the rest go back, still first in line.
//   size_t n = line.take(now, batch);  size_t sent = send(batch, n);  line.settle(sent);
//
// Sans-IO: the caller says what time it is. `Meta` is whatever travels with the bytes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "uroce/vocab/time.hpp"

namespace uroce::fault {

template <class Meta>
class DelayLine {
 public:
  struct Packet {
    std::span<uint8_t> bytes;
    Meta meta;
    TimePoint release;
  };

  DelayLine(uint32_t limit, size_t max_len)
      : max_len_(max_len), store_(size_t{limit} * max_len), meta_(limit), len_(limit) {
    free_.reserve(limit);
    for (uint32_t i = limit; i > 0; --i) free_.push_back(i - 1);
    heap_.reserve(limit);
    taken_.reserve(limit);
  }

  [[nodiscard]] bool full() const { return free_.empty(); }
  [[nodiscard]] bool empty() const { return heap_.empty(); }
  [[nodiscard]] size_t size() const { return heap_.size(); }
  // The earliest release time held, kNever when empty.
  [[nodiscard]] TimePoint next_release() const {
    return heap_.empty() ? kNever : heap_.front().release;
  }
  [[nodiscard]] bool due(TimePoint now) const { return !heap_.empty() && next_release() <= now; }

  // Copies `bytes` (at most max_len) in; false when every slot is taken. `stored` (if given)
  // is set to the copy, which the caller may still change (a corruption).
  bool push(TimePoint release, std::span<const uint8_t> bytes, const Meta& meta,
            std::span<uint8_t>* stored = nullptr) {
    if (free_.empty() || bytes.size() > max_len_ || !taken_.empty()) return false;
    const uint32_t slot = free_.back();
    free_.pop_back();
    uint8_t* dst = store_.data() + size_t{slot} * max_len_;
    if (!bytes.empty()) std::memcpy(dst, bytes.data(), bytes.size());
    len_[slot] = bytes.size();
    meta_[slot] = meta;
    heap_.push_back(Entry{release, next_seq_++, slot});
    std::push_heap(heap_.begin(), heap_.end(), later);
    if (stored != nullptr) *stored = std::span<uint8_t>(dst, bytes.size());
    return true;
  }

  // Moves up to out.size() due packets, in release order, into `out` and returns how many;
  // they stay in their slots until settle().
  size_t take(TimePoint now, std::span<Packet> out) {
    size_t n = 0;
    while (n < out.size() && due(now)) {
      out[n++] = front();
      std::pop_heap(heap_.begin(), heap_.end(), later);
      taken_.push_back(heap_.back());
      heap_.pop_back();
    }
    return n;
  }

  // The first `done` packets of the last take() are gone; the others return to the line with
  // their release times and order.
  void settle(size_t done) {
    for (size_t i = 0; i < taken_.size(); ++i) {
      if (i < done) {
        free_.push_back(taken_[i].slot);
      } else {
        heap_.push_back(taken_[i]);
        std::push_heap(heap_.begin(), heap_.end(), later);
      }
    }
    taken_.clear();
  }

  // The packet next due (the caller checks due() or empty() first). Its bytes stay valid
  // until pop().
  [[nodiscard]] Packet front() {
    const Entry& e = heap_.front();
    return Packet{std::span<uint8_t>(store_.data() + size_t{e.slot} * max_len_, len_[e.slot]),
                  meta_[e.slot], e.release};
  }

  void pop() {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    free_.push_back(heap_.back().slot);
    heap_.pop_back();
  }

 private:
  struct Entry {
    TimePoint release;
    uint64_t seq;
    uint32_t slot;
  };
  // std heaps keep the largest first: "later" as less-than puts the earliest on top.
  static bool later(const Entry& a, const Entry& b) {
    return a.release != b.release ? a.release > b.release : a.seq > b.seq;
  }

  size_t max_len_;
  std::vector<uint8_t> store_;
  std::vector<Meta> meta_;
  std::vector<size_t> len_;
  std::vector<uint32_t> free_;
  std::vector<Entry> heap_;
  std::vector<Entry> taken_;  // between take() and settle()
  uint64_t next_seq_ = 0;
};

}  // namespace uroce::fault
