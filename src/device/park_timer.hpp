// ParkTimer: where the parked progress thread sleeps while a busy-polling application drives
// the device (ProgressOptions::app_handoff). A kernel timer (timerfd) that the application's
// polls push forward, and an eventfd to end the sleep at once.
//
// Why not a timed wait on a condition variable: the application cannot move a waiter's
// timeout without waking it, so the thread woke once per handoff (500 us: 2000 context
// switches a second, each taking a core from a busy-polling thread on a small host) only to
// find the application still polling. A timerfd's expiry can be moved by any thread without
// waking the one that waits on it: while the application keeps polling, the thread sleeps.
#pragma once

#include <atomic>
#include <cstdint>

#include "uroce/vocab/time.hpp"

namespace uroce::device {

class ParkTimer {
 public:
  ParkTimer();  // ok() false if the descriptors could not be had: callers keep their fallback
  ~ParkTimer();
  ParkTimer(const ParkTimer&) = delete;
  ParkTimer& operator=(const ParkTimer&) = delete;

  [[nodiscard]] bool ok() const { return timer_fd_ >= 0 && wake_fd_ >= 0; }
  // Fires at `at` (Device::now()'s clock, CLOCK_MONOTONIC), replacing any earlier setting.
  void fire_at(TimePoint at);
  // When it fires (the last fire_at), for a caller deciding whether to push it forward.
  [[nodiscard]] TimePoint fires_at() const {
    return TimePoint(fires_at_ns_.load(std::memory_order_relaxed));
  }
  // Sleeps until the timer fires, wake() is called (since the last sleep too), or
  // `longest` passes; clears what ended it.
  void sleep(Nanos longest);
  void wake();  // any thread

 private:
  int timer_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<int64_t> fires_at_ns_{0};
};

}  // namespace uroce::device
