// A busy-polling application drives its device (ProgressOptions::app_handoff): its polls
// move the packets while the progress thread is parked, the ACK its pass builds for a
// request leaves right behind the application's reply instead of ahead of it, and a program
// that stops right after its last completion still gets that ACK to its peer. A lone post to
// a QP with nothing outstanding leaves at once; posts to a QP with WRs in flight wait for its
// next poll and leave together (ProgressOptions::batch_posts), as do UD and UC WRs posted back
// to back without a poll between them. Also: a
// responder that takes several requests of one QP in one pass answers them with one ACK, and
// a process about to exit can send what it posted (flush_sends).
#include <array>
#include <chrono>
#include <cstring>
#include <thread>

#include "device_fixture.hpp"

namespace uroce::test {
namespace {

using namespace std::chrono_literals;

// How one side of an RcPair runs (make_fake_device's options).
struct DeviceSpec {
  bool thread = true;         // a progress thread
  Nanos handoff = Nanos(-1);  // ProgressOptions::app_handoff; negative: the default
  bool drives = true;         // ProgressOptions::app_calls_drive
};

// Devices 1 (a) and 2 (b) on one wire, an RC QP on each, connected.
struct RcPair {
  RcPair(DeviceSpec sa, DeviceSpec sb)
      : a(make_fake_device(wire, 1, 0x100, sa.thread, sa.handoff, sa.drives)),
        b(make_fake_device(wire, 2, 0x2000, sb.thread, sb.handoff, sb.drives)),
        qa(a.make_qp(QpType::kRc)),
        qb(b.make_qp(QpType::kRc)) {
    connect_rc_pair(qa, qb);
  }
  FakeWire wire;
  Side a;
  Side b;
  QueuePair qa;
  QueuePair qb;
};

// A signaled RDMA WRITE of `len` bytes at `offset` of `from`'s buffer to the same offset of
// `to`'s; `sge` (the caller's: it must live until the post) describes the source.
SendWr write_wr(Side& from, Side& to, size_t offset, uint32_t len, uint64_t wr_id, Sge& sge) {
  sge = from.mr.sge(offset, len);
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.send_flags = kSendSignaled;
  wr.sg_list = std::span<const Sge>(&sge, 1);
  wr.rdma = {reinterpret_cast<uint64_t>(to.buf.data() + offset), to.mr.rkey()};
  return wr;
}

// Polls `side`'s empty CQ like a busy-polling program, long enough for its progress thread
// to see the polls and park (ProgressOptions::app_handoff): its posts then wait for its polls.
void busy_poll(Side& side) {
  Wc wc;
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(side.cq.poll(std::span<Wc>(&wc, 1)), 0);
    std::this_thread::sleep_for(1ms);
  }
}

// B behaves like a busy-polling program (a perftest or sockperf loop): it polls its empty CQ
// before anything arrives, so its own polls receive A's request. The 10 s handoff keeps B's
// progress thread parked for the whole test: whatever B sends, its application's calls sent.
class BusyPollTest : public ::testing::Test {
 protected:
  BusyPollTest()
      : a_(make_fake_device(wire_, 1, 0x100)),
        b_(make_fake_device(wire_, 2, 0x2000, true, std::chrono::seconds(10))),
        qa_(a_.make_qp(QpType::kRc)),
        qb_(b_.make_qp(QpType::kRc)) {}

  void SetUp() override {
    connect_rc_pair(qa_, qb_);
    post_recv(qa_, a_, 4096, 1);
    post_recv(qb_, b_, 4096, 2);
    busy_poll(b_);
    std::memcpy(a_.buf.data(), "ping....", 8);
    post_send(qa_, a_, 0, 10);
    const Wc r = wait_wc(b_.cq);  // B's polls receive the ping
    ASSERT_EQ(r.status, WcStatus::kSuccess);
    ASSERT_EQ(r.wr_id, 2u);
    ASSERT_EQ(std::memcmp(b_.buf.data() + 4096, "ping....", 8), 0);
  }

  // B posts a signaled 8-byte RDMA WRITE of its buffer at `offset` to the same place in A's.
  void post_write(size_t offset, uint64_t wr_id) {
    Sge sge;
    ASSERT_TRUE(qb_.post_send(write_wr(b_, a_, offset, 8, wr_id, sge)));
  }

