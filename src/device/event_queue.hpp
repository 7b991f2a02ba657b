// EventQueue<T>: a FIFO whose non-empty state is an eventfd, so an application can wait for
// it with poll/epoll/select next to its other file descriptors. The eventfd is a semaphore
// (EFD_SEMAPHORE) and non-blocking: every push adds 1, every successful pop reads 1, so the
// fd is readable exactly while items are queued (push_for_next_pop, below, leaves out one
// item that its own thread takes at once). Thread-safe; pushes come from the progress
// thread, pops from application threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

#include "uroce/vocab/time.hpp"
#include "uroce/vocab/verbs_types.hpp"

namespace uroce::device {

class EventFd {
 public:
  EventFd();  // EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC; fd() < 0 if the kernel refused
  ~EventFd();
  EventFd(const EventFd&) = delete;
  EventFd& operator=(const EventFd&) = delete;

  [[nodiscard]] int fd() const { return fd_; }
  void signal() const;    // +1
  bool try_take() const;  // -1 if > 0; false when 0
  // Waits until readable or `timeout` (negative: forever). True when readable.
  bool wait_readable(Nanos timeout) const;

 private:
  int fd_ = -1;
};

template <typename T>
class EventQueue {
 public:
  [[nodiscard]] int fd() const { return efd_.fd(); }
  [[nodiscard]] bool valid() const { return efd_.fd() >= 0; }

  void push(const T& item) {
    enqueue(item);
    efd_.signal();
  }

  // A push for the thread that pops right after it (a blocked get_cq_event driving the device,
  // whose own pass raised the event): the eventfd is not signalled, and that pop takes the
  // item without reading it, two system calls fewer per event. Only one such item at a time,
  // so that the fd is never left unreadable with more than that one item queued; a second
  // is pushed as usual. Items and tokens are not paired: a pop takes the oldest item and an
  // unsignalled token if there is one, else reads the eventfd, so the fd's count always equals
  // the items queued less the unsignalled ones.
  void push_for_next_pop(const T& item) {
    uint32_t none = 0;
    if (!unsignalled_.compare_exchange_strong(none, 1)) {
      push(item);
      return;
    }
    enqueue(item);
  }

  // Pops one item; waits up to `timeout` (0: poll, negative: forever). EAGAIN when none
  // arrived in time.
  transport::Result<T> pop(Nanos timeout) {
    for (;;) {
      // An empty queue is told without a read of the eventfd: a thread that drives the device
      // while it waits for an event (Device::drive_cq_event) looks after every pass.
      if (queued_.load() != 0 && (take_unsignalled() || efd_.try_take())) {
        queued_.fetch_sub(1);
        std::lock_guard lock(mu_);
        T item = items_.front();
        items_.pop_front();
        return item;
      }
      if (timeout == Nanos::zero() || !efd_.wait_readable(timeout)) {
        return transport::Status(EAGAIN, "no event queued");
      }
    }
  }

 private:
  // queued_ is raised after the item is in, and before any eventfd signal for it.
  void enqueue(const T& item) {
    {
      std::lock_guard lock(mu_);
      items_.push_back(item);
    }
    queued_.fetch_add(1);
  }
  bool take_unsignalled() {
    uint32_t one = 1;
    return unsignalled_.load() != 0 && unsignalled_.compare_exchange_strong(one, 0);
  }

  EventFd efd_;
  std::mutex mu_;
  std::deque<T> items_;
  // Items pushed and not yet taken from the eventfd: raised before the eventfd is signalled,
  // so a pop that reads 0 would also have found the eventfd at 0.
  std::atomic<uint32_t> queued_{0};
  // Items pushed by push_for_next_pop and not yet taken: 0 or 1.
  std::atomic<uint32_t> unsignalled_{0};
};

}  // namespace uroce::device
