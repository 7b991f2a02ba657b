#include "device/event_queue.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

namespace uroce::device {

EventFd::EventFd() : fd_(eventfd(0, EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC)) {}

EventFd::~EventFd() {
  if (fd_ >= 0) close(fd_);
}

void EventFd::signal() const {
  uint64_t one = 1;
  // A full counter (2^64-2) cannot happen: every signal has a queued item behind it.
  while (write(fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

bool EventFd::try_take() const {
  uint64_t v = 0;
  for (;;) {
    if (read(fd_, &v, sizeof v) == static_cast<ssize_t>(sizeof v)) return true;
    if (errno != EINTR) return false;
  }
}

bool EventFd::wait_readable(Nanos timeout) const {
  pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
  int ms = timeout.count() < 0 ? -1 : static_cast<int>((timeout.count() + 999'999) / 1'000'000);
  for (;;) {
    int r = poll(&p, 1, ms);
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

}  // namespace uroce::device
