// One switch of the simulated fabric: the shared-buffer egress queues of the fabric model
// (fabric::SwitchQueues, the same code `uroce switch` forwards with) plus what a link adds
// around them: the egress link's own busy time and the pause a downstream neighbour asked
// for (PFC received), with the time each egress spent paused. Every use of SwitchQueues in
// the simulator is in switch_node.cpp, so a change of that API stays local.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common/time.hpp"
#include "fabric/switch_queue.hpp"

namespace uroce::sim {

inline constexpr uint32_t kPriorities = 8;

struct SwitchArrival {
  bool dropped = false;
  bool headroom = false;  // dropped beyond the PFC headroom
  bool marked = false;    // CE at enqueue
  bool pause = false;     // send PFC pause upstream on the ingress port, for `priority`
};

struct SwitchTx {
  uint64_t cookie = 0;
  bool marked = false;
  bool resume = false;  // send PFC resume upstream on `ingress` for `priority`
  uint32_t ingress = 0;
  uint8_t priority = 0;
  TimePoint start{};
  TimePoint end{};
};

struct EgressStats {
  uint64_t enqueued = 0;
  uint64_t dequeued_bytes = 0;
  uint64_t dropped_tail = 0;
  uint64_t dropped_headroom = 0;
  uint64_t ecn_marked = 0;
  uint64_t max_depth_bytes = 0;
  uint64_t depth_bytes = 0;
  uint64_t paused_ns = 0;          // this egress held by the downstream peer's PFC
  uint64_t pause_frames_sent = 0;  // PFC pauses sent upstream from this port's ingress side
};

class SwitchNode {
 public:
  // `base` carries buffer, RED and PFC settings; ports and rates come from the topology.
  // `lossless_priorities`: bit p set = priority p is lossless when base.mode is lossless.
  // The queue model runs at the fastest port's rate; each egress serialises at its own
  // rate (port_bps) here, so a leaf's slower uplinks take their real time.
  SwitchNode(const fabric::SwitchQueueConfig& base, std::vector<uint64_t> port_bps,
             uint8_t lossless_priorities, bool strict, const std::vector<uint32_t>& dwrr_weights,
             uint64_t seed);

  // How many priorities the model keeps apart (1 until the queue model has per-priority
  // queues; then 8).
  [[nodiscard]] static uint32_t priorities();

  SwitchArrival enqueue(uint32_t egress, uint32_t ingress, uint32_t bytes, uint8_t priority,
                        bool ect, uint64_t cookie, TimePoint now);
  // When the egress can start its next transmission (kNever: empty or paused).
  [[nodiscard]] TimePoint next_tx(uint32_t egress) const;
  std::optional<SwitchTx> transmit(uint32_t egress, TimePoint now);
  void set_downstream_paused(uint32_t egress, uint8_t priority, bool paused, TimePoint now);
  [[nodiscard]] bool downstream_paused(uint32_t egress, uint8_t priority) const {
    return (ports_[egress].paused_mask >> priority) & 1u;
  }

  [[nodiscard]] uint32_t ports() const { return static_cast<uint32_t>(ports_.size()); }
  [[nodiscard]] EgressStats stats(uint32_t egress, uint8_t priority, TimePoint now) const;
  [[nodiscard]] uint64_t depth_bytes(uint32_t egress, uint8_t priority) const;
  [[nodiscard]] uint64_t queued_packets() const;
  [[nodiscard]] double mark_probability(uint64_t q) const { return q_->mark_probability(q); }

 private:
  struct Port {
    uint64_t bps = 0;
    uint64_t residual = 0;  // sub-ns remainder of back-to-back serialisations
    TimePoint link_free{};
    uint8_t paused_mask = 0;
    std::array<TimePoint, kPriorities> paused_since{};
    std::array<uint64_t, kPriorities> paused_ns{};
    std::array<uint64_t, kPriorities> pause_frames{};
  };
  std::unique_ptr<fabric::SwitchQueues> q_;
  std::vector<Port> ports_;
};

}  // namespace uroce::sim
