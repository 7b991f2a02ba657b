// The hold queue of one lossless (ingress, priority) in `uroce switch`: the frames a paused
// ingress sent, in arrival order, standing for the upstream device's transmit queue that a
// PAUSE frame would stop (switch_forwarder.hpp has the emulation as a whole).
//
// A FIFO of frames is not quite a transmit queue. A RoCE requester whose retransmit timer
// fires while its port is paused goes back N in its own send queue, and the packets it had not
// transmitted yet simply leave later, from the new position: no NIC queues two copies of a
// packet. Here the sender could not be stopped, so it did transmit them (into this queue), and
// a go-back would leave every copy queued. Under a long pause each timeout then adds a whole
// window of duplicates, the queue's delay grows past the retransmit timeout, every later
// timeout is spurious as well, and the flows collapse (seen with four `uroce perf` senders
// through `--mode lossless` on a loaded 2-core machine: 92 % of the frames were
// retransmissions, the hold queues reached 3,900 frames of a 128-packet window, the flows
// stalled until their timeout).
//
// So a held RC request (SEND, WRITE, READ request, atomic, FLUSH) whose PSN is not after the
// last PSN held for its QP shows that the requester went back: it supersedes the held frames
// of that QP from its PSN on, which are taken out (and counted) as the paused NIC would never
// have sent them. Frames of a QP are told apart by (source address, destination address,
// destination QP); other frames (TCP, ACKs and READ responses, UD, frames not on the RoCE UDP
// port) are never taken out.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "cli/switch_options.hpp"

namespace uroce::cli {

// The identity and PSN of an RC request packet in an Ethernet frame.
struct RcRequest {
  std::array<uint8_t, 16> src{}, dst{};  // IPv6, or IPv4-mapped
  uint32_t dest_qp = 0;
  uint32_t psn = 0;
};

// The RC request in `frame` (Ethernet, at most one 802.1Q tag, IPv4/IPv6, UDP to one of
// `roce_ports`, BTH); nullopt for anything else.
[[nodiscard]] std::optional<RcRequest> rc_request_of(std::span<const uint8_t> frame,
                                                     const UdpPortSet& roce_ports);

struct HeldFrame {
  uint32_t slot = 0;    // the forwarder's frame buffer
  uint32_t egress = 0;  // where it goes once released
};

class HoldQueue {
 public:
  // Room for `capacity` frames (the forwarder's frame buffer count, so a push never fails).
  explicit HoldQueue(size_t capacity);

  // Appends a frame; `req` is its RC request identity, if it is one. The slots of held frames
  // it supersedes are appended to `superseded` (which the caller has reserved room in).
  void push(HeldFrame f, const std::optional<RcRequest>& req, std::vector<uint32_t>& superseded);
  HeldFrame pop();
  [[nodiscard]] bool empty() const { return count_ == 0; }
  [[nodiscard]] size_t size() const { return count_; }

  // Distinct QPs tracked at once; the frames of further ones are held without superseding.
  static constexpr size_t kMaxFlows = 64;

 private:
  static constexpr uint8_t kNoFlow = 0xFF;
  struct Item {
    uint32_t slot;
    uint32_t egress;
    uint32_t psn;
    uint8_t flow;  // index into flows_, or kNoFlow
  };
  struct Flow {
    std::array<uint8_t, 16> src{}, dst{};
    uint32_t dest_qp = 0;
    uint32_t last_psn = 0;  // of the newest held request
    uint32_t held = 0;      // its requests in the queue
  };

  uint8_t flow_of(const RcRequest& r);
  // Takes out the held frames of `flow` whose PSN is not before `psn`, keeping the order.
  void supersede(uint8_t flow, uint32_t psn, std::vector<uint32_t>& superseded);
  Item& at(size_t i) { return items_[(head_ + i) % items_.size()]; }

  std::vector<Item> items_;
  size_t head_ = 0;
  size_t count_ = 0;
  std::vector<Flow> flows_;
};

}  // namespace uroce::cli
