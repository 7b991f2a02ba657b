// The device's progress: the thread that moves packets between the PacketIo and the engine
// while the application does nothing (so one-sided operations complete at a passive target),
// and the same pass run from application threads when the I/O is free.
//
// One pass (io_pass), with io_mu_ held so one thread at a time drives the PacketIo:
//   rx_burst into preallocated buffers            (no engine lock: a syscall)
//   engine: on_packet for each, on_timer if due, poll_tx into free TxSlots, poll_events
//   tx_burst what was built                       (no engine lock: sendmmsg; but under it
//                                                  when a payload is sent by reference,
//                                                  send_referenced_locked)
//   dispatch events to completion channels / the async queue
// When a pass finds nothing to do the thread spins for ProgressOptions::spin, then sleeps in
// PacketIo::wait until the engine's next deadline or a wake().
//
// Lost wake-ups: the thread raises sleeping_, then re-checks the engine for work
// under engine_mu_; a poster publishes its work (a send WQE by the engine's doorbell list,
// Engine::submit_send, which has_tx() reads), then reads sleeping_ and wakes. With
// sequentially consistent atomics one of the two always sees the other. kicked_ covers work
// has_tx() cannot show (events raised by an application call).
//
// Busy-polling handoff (ProgressOptions::app_handoff): when an application thread keeps
// calling poll_cq on an empty CQ, its passes move the packets and the progress thread parks
// (park_timer.hpp: a timer the polls push forward, so it does not wake while they keep
// coming) instead of spinning or waking on every datagram. A 2-core host running a
// ping-pong between two processes then has two busy threads, not four fighting for the
// cores and for io_mu_. The thread takes over again app_handoff after the last such pass,
// or at once when the application arms a CQ (it is about to block).
//
// Blocking handoff (event_wait.cpp): an application thread blocked in get_cq_event drives
// the device itself, and the thread parks the same way until app_handoff after the last
// such wait.
#include <pthread.h>
#include <sched.h>

#include <algorithm>

#include "device/device.hpp"
#include "wire/header_layout.hpp"
#include "wire/opcode.hpp"
#include "wire/packet.hpp"