  FakeWire wire_;
  Side a_;
  Side b_;
  QueuePair qa_;
  QueuePair qb_;
};

TEST_F(BusyPollTest, TheAckOfTheRequestLeavesRightBehindTheReply) {
  // Nothing from B yet: the ACK of the ping waits for B's next call.
  EXPECT_EQ(opcodes_from(wire_, 2), std::vector<uint8_t>{});
  std::memcpy(b_.buf.data(), "pong....", 8);
  post_send(qb_, b_, 0, 20);
  // The reply is a lone WR on a QP with nothing outstanding: it leaves with the post, not at
  // B's next poll, and the held ACK rides behind it in the same burst.
  EXPECT_EQ(opcodes_from(wire_, 2), (std::vector<uint8_t>{kRcSendOnly, kRcAcknowledge}));
  const std::vector<uint64_t> bursts = bursts_from(wire_, 2);
  ASSERT_EQ(bursts.size(), 2u);
  EXPECT_EQ(bursts[0], bursts[1]);

  const Wc sent = wait_wc(a_.cq);
  const Wc got = wait_wc(a_.cq);
  const Wc& send_wc = sent.wr_id == 10 ? sent : got;
  const Wc& recv_wc = sent.wr_id == 10 ? got : sent;
  EXPECT_EQ(send_wc.wr_id, 10u);
  EXPECT_EQ(send_wc.status, WcStatus::kSuccess);
  EXPECT_EQ(recv_wc.wr_id, 1u);
  EXPECT_EQ(recv_wc.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a_.buf.data() + 4096, "pong....", 8), 0);
}

TEST_F(BusyPollTest, DestroyingTheQpRightAfterTheLastCompletionStillAcks) {
  // B's program is done: it destroys its QP without another call. A must not be left
  // retransmitting to a peer that has gone.
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(opcodes_from(wire_, 2), std::vector<uint8_t>{});
  { QueuePair gone = std::move(qb_); }
  EXPECT_EQ(opcodes_from(wire_, 2), std::vector<uint8_t>{kRcAcknowledge});
  const Wc s = wait_wc(a_.cq);
  EXPECT_EQ(s.wr_id, 10u);
  EXPECT_EQ(s.status, WcStatus::kSuccess);
}

// Like a NIC fetching the WQEs of one doorbell: what a busy-polling program posts between
// two polls to a QP with WRs in flight leaves at the next poll, in one burst (one sendmmsg,
// GSO runs on UDP). The first WRITE finds the QP idle and leaves at once.
TEST_F(BusyPollTest, PostsBetweenTwoPollsLeaveTogetherAtTheNextPoll) {
  for (uint64_t i = 0; i < 3; ++i) {
    std::memset(b_.buf.data() + 256 + i * 8, static_cast<int>('a' + i), 8);
    post_write(256 + i * 8, 30 + i);
    if (i == 0) {
      // Alone on an idle QP: on the wire now, with the held ACK of the ping behind it. It
      // stays outstanding until B's next poll reads A's ACK (B's progress thread is parked).
      EXPECT_EQ(opcodes_from(wire_, 2), (std::vector<uint8_t>{kRcWriteOnly, kRcAcknowledge}));
    }
  }
  EXPECT_EQ(opcodes_from(wire_, 2), (std::vector<uint8_t>{kRcWriteOnly, kRcAcknowledge}));
  // One poll sends the other two (its pass may complete some: A acknowledges fast).
  std::array<Wc, 4> wcs;
  const int first = b_.cq.poll(std::span<Wc>(wcs));
  ASSERT_GE(first, 0);
  EXPECT_EQ(opcodes_from(wire_, 2),
            (std::vector<uint8_t>{kRcWriteOnly, kRcAcknowledge, kRcWriteOnly, kRcWriteOnly}));
  const std::vector<uint64_t> bursts = bursts_from(wire_, 2);
  ASSERT_EQ(bursts.size(), 4u);
  EXPECT_EQ(bursts[0], bursts[1]);
  EXPECT_EQ(bursts[2], bursts[3]);
  EXPECT_NE(bursts[1], bursts[2]);
  for (auto i = static_cast<size_t>(first); i < 3; ++i) wcs[i] = wait_wc(b_.cq);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(wcs[i].wr_id, 30 + i);
    EXPECT_EQ(wcs[i].status, WcStatus::kSuccess);
    EXPECT_EQ(a_.buf[256 + i * 8], static_cast<uint8_t>('a' + i));
    EXPECT_EQ(a_.buf[256 + i * 8 + 7], static_cast<uint8_t>('a' + i));
  }
}

