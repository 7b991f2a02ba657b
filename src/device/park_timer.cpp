// ParkTimer (park_timer.hpp): a timerfd the application pushes forward, an eventfd to wake.
#include "device/park_timer.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>

namespace uroce::device {

ParkTimer::ParkTimer()
    : timer_fd_(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)),
      wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

ParkTimer::~ParkTimer() {
  if (timer_fd_ >= 0) close(timer_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

void ParkTimer::fire_at(TimePoint at) {
  const int64_t ns = std::max<int64_t>(at.count(), 1);  // 0 would disarm it
  fires_at_ns_.store(ns, std::memory_order_relaxed);
  itimerspec when{};
  when.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  when.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  (void)timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &when, nullptr);
}

void ParkTimer::sleep(Nanos longest) {
  pollfd fds[2] = {{timer_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(std::max(longest, Nanos::zero()));
  (void)poll(fds, 2, static_cast<int>(std::min<int64_t>(ms.count(), 1'000'000)));
  // Nonblocking reads: whichever fired is cleared, the other left as it was (EAGAIN).
  uint64_t count = 0;
  if ((fds[0].revents & POLLIN) != 0) (void)read(timer_fd_, &count, sizeof count);
  if ((fds[1].revents & POLLIN) != 0) (void)read(wake_fd_, &count, sizeof count);
}

void ParkTimer::wake() {
  const uint64_t one = 1;
  (void)write(wake_fd_, &one, sizeof one);
}

}  // namespace uroce::device