namespace uroce::device {

size_t Device::fill_tx_locked(TimePoint now) {
  if (tx_count_ != 0 || !engine_.has_tx()) return 0;
  // The engine sets len and meta of every slot it fills; the others are never read.
  tx_head_ = 0;
  tx_count_ = engine_.poll_tx(now, std::span<transport::TxSlot>(tx_));
  const size_t built = tx_count_;
  send_referenced_locked();
  return built;
}

void Device::send_referenced_locked() {
  // A slot whose payload is a reference into an MR (transport::TxSlot::payload) goes out
  // before the engine's lock is released: after that the application may deregister or
  // rewrite the memory (a flushed WQE completes without waiting for its packets). What the
  // socket does not take now is copied into its slot and waits there like any other.
  bool any = false;
  for (size_t i = tx_head_; i < tx_head_ + tx_count_ && !any; ++i) any = !tx_[i].payload.empty();
  if (!any) return;
  // Held ACKs ride behind, as behind any send: a 4 KiB reply's ACK took a sendmmsg of its own.
  send_pending(true);
  for (size_t i = tx_head_; i < tx_head_ + tx_count_; ++i) transport::flatten(tx_[i]);
}

namespace {

// Held ACKs only: no payload, by reference or not (the slot copied into may have had one).
void copy_slot(const transport::TxSlot& from, transport::TxSlot& to) {
  std::copy_n(from.buf.data(), from.len, to.buf.data());
  to.len = from.len;
  to.meta = from.meta;
  to.payload = {};
}

// A positive RC ACK (Acknowledge with an AETH of type ACK): what hold_acks may delay. NAKs,
// responses with data and CNPs go at once.
bool is_positive_ack(const transport::TxSlot& slot) {
  constexpr uint8_t kRcAck = wire::make_opcode(wire::Transport::kRc, wire::Op::kAcknowledge);
  if (slot.len < wire::kBthLen + wire::kAethLen || slot.buf[0] != kRcAck) return false;
  return wire::Aeth{slot.buf[wire::kBthLen], 0}.type() == wire::AethType::kAck;
}

}  // namespace

size_t Device::send_pending(bool with_held) {
  if (with_held && held_count_ != 0) {
    // The held ACKs ride behind what is built, in the same sendmmsg. Without room (a full
    // burst still going out) they wait for it to drain.
    if (tx_count_ == 0) tx_head_ = 0;
    if (tx_head_ + tx_count_ + held_count_ <= tx_.size()) {
      for (size_t i = 0; i < held_count_; ++i) copy_slot(held_[i], tx_[tx_head_ + tx_count_ + i]);
      tx_count_ += held_count_;
      held_count_ = 0;
    }
  }
  if (tx_count_ == 0) return 0;
  const size_t sent =
      io_->tx_burst(std::span<const transport::TxSlot>(tx_.data() + tx_head_, tx_count_));
  observe_held_rx();  // what came in goes to the observer before what went out
  if (config_.observer && sent > 0) {
    config_.observer->on_tx(now(), std::span<const transport::TxSlot>(tx_.data() + tx_head_, sent));
  }
  tx_head_ += sent;
  tx_count_ -= sent;
  return sent;
}

bool Device::hold_acks() {
  if (tx_count_ == 0 || held_count_ + tx_count_ > kMaxHeldAcks) return false;
  for (size_t i = tx_head_; i < tx_head_ + tx_count_; ++i) {
    if (!is_positive_ack(tx_[i]) || tx_[i].len > kHeldAckBytes) return false;
  }
  for (size_t i = tx_head_; i < tx_head_ + tx_count_; ++i) copy_slot(tx_[i], held_[held_count_++]);
  tx_head_ += tx_count_;
  tx_count_ = 0;
  return true;
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
    if (ch == channels_.end()) continue;
    // A thread blocked in get_cq_event on this channel that drives the device sleeps in the
    // PacketIo's wait(), not on the channel: wake it, unless this is its own pass. Then it
    // takes the event right after the pass, and the channel's eventfd need not carry it.
    const bool for_waiter = waiting_channel_.load() == ch->first;
    if (for_waiter && waiter_pass_) {
      ch->second.queue->push_for_next_pop(CqId(ev.element));
      continue;
    }
    ch->second.queue->push(CqId(ev.element));
    if (for_waiter) io_->wake();
  }
}

void Device::observe_held_rx() {
  if (rx_unobserved_ == 0) return;
  config_.observer->on_rx(rx_unobserved_at_, std::span<const RxPacket>(rx_.data(), rx_unobserved_));
  rx_unobserved_ = 0;
}

bool Device::io_pass(PassBy by) {
  observe_held_rx();  // before rx_burst reuses the buffers
  waiter_pass_ = by == PassBy::kWaiter;
  bool worked = send_pending() > 0;
  const size_t n_rx = io_->rx_burst(std::span<RxPacket>(rx_));
  size_t n_events = 0;
  // One clock read for the rest of the pass: the engine's time (read under its lock, so the
  // engine never sees time go back), telemetry's and the handoff check's. A read is ~30 ns
  // on a VM, and a busy-polling program makes a pass every microsecond or two.
  TimePoint t;
  {
    std::lock_guard lock(engine_mu_);
    t = now();
    for (size_t i = 0; i < n_rx; ++i) {
      engine_.on_packet(t, rx_[i].meta, rx_[i].bytes());
    }
    if (engine_.next_deadline() <= t) {
      engine_.on_timer(t);
      worked = true;
    }
    // The received packets go to telemetry (capture, RTT) before anything this pass built
    // (send_pending observes them first, also when fill_tx_locked sends at once); after the
    // reply of a busy-polling program, which its next call sends (observe_held_rx).
    if (config_.observer && n_rx > 0) {
      rx_unobserved_ = n_rx;
      rx_unobserved_at_ = t;
    }
    if (fill_tx_locked(t) > 0) worked = true;
    n_events = engine_.poll_events(std::span<transport::AsyncEvent>(events_scratch_));
  }
  if (by == PassBy::kThread) observe_held_rx();
  // A waiter's pass that raised an event returns it to a program that typically replies
  // at once: its ACKs ride with the reply, as a busy poller's do.
  const bool hold =
      (by == PassBy::kPoller && app_driving_at(t)) || (by == PassBy::kWaiter && n_events > 0);
  if (hold && hold_acks()) {
    worked = true;
  } else if (send_pending() > 0) {
    worked = true;
  }
  if (n_events > 0) {
    dispatch_events(std::span<const transport::AsyncEvent>(events_scratch_.data(), n_events));
  }
  waiter_pass_ = false;
  if (config_.observer) config_.observer->on_pass(t, *this);
  return worked || n_rx > 0 || n_events > 0;
}

