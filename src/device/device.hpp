// Device: one software RDMA NIC. Owns a transport::Engine (PDs, MRs, CQs, SRQs, QPs and the
// protocol), a PacketIo that moves its packets, the GID table and the port/device attributes,
// the completion channels and the async event queue, and the progress thread.
//
//   Device dev(config, std::move(io));      // starts the progress thread
//   pd = dev.alloc_pd(); mr = dev.reg_mr(pd, buf, len, access, /*pin=*/false);
//   ch = dev.create_comp_channel(); cq = dev.create_cq(256, ch);
//   qp = dev.create_qp(pd, init); dev.modify_qp(qpn, attr, mask);   // AV: sgid_index resolved
//   dev.post_send(qpn, wr); dev.poll_cq(cq, wcs);
//   dev.req_notify_cq(cq, false); poll(channel_fd(ch)); get_cq_event(ch, 0); ack_cq_events(cq, 1)
//
// Threading: every method is thread-safe. The engine is single-threaded, so one mutex
// (engine_mu_) serialises every engine call but poll_cq, which reads the CQ's ring without it
// (transport/cq.hpp), and the posts, which write the QP's or SRQ's queues without it
// (transport/send_queue.hpp, recv_queue.hpp); the critical sections are the engine calls
// themselves, never a syscall. A second mutex (io_mu_) makes one thread at a time drive the
// PacketIo: the progress thread, or an application thread inside post_send / poll_cq that found the
// I/O free (ProgressOptions::app_calls_drive). docs/api.md has the whole model.
//
// This is the layer the C++ API (include/uroce) and the libibverbs shim sit on: objects are
// plain ids, results are transport::Status / Result with ibverbs errno values.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "device/device_types.hpp"
#include "device/event_queue.hpp"
#include "device/observer.hpp"
#include "device/packet_io.hpp"
#include "device/park_timer.hpp"
#include "transport/engine.hpp"

namespace uroce::device {

using transport::CqId;
using transport::PdId;
using transport::Result;
using transport::SrqId;
using transport::Status;

class Device {
 public:
  Device(DeviceConfig config, std::unique_ptr<PacketIo> io);
  ~Device();  // stops the progress thread; unpins what is still pinned
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  [[nodiscard]] const std::string& name() const { return config_.name; }
  [[nodiscard]] const DeviceConfig& config() const { return config_; }

  // ---- Attributes.
  [[nodiscard]] DeviceAttr query_device() const;
  Status query_port(uint8_t port_num, PortAttr& attr) const;  // EINVAL: no such port
  // EINVAL: no such port or index beyond the table; ENODATA: empty entry.
  Status query_gid(uint8_t port_num, uint32_t index, Gid& gid) const;
  [[nodiscard]] const std::vector<PortInfo>& ports() const { return config_.ports; }

  // Resolves an address vector's source: sgid = GID table[port_num][sgid_index]. EINVAL
  // beyond the table, ENODATA for an empty entry, EADDRNOTAVAIL when the driver cannot send
  // from that address (no socket bound to it).
  Status resolve_av(transport::AhAttr& ah) const;

  // ---- Resources.
  Result<PdId> alloc_pd();
  Status dealloc_pd(PdId pd);
  // pin: mlock the range (RLIMIT_MEMLOCK checked first: ENOMEM with the fix in the message).
  Result<transport::MrInfo> reg_mr(PdId pd, void* addr, size_t length, uint32_t access,
                                   bool pin = false);
  // ibv_rereg_mr of an MR registered without pinning: same keys, new range, PD and access.
  Result<transport::MrInfo> rereg_mr(uint32_t lkey, PdId pd, void* addr, size_t length,
                                     uint32_t access);
  Status dereg_mr(uint32_t lkey);
  Result<uint32_t> alloc_mw(PdId pd, transport::MwType type);  // Engine::alloc_mw
  Status dealloc_mw(uint32_t rkey);

  Result<ChannelId> create_comp_channel();
  Status destroy_comp_channel(ChannelId ch);         // EBUSY while a CQ uses it
  [[nodiscard]] int channel_fd(ChannelId ch) const;  // -1: no such channel

  Result<CqId> create_cq(uint32_t cqe, std::optional<ChannelId> channel = std::nullopt);
  // EBUSY while a QP uses it or events got from its channel are not acked yet.
  Status destroy_cq(CqId cq);
  [[nodiscard]] uint32_t cq_capacity(CqId cq) const;
  Status resize_cq(CqId cq, uint32_t cqe);

  Result<SrqId> create_srq(PdId pd, const transport::SrqInitAttr& attr);
  Status modify_srq(SrqId srq, const transport::SrqAttr& attr, uint32_t mask);
  Status query_srq(SrqId srq, transport::SrqAttr& attr) const;
  Status destroy_srq(SrqId srq);

