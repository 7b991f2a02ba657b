// The completion queue's two sides on real threads (transport/cq.hpp): the engine pushes from
// one thread while application threads poll from others, without the device's engine lock.
// Every completion must reach exactly one poller, each poller must see them oldest first,
// and a QP's clean-up or a resize running between polls must neither lose nor repeat a
// completion of another QP. Part of device_unit_test so that the ThreadSanitizer build
// (scripts/test) runs it too.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

#include "transport/cq.hpp"

namespace uroce::test {
namespace {

using transport::Cq;
using transport::Wc;

// A completion numbered `seq` of QP `qpn`, stamped at seq ns.
Cq::PushResult push_numbered(Cq& cq, uint64_t seq, uint32_t qpn) {
  Wc wc;
  wc.wr_id = seq;
  wc.qp_num = qpn;
  wc.byte_len = static_cast<uint32_t>(seq * 7);
  return cq.push(wc, false, TimePoint(static_cast<int64_t>(seq)));
}

// Polls until `stop` is set and the CQ is empty; records what it got, in order. More than
// `pushed` completions can only come from a broken ring (one that hands out entries it never
// held, forever): the test then fails instead of hanging.
void poll_until_stopped(Cq& cq, const std::atomic<bool>& stop, uint64_t pushed,
                        std::vector<Wc>& got) {
  std::array<Wc, 16> batch{};
  for (;;) {
    const bool last_round = stop.load(std::memory_order_acquire);
    const int n = cq.poll(batch);
    ASSERT_GE(n, 0);
    got.insert(got.end(), batch.begin(), batch.begin() + n);
    ASSERT_LE(got.size(), pushed) << "a poller got more completions than were pushed";
    if (n == 0 && last_round) return;
  }
}

// Two threads running poll_until_stopped; `failed()` once either gave up before `stop`, so that
// the producer stops waiting for room a failed poller will never make.
class TwoPollers {
 public:
  TwoPollers(Cq& cq, uint64_t pushed) {
    for (size_t i = 0; i < threads_.size(); ++i) {
      threads_[i] = std::thread([this, &cq, pushed, i] {
        poll_until_stopped(cq, stop_, pushed, got_[i]);
        if (!stop_.load(std::memory_order_acquire)) failed_.store(true);
      });
    }
  }
  [[nodiscard]] bool failed() const { return failed_.load(); }
  // Lets the pollers empty the CQ and end; what each one got, in order.
  const std::array<std::vector<Wc>, 2>& join() {
    stop_.store(true, std::memory_order_release);
    for (auto& t : threads_) t.join();
    return got_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::array<std::vector<Wc>, 2> got_;
  std::array<std::thread, 2> threads_;
};

// Each poller's completions come oldest first, and every one carries what was pushed with it.
void expect_ordered_and_whole(const std::vector<Wc>& got) {
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].byte_len, got[i].wr_id * 7) << "completion " << got[i].wr_id << " torn";
    EXPECT_EQ(got[i].timestamp_ns, static_cast<int64_t>(got[i].wr_id));
    if (i > 0) {
      ASSERT_LT(got[i - 1].wr_id, got[i].wr_id) << "a poller saw completions out of order";
    }
  }
}

TEST(CqRing, EveryCompletionReachesExactlyOnePollerOldestFirst) {
  constexpr uint64_t kCount = 50'000;
  Cq cq(64);  // small, so the producer keeps finding it full and the pollers keep emptying it
  TwoPollers pollers(cq, kCount);
  uint64_t overflows = 0;
  for (uint64_t seq = 0; seq < kCount && !pollers.failed();) {
    if (push_numbered(cq, seq, 5) == Cq::PushResult::kOverflow) {
      ++overflows;  // lost, as a full CQ loses it: push the same number again once one fits
      std::this_thread::yield();
      continue;
    }
    ++seq;
  }
  const auto& got = pollers.join();

  std::vector<uint8_t> seen(kCount, 0);
  for (const std::vector<Wc>& one : got) {
    expect_ordered_and_whole(one);
    for (const Wc& wc : one) {
      ASSERT_LT(wc.wr_id, kCount);
      ++seen[wc.wr_id];
    }
  }
  for (uint64_t seq = 0; seq < kCount; ++seq) {
    ASSERT_EQ(seen[seq], 1) << "completion " << seq << " reached " << int{seen[seq]} << " polls";
  }
  EXPECT_EQ(cq.size(), 0u);
  RecordProperty("overflows_retried", static_cast<int>(overflows));
}