bool Device::flush_tx(bool* more_to_send, TimePoint* next_deadline) {
  // Held ACKs go right after what this call builds, and keep waiting if it built nothing
  // (a post_recv): the reply they wait for comes with the next post_send (hold_acks).
  bool worked = send_pending(false) > 0;
  size_t n_events = 0;
  size_t built = 0;
  {
    std::lock_guard lock(engine_mu_);
    built = fill_tx_locked(now());
    n_events = engine_.poll_events(std::span<transport::AsyncEvent>(events_scratch_));
    if (more_to_send != nullptr) *more_to_send = engine_.has_tx();
    if (next_deadline != nullptr) *next_deadline = engine_.next_deadline();
  }
  if (built > 0) worked = true;
  if (send_pending(built > 0) > 0) worked = true;
  if (n_events > 0) {
    dispatch_events(std::span<const transport::AsyncEvent>(events_scratch_.data(), n_events));
  }
  return worked || n_events > 0;
}

bool Device::progress() {
  // A poll counts as the application's even when another thread has the I/O this instant:
  // the progress thread may be that other thread, finishing the pass before it parks.
  const TimePoint t = note_app_drove();
  std::unique_lock io(io_mu_, std::try_to_lock);
  if (!io.owns_lock()) return false;
  if (maintain_due_.load(std::memory_order_relaxed) && maintain_due_.exchange(false)) {
    maintain_io_locked();
  }
  // WQEs posted since the last pass leave before this pass reads the sockets: a ping-pong's
  // request must not wait behind a receive call.
  // Read first: an exchange is a locked instruction on every poll of a busy-polling program.
  // A post that sets the flag after this read is built by this pass all the same (its WQEs
  // are in the engine) or by the next one (the flag stays set).
  bool worked = posts_waiting_.load(std::memory_order_relaxed) && posts_waiting_.exchange(false) &&
                flush_tx();
  worked = io_pass(PassBy::kPoller) || worked;
  // Packets the socket would not take now (a full send buffer): the next pass retries them.
  const bool tx_left = tx_count_ != 0;
  io.unlock();
  push_park_timer(t, !worked);
  // No poll of this application is coming soon to retry them: without this a thread asleep
  // on readability alone would leave them until its timeout (up to max_sleep).
  if (tx_left && !app_driving()) hand_to_thread();
  // A thread asleep in wait() while the application drives would stay asleep (the
  // application's passes drain the sockets it waits on) until its timeout: wake it so it
  // parks, and posts can wait for the application's polls (ring_doorbell). Telemetry
  // publishes the final state when the thread goes idle: it must see this pass too.
  // Publishing from here would build a snapshot per application pass.
  if (sleeping_.load() != 0 && ((worked && config_.observer) || app_driving())) io_->wake();
  return worked;
}

void Device::flush_held_acks() {
  bool left = false;
  {
    std::lock_guard io(io_mu_);
    send_pending(true);
    observe_held_rx();
    left = tx_count_ != 0;
  }
  // A full socket buffer kept some: the thread, asleep on readability alone, must wait for
  // writability instead (no application poll may come: this runs from destroy_qp).
  if (left) hand_to_thread();
}