// A poll that finds completions while posts wait sends the posts, and its pass may complete
// more: those go after the ones already found, none overwritten. A has no progress thread:
// its passes, run here, decide when its ACKs leave.
TEST(PostBatching, APollWithPostsWaitingReturnsEveryCompletion) {
  RcPair pair({.thread = false}, {.handoff = std::chrono::seconds(10)});
  auto& [wire, a, b, qa, qb] = pair;
  const auto post_write = [&](uint64_t k) {
    Sge sge;
    ASSERT_TRUE(qb.post_send(write_wr(b, a, k * 8, 8, 30 + k, sge)));
  };
  busy_poll(b);
  post_write(1);  // the QP is idle: 31 leaves at once
  post_write(2);  // 31 is in flight: 32 waits for the poll
  Wc wc;
  ASSERT_EQ(b.cq.poll(std::span<Wc>(&wc, 1)), 0);  // sends 32
  ASSERT_TRUE(a.dev.raw().progress());             // both in, one ACK out
  post_write(3);
  ASSERT_TRUE(b.dev.raw().progress());  // the ACK: 31 and 32 complete; 33 leaves
  ASSERT_TRUE(a.dev.raw().progress());  // 33 in, its ACK out
  post_write(4);                        // posts wait again
  std::array<Wc, 8> wcs;
  // The CQ holds 31 and 32; the poll's pass sends 34 and completes 33.
  const int n = b.cq.poll(std::span<Wc>(wcs));
  ASSERT_EQ(n, 3);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(wcs[static_cast<size_t>(i)].wr_id, 31u + static_cast<uint64_t>(i));
    EXPECT_EQ(wcs[static_cast<size_t>(i)].status, WcStatus::kSuccess);
  }
  EXPECT_EQ(opcodes_from(wire, 2),
            (std::vector<uint8_t>{kRcWriteOnly, kRcWriteOnly, kRcWriteOnly, kRcWriteOnly}));
}

// A list of WRs (ibv_post_send with a chain) rings the doorbell once, after its last WR: the
// three leave in one burst, not one each. B has no progress thread: its post sends.
TEST(PostBatching, AListOfWrsRingsTheDoorbellOnce) {
  RcPair pair({}, {.thread = false});
  auto& [wire, a, b, qa, qb] = pair;
  std::array<Sge, 3> sges;
  std::array<SendWr, 3> wrs;
  for (size_t i = 0; i < 3; ++i) {
    std::memset(b.buf.data() + i * 8, static_cast<int>('x' + i), 8);
    wrs[i] = write_wr(b, a, i * 8, 8, 40 + i, sges[i]);
  }
  ASSERT_TRUE(qb.post_send(std::span<const SendWr>(wrs)));
  EXPECT_EQ(opcodes_from(wire, 2),
            (std::vector<uint8_t>{kRcWriteOnly, kRcWriteOnly, kRcWriteOnly}));
  const std::vector<uint64_t> bursts = bursts_from(wire, 2);
  ASSERT_EQ(bursts.size(), 3u);
  EXPECT_EQ(bursts.front(), bursts.back());
  for (uint64_t i = 0; i < 3; ++i) {
    const Wc c = wait_wc(b.cq);
    EXPECT_EQ(c.wr_id, 40 + i);
    EXPECT_EQ(c.status, WcStatus::kSuccess);
    EXPECT_EQ(a.buf[i * 8 + 7], static_cast<uint8_t>('x' + i));
  }
}