TEST(CqRing, AFullRingLosesTheNewCompletionAndKeepsTheQueuedOnes) {
  Cq cq(4);
  for (uint64_t seq = 0; seq < 4; ++seq) {
    ASSERT_EQ(push_numbered(cq, seq, 5), Cq::PushResult::kStored);
  }
  EXPECT_EQ(push_numbered(cq, 4, 5), Cq::PushResult::kOverflow);
  std::array<Wc, 8> out{};
  ASSERT_EQ(cq.poll(out), 4);
  for (uint64_t seq = 0; seq < 4; ++seq) EXPECT_EQ(out[seq].wr_id, seq);
  // The ring wraps: four more fit where the polled ones were.
  for (uint64_t seq = 10; seq < 14; ++seq) {
    ASSERT_EQ(push_numbered(cq, seq, 5), Cq::PushResult::kStored);
  }
  ASSERT_EQ(cq.poll(std::span(out).first(3)), 3);
  EXPECT_EQ(out[0].wr_id, 10u);
  EXPECT_EQ(out[2].wr_id, 12u);
  ASSERT_EQ(cq.poll(out), 1);
  EXPECT_EQ(out[0].wr_id, 13u);
  EXPECT_EQ(cq.poll(out), 0);
}

TEST(CqRing, ArmedNotificationIsReportedOnceForTheNextCompletion) {
  Cq cq(8);
  EXPECT_EQ(push_numbered(cq, 0, 5), Cq::PushResult::kStored);
  cq.arm(false);
  EXPECT_EQ(push_numbered(cq, 1, 5), Cq::PushResult::kStoredNotify);
  EXPECT_EQ(push_numbered(cq, 2, 5), Cq::PushResult::kStored);
  cq.arm(true);  // solicited only: an unsolicited completion does not fire it
  EXPECT_EQ(cq.push(Wc{}, false, TimePoint(0)), Cq::PushResult::kStored);
  EXPECT_EQ(cq.push(Wc{}, true, TimePoint(0)), Cq::PushResult::kStoredNotify);
}

// The producer cleans one QP's completions out and resizes the ring between pushes, as
// modify_qp(RESET) and ibv_resize_cq do, while two threads poll. QP 1's completions must all
// arrive exactly once; QP 2's may be polled before a clean-up or removed by it, never twice.
TEST(CqRing, CleanUpAndResizeBetweenPushesLoseNothingOfAnotherQp) {
  constexpr uint64_t kCount = 40'000;
  constexpr uint32_t kKeptQp = 1;
  constexpr uint32_t kCleanedQp = 2;
  Cq cq(32);
  TwoPollers pollers(cq, kCount);
  uint64_t removed = 0;
  uint32_t resizes = 0;
  uint32_t resized = 0;
  for (uint64_t seq = 0; seq < kCount && !pollers.failed();) {
    const uint32_t qpn = seq % 3 == 0 ? kCleanedQp : kKeptQp;
    if (push_numbered(cq, seq, qpn) == Cq::PushResult::kOverflow) {
      std::this_thread::yield();
      continue;
    }
    ++seq;
    if (seq % 97 == 0) removed += cq.remove_qp(kCleanedQp);
    if (seq % 1009 == 0) {
      // Alternate between a smaller and a larger ring. The pollers may empty it meanwhile, so
      // whether it holds what is queued is known only to resize: a refusal changes nothing.
      const uint32_t want = resizes++ % 2 == 0 ? 16 : 48;
      const uint32_t before = cq.capacity();
      if (cq.resize(want)) {
        ++resized;
        EXPECT_EQ(cq.capacity(), want);
      } else {
        EXPECT_EQ(cq.capacity(), before);
      }
    }
  }
  const auto& got = pollers.join();

  std::vector<uint8_t> seen(kCount, 0);
  uint64_t cleaned_seen = 0;
  for (const std::vector<Wc>& one : got) {
    expect_ordered_and_whole(one);
    for (const Wc& wc : one) {
      ASSERT_LT(wc.wr_id, kCount);
      ++seen[wc.wr_id];
      if (wc.qp_num == kCleanedQp) ++cleaned_seen;
    }
  }
  for (uint64_t seq = 0; seq < kCount; ++seq) {
    ASSERT_LE(seen[seq], 1) << "completion " << seq << " polled twice";
    if (seq % 3 != 0) {
      ASSERT_EQ(seen[seq], 1) << "QP 1's completion " << seq << " lost";
    }
  }
  // Each of QP 2's completions was either polled or removed.
  EXPECT_EQ(cleaned_seen + removed, (kCount + 2) / 3);
  EXPECT_GT(resized, 0u);
}

}  // namespace
}  // namespace uroce::test
