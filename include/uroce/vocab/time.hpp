// Time as the sans-IO engine sees it: nanoseconds since an epoch the driver chooses (the
// UDP driver uses CLOCK_MONOTONIC, the simulator its virtual clock). The engine never reads
// a clock; every entry point takes `now`.
#pragma once

#include <chrono>
#include <cstdint>

namespace uroce {

using Nanos = std::chrono::nanoseconds;
using TimePoint = std::chrono::nanoseconds;  // since the driver's epoch

inline constexpr TimePoint kNever = TimePoint::max();

}  // namespace uroce