// A busy-polling program that posts and then stops polling is not left waiting: the parked
// progress thread takes over when the handoff runs out and sends what the post queued (the
// second SEND: the first found the QP idle and left with its post).
TEST(PostBatching, APostWithNoPollAfterItLeavesWhenTheHandoffEnds) {
  RcPair pair({}, {.handoff = std::chrono::milliseconds(50)});
  auto& [wire, a, b, qa, qb] = pair;
  post_recv(qa, a, 4096, 1);
  post_recv(qa, a, 4096 + 64, 2);
  busy_poll(b);
  std::memcpy(b.buf.data(), "first...", 8);
  std::memcpy(b.buf.data() + 8, "late....", 8);
  post_send(qb, b, 0, 20);
  post_send(qb, b, 8, 21);
  EXPECT_EQ(opcodes_from(wire, 2), std::vector<uint8_t>{kRcSendOnly});  // the second waits
  const Wc r1 = wait_wc(a.cq);  // no poll on B's side from here
  const Wc r2 = wait_wc(a.cq);
  EXPECT_EQ(r1.wr_id, 1u);
  EXPECT_EQ(r2.wr_id, 2u);
  EXPECT_EQ(r2.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a.buf.data() + 4096, "first...", 8), 0);
  EXPECT_EQ(std::memcmp(a.buf.data() + 4096 + 64, "late....", 8), 0);
}

// UD and UC WRs complete as they leave, so their QP is idle again after every packet. A
// busy-polling program streaming them must still not ring a doorbell (a system call) per WR:
// the first WR since its last poll leaves at once, the ones posted right behind it leave
// together at the next poll, and a WR posted after a poll (a ping-pong) leaves at once again.
// Before, every UD SEND and UC WRITE left alone: one sendmmsg per message, a tenth of RC's
// message rate in `uroce perf send_bw -c UD`.
void check_back_to_back_posts_batch(QpType type) {
  FakeWire wire;
  Side a(make_fake_device(wire, 1, 0x100));
  Side b(make_fake_device(wire, 2, 0x2000, true, std::chrono::seconds(10)));
  QueuePair qa = a.make_qp(type);
  QueuePair qb = b.make_qp(type);
  connect_rc_pair(qa, qb);
  const bool ud = type == QpType::kUd;
  // IBTA 9.2 Table 38: UD SEND Only, UC RDMA WRITE Only with Immediate (whose receive
  // completion on A says the bytes are in place).
  const uint8_t opcode = ud ? 0x64 : 0x2B;
  for (uint64_t i = 0; i < 4; ++i) post_recv(qa, a, 4096 + i * 64, i);  // 40 B GRH + 8 (UD)
  auto ah = b.pd.create_ah(make_ah_attr(fake_gid(1)));
  ASSERT_TRUE(ah.is_ok());
  const auto post = [&](uint64_t k) {
    std::memset(b.buf.data() + k * 8, static_cast<int>('k' + k), 8);
    Sge sge;
    SendWr wr;
    if (ud) {
      sge = b.mr.sge(k * 8, 8);
      wr = ud_send_wr(ah->attr(), qa.qp_num(), sge, 50 + k);
    } else {
      wr = write_wr(b, a, k * 8, 8, 50 + k, sge);
      wr.opcode = WrOpcode::kRdmaWriteWithImm;
      wr.imm_data = static_cast<uint32_t>(k);
    }
    ASSERT_TRUE(qb.post_send(wr));
  };
  busy_poll(b);
  post(0);  // the first since B's last poll: on the wire now
  EXPECT_EQ(opcodes_from(wire, 2), std::vector<uint8_t>{opcode});
  post(1);
  post(2);
  EXPECT_EQ(opcodes_from(wire, 2), std::vector<uint8_t>{opcode});  // 1 and 2 wait for a poll
  std::array<Wc, 4> wcs;
  int n = b.cq.poll(std::span<Wc>(wcs));  // 0's completion; the poll sends 1 and 2
  ASSERT_GE(n, 1);
  EXPECT_EQ(opcodes_from(wire, 2), (std::vector<uint8_t>{opcode, opcode, opcode}));
  std::vector<uint64_t> bursts = bursts_from(wire, 2);
  ASSERT_EQ(bursts.size(), 3u);
  EXPECT_NE(bursts[0], bursts[1]);
  EXPECT_EQ(bursts[1], bursts[2]);
  for (auto i = static_cast<size_t>(n); i < 3; ++i) wcs[i] = wait_wc(b.cq);
  post(3);  // after a poll: at once, in a burst of its own
  EXPECT_EQ(opcodes_from(wire, 2), (std::vector<uint8_t>{opcode, opcode, opcode, opcode}));
  bursts = bursts_from(wire, 2);
  ASSERT_EQ(bursts.size(), 4u);
  EXPECT_NE(bursts[3], bursts[2]);
  wcs[3] = wait_wc(b.cq);
  for (uint64_t k = 0; k < 4; ++k) {
    EXPECT_EQ(wcs[k].wr_id, 50 + k);
    EXPECT_EQ(wcs[k].status, WcStatus::kSuccess);
  }
  for (uint64_t k = 0; k < 4; ++k) {
    const Wc r = wait_wc(a.cq);
    ASSERT_EQ(r.status, WcStatus::kSuccess);
    EXPECT_EQ(r.wr_id, k);
    if (ud) {
      EXPECT_EQ(r.byte_len, 48u);
      EXPECT_EQ(a.buf[4096 + k * 64 + 40], static_cast<uint8_t>('k' + k));
    } else {
      EXPECT_EQ(r.imm_data, k);
      EXPECT_EQ(a.buf[k * 8], static_cast<uint8_t>('k' + k));
      EXPECT_EQ(a.buf[k * 8 + 7], static_cast<uint8_t>('k' + k));
    }
  }
}

