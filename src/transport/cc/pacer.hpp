// A per-QP rate limiter: after each packet the next send time moves on by the packet's
// transmission time at the current rate. A QP that was idle may send `burst_bytes` back to
// back (a real NIC's rate limiter has a burst size too; without one, a driver that wakes
// every few µs could never reach the rate). A rate change takes effect at once, as in a
// NIC's token bucket: the part of the gap still to run (bits not yet paid for) is repaid at
// the new rate, so after a change the QP never waits longer than one packet at the new rate
// (a gap computed at a 1 Mb/s floor would otherwise hold a 4 KiB packet for 33 ms after the
// rate rose again). Pure arithmetic on the caller's times.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "uroce/vocab/time.hpp"

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

  // The rate went from `old_bps` to `new_bps` at `now`. The time still owed (next send time
  // after now) is rescaled by old/new, rounded up to whole ns; so is a banked burst credit
  // (next send time before now, at most burst_bytes at the old rate), rounded towards less
  // credit. 0 (unlimited) on either side leaves the schedule alone.
  void on_rate_change(TimePoint now, uint64_t old_bps, uint64_t new_bps) {
    if (old_bps == 0 || new_bps == 0 || old_bps == new_bps) return;
    const Nanos delta = std::max(next_ - now, -tx_time(burst_bytes_, old_bps));
    const double scaled = static_cast<double>(delta.count()) * static_cast<double>(old_bps) /
                          static_cast<double>(new_bps);
    next_ = now + Nanos(static_cast<int64_t>(std::ceil(scaled)));
  }

  [[nodiscard]] TimePoint next_send_time() const { return next_; }

 private:
  uint32_t burst_bytes_;
  TimePoint next_{std::numeric_limits<int64_t>::min() / 2};
};

}  // namespace uroce::transport
