// The device's progress: the thread that moves packets between the PacketIo and the engine
// while the application does nothing (so one-sided operations complete at a passive target),
// and the same pass run from application threads when the I/O is free.
//
// One pass (io_pass), with io_mu_ held so one thread at a time drives the PacketIo:
//   rx_burst into preallocated buffers            (no engine lock: a syscall)
//   engine: on_packet for each, on_timer if due, poll_tx into free TxSlots, poll_events
//   tx_burst what was built                       (no engine lock: sendmmsg)
//   dispatch events to completion channels / the async queue
// When a pass finds nothing to do the thread spins for ProgressOptions::spin, then sleeps in
// PacketIo::wait until the engine's next deadline or a wake().
//
// Lost wake-ups: the thread publishes sleeping_ = true, then re-checks the engine for work
// under engine_mu_; a poster publishes its work under engine_mu_, then reads sleeping_ and
// wakes. With sequentially consistent atomics one of the two always sees the other. kicked_
// covers work has_tx() cannot show (events raised by an application call).
#include <algorithm>

#include "device/device.hpp"

namespace uroce::device {

size_t Device::fill_tx_locked(TimePoint now) {
  if (tx_count_ != 0 || !engine_.has_tx()) return 0;
  for (auto& slot : tx_) slot.len = 0;
  tx_head_ = 0;
  tx_count_ = engine_.poll_tx(now, std::span<transport::TxSlot>(tx_));
  return tx_count_;
}

size_t Device::send_pending() {
  if (tx_count_ == 0) return 0;
  const size_t sent =
      io_->tx_burst(std::span<const transport::TxSlot>(tx_.data() + tx_head_, tx_count_));
  if (config_.observer && sent > 0) {
    config_.observer->on_tx(now(), std::span<const transport::TxSlot>(tx_.data() + tx_head_, sent));
  }
  tx_head_ += sent;
  tx_count_ -= sent;
  return sent;
}

void Device::dispatch_events(std::span<const transport::AsyncEvent> events) {
  for (const transport::AsyncEvent& ev : events) {
    if (ev.type != transport::EventType::kCqCompletion) {
      async_.push(ev);
      continue;
    }
    std::lock_guard lock(channel_mu_);
    auto cq = cqs_.find(ev.element);
    if (cq == cqs_.end() || !cq->second.channel) continue;
    auto ch = channels_.find(static_cast<uint32_t>(*cq->second.channel));
    if (ch != channels_.end()) ch->second.queue->push(CqId(ev.element));
  }
}

bool Device::io_pass() {
  bool worked = send_pending() > 0;
  const size_t n_rx = io_->rx_burst(std::span<RxPacket>(rx_));
  if (config_.observer && n_rx > 0) {
    config_.observer->on_rx(now(), std::span<const RxPacket>(rx_.data(), n_rx));
  }
  size_t n_events = 0;
  {
    std::lock_guard lock(engine_mu_);
    const TimePoint t = now();
    for (size_t i = 0; i < n_rx; ++i) {
      engine_.on_packet(t, rx_[i].meta, std::span<const uint8_t>(rx_[i].buf.data(), rx_[i].len));
    }
    if (engine_.next_deadline() <= t) {
      engine_.on_timer(t);
      worked = true;
    }
    if (fill_tx_locked(t) > 0) worked = true;
    n_events = engine_.poll_events(std::span<transport::AsyncEvent>(events_scratch_));
  }
  if (send_pending() > 0) worked = true;
  if (n_events > 0) {
    dispatch_events(std::span<const transport::AsyncEvent>(events_scratch_.data(), n_events));
  }
  if (config_.observer) config_.observer->on_pass(now(), *this);
  return worked || n_rx > 0 || n_events > 0;
}

bool Device::flush_tx() {
  bool worked = send_pending() > 0;
  size_t n_events = 0;
  {
    std::lock_guard lock(engine_mu_);
    if (fill_tx_locked(now()) > 0) worked = true;
    n_events = engine_.poll_events(std::span<transport::AsyncEvent>(events_scratch_));
  }
  if (send_pending() > 0) worked = true;
  if (n_events > 0) {
    dispatch_events(std::span<const transport::AsyncEvent>(events_scratch_.data(), n_events));
  }
  return worked || n_events > 0;
}

bool Device::progress() {
  std::unique_lock io(io_mu_, std::try_to_lock);
  if (!io.owns_lock()) return false;
  const bool worked = io_pass();
  // The progress thread may sleep through what this application-driven pass did: let the
  // observer publish it now rather than at the thread's next pass.
  if (worked && config_.observer) config_.observer->on_idle(now(), *this);
  return worked;
}

void Device::kick() {
  if (config_.progress.app_calls_drive) {
    std::unique_lock io(io_mu_, std::try_to_lock);
    if (io.owns_lock()) {
      flush_tx();
      // Something left (the socket buffer was full, or more than one burst): the thread
      // takes it from here.
      if (tx_count_ == 0) {
        std::lock_guard lock(engine_mu_);
        if (!engine_.has_tx()) return;
      }
    }
  }
  kicked_.store(true);
  if (sleeping_.load()) io_->wake();
}

void Device::progress_loop() {
  TimePoint last_work = now();
  while (!stop_.load()) {
    bool worked = false;
    bool want_write = false;
    {
      std::lock_guard io(io_mu_);
      worked = io_pass();
      want_write = tx_count_ != 0;
    }
    const TimePoint t = now();
    if (worked) {
      last_work = t;
      continue;
    }
    if (t - last_work < config_.progress.spin && !want_write) continue;

    sleeping_.store(true);
    TimePoint deadline = kNever;
    bool has_tx = false;
    {
      std::lock_guard lock(engine_mu_);
      deadline = engine_.next_deadline();
      has_tx = engine_.has_tx();
    }
    // A kick that came while this thread held the I/O may have left events (a flush
    // completion of a post_recv in ERR) that has_tx() does not show.
    const bool kicked = kicked_.exchange(false);
    if (!has_tx && !kicked && !stop_.load()) {
      if (config_.observer) config_.observer->on_idle(now(), *this);
      Nanos timeout = config_.progress.max_sleep;
      if (deadline != kNever) timeout = std::clamp(deadline - now(), Nanos::zero(), timeout);
      {
        // Under io_mu_: an application thread's progress() may be in rx_burst on the same
        // ports, and maintenance rewrites what rx_burst reads (a shared port's group).
        std::lock_guard io(io_mu_);
        io_->maintain();
      }
      io_->wait(timeout, want_write);
    }
    sleeping_.store(false);
    last_work = now();
  }
}

}  // namespace uroce::device
