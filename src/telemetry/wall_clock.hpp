// Wall-clock time for what uroce stamps for people and other programs (snapshots, captures,
// Prometheus samples, `uroce stat`): CLOCK_REALTIME, unlike the data path's monotonic clock.
#pragma once

#include <time.h>

#include <cstdint>

namespace uroce::telemetry {

[[nodiscard]] inline uint64_t unix_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace uroce::telemetry
