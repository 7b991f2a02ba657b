#include "sim/cdf.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace uroce::sim {

FlowSizeCdf FlowSizeCdf::parse(std::string_view text, const std::string& name) {
  FlowSizeCdf cdf;
  std::istringstream in{std::string(text)};
  std::string line;
  int n = 0;
  auto fail = [&](std::string_view what) {
    throw std::runtime_error(fmt::format("{}:{}: {}", name, n, what));
  };
  while (std::getline(in, line)) {
    ++n;
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream ls(line);
    std::string a;
    std::string b;
    if (!(ls >> a)) continue;
    std::string extra;
    if (!(ls >> b) || (ls >> extra)) fail("expected `BYTES PROBABILITY`");
    size_t used = 0;
    uint64_t bytes = 0;
    double p = 0;
    try {
      bytes = std::stoull(a, &used);
      if (used != a.size() || a[0] == '-') throw std::invalid_argument(a);
    } catch (const std::exception&) {
      fail(fmt::format("'{}' is not a byte count (an integer)", a));
    }
    try {
      p = std::stod(b, &used);
      if (used != b.size()) throw std::invalid_argument(b);
    } catch (const std::exception&) {
      fail(fmt::format("'{}' is not a probability", b));
    }
    if (!(p >= 0.0 && p <= 1.0)) fail(fmt::format("probability {} is outside 0..1", b));
    if (!cdf.points_.empty()) {
      if (bytes < cdf.points_.back().bytes) fail("byte counts must not decrease");
      if (p < cdf.points_.back().p) fail("probabilities must not decrease");
    }
    cdf.points_.push_back({bytes, p});
  }
  if (cdf.points_.empty()) fail("no points");
  if (cdf.points_.back().p != 1.0) fail("the last probability must be exactly 1");
  return cdf;
}

FlowSizeCdf FlowSizeCdf::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open the CDF file", path));
  std::ostringstream os;
  os << in.rdbuf();
  return parse(os.str(), path);
}

uint64_t FlowSizeCdf::sample(double u) const {
  const Point* prev = &points_.front();
  if (u <= prev->p) return std::max<uint64_t>(1, prev->bytes);
  for (const Point& pt : points_) {
    if (u <= pt.p) {
      if (pt.p == prev->p) return std::max<uint64_t>(1, pt.bytes);
      const double f = (u - prev->p) / (pt.p - prev->p);
      const double b =
          static_cast<double>(prev->bytes) + f * static_cast<double>(pt.bytes - prev->bytes);
      return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(b)));
    }
    prev = &pt;
  }
  return std::max<uint64_t>(1, points_.back().bytes);
}

double FlowSizeCdf::mean() const {
  // Mass at the first point, then uniform between consecutive points.
  double m = points_.front().p * static_cast<double>(points_.front().bytes);
  for (size_t i = 1; i < points_.size(); ++i) {
    const double dp = points_[i].p - points_[i - 1].p;
    m += dp * 0.5 * static_cast<double>(points_[i].bytes + points_[i - 1].bytes);
  }
  return m;
}

}  // namespace uroce::sim
