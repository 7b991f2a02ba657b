#include "net/reuseport_program.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace uroce::net {
namespace {

std::vector<uint8_t> bth_to(uint32_t dqpn) {
  std::vector<uint8_t> p(12 + 4, 0);
  p[0] = 0x04;  // RC SEND Only
  p[2] = p[3] = 0xff;
  p[5] = static_cast<uint8_t>(dqpn >> 16);
  p[6] = static_cast<uint8_t>(dqpn >> 8);
  p[7] = static_cast<uint8_t>(dqpn);
  return p;
}

TEST(QpnSlots, RangesCoverTheQpnSpaceWithoutSpecialQpns) {
  EXPECT_EQ(qpn_range_of_slot(0), (QpnRange{0x11, 0x40000 - 0x11}));
  EXPECT_EQ(qpn_range_of_slot(1), (QpnRange{0x40000, 0x40000}));
  EXPECT_EQ(qpn_range_of_slot(63), (QpnRange{0xFC0000, 0x3FFFF}));
  EXPECT_EQ(whole_qpn_range(), (QpnRange{0x11, 0xFFFFFF - 0x11}));
  EXPECT_EQ(slot_of_qpn(0x000011), 0u);
  EXPECT_EQ(slot_of_qpn(0x03FFFF), 0u);
  EXPECT_EQ(slot_of_qpn(0x040000), 1u);
  EXPECT_EQ(slot_of_qpn(0xFFFFFE), 63u);
  EXPECT_TRUE(qpn_range_of_slot(2).contains(0x080000));
  EXPECT_FALSE(qpn_range_of_slot(2).contains(0x0C0000));
  for (uint32_t s = 0; s < kSlotCount; ++s) {
    QpnRange r = qpn_range_of_slot(s);
    EXPECT_EQ(slot_of_qpn(r.base), s);
    EXPECT_EQ(slot_of_qpn(r.base + r.count - 1), s);
  }
}

TEST(QpnSlots, DestQpnNeedsAFullBth) {
  EXPECT_EQ(dest_qpn_of(bth_to(0x123456)), 0x123456u);
  std::vector<uint8_t> runt(11, 0);
  EXPECT_FALSE(dest_qpn_of(runt).has_value());
}

TEST(SteeringProgram, MapsSlotsToPositions) {
  const std::vector<SteeringEntry> entries = {{0, 1}, {5, 0}, {63, 2}};
  const auto prog = build_steering_program(entries);
  // Probe 4, QPN-1 check 4, slot rule 2 + 2n + 1, QP1 rule 14 + 2n + 1, no listeners 1.
  EXPECT_EQ(prog.size(), 27u + 4 * entries.size());
  EXPECT_EQ(run_steering_program(prog, bth_to(0x000123)), 1u);
  EXPECT_EQ(run_steering_program(prog, bth_to((5u << 18) | 7)), 0u);
  EXPECT_EQ(run_steering_program(prog, bth_to(0xFFFFFE)), 2u);
  EXPECT_EQ(run_steering_program(prog, bth_to(9u << 18)), 0xFFFFFFFFu);  // nobody: kernel hashes
  // Too short for the QPN byte: the kernel ends the program with 0.
  std::vector<uint8_t> runt = {0x04, 0, 0xff, 0xff, 0};
  EXPECT_EQ(run_steering_program(prog, runt), 0u);
}

TEST(SteeringProgram, ProbesGoToTheirPosition) {
  const std::vector<SteeringEntry> entries = {{0, 1}};
  const auto prog = build_steering_program(entries);
  for (uint8_t pos : {0, 1, 7, 200}) {
    auto probe = make_probe(pos, 0x0123456789abcdefULL);
    EXPECT_EQ(run_steering_program(prog, probe), pos);
    auto parsed = parse_probe(probe);
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(parsed->position, pos);
    EXPECT_EQ(parsed->token, 0x0123456789abcdefULL);
  }
  EXPECT_FALSE(parse_probe(bth_to(0x11)).has_value());
}

}  // namespace
}  // namespace uroce::net
