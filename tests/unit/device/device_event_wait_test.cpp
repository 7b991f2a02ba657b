// A thread blocked in get_cq_event drives its device (Device::drive_cq_event): its own passes
// receive the packet that completes the WR, the ACK that pass builds leaves behind the
// program's reply, the progress thread sleeps through an event-driven ping-pong, the waiter
// runs the engine's timers (a retransmission), an event raised by another thread's call wakes
// it, a second blocked thread waits on its own channel, and a timeout ends the wait. The event
// its own pass raises reaches it without the channel's eventfd, and the fd still tells every
// other queued event.
//
// Where a missed wake-up would only make an event late, the device's longest sleep
// (ProgressOptions::max_sleep) is a minute and the wait's timeout 20 s, so the bug shows as
// EAGAIN instead of a slower pass.
#include <poll.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

#include "device_fixture.hpp"

namespace uroce::test {
namespace {

using namespace std::chrono_literals;

constexpr Nanos kMinute = std::chrono::minutes(1);
constexpr Nanos kLongHandoff = std::chrono::seconds(10);
constexpr Nanos kEventTimeout = std::chrono::seconds(20);

// A completion channel on `side`'s device and a CQ on it, for RC QPs whose completions go
// there. Declare the QPs after it: they must go first.
struct Armed {
  explicit Armed(Side& side)
      : channel(std::move(side.dev.create_comp_channel().value())),
        cq(std::move(side.dev.create_cq(256, &channel).value())) {}

  QueuePair make_qp(Side& side) const {
    QpInitAttr init;
    init.qp_type = QpType::kRc;
    init.send_cq = cq.id();
    init.recv_cq = cq.id();
    init.cap = QpCap{256, 256, 4, 4, 64};
    auto r = side.pd.create_qp(init);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return std::move(r.value());
  }

  CompletionChannel channel;
  CompletionQueue cq;
};

// How the two sides of an EventPair run (make_fake_device's options); negative: the default.
struct PairSpec {
  bool a_thread = true;
  bool b_thread = true;
  Nanos b_handoff = Nanos(-1);
  Nanos b_max_sleep = Nanos(-1);
  bool by_reference = false;  // FakeWire::by_reference
};

// Device 1 (a) and device 2 (b) on one wire, an RC QP on each, connected (path MTU 1024,
// local ACK timeout 14: 67 ms); b's QP completes on a CQ with a channel (eb).
struct EventPair {
  explicit EventPair(const PairSpec& spec)
      : a((wire.by_reference = spec.by_reference, make_fake_device(wire, 1, 0x100, spec.a_thread))),
        b(make_fake_device(wire, 2, 0x2000, spec.b_thread, spec.b_handoff, true, nullptr,
                           spec.b_max_sleep)),
        eb(b),
        qa(a.make_qp(QpType::kRc)),
        qb(eb.make_qp(b)) {
    connect_rc_pair(qa, qb);
  }
  FakeWire wire;
  Side a;
  Side b;
  Armed eb;
  QueuePair qa;
  QueuePair qb;
};

// Devices 1 (a) and 2 (b), two RC QP pairs; b's QPs complete on two CQs with a channel each
// (e1, e2). b sleeps at most a minute and hands over after b_handoff (negative: the default).
struct TwoChannels {
  explicit TwoChannels(Nanos b_handoff)
      : a(make_fake_device(wire, 1, 0x100)),
        b(make_fake_device(wire, 2, 0x2000, true, b_handoff, true, nullptr, kMinute)),
        e1(b),
        e2(b),
        qa1(a.make_qp(QpType::kRc)),
        qa2(a.make_qp(QpType::kRc)),
        qb1(e1.make_qp(b)),
        qb2(e2.make_qp(b)) {
    connect_rc_pair(qa1, qb1);
    connect_rc_pair(qa2, qb2);
  }
  FakeWire wire;
  Side a;
  Side b;
  Armed e1;
  Armed e2;
  QueuePair qa1;
  QueuePair qa2;
  QueuePair qb1;
  QueuePair qb2;
};

// get_event on another thread; join() returns its result. A wake-up the waiter missed shows
// as an event taken only when the wait's timeout (20 s) ended its sleep: joined_in_time()
// tells it from one taken at once.
class BlockedGet {
 public:
  BlockedGet(CompletionChannel& channel, Nanos timeout)
      : thread_([this, &channel, timeout] {
          const auto start = std::chrono::steady_clock::now();
          result_.emplace(channel.get_event(timeout));
          waited_ = std::chrono::steady_clock::now() - start;
        }) {}
  Result<CqId> join() {
    thread_.join();
    return *result_;
  }
  [[nodiscard]] bool joined_in_time() const { return waited_ < kEventTimeout / 2; }

