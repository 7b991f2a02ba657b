// Blocking get_cq_event that drives the device (Device::drive_cq_event).
//
// Why: an event-driven program (ibv_get_cq_event on a blocking channel) used to sleep on the
// channel's eventfd while the progress thread slept on the sockets. Each packet that
// completed a WR woke two threads in turn: the progress thread, which ran the pass and
// signalled the channel, then the application. On a 2-core VM that put an event-driven
// ping-pong at 3-4.5 times a blocking UDP ping-pong's round trip (docs/performance.md).
//
// How: the blocked thread does what the progress thread would: it runs passes, spins for
// ProgressOptions::spin after the last work, then sleeps in the PacketIo's wait() until the
// engine's next deadline. The pass that raises its event holds the ACKs it built
// (Device::hold_acks) so they leave with the program's reply. Meanwhile the progress thread
// parks on its park timer (park_timer.hpp), and stays parked until app_handoff after the
// last such wait ends: a program that gets an event, replies and blocks again never wakes
// it. One thread at a time drives a wait; other blocked threads wait on their channel, and
// a driver that leaves while they do hands the device to the progress thread at once.
//
// Hand-over, without lost wake-ups (all sequentially consistent):
//   - the waiter publishes waiting_channel_, then reads sleeping_: a progress thread asleep
//     in wait() is woken to park; one about to sleep reads waiting_channel_ after raising
//     sleeping_ and parks instead. The waiter sleeps only once no other thread is in wait():
//     a wake would end one sleep, not both;
//   - an event pushed to the waiter's channel by another thread's pass wakes the PacketIo
//     (dispatch_events), whose wake is sticky;
//   - the leaving waiter clears waiting_channel_, then pulls the parked thread's timer in to
//     app_handoff from now; the parked thread sets its timer, then reads waiting_channel_
//     again, so a timer set long for a waiter that just left is corrected by one of them.
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "common/ppoll_timeout.hpp"
#include "device/device.hpp"