  Result<transport::QpInfo> create_qp(PdId pd, const transport::QpInitAttr& attr);
  // With kQpAv the AV's source GID is resolved from sgid_index first (resolve_av).
  Status modify_qp(uint32_t qpn, const transport::QpAttr& attr, uint32_t mask);
  Status query_qp(uint32_t qpn, transport::QpAttr& attr, transport::QpInitAttr& init) const;
  Status destroy_qp(uint32_t qpn);

  // ---- Data path.
  // UD: wr.ud.ah must be resolved (resolve_av, or an AddressHandle of the C++ API).
  // ring: false while more WRs of the same list follow (an ibv_post_send chain): the
  // doorbell (ring_doorbell) rings once, after the last, or after a WR that fails.
  Status post_send(uint32_t qpn, const transport::SendWr& wr, bool ring = true);
  // After posting: sends now if the I/O is free, else wakes the progress thread; while a
  // busy-polling application drives the device (ProgressOptions::batch_posts), leaves the
  // WQEs to its next poll instead.
  void ring_doorbell() { ring_doorbell_at(now(), false); }
  Status post_recv(uint32_t qpn, const transport::RecvWr& wr);
  Status post_srq_recv(SrqId srq, const transport::RecvWr& wr);
  int poll_cq(CqId cq, std::span<transport::Wc> out);  // count or -EINVAL
  Status req_notify_cq(CqId cq, bool solicited_only);

  // ---- Completion channels (ibv_get_cq_event / ibv_ack_cq_events).
  // One CQ that got a completion after req_notify_cq; waits up to `timeout` (0: poll,
  // negative: forever). EAGAIN: none. Every event got must be acked before destroy_cq.
  // A blocking get moves the device's packets from the caller's thread while it waits
  // (drive_cq_event), and waits on the channel when another thread does that already.
  Result<CqId> get_cq_event(ChannelId ch, Nanos timeout);
  void ack_cq_events(CqId cq, uint32_t count);
  // Waits up to `timeout` (negative: forever) for an event on `ch` while this thread drives
  // the device: it sleeps in the PacketIo's wait() and runs the passes itself, and the
  // progress thread stays parked until app_handoff after the last such wait, so a packet
  // that completes a WR wakes one thread, not the progress thread and then this one
  // (event_wait.cpp). While another thread drives, it waits on its channel. EINTR: a signal
  // came. EBUSY: this device does not hand over (a progress thread without its park timer,
  // or app_calls_drive off): wait on channel_fd(ch) instead. EAGAIN: `timeout` passed.
  Result<CqId> drive_cq_event(ChannelId ch, Nanos timeout);

  // ---- Async events (ibv_get_async_event): QP fatal, SRQ limit, last WQE, CQ error.
  [[nodiscard]] int async_fd() const { return async_.fd(); }
  Result<transport::AsyncEvent> get_async_event(Nanos timeout) { return async_.pop(timeout); }

  // ---- QP1 steering for the CM (PacketIo::cm_capable / cm_listen). errno values.
  int cm_capable(bool on);
  int cm_listen(uint64_t service_id, bool on);

  // ---- Counters (snapshots).
  [[nodiscard]] transport::Counters counters() const;
  [[nodiscard]] std::optional<transport::Counters> qp_counters(uint32_t qpn) const;
  // The QP's oldest unacknowledged PSN (transport::Engine::qp_acked_psn).
  [[nodiscard]] std::optional<uint32_t> qp_acked_psn(uint32_t qpn) const;
  // The PacketIo's drop/ICMP counters and what the network said about one peer.
  [[nodiscard]] IoCounters io_counters() const { return io_->io_counters(); }
  [[nodiscard]] PathReport path_report(const Gid& peer) const { return io_->path_report(peer); }

  // One progress pass from the caller's thread (rx, timers, tx, events) if the I/O is free.
  // Returns true when it did any work. For drivers without the progress thread.
  bool progress();
  // Puts on the wire now what the engine has ready to send (posted WQEs, held ACKs), waiting
  // for the I/O: a pass another thread is in finishes first, so its packets are out too.
  // For a process about to exit: a WQE posted just before (a CM's DREQ) must not die
  // unsent with the progress thread. False when some are still waiting: the socket buffer
  // is full, or an RC QP has more to send than its window lets out now.
  bool flush_sends();

  [[nodiscard]] static TimePoint now();

 private:
  struct CqState {
    std::optional<ChannelId> channel;
    uint64_t events_got = 0;
    uint64_t events_acked = 0;
  };
  struct Channel {
    std::unique_ptr<EventQueue<CqId>> queue;
    uint32_t cqs = 0;
  };
  struct PinnedRange {
    void* addr = nullptr;
    size_t length = 0;
  };