 private:
  std::optional<Result<CqId>> result_;
  Nanos waited_{};
  std::thread thread_;
};

// Polls `armed`'s CQ until `want` completions came, blocking in get_event between polls as an
// event-driven program does (poll, arm, poll again, wait). Fails the test on a wait that
// ends without an event.
std::vector<Wc> event_driven_wait(Armed& armed, size_t want) {
  std::vector<Wc> got;
  std::array<Wc, 8> wcs{};
  auto drain = [&] {
    const int n = armed.cq.poll(std::span<Wc>(wcs));
    for (int i = 0; i < n; ++i) got.push_back(wcs[static_cast<size_t>(i)]);
  };
  drain();
  while (got.size() < want) {
    EXPECT_TRUE(armed.cq.req_notify(false));
    drain();  // a completion between the poll and the arming raised no event
    if (got.size() >= want) break;
    const Result<CqId> ev = armed.channel.get_event(kEventTimeout);
    EXPECT_TRUE(ev.is_ok()) << "after " << got.size() << " of " << want
                            << " completions: " << ev.status().message();
    if (!ev) break;
    EXPECT_EQ(*ev, armed.cq.id());
    armed.cq.ack_events(1);
    drain();
  }
  return got;
}

// B has no progress thread: the blocked get_cq_event is the only thing that moves B's
// packets, so what B sends is exactly what the waiter's pass and the program's calls sent.
// Also with a PacketIo that takes payloads by reference (UDP does) and a 1 KiB reply, whose
// payload is then sent from B's MR while the engine is locked (Device::send_referenced_locked):
// its ACK must ride along all the same.
TEST(BlockingGetEvent, TheWaitersPassHoldsItsAckToLeaveBehindTheReply) {
  for (const bool by_reference : {false, true}) {
    SCOPED_TRACE(by_reference ? "payloads by reference" : "payloads copied");
    EventPair p({.b_thread = false, .by_reference = by_reference});
    auto& [wire, a, b, eb, qa, qb] = p;  // path MTU 1024: a 1 KiB reply is one packet
    const uint32_t reply_len = by_reference ? 1024 : 8;
    const Sge reply_to = a.mr.sge(4096, reply_len);
    ASSERT_TRUE(qa.post_recv(RecvWr{1, std::span<const Sge>(&reply_to, 1)}));
    post_recv(qb, b, 4096, 2);
    ASSERT_TRUE(eb.cq.req_notify(false));

    BlockedGet get(eb.channel, kEventTimeout);
    std::memcpy(a.buf.data(), "ping....", 8);
    post_send(qa, a, 0, 10);
    const Result<CqId> ev = get.join();
    ASSERT_TRUE(ev.is_ok()) << ev.status().message();
    EXPECT_EQ(*ev, eb.cq.id());
    eb.cq.ack_events(1);
    // The waiter's pass received the SEND and raised the event; its ACK waits for the reply.
    EXPECT_EQ(opcodes_from(wire, 2), std::vector<uint8_t>{});
    Wc wc;
    ASSERT_EQ(eb.cq.poll(std::span<Wc>(&wc, 1)), 1);
    EXPECT_EQ(wc.wr_id, 2u);
    EXPECT_EQ(wc.status, WcStatus::kSuccess);
    EXPECT_EQ(std::memcmp(b.buf.data() + 4096, "ping....", 8), 0);

    for (uint32_t i = 0; i < reply_len; ++i) b.buf[i] = static_cast<uint8_t>(i * 7 + 1);
    post_send(qb, b, 0, 20, reply_len);
    EXPECT_EQ(opcodes_from(wire, 2), (std::vector<uint8_t>{kRcSendOnly, kRcAcknowledge}));
    const std::vector<uint64_t> bursts = bursts_from(wire, 2);
    ASSERT_EQ(bursts.size(), 2u);
    EXPECT_EQ(bursts[0], bursts[1]);  // one system call of a real driver

    const Wc first = wait_wc(a.cq);
    const Wc second = wait_wc(a.cq);
    EXPECT_EQ(first.status, WcStatus::kSuccess);
    EXPECT_EQ(second.status, WcStatus::kSuccess);
    EXPECT_EQ(first.wr_id + second.wr_id, 11u);  // the SEND (10) and the RECV (1)
    EXPECT_EQ(std::memcmp(a.buf.data() + 4096, b.buf.data(), reply_len), 0);
    const Wc sent = wait_wc(eb.cq);  // B's own SEND, acked by A
    EXPECT_EQ(sent.wr_id, 20u);
    EXPECT_EQ(sent.status, WcStatus::kSuccess);
  }
}

// Before, every packet B received woke B's progress thread, which signalled the channel
// and woke the program: with A answering 200 us later, the thread went to sleep and woke
// again once per round. Now B's blocked get_cq_event receives the packet and the thread stays
// parked. A has no progress thread, so B's is the process's only one (its switches counted).
TEST(BlockingGetEvent, TheProgressThreadSleepsThroughAnEventDrivenPingPong) {
  EventPair p({.a_thread = false, .b_handoff = kLongHandoff});
  auto& [wire, a, b, eb, qa, qb] = p;
  constexpr int kRounds = 200;

  // A: a busy-polling echo that answers each message 200 us after it came, with its bytes.
  std::atomic<bool> stop{false};
  for (uint64_t i = 0; i < 8; ++i) post_recv(qa, a, 4096 + i * 64, 100 + i);
  std::thread echo([&] {
    while (!stop.load()) {
      Wc wc;
      if (a.cq.poll(std::span<Wc>(&wc, 1)) != 1 || wc.opcode != WcOpcode::kRecv) continue;
      std::this_thread::sleep_for(200us);
      const size_t slot = wc.wr_id - 100;
      std::memcpy(a.buf.data() + slot * 64, a.buf.data() + 4096 + slot * 64, 8);
      post_send(qa, a, slot * 64, 200 + slot);
      post_recv(qa, a, 4096 + slot * 64, wc.wr_id);
    }
  });

  // One round before counting: the thread wakes once to see the first wait and park.
  const int64_t before_first = progress_thread_switches();
  ASSERT_GE(before_first, 0);
  int64_t before = before_first;
  for (int round = 0; round < kRounds; ++round) {
    if (round == 1) before = progress_thread_switches();
    post_recv(qb, b, 8192, 1000 + static_cast<uint64_t>(round));
    char msg[8];
    std::snprintf(msg, sizeof msg, "r%06d", round);
    std::memcpy(b.buf.data(), msg, 8);
    post_send(qb, b, 0, static_cast<uint64_t>(round));
    const std::vector<Wc> wcs = event_driven_wait(eb, 2);  // the SEND and the echo
    ASSERT_EQ(wcs.size(), 2u) << "round " << round;
    for (const Wc& wc : wcs) ASSERT_EQ(wc.status, WcStatus::kSuccess) << "round " << round;
    ASSERT_EQ(std::memcmp(b.buf.data() + 8192, msg, 8), 0) << "round " << round;
  }
  const int64_t woke = progress_thread_switches() - before;
  stop.store(true);
  echo.join();
  EXPECT_LE(woke, 20) << "B's progress thread woke " << woke << " times in " << kRounds - 1
                      << " rounds";
}

// The waiter holds no lock while it sleeps in the PacketIo's wait(); a call of another thread
// that raises an event (a move to ERR flushes a receive) must wake it: the progress thread is
// parked, and the waiter would sleep out its 20 s.
TEST(BlockingGetEvent, AnEventRaisedByAnotherThreadsCallWakesTheWaiter) {
  EventPair p({.b_handoff = kLongHandoff, .b_max_sleep = kMinute});
  auto& [wire, a, b, eb, qa, qb] = p;
  post_recv(qb, b, 4096, 7);
  ASSERT_TRUE(eb.cq.req_notify(false));

  BlockedGet get(eb.channel, kEventTimeout);
  std::this_thread::sleep_for(50ms);  // most likely asleep by now; either order must work
  QpAttr err;
  err.qp_state = QpState::kErr;
  ASSERT_TRUE(qb.modify(err, kQpState));
  const Result<CqId> ev = get.join();
  ASSERT_TRUE(ev.is_ok()) << ev.status().message();
  EXPECT_TRUE(get.joined_in_time()) << "the event waited for the end of the waiter's sleep";
  EXPECT_EQ(*ev, eb.cq.id());
  eb.cq.ack_events(1);
  Wc wc;
  ASSERT_EQ(eb.cq.poll(std::span<Wc>(&wc, 1)), 1);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.status, WcStatus::kWrFlushErr);
}

// B's SEND is lost; only B's timer can send it again. B's progress thread is parked for the
// blocked get_cq_event, so the waiter must run the engine's timers itself.
TEST(BlockingGetEvent, TheWaiterRunsTheRetransmissionTimer) {
  EventPair p({.b_handoff = kLongHandoff, .b_max_sleep = kMinute});
  auto& [wire, a, b, eb, qa, qb] = p;
  post_recv(qa, a, 4096, 1);
  ASSERT_TRUE(eb.cq.req_notify(false));

  wire.drop_all.store(true);
  std::memcpy(b.buf.data(), "resent..", 8);
  post_send(qb, b, 0, 30);
  std::thread heal([&] {
    std::this_thread::sleep_for(30ms);
    wire.drop_all.store(false);
  });
  const Result<CqId> ev = eb.channel.get_event(kEventTimeout);
  heal.join();
  ASSERT_TRUE(ev.is_ok()) << ev.status().message();
  eb.cq.ack_events(1);
  Wc wc;
  ASSERT_EQ(eb.cq.poll(std::span<Wc>(&wc, 1)), 1);
  EXPECT_EQ(wc.wr_id, 30u);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  const Wc got = wait_wc(a.cq);
  EXPECT_EQ(got.wr_id, 1u);
  EXPECT_EQ(std::memcmp(a.buf.data() + 4096, "resent..", 8), 0);
  const std::optional<transport::Counters> c = b.dev.raw().qp_counters(qb.qp_num());
  ASSERT_TRUE(c.has_value());
  EXPECT_GE((*c)[transport::Counter::kRetransmittedPkts], 1u);  // more if the heal came late
}

// One thread drives; the other, finding the device driven, waits on its own channel and is
// woken through it. Both get their own CQ's event, round after round.
TEST(BlockingGetEvent, TwoThreadsBlockedOnTwoChannelsEachGetTheirOwnEvent) {
  TwoChannels p(Nanos(-1));
  auto& [wire, a, b, e1, e2, qa1, qa2, qb1, qb2] = p;
  for (uint64_t round = 0; round < 50; ++round) {
    post_recv(qb1, b, 4096, round);
    post_recv(qb2, b, 8192, round);
    ASSERT_TRUE(e1.cq.req_notify(false));
    ASSERT_TRUE(e2.cq.req_notify(false));
    BlockedGet get1(e1.channel, kEventTimeout);
    BlockedGet get2(e2.channel, kEventTimeout);
    std::memcpy(a.buf.data(), "first...", 8);
    std::memcpy(a.buf.data() + 64, "second..", 8);
    post_send(qa1, a, 0, 1);
    post_send(qa2, a, 64, 2);
    const Result<CqId> ev1 = get1.join();
    const Result<CqId> ev2 = get2.join();
    ASSERT_TRUE(ev1.is_ok()) << "round " << round << ": " << ev1.status().message();
    ASSERT_TRUE(ev2.is_ok()) << "round " << round << ": " << ev2.status().message();
    ASSERT_TRUE(get1.joined_in_time() && get2.joined_in_time()) << "round " << round;
    EXPECT_EQ(*ev1, e1.cq.id());
    EXPECT_EQ(*ev2, e2.cq.id());
    e1.cq.ack_events(1);
    e2.cq.ack_events(1);
    ASSERT_EQ(wait_wc(e1.cq).wr_id, round);
    ASSERT_EQ(wait_wc(e2.cq).wr_id, round);
    ASSERT_EQ(std::memcmp(b.buf.data() + 4096, "first...", 8), 0);
    ASSERT_EQ(std::memcmp(b.buf.data() + 8192, "second..", 8), 0);
    ASSERT_EQ(wait_wc(a.cq).status, WcStatus::kSuccess);
    ASSERT_EQ(wait_wc(a.cq).status, WcStatus::kSuccess);
  }
}

// The driving waiter gets its event and leaves while a second thread is still blocked on its
// own channel: the progress thread must take over at once. With a one-minute handoff nobody
// would drive for the second thread otherwise, and its wait would run out.
TEST(BlockingGetEvent, ADriverThatLeavesHandsTheOtherWaitersToTheProgressThread) {
  TwoChannels p(kMinute);
  auto& [wire, a, b, e1, e2, qa1, qa2, qb1, qb2] = p;
  post_recv(qb1, b, 4096, 1);
  post_recv(qb2, b, 8192, 2);
  ASSERT_TRUE(e1.cq.req_notify(false));
  ASSERT_TRUE(e2.cq.req_notify(false));

  BlockedGet first(e1.channel, kEventTimeout);
  std::this_thread::sleep_for(50ms);  // most likely driving by now
  BlockedGet second(e2.channel, kEventTimeout);
  std::this_thread::sleep_for(50ms);  // most likely waiting on its channel by now
  post_send(qa1, a, 0, 10);
  const Result<CqId> ev1 = first.join();  // the driver has its event and has left
  ASSERT_TRUE(ev1.is_ok()) << ev1.status().message();
  post_send(qa2, a, 64, 20);
  const Result<CqId> ev2 = second.join();
  ASSERT_TRUE(ev2.is_ok()) << ev2.status().message();
  EXPECT_TRUE(second.joined_in_time()) << "the second waiter's event waited for its timeout";
  EXPECT_EQ(*ev2, e2.cq.id());
  e1.cq.ack_events(1);
  e2.cq.ack_events(1);
  EXPECT_EQ(wait_wc(e1.cq).wr_id, 1u);
  EXPECT_EQ(wait_wc(e2.cq).wr_id, 2u);
}

TEST(BlockingGetEvent, ATimeoutEndsTheWaitAndTheNextWaitStillGetsItsEvent) {
  for (const bool thread : {true, false}) {
    SCOPED_TRACE(thread ? "with a progress thread" : "without a progress thread");
    EventPair p({.b_thread = thread});
    auto& [wire, a, b, eb, qa, qb] = p;
    post_recv(qb, b, 4096, 5);
    ASSERT_TRUE(eb.cq.req_notify(false));
    EXPECT_EQ(eb.channel.get_event(30ms).status().code(), EAGAIN);
    post_send(qa, a, 0, 6);
    const Result<CqId> ev = eb.channel.get_event(kEventTimeout);
    ASSERT_TRUE(ev.is_ok()) << ev.status().message();
    eb.cq.ack_events(1);
    EXPECT_EQ(wait_wc(eb.cq).wr_id, 5u);
    // B's next call sends the ACK its waiter's pass held for a reply (without a progress
    // thread nothing else would).
    Wc none;
    EXPECT_EQ(eb.cq.poll(std::span<Wc>(&none, 1)), 0);
    EXPECT_EQ(wait_wc(a.cq).wr_id, 6u);
  }
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

// EventQueue::push_for_next_pop, the waiter's own event: the eventfd's count never includes
// it, a pop takes it without a read, and a second such push (two events for the waiter's
// channel in one pass) is signalled, so the fd is readable while anything but the one event
// its own thread takes at once is queued.
TEST(BlockingGetEvent, TheWaitersOwnEventSkipsTheEventfdAndAnyOtherIsSignalled) {
  device::EventQueue<int> q;
  ASSERT_TRUE(q.valid());
  q.push_for_next_pop(1);
  EXPECT_FALSE(readable(q.fd()));
  ASSERT_EQ(*q.pop(Nanos::zero()), 1);
  EXPECT_EQ(q.pop(Nanos::zero()).status().code(), EAGAIN);

  q.push_for_next_pop(2);
  q.push_for_next_pop(3);  // one unsignalled item at a time: this one is signalled
  EXPECT_TRUE(readable(q.fd()));
  q.push(4);
  ASSERT_EQ(*q.pop(Nanos::zero()), 2);
  EXPECT_TRUE(readable(q.fd()));
  ASSERT_EQ(*q.pop(Nanos::zero()), 3);
  EXPECT_TRUE(readable(q.fd()));
  ASSERT_EQ(*q.pop(Nanos::zero()), 4);
  EXPECT_FALSE(readable(q.fd()));
  EXPECT_EQ(q.pop(Nanos::zero()).status().code(), EAGAIN);

  // The unsignalled token frees up once taken, whichever item the pop took.
  q.push(5);
  q.push_for_next_pop(6);
  ASSERT_EQ(*q.pop(Nanos::zero()), 5);  // takes the unsignalled token
  EXPECT_TRUE(readable(q.fd()));        // 6 is behind the signalled one
  q.push_for_next_pop(7);               // the token is free again
  ASSERT_EQ(*q.pop(Nanos::zero()), 6);
  ASSERT_EQ(*q.pop(Nanos::zero()), 7);
  EXPECT_FALSE(readable(q.fd()));
}

// Two CQs on one channel complete in the same pass of the blocked thread (B has no progress
// thread, and both SENDs wait on B's wire before it blocks): it gets one event, and the
// channel's fd is readable for the other until a second get takes it.
TEST(BlockingGetEvent, TwoEventsOfTheWaitersOwnPassLeaveTheSecondOnTheChannelsFd) {
  FakeWire wire;
  Side a(make_fake_device(wire, 1, 0x100));
  Side b(make_fake_device(wire, 2, 0x2000, false));
  Armed eb(b);
  CompletionQueue cq2 = std::move(b.dev.create_cq(256, &eb.channel).value());
  QueuePair qa1 = a.make_qp(QpType::kRc);
  QueuePair qa2 = a.make_qp(QpType::kRc);
  QueuePair qb1 = eb.make_qp(b);
  QpInitAttr init;
  init.qp_type = QpType::kRc;
  init.send_cq = cq2.id();
  init.recv_cq = cq2.id();
  init.cap = QpCap{256, 256, 4, 4, 64};
  QueuePair qb2 = std::move(b.pd.create_qp(init).value());
  connect_rc_pair(qa1, qb1);
  connect_rc_pair(qa2, qb2);

  post_recv(qb1, b, 4096, 1);
  post_recv(qb2, b, 8192, 2);
  ASSERT_TRUE(eb.cq.req_notify(false));
  ASSERT_TRUE(cq2.req_notify(false));
  const uint64_t before = wire.delivered.load();
  post_send(qa1, a, 0, 11);
  post_send(qa2, a, 64, 12);
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (wire.delivered.load() < before + 2 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(wire.delivered.load(), before + 2);
  EXPECT_FALSE(readable(eb.channel.fd()));  // nothing moves B's packets but the waiter

  const Result<CqId> first = eb.channel.get_event(kEventTimeout);
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  EXPECT_TRUE(readable(eb.channel.fd()));
  const Result<CqId> second = eb.channel.get_event(Nanos::zero());
  ASSERT_TRUE(second.is_ok()) << second.status().message();
  EXPECT_NE(*first, *second);
  EXPECT_TRUE(*first == eb.cq.id() || *first == cq2.id());
  EXPECT_TRUE(*second == eb.cq.id() || *second == cq2.id());
  EXPECT_FALSE(readable(eb.channel.fd()));
  eb.cq.ack_events(1);
  cq2.ack_events(1);
  EXPECT_EQ(wait_wc(eb.cq).wr_id, 1u);
  EXPECT_EQ(wait_wc(cq2).wr_id, 2u);
}

}  // namespace
}  // namespace uroce::test