bool Device::flush_sends() {
  std::lock_guard io(io_mu_);
  flush_tx();
  send_pending(true);
  observe_held_rx();
  std::lock_guard lock(engine_mu_);
  return tx_count_ == 0 && held_count_ == 0 && !engine_.has_tx();
}

TimePoint Device::note_app_drove() {
  if (config_.progress.app_handoff <= Nanos::zero()) return TimePoint{};
  // Counted up to kBusyPolls only (all app_driving_at asks): no locked add on every poll.
  if (app_polls_since_arm_.load(std::memory_order_relaxed) < kBusyPolls) {
    app_polls_since_arm_.fetch_add(1, std::memory_order_relaxed);
  }
  const TimePoint t = now();
  app_drove_ns_.store(t.count(), std::memory_order_relaxed);
  return t;
}

TimePoint Device::post_time() const {
  // A busy-polling application posts between its polls, so the time its last poll read is at
  // most a turn of its loop old: a clock read saved per post (26 ns on kvm-clock, 4 % of a
  // 64-byte WRITE's sender). What the time decides tolerates that age: whether the
  // application drives (it polled just now, or the thread took over and is woken anyway),
  // the pacer (a QP held until a time already past is released by the next pass), and a
  // flush completion's timestamp. An application that stops polling without arming a CQ
  // keeps this age until its next poll.
  if (app_polls_since_arm_.load(std::memory_order_relaxed) >= kBusyPolls) {
    const int64_t last = app_drove_ns_.load(std::memory_order_relaxed);
    if (last != 0) return TimePoint(Nanos(last));
  }
  return now();
}

void Device::push_park_timer(TimePoint t, bool idle_poll) {
  // The parked thread's timer must not fire while polls keep coming: push it a whole
  // handoff ahead once it is within half a handoff, from a poll that found nothing (the
  // program is waiting anyway, so the system call is not in a message's way), or within a
  // quarter from any poll (a program whose every poll has work). A system call every half
  // handoff here instead of a context switch every handoff there. A push missed (the thread
  // parks just after this read) only lets the timer fire: the thread finds the polls still
  // coming and sleeps on.
  if (!park_timer_ || !parked_.load(std::memory_order_relaxed)) return;
  const Nanos handoff = config_.progress.app_handoff;
  if (park_timer_->fires_at() - t < (idle_poll ? handoff / 2 : handoff / 4)) {
    park_timer_->fire_at(t + handoff);
  }
}

void Device::end_app_driving() {
  app_polls_since_arm_.store(0, std::memory_order_relaxed);
  if (app_drove_ns_.exchange(0) == 0) return;
  // Only a thread parked for the polls: one parked for a blocked get_cq_event
  // (park_for_waiter) stays parked, as that wait drives the device. park() reads
  // app_drove_ns_ after raising parked_, so one of the two sees the other.
  if (!park_timer_ || parked_.load()) unpark();
  // A sleeping thread computed its timeout before the application's passes, which may
  // have armed new timers (a retransmission): make it look again.
  if (sleeping_.load() != 0) io_->wake();
}

bool Device::app_driving_at(TimePoint t) const {
  if (app_polls_since_arm_.load(std::memory_order_relaxed) < kBusyPolls) return false;
  const int64_t last = app_drove_ns_.load(std::memory_order_relaxed);
  return last != 0 && t - Nanos(last) < config_.progress.app_handoff;
}

void Device::park() {
  if (park_timer_) {
    // One sleep per call, at most kParkLongest (progress_loop's housekeeping runs between);
    // the timer fires a handoff after the last application pass unless the polls push it.
    parked_.store(true);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // end_app_driving's exchange
    if (!stop_.load() && app_driving()) {
      const TimePoint due =
          TimePoint(app_drove_ns_.load(std::memory_order_relaxed)) + config_.progress.app_handoff;
      if (park_timer_->fires_at() < due) park_timer_->fire_at(due);
      park_timer_->sleep(kParkLongest);
    }
    parked_.store(false);
    return;
  }
  std::unique_lock lock(park_mu_);
  while (!stop_.load() && app_driving()) {
    const Nanos left =
        Nanos(app_drove_ns_.load(std::memory_order_relaxed)) + config_.progress.app_handoff - now();
    if (left <= Nanos::zero()) break;
    park_cv_.wait_for(lock, left);
  }
}

