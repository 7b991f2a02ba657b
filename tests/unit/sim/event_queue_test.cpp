// The event heap: (time, sequence) order, ties in scheduling order, exact replay.
#include "sim/event_queue.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "sim/rng.hpp"

namespace uroce::sim {
namespace {

TEST(EventQueue, PopsByTimeThenSchedulingOrder) {
  EventQueue q;
  q.push(Nanos(30), 1, 0);
  q.push(Nanos(10), 2, 1);
  q.push(Nanos(30), 3, 2);
  q.push(Nanos(10), 4, 3);
  q.push(Nanos(20), 5, 4);
  std::vector<uint32_t> kinds;
  while (!q.empty()) kinds.push_back(q.pop().kind);
  EXPECT_EQ(kinds, (std::vector<uint32_t>{2, 4, 5, 1, 3}));
}

TEST(EventQueue, ManyRandomEventsComeOutSortedAndStable) {
  EventQueue q;
  Rng rng(7, 1);
  for (uint32_t i = 0; i < 20000; ++i) q.push(Nanos(static_cast<int64_t>(rng.below(500))), 0, i);
  TimePoint last{-1};
  uint64_t last_seq = 0;
  size_t n = 0;
  while (!q.empty()) {
    const Event e = q.pop();
    if (e.at == last) {
      EXPECT_GT(e.seq, last_seq);  // same time: scheduling order
    }
    EXPECT_GE(e.at, last);
    last = e.at;
    last_seq = e.seq;
    EXPECT_EQ(e.seq, e.a);  // the payload travels with its event
    ++n;
  }
  EXPECT_EQ(n, 20000u);
}

TEST(EventQueue, InterleavedPushPopReplaysExactly) {
  auto trace = [] {
    EventQueue q;
    Rng rng(3, 9);
    std::vector<uint64_t> out;
    q.push(Nanos(0), 0, 0);
    uint32_t id = 1;
    while (!q.empty() && out.size() < 5000) {
      const Event e = q.pop();
      out.push_back(e.a);
      for (int k = 0; k < 2; ++k)
        q.push(e.at + Nanos(static_cast<int64_t>(rng.below(10))), 0, id++);
    }
    return out;
  };
  EXPECT_EQ(trace(), trace());
}

}  // namespace
}  // namespace uroce::sim