  // Progress (progress.cpp).
  void progress_loop();
  // Who runs a pass: the progress thread, an application's poll_cq, or an application
  // thread blocked in get_cq_event (drive_cq_event).
  enum class PassBy : uint8_t { kThread, kPoller, kWaiter };
  // With io_mu_ held: one rx / timer / tx / event round. An application's pass may hold back
  // ACKs (hold_acks()): a busy poller's, and a waiter's that raised completion events.
  bool io_pass(PassBy by);
  // With io_mu_ held: tx only. more_to_send (if given): whether the engine still had packets
  // to build after this call's burst, and next_deadline (if given) its next timer, read in
  // the same critical section.
  bool flush_tx(bool* more_to_send = nullptr, TimePoint* next_deadline = nullptr);
  size_t fill_tx_locked(TimePoint now);  // with engine_mu_ held
  // With io_mu_ held: sends what is built, with_held the held ACKs right behind it (in the
  // same burst; they wait if it has no room). Returns the packets sent.
  size_t send_pending(bool with_held = true);
  // With io_mu_ held, at the end of an application-driven pass of a busy-polling program:
  // when everything the pass built is positive ACKs, keep them (copied) to go out after the
  // packets of the application's next call, typically its reply, so that the reply does not
  // wait behind an ACK's trip through the kernel. The next send of any thread, or the next
  // pass, sends them; they wait at most until the parked progress thread's next pass.
  bool hold_acks();
  // Sends held ACKs now (takes io_mu_): a program that destroys its QP or closes the device
  // right after its last completion must not leave its peer waiting for them.
  void flush_held_acks();
  // With io_mu_ held: hands the packets an application pass received to the observer
  // (capture, RTT), if it has not had them yet. The pass leaves them for later so that its
  // program's reply goes out first: the next send (after its sendmmsg, before the observer
  // sees what it sent), the next pass, or any other use of the I/O.
  void observe_held_rx();
  // The ports' housekeeping (PacketIo::maintain), io_mu_ held.
  void maintain_io_locked();
  // Sends the built slots now if any has its payload by reference, under engine_mu_ (the
  // caller's); copies in the payloads of those the socket did not take.
  void send_referenced_locked();
  void dispatch_events(std::span<const transport::AsyncEvent> events);
  void kick();  // after posting: send now if the I/O is free, else wake the progress thread
  // Busy-polling handoff (ProgressOptions::app_handoff).
  // An application thread polled (it may not have got the I/O); returns the time it read.
  TimePoint note_app_drove();
  // The time a post uses: the last poll's while the application busy-polls, else a clock read.
  TimePoint post_time() const;
  // After an application pass at `t` (idle_poll: it found nothing): keeps the parked
  // thread's timer a handoff ahead (park_timer.hpp).
  void push_park_timer(TimePoint t, bool idle_poll);
  void end_app_driving();  // the application is about to block: the thread takes over
  bool app_driving() const { return app_driving_at(now()); }
  bool app_driving_at(TimePoint t) const;  // an application pass within app_handoff of t
  // ring_doorbell with the time the caller read; lone_on_idle_qp: the post was one WR on a
  // QP with nothing outstanding (UD, UC: and the first since a poll; it is not batched).
  void ring_doorbell_at(TimePoint t, bool lone_on_idle_qp);
  void mark_posts_waiting();  // the application's next poll runs a pass (posts_waiting_)
  void hand_to_thread();      // work this thread leaves: the progress thread must not sleep on it
  void park();                // progress thread: sleep while app_driving(), or until unparked
  void unpark();              // any thread: end park() now (stop_ or the handoff changed)
  // Before a sleep in io_->wait(), by the progress thread or a waiter: raises sleeping_
  // (the caller lowers it when it wakes), then reads the engine's next deadline; nullopt when
  // there is work instead (WQEs to build, a kick).
  std::optional<TimePoint> begin_sleep();
  // io_->wait(), with sleep_until_ns_ published meanwhile; false when a signal ended it.
  bool sleep_in_io(Nanos timeout, bool want_write);
  // Blocking waits that drive the device (event_wait.cpp).
  Result<CqId> take_event(ChannelId ch, EventQueue<CqId>& queue, Nanos timeout);
  EventQueue<CqId>* channel_queue(ChannelId ch);
  bool enter_waiter(ChannelId ch, TimePoint t);  // false: another thread drives a wait
  void leave_waiter();
  // A waiter drives now, or left less than app_handoff before t: the thread stays parked.
  bool waiter_holds(TimePoint t) const;
  void park_for_waiter();  // progress thread: sleep while waiter_holds(now())

  const PortInfo* port(uint8_t port_num) const;