namespace uroce::device {

namespace {

Nanos until(TimePoint deadline, TimePoint t) {
  if (deadline == kNever) return Nanos(-1);
  return std::max(deadline - t, Nanos::zero());
}

// Waits until `fd` is readable or `timeout` (negative: no limit) passes: 0, EAGAIN, or EINTR
// when a signal came (so that the drop-in's blocked ibv_get_cq_event returns it).
int wait_readable(int fd, Nanos timeout) {
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  timespec ts{};
  const int n = ppoll(&p, 1, common::ppoll_timeout(timeout, ts), nullptr);
  if (n > 0) return 0;
  if (n == 0) return EAGAIN;
  return errno == EINTR ? EINTR : 0;
}

}  // namespace

EventQueue<CqId>* Device::channel_queue(ChannelId ch) {
  std::lock_guard lock(channel_mu_);
  auto it = channels_.find(static_cast<uint32_t>(ch));
  return it == channels_.end() ? nullptr : it->second.queue.get();
}

Result<CqId> Device::take_event(ChannelId ch, EventQueue<CqId>& queue, Nanos timeout) {
  // The channel cannot go away while we wait: destroying it needs every CQ on it destroyed,
  // which needs every event got to be acked, and the application is still getting one.
  for (;;) {
    Result<CqId> r = queue.pop(timeout);
    if (!r) return r;
    std::lock_guard lock(channel_mu_);
    auto it = cqs_.find(static_cast<uint32_t>(*r));
    if (it == cqs_.end() || it->second.channel != ch) continue;  // CQ destroyed meanwhile
    ++it->second.events_got;
    return r;
  }
}

Result<CqId> Device::get_cq_event(ChannelId ch, Nanos timeout) {
  EventQueue<CqId>* queue = channel_queue(ch);
  if (queue == nullptr) return Status(EINVAL, "no such completion channel");
  Result<CqId> r = take_event(ch, *queue, Nanos::zero());
  if (r || timeout == Nanos::zero()) return r;
  const TimePoint deadline = timeout.count() < 0 ? kNever : now() + timeout;
  for (;;) {
    r = drive_cq_event(ch, until(deadline, now()));
    // This API's wait is not ended by signals (the ibverbs drop-in's is).
    if (r || r.status().code() != EINTR) break;
  }
  if (r || r.status().code() != EBUSY) return r;
  return take_event(ch, *queue, until(deadline, now()));
}

Result<CqId> Device::drive_cq_event(ChannelId ch, Nanos timeout) {
  // Without a progress thread the waiter is the only driver there is; with one, it must be
  // able to park (its park timer).
  if (!config_.progress.app_calls_drive || (config_.progress.thread && !park_timer_)) {
    return Status(EBUSY, "this device's progress thread does not hand over; wait on the channel");
  }
  EventQueue<CqId>* queue = channel_queue(ch);
  if (queue == nullptr) return Status(EINVAL, "no such completion channel");
  end_app_driving();
  const TimePoint start = now();
  const TimePoint deadline = timeout.count() < 0 ? kNever : start + timeout;
  for (;;) {
    if (Result<CqId> r = take_event(ch, *queue, Nanos::zero())) return r;
    // Counted before trying: a driver leaving meanwhile either lets this thread in or sees
    // the count and hands the device to the progress thread (leave_waiter).
    waiting_elsewhere_.fetch_add(1);
    if (enter_waiter(ch, now())) {
      waiting_elsewhere_.fetch_sub(1);
      break;
    }
    // Another thread drives: wait on this channel, whose event the pass that raises it
    // pushes (the driver's, or the progress thread's once that driver has left).
    const int rc = wait_readable(queue->fd(), until(deadline, now()));
    waiting_elsewhere_.fetch_sub(1);
    if (rc == EINTR) return Status(EINTR, "a signal interrupted the wait");
    if (rc == EAGAIN && now() >= deadline) return Status(EAGAIN, "no completion event in time");
  }
  struct Leave {
    Device* dev;
    ~Leave() { dev->leave_waiter(); }
  } leave{this};

  TimePoint last_work = start;
  for (;;) {
    // After enter_waiter: an event pushed before it published the channel is seen here.
    if (Result<CqId> r = take_event(ch, *queue, Nanos::zero())) return r;
    bool worked = false;
    bool want_write = false;
    TimePoint maintain_at{};
    {
      std::lock_guard io(io_mu_);
      if (maintain_due_.load(std::memory_order_relaxed) && maintain_due_.exchange(false)) {
        maintain_io_locked();
      }
      worked = io_pass(PassBy::kWaiter);
      want_write = tx_count_ != 0 || held_count_ != 0;
      maintain_at = maintained_at_ + kMaintainIdleEvery;
    }
    if (Result<CqId> r = take_event(ch, *queue, Nanos::zero())) return r;
    const TimePoint t = now();
    if (worked) {
      last_work = t;
      continue;
    }
    if (t >= deadline) return Status(EAGAIN, "no completion event in time");
    if (t - last_work < config_.progress.spin && !want_write) continue;

    // The progress thread may still be asleep in wait() from before this waiter began (it
    // does not go to sleep while one is published): then a wake meant for this thread could
    // end that one's sleep instead, whichever of the two reads the wake first. Wake it out
    // first; it parks.
    while (sleeping_.load() != 0) {
      io_->wake();
      std::this_thread::yield();
    }
    // As the progress thread sleeps (progress_loop).
    const std::optional<TimePoint> next = begin_sleep();
    bool interrupted = false;
    if (next) {
      TimePoint wake_at = *next;
      if (config_.observer) wake_at = std::min(wake_at, config_.observer->on_idle(now(), *this));
      wake_at = std::min(wake_at, deadline);
      // The ports' housekeeping, as the progress thread does it before it sleeps: now if due,
      // else the sleep ends when it is.
      const TimePoint before = now();
      if (before >= maintain_at) {
        std::lock_guard io(io_mu_);
        maintain_io_locked();
      } else {
        wake_at = std::min(wake_at, maintain_at);
      }
      const Nanos sleep_for =
          std::min(std::max(wake_at - before, Nanos::zero()), Nanos(config_.progress.max_sleep));
      interrupted = !sleep_in_io(sleep_for, want_write);
    }
    sleeping_.fetch_sub(1);
    last_work = now();
    if (interrupted) return Status(EINTR, "a signal interrupted the wait");
  }
}

bool Device::enter_waiter(ChannelId ch, TimePoint t) {
  uint32_t none = 0;
  if (!waiting_channel_.compare_exchange_strong(none, static_cast<uint32_t>(ch))) return false;
  const Nanos handoff = config_.progress.app_handoff;
  if (parked_for_waiter_.load()) {
    // Parked for the last wait: keep its timer a handoff ahead, with a system call only
    // once it is within half a handoff (a ping-pong blocks again within microseconds).
    if (park_timer_->fires_at() - t < handoff / 2) park_timer_->fire_at(t + handoff);
  } else if (sleeping_.load() != 0) {
    io_->wake();  // asleep in wait(): it parks when it wakes
  }
  return true;
}

void Device::leave_waiter() {
  const TimePoint t = now();
  waiter_left_ns_.store(t.count(), std::memory_order_relaxed);
  waiting_channel_.store(0);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // park_for_waiter's fire_at
  if (waiting_elsewhere_.load() != 0) {
    // Another thread is blocked on its channel and nobody would drive for it until the
    // handoff ran out: the progress thread takes over now (it reads waiter_left_ns_ after
    // raising parked_for_waiter_, so one of the two sees the other).
    waiter_left_ns_.store(0);
    if (parked_for_waiter_.load()) park_timer_->wake();
    return;
  }
  // After a long wait the parked thread's timer is far off (park_for_waiter): bring it to
  // a handoff from now, so that the thread takes over if no wait follows.
  const TimePoint take_over = t + config_.progress.app_handoff;
  if (parked_for_waiter_.load() && park_timer_->fires_at() > take_over) {
    park_timer_->fire_at(take_over);
  }
}

bool Device::waiter_holds(TimePoint t) const {
  if (!park_timer_) return false;
  if (waiting_channel_.load() != 0) return true;
  const int64_t left = waiter_left_ns_.load(std::memory_order_relaxed);
  return left != 0 && t - TimePoint(Nanos(left)) < config_.progress.app_handoff;
}

void Device::park_for_waiter() {
  parked_for_waiter_.store(true);
  while (!stop_.load()) {
    const bool waiting = waiting_channel_.load() != 0;
    const TimePoint t = now();
    // While the waiter waits, sleep as long as the thread ever does (the waiter runs the
    // ports' housekeeping): it pulls the timer in when it leaves.
    const Nanos longest = std::max(config_.progress.max_sleep, kParkLongest);
    TimePoint wake_at = t + longest;
    if (!waiting) {
      wake_at = TimePoint(Nanos(waiter_left_ns_.load())) + config_.progress.app_handoff;
      if (wake_at <= t) break;
    }
    if (park_timer_->fires_at() != wake_at) park_timer_->fire_at(wake_at);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // leave_waiter's store
    if ((waiting_channel_.load() != 0) != waiting) continue;
    park_timer_->sleep(waiting ? longest : kParkLongest);
  }
  parked_for_waiter_.store(false);
}

}  // namespace uroce::device