TEST(PostBatching, UdSendsPostedBackToBackLeaveTogetherAtTheNextPoll) {
  check_back_to_back_posts_batch(QpType::kUd);
}

TEST(PostBatching, UcWritesPostedBackToBackLeaveTogetherAtTheNextPoll) {
  check_back_to_back_posts_batch(QpType::kUc);
}

// A program that streams UD SENDs and polls until it has their completions never sees an
// empty poll: a UD WR completes as it leaves, so its CQ always has some. Its polls must still
// come to count as driving the device, or every WR rings a doorbell of its own for good
// (perftest's ib_send_bw -c UD ran at 0.15 or 1 M/s, depending on whether one early poll
// happened to find the CQ empty). B has no progress thread: only its own calls send.
TEST(PostBatching, AStreamerWhosePollsAlwaysFindCompletionsComesToBatch) {
  FakeWire wire;
  Side a(make_fake_device(wire, 1, 0x100));
  Side b(make_fake_device(wire, 2, 0x2000, /*progress_thread=*/false));
  QueuePair qa = a.make_qp(QpType::kUd);
  QueuePair qb = b.make_qp(QpType::kUd);
  connect_rc_pair(qa, qb);
  auto ah = b.pd.create_ah(make_ah_attr(fake_gid(1)));
  ASSERT_TRUE(ah.is_ok());
  const Sge sge = b.mr.sge(0, 8);
  SendWr wr = ud_send_wr(ah->attr(), qa.qp_num(), sge, 0);
  constexpr uint64_t kPerRound = 8;
  size_t first_of_round = 0;
  for (uint64_t round = 0; round < 8; ++round) {
    first_of_round = bursts_from(wire, 2).size();
    for (uint64_t k = 0; k < kPerRound; ++k) {
      wr.wr_id = round * kPerRound + k;
      ASSERT_TRUE(qb.post_send(wr));
    }
    std::array<Wc, kPerRound> wcs;
    uint64_t got = 0;
    int empty_polls = 0;
    while (got < kPerRound) {
      const int n = b.cq.poll(std::span<Wc>(wcs).subspan(got));
      ASSERT_GE(n, 0);
      if (n == 0) ++empty_polls;
      got += static_cast<uint64_t>(n);
      ASSERT_LT(empty_polls, 1000);
    }
    for (uint64_t k = 0; k < kPerRound; ++k) {
      EXPECT_EQ(wcs[k].wr_id, round * kPerRound + k);
      EXPECT_EQ(wcs[k].status, WcStatus::kSuccess);
    }
    ASSERT_EQ(empty_polls, 0);  // the case at hand: no poll ever found the CQ empty
  }
  // The last round: the first SEND left with its post, the other seven at the next poll.
  const std::vector<uint64_t> bursts = bursts_from(wire, 2);
  ASSERT_EQ(bursts.size(), first_of_round + kPerRound);
  EXPECT_NE(bursts[first_of_round], bursts[first_of_round + 1]);
  EXPECT_EQ(bursts[first_of_round + 1], bursts.back());
}

