// A per-QP rate limiter: after each packet the next send time moves on by the packet's
// transmission time at the current rate. A QP that was idle may send `burst_bytes` back to
// back (a real NIC's rate limiter has a burst size too; without one, a driver that wakes
// every few µs could never reach the rate). Pure arithmetic on the caller's times.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "common/time.hpp"

namespace uroce::transport {

class Pacer {
 public:
  explicit Pacer(uint32_t burst_bytes = 0) : burst_bytes_(burst_bytes) {}

  // Time to put `bytes` on a link of `rate_bps` bit/s, rounded up to whole ns.
  [[nodiscard]] static Nanos tx_time(uint64_t bytes, uint64_t rate_bps) {
    if (rate_bps == 0) return Nanos(0);
    return Nanos(static_cast<int64_t>(
        std::ceil(static_cast<double>(bytes) * 8e9 / static_cast<double>(rate_bps))));
  }

  void on_sent(TimePoint now, uint64_t bytes, uint64_t rate_bps) {
    if (rate_bps == 0) return;
    const TimePoint start = std::max(next_, now - tx_time(burst_bytes_, rate_bps));
    next_ = start + tx_time(bytes, rate_bps);
  }
  [[nodiscard]] TimePoint next_send_time() const { return next_; }

 private:
  uint32_t burst_bytes_;
  TimePoint next_{std::numeric_limits<int64_t>::min() / 2};
};

}  // namespace uroce::transport
