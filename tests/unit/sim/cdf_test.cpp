// Flow-size CDF files: parsing, errors with the line, inverse-transform sampling.
#include "sim/cdf.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace uroce::sim {
namespace {

constexpr const char* kSmall =
    "# a test distribution\n"
    "1000 0.5\n"
    "\n"
    "3000 0.75   # comment after a point\n"
    "11000 1\n";

TEST(FlowSizeCdf, SamplesByLinearInterpolation) {
  const FlowSizeCdf c = FlowSizeCdf::parse(kSmall, "t.txt");
  ASSERT_EQ(c.points().size(), 3u);
  EXPECT_EQ(c.sample(0.0), 1000u);  // mass at the first point
  EXPECT_EQ(c.sample(0.5), 1000u);
  EXPECT_EQ(c.sample(0.625), 2000u);
  EXPECT_EQ(c.sample(0.75), 3000u);
  EXPECT_EQ(c.sample(0.875), 7000u);
  EXPECT_EQ(c.sample(0.999999999), 11000u);
  // 0.5 * 1000 + 0.25 * 2000 + 0.25 * 7000
  EXPECT_DOUBLE_EQ(c.mean(), 2750.0);
}

TEST(FlowSizeCdf, ShippedTestCdfParses) {
  const FlowSizeCdf c =
      FlowSizeCdf::load(std::string(UROCE_SOURCE_DIR) + "/tests/unit/sim/small.cdf");
  EXPECT_EQ(c.points().back().p, 1.0);
  EXPECT_GT(c.mean(), 0.0);
}

std::string error_of(const char* text) {
  try {
    (void)FlowSizeCdf::parse(text, "bad.txt");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(FlowSizeCdf, ErrorsNameTheLine) {
  EXPECT_EQ(error_of("100 0.5\n50 1\n"), "bad.txt:2: byte counts must not decrease");
  EXPECT_EQ(error_of("100 0.5\n200 0.4\n300 1\n"), "bad.txt:2: probabilities must not decrease");
  EXPECT_EQ(error_of("100 0.5\n200 0.9\n"), "bad.txt:2: the last probability must be exactly 1");
  EXPECT_EQ(error_of("# x\nabc 0.5\n"), "bad.txt:2: 'abc' is not a byte count (an integer)");
  EXPECT_EQ(error_of("100 1.5\n"), "bad.txt:1: probability 1.5 is outside 0..1");
  EXPECT_EQ(error_of("100\n"), "bad.txt:1: expected `BYTES PROBABILITY`");
  EXPECT_EQ(error_of("# only a comment\n"), "bad.txt:1: no points");
}

}  // namespace
}  // namespace uroce::sim
