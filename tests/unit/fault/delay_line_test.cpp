// DelayLine: release order (ties in arrival order), the fixed capacity, and take/settle for a
// sender that takes fewer than offered.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "fault/delay_line.hpp"

namespace uroce::fault {
namespace {

using Line = DelayLine<int>;

std::vector<uint8_t> bytes_of(uint8_t tag, size_t n) {
  return std::vector<uint8_t>(n, tag);
}

TEST(DelayLine, ReleasesInTimeOrderTiesInArrivalOrder) {
  Line line(8, 64);
  EXPECT_TRUE(line.empty());
  EXPECT_EQ(line.next_release(), kNever);
  const std::array<std::pair<int64_t, int>, 6> in = {
      {{30, 0}, {10, 1}, {20, 2}, {10, 3}, {50, 4}, {20, 5}}};
  for (const auto& [t, tag] : in) {
    const auto b = bytes_of(static_cast<uint8_t>(tag), 10 + tag);
    ASSERT_TRUE(line.push(TimePoint(t), b, tag));
  }
  EXPECT_EQ(line.size(), 6u);
  EXPECT_EQ(line.next_release(), TimePoint(10));
  EXPECT_FALSE(line.due(TimePoint(9)));
  std::vector<int> order;
  while (line.due(TimePoint(30))) {
    const auto p = line.front();
    EXPECT_EQ(p.bytes.size(), size_t(10 + p.meta));
    EXPECT_EQ(p.bytes[0], p.meta);
    order.push_back(p.meta);
    line.pop();
  }
  EXPECT_EQ(order, (std::vector<int>{1, 3, 2, 5, 0}));
  EXPECT_EQ(line.size(), 1u);
  EXPECT_EQ(line.next_release(), TimePoint(50));
}

TEST(DelayLine, FullRefusesAndFreedSlotsAreReused) {
  Line line(3, 16);
  const auto b = bytes_of(7, 16);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(line.push(TimePoint(i), b, i));
  EXPECT_TRUE(line.full());
  EXPECT_FALSE(line.push(TimePoint(0), b, 9));
  EXPECT_FALSE(Line(3, 16).push(TimePoint(0), bytes_of(1, 17), 0));  // longer than a slot
  line.pop();
  EXPECT_FALSE(line.full());
  std::span<uint8_t> stored;
  ASSERT_TRUE(line.push(TimePoint(100), bytes_of(5, 4), 42, &stored));
  ASSERT_EQ(stored.size(), 4u);
  stored[0] = 0xEE;  // the caller may change the held copy (a corruption)
  for (int i = 0; i < 2; ++i) line.pop();
  const auto p = line.front();
  EXPECT_EQ(p.meta, 42);
  EXPECT_EQ(p.bytes[0], 0xEE);
  EXPECT_EQ(p.bytes[1], 5);
}

TEST(DelayLine, TakeAndSettleKeepTheUnsentFirstInLine) {
  Line line(8, 8);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(line.push(TimePoint(i), bytes_of(uint8_t(i), 8), i));
  std::array<Line::Packet, 4> batch{};
  ASSERT_EQ(line.take(TimePoint(100), batch), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(batch[i].meta, i);
  EXPECT_FALSE(line.push(TimePoint(0), bytes_of(0, 8), 99));  // not between take and settle
  line.settle(2);  // 0 and 1 left; 2 and 3 come back ahead of 4 and 5
  EXPECT_EQ(line.size(), 4u);
  std::vector<int> rest;
  while (!line.empty()) {
    rest.push_back(line.front().meta);
    line.pop();
  }
  EXPECT_EQ(rest, (std::vector<int>{2, 3, 4, 5}));
  // Only due packets are taken.
  ASSERT_TRUE(line.push(TimePoint(10), bytes_of(1, 8), 1));
  EXPECT_EQ(line.take(TimePoint(9), batch), 0u);
  line.settle(0);
  EXPECT_EQ(line.size(), 1u);
}

}  // namespace
}  // namespace uroce::fault