// A responder that takes three WRITEs of one QP in one pass sends one ACK, for the last.
TEST(AckCoalescing, ThreeWritesInOnePassGetOneAck) {
  RcPair pair({}, {.thread = false});
  auto& [wire, a, b, qa, qb] = pair;
  for (uint64_t i = 0; i < 3; ++i) {
    std::memset(a.buf.data() + i * 64, static_cast<int>('a' + i), 64);
    Sge sge;
    ASSERT_TRUE(qa.post_send(write_wr(a, b, i * 64, 64, 30 + i, sge)));
  }
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (opcodes_from(wire, 1).size() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(opcodes_from(wire, 1),
            (std::vector<uint8_t>{kRcWriteOnly, kRcWriteOnly, kRcWriteOnly}));
  ASSERT_TRUE(b.dev.raw().progress());  // one pass: all three in, the ACKs out
  ASSERT_EQ(opcodes_from(wire, 2), std::vector<uint8_t>{kRcAcknowledge});
  for (uint64_t i = 0; i < 3; ++i) {
    const Wc wc = wait_wc(a.cq);
    EXPECT_EQ(wc.wr_id, 30 + i);
    EXPECT_EQ(wc.status, WcStatus::kSuccess);
    EXPECT_EQ(b.buf[i * 64], static_cast<uint8_t>('a' + i));
    EXPECT_EQ(b.buf[i * 64 + 63], static_cast<uint8_t>('a' + i));
  }
  EXPECT_EQ(b.dev.counters()[Counter::kSentPkts], 1u);
  EXPECT_EQ(b.dev.counters()[Counter::kRxWriteRequests], 3u);
}

// A process about to exit (rdma_cm's last DREQ) asks the device to send what it posted:
// flush_sends puts it on the wire from the caller's thread, with no progress thread and no
// application pass to do it.
TEST(FlushSends, PostedWorkLeavesWithoutAProgressThreadOrAPass) {
  RcPair pair({.thread = false, .drives = false}, {});
  auto& [wire, a, b, qa, qb] = pair;
  post_recv(qb, b, 4096, 2);
  std::memcpy(a.buf.data(), "bye.....", 8);
  post_send(qa, a, 0, 10);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(opcodes_from(wire, 1), std::vector<uint8_t>{});  // posted, not sent
  EXPECT_TRUE(a.dev.raw().flush_sends());
  EXPECT_EQ(opcodes_from(wire, 1), std::vector<uint8_t>{kRcSendOnly});
  const Wc r = wait_wc(b.cq);
  EXPECT_EQ(r.wr_id, 2u);
  EXPECT_EQ(r.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(b.buf.data() + 4096, "bye.....", 8), 0);
}

// While the application keeps polling, its parked progress thread sleeps: it does not wake
// once per handoff to find the polls still coming (each such wake takes a core from a
// busy-polling thread on a small host). It wakes for the ports' housekeeping, every 100 ms.
TEST(BusyPollParking, TheParkedThreadSleepsWhileTheApplicationKeepsPolling) {
  FakeWire wire;
  Side b(make_fake_device(wire, 2, 0x2000, true, std::chrono::milliseconds(20)));
  busy_poll(b);  // parked from here
  std::this_thread::sleep_for(1ms);
  Wc wc;
  ASSERT_EQ(b.cq.poll(std::span<Wc>(&wc, 1)), 0);
  const int64_t before = progress_thread_switches();
  ASSERT_GE(before, 0);
  // 600 ms of polls (never 10 ms apart): a thread woken every 20 ms handoff would switch
  // about 30 times.
  const auto end = std::chrono::steady_clock::now() + 600ms;
  while (std::chrono::steady_clock::now() < end) {
    ASSERT_EQ(b.cq.poll(std::span<Wc>(&wc, 1)), 0);
    std::this_thread::sleep_for(100us);
  }
  const int64_t woke = progress_thread_switches() - before;
  EXPECT_LE(woke, 12) << "the parked thread woke " << woke << " times in 600 ms";
}

}  // namespace
}  // namespace uroce::test