  DeviceConfig config_;
  std::unique_ptr<PacketIo> io_;
  transport::Engine engine_;
  mutable std::mutex engine_mu_;
  std::mutex io_mu_;

  // Guarded by io_mu_: preallocated packet buffers.
  std::vector<uint8_t> rx_storage_;
  std::vector<RxPacket> rx_;
  std::vector<uint8_t> tx_storage_;
  std::vector<transport::TxSlot> tx_;
  size_t tx_head_ = 0;  // tx_[tx_head_, tx_head_ + tx_count_) built, not yet sent
  size_t tx_count_ = 0;
  std::vector<transport::AsyncEvent> events_scratch_;
  static constexpr size_t kMaxHeldAcks = 16;
  // resize_cq builds what is posted before counting: at most this many bursts (a full
  // socket buffer stops it sooner; the rest completes later, as it would on any device).
  static constexpr int kResizeFlushPasses = 8;
  static constexpr size_t kHeldAckBytes = 64;  // BTH + AETH + ICRC is 20
  std::vector<uint8_t> held_storage_;
  std::vector<transport::TxSlot> held_;  // kMaxHeldAcks slots
  size_t held_count_ = 0;                // held_[0, held_count_) wait to be sent
  size_t rx_unobserved_ = 0;             // rx_[0, rx_unobserved_) not yet seen by the observer
  TimePoint rx_unobserved_at_{};         // when they were received (the pass's time)

  // Guarded by engine_mu_.
  std::unordered_map<uint32_t, PinnedRange> pinned_;  // by lkey
  size_t pinned_bytes_ = 0;

  // Lock order: engine_mu_, then channel_mu_.
  mutable std::mutex channel_mu_;
  std::unordered_map<uint32_t, CqState> cqs_;
  std::unordered_map<uint32_t, Channel> channels_;
  uint32_t next_channel_ = 1;

  EventQueue<transport::AsyncEvent> async_;

  std::atomic<bool> stop_{false};
  // Threads asleep in io_->wait(): the progress thread and a blocked get_cq_event's
  // (drive_cq_event) may overlap for a moment, so a count.
  std::atomic<int> sleeping_{0};
  // When the last thread to go to sleep in io_->wait() means to wake (Device::now() ns;
  // INT64_MAX while none sleeps): a send from an application thread that arms an earlier
  // timer (the retransmission of its first packet) must wake it (kick).
  std::atomic<int64_t> sleep_until_ns_{INT64_MAX};
  std::atomic<bool> kicked_{false};
  // post_send left its WQEs for the application's next poll (ring_doorbell), or posted one
  // right behind another while the application did not drive: its next poll runs a pass.
  std::atomic<bool> posts_waiting_{false};
  // The parked thread found the I/O taken when the ports' housekeeping was due: the
  // application's next pass, which holds the I/O, runs it.
  std::atomic<bool> maintain_due_{false};
  // Busy-polling handoff: the time (Device::now() ns) of the last application-driven pass,
  // 0 after end_app_driving(); the parked thread sleeps on park_timer_ (park_cv_ if it
  // could not be had), which the application's polls push forward while parked_.
  std::atomic<int64_t> app_drove_ns_{0};
  // Application-driven passes since the last req_notify_cq: an event-driven program polls
  // once or twice between arming its CQ, a busy-polling one thousands of times. Parking
  // needs kBusyPolls of them, so a program about to block never makes the thread park.
  static constexpr uint32_t kBusyPolls = 4;
  std::atomic<uint32_t> app_polls_since_arm_{0};
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  std::unique_ptr<ParkTimer> park_timer_;  // with a progress thread and a handoff
  std::atomic<bool> parked_{false};
  // The channel whose blocked get_cq_event drives the device (0: none), when that waiter
  // left (Device::now() ns), and whether the progress thread is parked for it.
  std::atomic<uint32_t> waiting_channel_{0};
  std::atomic<int64_t> waiter_left_ns_{0};
  std::atomic<bool> parked_for_waiter_{false};
  // Threads blocked in drive_cq_event on their channel while another thread drives.
  std::atomic<int> waiting_elsewhere_{0};
  bool waiter_pass_ = false;   // guarded by io_mu_: the pass running is the waiter's
  TimePoint maintained_at_{};  // guarded by io_mu_: the last maintain_io_locked()
  // How long one park() sleeps at most: the parked thread still runs the ports'
  // housekeeping (progress_loop) at this pace.
  static constexpr Nanos kParkLongest = std::chrono::milliseconds(100);
  static constexpr Nanos kTimerParkMin = std::chrono::microseconds(100);
  // How often the port's housekeeping runs at most when the thread goes to sleep.
  static constexpr Nanos kMaintainIdleEvery = std::chrono::milliseconds(1);
  std::thread thread_;
};

}  // namespace uroce::device
