// PostLock: the lock a queue's producers take around one post (send_queue.hpp,
// recv_queue.hpp). A post holds it for a few dozen nanoseconds, and two threads seldom post to
// one queue at once, so it spins a little, then yields the CPU to whoever holds it (on a
// 2-core host the holder may be preempted). A std::mutex costs two locked instructions per
// post where this costs one (its release is a plain store), and a post makes only a handful.
// mlx5's provider takes a spinlock per queue for the same reason. BasicLockable, for
// std::lock_guard and std::unique_lock.
#pragma once

#include <atomic>
#include <thread>

namespace uroce::transport {

class PostLock {
 public:
  void lock() {
    while (held_.exchange(true, std::memory_order_acquire)) {
      for (int spins = 0; held_.load(std::memory_order_relaxed); ++spins) {
        if (spins < kSpins) {
          relax();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  static constexpr int kSpins = 64;
  static void relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  std::atomic<bool> held_{false};
};

}  // namespace uroce::transport
