// PSN serial arithmetic at the 24-bit wrap (IBTA 9.7.1).
#include "uroce/vocab/psn.hpp"

#include <gtest/gtest.h>

namespace uroce {
namespace {

TEST(Psn, ConstructionMasksTo24Bits) {
  EXPECT_EQ(Psn(0x1234567).value(), 0x234567u);
  EXPECT_EQ(Psn(0xFFFFFFFF).value(), 0xFFFFFFu);
}

TEST(Psn, IncrementWrapsToZero) {
  Psn p(0xFFFFFF);
  ++p;
  EXPECT_EQ(p.value(), 0u);
  EXPECT_EQ((Psn(0xFFFFFE) + 3).value(), 1u);
  EXPECT_EQ((Psn(1) - 2).value(), 0xFFFFFFu);
  Psn q(0xFFFFF0);
  q += 0x20;
  EXPECT_EQ(q.value(), 0x10u);
}

TEST(Psn, DistanceAcrossTheWrap) {
  EXPECT_EQ(Psn::distance(Psn(0), Psn(0xFFFFFF)), 1);
  EXPECT_EQ(Psn::distance(Psn(0xFFFFFF), Psn(0)), -1);
  EXPECT_EQ(Psn::distance(Psn(5), Psn(0xFFFFFB)), 10);
  EXPECT_EQ(Psn::distance(Psn(0xFFFFFB), Psn(5)), -10);
  EXPECT_EQ(Psn::distance(Psn(7), Psn(7)), 0);
  // Half the space is the edge: +2^23 - 1 ahead, -2^23 behind.
  EXPECT_EQ(Psn::distance(Psn(0x7FFFFF), Psn(0)), 0x7FFFFF);
  EXPECT_EQ(Psn::distance(Psn(0x800000), Psn(0)), -0x800000);
  EXPECT_EQ(Psn::distance(Psn(0x800005), Psn(5)), -0x800000);
}

TEST(Psn, BeforeAndAfterAcrossTheWrap) {
  EXPECT_TRUE(Psn(0xFFFFFF).before(Psn(0)));
  EXPECT_TRUE(Psn(0).after(Psn(0xFFFFFF)));
  EXPECT_FALSE(Psn(0).before(Psn(0xFFFFFF)));
  EXPECT_TRUE(Psn(0xFFFF00).before(Psn(0x100)));
  EXPECT_FALSE(Psn(3).before(Psn(3)));
  EXPECT_FALSE(Psn(3).after(Psn(3)));
  // A window of 128 PSNs straddling the wrap is ordered consistently.
  const Psn base(0xFFFFC0);
  for (uint32_t i = 1; i < 128; ++i) {
    EXPECT_TRUE((base + i).after(base)) << i;
    EXPECT_EQ(Psn::distance(base + i, base), static_cast<int32_t>(i));
  }
}

}  // namespace
}  // namespace uroce