void Device::unpark() {
  if (park_timer_) park_timer_->wake();
  {
    // Under park_mu_: the thread checks its condition and waits with it held, so this
    // notification cannot fall between its check and its wait.
    std::lock_guard lock(park_mu_);
  }
  park_cv_.notify_one();
}

void Device::ring_doorbell_at(TimePoint t, bool lone_on_idle_qp) {
  // While a busy-polling application drives the device, a post only marks its WQEs: the
  // application's next poll sends every WQE posted since, in one sendmmsg with its runs
  // merged by GSO, as a NIC fetches a burst of WQEs per doorbell. If no poll comes, the
  // progress thread takes over when app_handoff runs out: a parked thread wakes by itself
  // then, one asleep in wait() is woken now to park (or, the handoff over, to send).
  // A lone WR on a QP with nothing outstanding (a ping-pong's request or reply) has nothing
  // to be batched with: waiting would only put the poll's own work before it.
  const bool batching = config_.progress.batch_posts && config_.progress.app_calls_drive;
  if (batching && !lone_on_idle_qp && app_driving_at(t)) {
    mark_posts_waiting();
    if (sleeping_.load() != 0) io_->wake();
    return;
  }
  kick();
  // A WR posted right behind another while the application does not drive (yet): its next
  // poll runs a pass even if it finds completions, and so counts as driving. Otherwise a
  // program whose polls always find some (UD and UC WRs complete as they leave) would never
  // be seen to drive, and would send one sendmmsg per WR for good.
  if (batching && !lone_on_idle_qp) mark_posts_waiting();
}

void Device::mark_posts_waiting() {
  // Read first: a store of true is an exchange (a locked instruction) per post, and the flag
  // is a hint. The WQE is published by the engine's doorbell list (Engine::submit_send),
  // which a pass takes whether or not the flag is seen, and which a thread about to sleep
  // re-checks; a flag cleared just after this read costs at most one pass's delay.
  if (!posts_waiting_.load(std::memory_order_relaxed)) {
    posts_waiting_.store(true, std::memory_order_release);
  }
}

void Device::kick() {
  if (config_.progress.app_calls_drive) {
    std::unique_lock io(io_mu_, std::try_to_lock);
    if (io.owns_lock()) {
      // Whether the engine has more is read in flush_tx's own critical section: a post took
      // the engine's lock three times (post, build, this check), now twice. Sending what was
      // built does not change the engine; a WR another thread posts meanwhile rings its own
      // doorbell, which finds the I/O taken and hands it to the thread.
      bool more = false;
      TimePoint deadline = kNever;
      flush_tx(&more, &deadline);
      // A thread asleep in wait() computed its timeout before this send armed its timers: a
      // lost first packet would wait for that sleep's end (up to max_sleep) instead of the
      // QP's timeout. The store of sleep_until_ns_ comes after the engine is read, so a sleep
      // that began meanwhile either saw the timer or is woken here.
      if (sleeping_.load() != 0 && deadline < TimePoint(Nanos(sleep_until_ns_.load()))) {
        io_->wake();
      }
      // Something left (the socket buffer was full, or more than one burst): the thread
      // takes it from here.
      // Held ACKs need no wake-up while the application drives: its next call sends them.
      if (tx_count_ == 0 && (held_count_ == 0 || app_driving()) && !more) return;
    }
  }
  hand_to_thread();
}

void Device::maintain_io_locked() {
  observe_held_rx();  // maintenance may rewrite the ports the buffers point into
  io_->maintain();
  maintained_at_ = now();
}

