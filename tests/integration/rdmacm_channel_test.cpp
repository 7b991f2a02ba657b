// librdmacm drop-in event channels (src/rdmacm/event_channel.cpp), linked directly: a program
// may destroy a channel while another of its threads waits on it (rping's main thread does,
// after rdma_destroy_id, while its CM thread goes back into rdma_get_cm_event). As with
// rdma-core, whose waiter sits in read() on the closed fd, the waiter stays blocked until the
// program exits (woken with an error, rping's CM thread would exit(255)), and it touches no
// freed memory (the ASan tree runs this too).
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace {

using std::chrono::milliseconds;

// A thread waiting on `ch` for an event; it is left blocked (detached) at the end.
void expect_still_waiting_after_destroy(rdma_event_channel* ch, bool destroy_first) {
  if (destroy_first) rdma_destroy_event_channel(ch);
  auto returned = std::make_shared<std::atomic<bool>>(false);
  std::thread waiter([ch, returned] {
    rdma_cm_event* ev = nullptr;
    (void)rdma_get_cm_event(ch, &ev);
    *returned = true;
  });
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(returned->load()) << "no event was queued: it must still wait";
  if (!destroy_first) rdma_destroy_event_channel(ch);
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(returned->load()) << "woken by the destroy";
  waiter.detach();
}

TEST(RdmacmChannel, DestroyingAChannelLeavesItsWaiterBlocked) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  expect_still_waiting_after_destroy(ch, false);
}

// The CM thread of such a program comes back to rdma_get_cm_event after the destroy.
TEST(RdmacmChannel, AWaitOnADestroyedChannelBlocks) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  expect_still_waiting_after_destroy(ch, true);
}

}  // namespace
