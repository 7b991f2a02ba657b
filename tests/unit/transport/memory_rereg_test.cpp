// ibv_rereg_mr in the memory table: the MR keeps its lkey and rkey while its range, PD and
// access change, and every check after it follows the new ones (the old range and the old
// PD are refused, a right taken away is refused); PD references move with the MR. And a QP
// moved to RESET leaves no completion of its own in a CQ (Cq::remove_qp), and ibv_resize_cq's
// ring keeps what is queued (Cq::resize).
#include <gtest/gtest.h>

#include <vector>

#include "transport/cq.hpp"
#include "transport/memory.hpp"

namespace uroce::test {
namespace {

using namespace transport;

constexpr uint32_t kRw = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;

TEST(MemoryRereg, KeysStayWhileRangePdAndAccessChange) {
  MemoryTable t(DeviceLimits{}, 0x5EED);
  const PdId pd1 = t.alloc_pd().value();
  const PdId pd2 = t.alloc_pd().value();
  std::vector<uint8_t> a(4096), b(8192);
  const MrInfo mr = t.reg_mr(pd1, a.data(), a.size(), kRw).value();
  uint8_t* p = nullptr;
  ASSERT_EQ(t.check_remote(pd1, 0, mr.rkey, reinterpret_cast<uint64_t>(a.data()), 8,
                           kAccessRemoteWrite, &p),
            AccessError::kOk);

  // New translation: the keys are the same, the old range is out, the new one in.
  const MrInfo moved = t.rereg_mr(mr.lkey, pd1, b.data(), b.size(), kRw).value();
  EXPECT_EQ(moved.lkey, mr.lkey);
  EXPECT_EQ(moved.rkey, mr.rkey);
  EXPECT_EQ(moved.length, b.size());
  EXPECT_EQ(t.check_remote(pd1, 0, mr.rkey, reinterpret_cast<uint64_t>(a.data()), 8,
                           kAccessRemoteWrite, &p),
            AccessError::kOutOfRange);
  EXPECT_EQ(t.check_remote(pd1, 0, mr.rkey, reinterpret_cast<uint64_t>(b.data()) + 8000, 8,
                           kAccessRemoteWrite, &p),
            AccessError::kOk);
  EXPECT_EQ(p, b.data() + 8000);
  EXPECT_EQ(
      t.check_local(pd1, mr.lkey, reinterpret_cast<uint64_t>(b.data()), 16, kAccessLocalWrite, &p),
      AccessError::kOk);

  // New access without remote write: a WRITE with the same rkey is refused, a READ is not.
  ASSERT_TRUE(
      t.rereg_mr(mr.lkey, pd1, b.data(), b.size(), kAccessLocalWrite | kAccessRemoteRead).is_ok());
  EXPECT_EQ(t.check_remote(pd1, 0, mr.rkey, reinterpret_cast<uint64_t>(b.data()), 8,
                           kAccessRemoteWrite, &p),
            AccessError::kNoAccess);
  EXPECT_EQ(t.check_remote(pd1, 0, mr.rkey, reinterpret_cast<uint64_t>(b.data()), 8,
                           kAccessRemoteRead, &p),
            AccessError::kOk);

  // New PD: the old PD's QPs are refused; the PD reference moved (pd1 can go, pd2 cannot).
  ASSERT_TRUE(t.rereg_mr(mr.lkey, pd2, b.data(), b.size(), kRw).is_ok());
  EXPECT_EQ(t.check_remote(pd1, 0, mr.rkey, reinterpret_cast<uint64_t>(b.data()), 8,
                           kAccessRemoteWrite, &p),
            AccessError::kBadPd);
  EXPECT_EQ(t.check_remote(pd2, 0, mr.rkey, reinterpret_cast<uint64_t>(b.data()), 8,
                           kAccessRemoteWrite, &p),
            AccessError::kOk);
  EXPECT_EQ(t.dealloc_pd(pd2).code(), EBUSY);
  EXPECT_TRUE(t.dealloc_pd(pd1).is_ok());
}

TEST(MemoryRereg, RefusedChangesLeaveTheMrAsItWas) {
  MemoryTable t(DeviceLimits{}, 1);
  const PdId pd = t.alloc_pd().value();
  std::vector<uint8_t> a(4096);
  const MrInfo mr = t.reg_mr(pd, a.data(), a.size(), kRw).value();
  // Remote write without local write, a PD that does not exist, an unknown key.
  EXPECT_EQ(t.rereg_mr(mr.lkey, pd, a.data(), a.size(), kAccessRemoteWrite).status().code(),
            EINVAL);
  EXPECT_EQ(t.rereg_mr(mr.lkey, PdId{99}, a.data(), a.size(), kRw).status().code(), EINVAL);
  EXPECT_EQ(t.rereg_mr(mr.lkey ^ 0x100, pd, a.data(), a.size(), kRw).status().code(), EINVAL);
  uint8_t* p = nullptr;
  EXPECT_EQ(t.check_remote(pd, 0, mr.rkey, reinterpret_cast<uint64_t>(a.data()), 8,
                           kAccessRemoteWrite, &p),
            AccessError::kOk);
}

TEST(CqRemoveQp, DropsOneQpsCompletionsAndKeepsTheOthersInOrder) {
  Cq cq(4);
  // Wrap the ring: push 3, poll 2, push 3 more (head in the middle).
  auto wc = [](uint32_t qpn, uint64_t id) {
    Wc w;
    w.qp_num = qpn;
    w.wr_id = id;
    return w;
  };
  cq.push(wc(1, 0), false, TimePoint{});
  cq.push(wc(1, 0), false, TimePoint{});
  cq.push(wc(7, 1), false, TimePoint{});
  std::vector<Wc> out(4);
  ASSERT_EQ(cq.poll(std::span<Wc>(out.data(), 2)), 2);
  cq.push(wc(9, 2), false, TimePoint{});
  cq.push(wc(7, 3), false, TimePoint{});
  cq.push(wc(9, 4), false, TimePoint{});
  EXPECT_EQ(cq.remove_qp(7), 2u);
  EXPECT_EQ(cq.size(), 2u);
  ASSERT_EQ(cq.poll(out), 2);
  EXPECT_EQ(out[0].wr_id, 2u);
  EXPECT_EQ(out[1].wr_id, 4u);
  EXPECT_EQ(cq.remove_qp(9), 0u);
}

TEST(CqResize, KeepsQueuedCompletionsInOrderAndRefusesTooSmall) {
  Cq cq(3);
  for (uint64_t id = 0; id < 3; ++id) {
    Wc w;
    w.wr_id = id;
    cq.push(w, false, TimePoint{});
  }
  std::vector<Wc> out(8);
  ASSERT_EQ(cq.poll(std::span<Wc>(out.data(), 1)), 1);  // head moves off slot 0
  Wc w;
  w.wr_id = 3;
  cq.push(w, false, TimePoint{});  // wraps
  EXPECT_FALSE(cq.resize(2));      // 3 queued
  EXPECT_EQ(cq.capacity(), 3u);
  ASSERT_TRUE(cq.resize(7));
  EXPECT_EQ(cq.capacity(), 7u);
  ASSERT_EQ(cq.poll(out), 3);
  EXPECT_EQ(out[0].wr_id, 1u);
  EXPECT_EQ(out[1].wr_id, 2u);
  EXPECT_EQ(out[2].wr_id, 3u);
  ASSERT_TRUE(cq.resize(1));
  EXPECT_EQ(cq.capacity(), 1u);
}

}  // namespace
}  // namespace uroce::test
