// The send, receive and completion queues keep a power of two of slots (a slot is found with a
// mask), while what the application asked for stays their capacity: a queue of 3 is full at 3
// and a CQ of 3 overflows at the 4th completion, however many slots the ring has. These tests
// use capacities that are not powers of two, wrap the rings many times and resize them with
// entries queued, checking the boundary and the order every time.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "transport/cq.hpp"
#include "transport/recv_queue.hpp"
#include "transport/send_queue.hpp"

namespace uroce::transport {
namespace {

Wc completion(uint64_t wr_id) {
  Wc wc;
  wc.wr_id = wr_id;
  wc.qp_num = 7;
  return wc;
}

// Polls everything queued and checks it is next, next + 1, ...; returns the next expected.
uint64_t poll_in_order(Cq& cq, uint64_t next) {
  std::vector<Wc> out(16);
  const int n = cq.poll(out);
  for (int i = 0; i < n; ++i) EXPECT_EQ(out[static_cast<size_t>(i)].wr_id, next++);
  return next;
}

TEST(QueueRings, ACqOfThreeOverflowsAtItsFourthCompletionOnEveryLapOfItsRing) {
  Cq cq(3);
  EXPECT_EQ(cq.capacity(), 3u);
  uint64_t pushed = 0;
  uint64_t polled = 0;
  for (int lap = 0; lap < 50; ++lap) {
    while (cq.size() < 3) {
      ASSERT_EQ(cq.push(completion(pushed), false, TimePoint{}), Cq::PushResult::kStored);
      ++pushed;
    }
    ASSERT_EQ(cq.push(completion(999), false, TimePoint{}), Cq::PushResult::kOverflow)
        << "lap " << lap;
    // Take one or two so that the ring's slots are used at every offset.
    std::vector<Wc> out(1 + static_cast<size_t>(lap % 2));
    const int n = cq.poll(out);
    ASSERT_EQ(n, static_cast<int>(out.size()));
    for (const Wc& wc : out) EXPECT_EQ(wc.wr_id, polled++);
  }
  polled = poll_in_order(cq, polled);
  EXPECT_EQ(polled, pushed);
}

TEST(QueueRings, AResizedCqKeepsItsQueuedCompletionsInOrderAndOverflowsAtTheNewCapacity) {
  Cq cq(3);
  uint64_t pushed = 0;
  // Wrap first, so the queued entries straddle the end of the old ring.
  for (; pushed < 5; ++pushed) {
    ASSERT_EQ(cq.push(completion(pushed), false, TimePoint{}), Cq::PushResult::kStored);
    if (pushed < 2) {
      std::vector<Wc> one(1);
      ASSERT_EQ(cq.poll(one), 1);
    }
  }
  ASSERT_EQ(cq.size(), 3u);
  EXPECT_FALSE(cq.resize(2));  // below what is queued: nothing changes
  EXPECT_EQ(cq.capacity(), 3u);
  ASSERT_TRUE(cq.resize(5));
  EXPECT_EQ(cq.capacity(), 5u);
  for (; cq.size() < 5; ++pushed) {
    ASSERT_EQ(cq.push(completion(pushed), false, TimePoint{}), Cq::PushResult::kStored);
  }
  EXPECT_EQ(cq.push(completion(999), false, TimePoint{}), Cq::PushResult::kOverflow);
  EXPECT_EQ(poll_in_order(cq, 2), pushed);
  // Smaller again, inside the old ring's slots.
  ASSERT_TRUE(cq.resize(1));
  ASSERT_EQ(cq.push(completion(pushed), false, TimePoint{}), Cq::PushResult::kStored);
  EXPECT_EQ(cq.push(completion(999), false, TimePoint{}), Cq::PushResult::kOverflow);
  EXPECT_EQ(poll_in_order(cq, pushed), pushed + 1);
}

TEST(QueueRings, ARemovedQpsCompletionsLeaveTheOthersInOrderAcrossTheRingsEnd) {
  Cq cq(6);
  std::vector<Wc> out(4);
  for (uint64_t i = 0; i < 4; ++i)
    ASSERT_EQ(cq.push(completion(i), false, TimePoint{}), Cq::PushResult::kStored);
  ASSERT_EQ(cq.poll(out), 4);  // the next entries start at slot 4 of 8
  for (uint64_t i = 0; i < 6; ++i) {
    Wc wc = completion(100 + i);
    wc.qp_num = i % 2 == 0 ? 7 : 9;
    ASSERT_EQ(cq.push(wc, false, TimePoint{}), Cq::PushResult::kStored);
  }
  EXPECT_EQ(cq.remove_qp(9), 3u);
  std::vector<Wc> left(8);
  ASSERT_EQ(cq.poll(left), 3);
  EXPECT_EQ(left[0].wr_id, 100u);
  EXPECT_EQ(left[1].wr_id, 102u);
  EXPECT_EQ(left[2].wr_id, 104u);
}

Status post(RecvQueue& rq, uint64_t wr_id) {
  const Sge sges[2] = {
      {.addr = 0x1000 + wr_id, .length = 8, .lkey = 1},
      {.addr = 0x9000 + wr_id, .length = static_cast<uint32_t>(wr_id % 64), .lkey = 2}};
  return rq.push(RecvWr{wr_id, sges});
}

void expect_pop(RecvQueue& rq, uint64_t wr_id) {
  RecvWqe w;
  w.sges.resize(rq.max_sge());
  ASSERT_TRUE(rq.pop(w));
  EXPECT_EQ(w.wr_id, wr_id);
  ASSERT_EQ(w.num_sge, 2u);
  EXPECT_EQ(w.sges[0].addr, 0x1000 + wr_id);
  EXPECT_EQ(w.sges[1].addr, 0x9000 + wr_id);
  EXPECT_EQ(w.length, 8 + wr_id % 64);
}

TEST(QueueRings, AReceiveQueueOfFiveIsFullAtFiveOnEveryLapAndGrowsInOrder) {
  RecvQueue rq;
  rq.init(5, 2, RecvQueue::Mode::kAccept);
  uint64_t posted = 0;
  uint64_t popped = 0;
  for (int lap = 0; lap < 40; ++lap) {
    while (rq.size() < 5) ASSERT_TRUE(post(rq, posted++).is_ok());
    ASSERT_EQ(post(rq, 999).code(), ENOMEM) << "lap " << lap;
    for (int k = 0; k <= lap % 3; ++k) expect_pop(rq, popped++);
  }
  // Queued entries straddle the ring's end; growing within the ring's 8 slots keeps them.
  rq.grow(7);
  EXPECT_EQ(rq.capacity(), 7u);
  while (rq.size() < 7) ASSERT_TRUE(post(rq, posted++).is_ok());
  EXPECT_EQ(post(rq, 999).code(), ENOMEM);
  // And past them: a new ring, the same order.
  expect_pop(rq, popped++);
  rq.grow(11);
  while (rq.size() < 11) ASSERT_TRUE(post(rq, posted++).is_ok());
  EXPECT_EQ(post(rq, 999).code(), ENOMEM);
  while (popped < posted) expect_pop(rq, popped++);
  EXPECT_TRUE(rq.empty());
}

TEST(QueueRings, ASendQueueOfThreeIsFullAtThreeOnEveryLap) {
  SendQueue sq;
  sq.init(3, 1, 0);
  sq.set_accepting(true);
  uint64_t posted = 0;
  for (int lap = 0; lap < 40; ++lap) {
    for (;;) {
      auto lock = sq.lock_posts();
      if (sq.post_full()) break;
      const uint64_t seq = sq.post_seq();
      sq.at(seq).wr_id = posted++;
      sq.at(seq).num_sge = 1;
      sq.sge_storage(seq)[0].addr = 0x5000 + seq;
      sq.publish();
    }
    EXPECT_EQ(sq.post_seq() - sq.head(), 3u) << "lap " << lap;
    while (sq.published() > 0) sq.take();
    // Retire one or two, oldest first, checking what the engine reads.
    for (int k = 0; k <= lap % 2; ++k) {
      const uint64_t seq = sq.head();
      EXPECT_EQ(sq.at(seq).wr_id, seq);
      ASSERT_EQ(sq.sges(seq).size(), 1u);
      EXPECT_EQ(sq.sges(seq)[0].addr, 0x5000 + seq);
      sq.pop();
    }
  }
}

}  // namespace
}  // namespace uroce::transport
