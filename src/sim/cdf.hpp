// Flow-size distributions from CDF files (scenarios/cdf/*.txt): one point per line,
// `BYTES CUMULATIVE_PROBABILITY`, both non-decreasing, the last probability exactly 1; `#`
// starts a comment. Sampling is inverse transform with linear interpolation between points
// (below the first point's probability, the first point's size).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace uroce::sim {

class FlowSizeCdf {
 public:
  // Throws std::runtime_error with "FILE:LINE: what is wrong".
  static FlowSizeCdf parse(std::string_view text, const std::string& name);
  static FlowSizeCdf load(const std::string& path);

  // u uniform in [0, 1): the flow size in bytes (at least 1).
  [[nodiscard]] uint64_t sample(double u) const;
  // The mean of the interpolated distribution (for Poisson arrivals at a target load).
  [[nodiscard]] double mean() const;

  struct Point {
    uint64_t bytes;
    double p;
  };
  [[nodiscard]] const std::vector<Point>& points() const { return points_; }

 private:
  std::vector<Point> points_;
};

}  // namespace uroce::sim
