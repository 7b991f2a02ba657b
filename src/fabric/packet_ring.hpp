// A fixed-capacity FIFO of queued packet descriptors, one per egress queue of the switch
// model (switch_queue.hpp). The storage is allocated once at construction, so the data path
// never allocates; push fails (returns false) when the ring is full.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "uroce/vocab/time.hpp"

namespace uroce::fabric {

// What the model knows of a packet: its length, where it came from and its priority. The bytes stay
// with the caller, found again by `cookie` (a frame slot, a simulator packet id, ...).
struct Packet {
  uint32_t bytes = 0;    // length that occupies buffer and link (the Ethernet frame)
  uint32_t ingress = 0;  // ingress port, for per-ingress (PFC) accounting
  uint64_t cookie = 0;   // the caller's handle, returned unchanged
  bool ect = false;      // ECN-capable (ECT(0), ECT(1) or already CE): may be marked
  uint8_t priority = 0;  // 802.1p priority / traffic class, 0..7 (switch_queue.hpp)
};

struct QueuedPacket {
  Packet packet;
  TimePoint enqueued_at{};
  bool marked = false;  // already marked at enqueue
};

class PacketRing {
 public:
  explicit PacketRing(size_t capacity) : slots_(capacity) {}

  [[nodiscard]] bool push(const QueuedPacket& p) {
    if (count_ == slots_.size()) return false;
    slots_[(head_ + count_) % slots_.size()] = p;
    ++count_;
    return true;
  }
  // Precondition: !empty().
  QueuedPacket pop() {
    QueuedPacket p = slots_[head_];
    head_ = (head_ + 1) % slots_.size();
    --count_;
    return p;
  }
  [[nodiscard]] const QueuedPacket& front() const { return slots_[head_]; }
  [[nodiscard]] bool empty() const { return count_ == 0; }
  [[nodiscard]] size_t size() const { return count_; }
  [[nodiscard]] size_t capacity() const { return slots_.size(); }

 private:
  std::vector<QueuedPacket> slots_;
  size_t head_ = 0;
  size_t count_ = 0;
};

}  // namespace uroce::fabric