void Device::hand_to_thread() {
  // kicked_ keeps a thread about to sleep from sleeping; one asleep in wait() computed its
  // wait (readable only, or writable too) before this work was left, so it is woken.
  kicked_.store(true);
  if (sleeping_.load() != 0) io_->wake();
}

std::optional<TimePoint> Device::begin_sleep() {
  sleeping_.fetch_add(1);
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
  if (has_tx || kicked) return std::nullopt;
  return deadline;
}

bool Device::sleep_in_io(Nanos timeout, bool want_write) {
  sleep_until_ns_.store((now() + timeout).count());
  const bool whole = io_->wait(timeout, want_write);
  sleep_until_ns_.store(INT64_MAX);
  return whole;
}

void Device::progress_loop() {
  if (!config_.progress.cpus.empty()) {
    // open_udp_device checked the CPUs against the process's mask; should one have gone
    // offline since, the thread keeps the affinity it inherited.
    cpu_set_t set;
    CPU_ZERO(&set);
    for (const int c : config_.progress.cpus) CPU_SET(c, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }
  TimePoint last_work = now();
  TimePoint last_maintain = now();
  while (!stop_.load()) {
    const bool polled = app_driving();
    if (polled || waiter_holds(now())) {
      if (polled) {
        park();
      } else {
        park_for_waiter();
      }
      // A parked thread never reaches the idle path below; keep the port's housekeeping
      // (kernel drop count, a shared port's group) going at a slow pace. Not by waiting for
      // the I/O: the application's passes hold it back to back, and a waiter woken at each
      // release found it taken again (30 futex waits in 10 ms, each release a wake-up that
      // preempted the peer's thread on a 2-core host: 1,000-2,800 a second at 64 QPs).
      if (now() - last_maintain >= std::chrono::milliseconds(100)) {
        std::unique_lock io(io_mu_, std::try_to_lock);
        if (io.owns_lock()) {
          maintain_io_locked();
        } else {
          maintain_due_.store(true);
        }
        last_maintain = now();
      }
      last_work = now();
      continue;
    }
    bool worked = false;
    bool want_write = false;
    {
      std::lock_guard io(io_mu_);
      worked = io_pass(PassBy::kThread);
      want_write = tx_count_ != 0 || held_count_ != 0;
    }
    const TimePoint t = now();
    if (worked) {
      last_work = t;
      continue;
    }
    if (t - last_work < config_.progress.spin && !want_write) continue;

    const std::optional<TimePoint> next = begin_sleep();
    // A get_cq_event that drives the device began: park instead (enter_waiter reads
    // sleeping_ after publishing itself, so one of the two sees the other).
    if (next && !stop_.load() && waiting_channel_.load() == 0) {
      TimePoint deadline = *next;
      if (config_.observer) deadline = std::min(deadline, config_.observer->on_idle(now(), *this));
      Nanos timeout = config_.progress.max_sleep;
      if (deadline != kNever) timeout = std::clamp(deadline - now(), Nanos::zero(), timeout);
      // The port's housekeeping (the kernel's drop count, a shared port's group: three or
      // four system calls a port) at most every kMaintainIdleEvery: a device that sleeps
      // between every burst of a stream (tens of thousands of times a second) paid more for
      // it than for the stream's receives. One that sleeps sooner wakes for it by then.
      const TimePoint maintain_at = last_maintain + kMaintainIdleEvery;
      const TimePoint before_sleep = now();
      if (before_sleep >= maintain_at) {
        // Under io_mu_: an application thread's progress() may be in rx_burst on the same
        // ports, and maintenance rewrites what rx_burst reads (a shared port's group).
        std::lock_guard io(io_mu_);
        maintain_io_locked();
        last_maintain = now();
      } else {
        timeout = std::min(timeout, maintain_at - before_sleep);
      }
      (void)sleep_in_io(timeout, want_write);
    }
    sleeping_.fetch_sub(1);
    last_work = now();
  }
}

}  // namespace uroce::device
