// One switch of the simulated fabric: the shared-buffer egress queues of the fabric model
// (fabric::SwitchQueues, the same code `uroce switch` forwards with: per-priority queues,
// strict priority / DWRR, PFC per (ingress, priority), downstream pause per (egress,
// priority)) plus the one thing a link adds around them: each egress serialises at its own
// port's rate. Every use of SwitchQueues in the simulator is in switch_node.cpp, so a
// change of that API stays local.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "fabric/switch_queue.hpp"
#include "uroce/vocab/time.hpp"

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
  bool resume = false;  // send PFC resume upstream on `ingress` for class `priority`
  uint32_t ingress = 0;
  uint8_t priority = 0;  // the packet's traffic class
  TimePoint start{};
  TimePoint end{};
};

struct EgressStats {
  uint64_t enqueued = 0;
  uint64_t dequeued = 0;
  uint64_t dequeued_bytes = 0;
  uint64_t dropped_tail = 0;
  uint64_t dropped_headroom = 0;
  uint64_t ecn_marked = 0;
  uint64_t max_depth_bytes = 0;
  uint64_t depth_bytes = 0;
  uint64_t paused_ns = 0;  // this egress held by the downstream peer's PFC
  // Times this port's ingress side crossed XOFF (the fabric model's pause decisions); the PFC
  // frames that follow are counted by the simulator (Simulator::pfc_tx_stats).
  uint64_t pause_events = 0;
};

class SwitchNode {
 public:
  // `base` carries buffer, RED and PFC settings and `priorities`; ports and rates come from
  // the topology. `lossless_priorities`: bit c set = class c is lossless when base.mode is
  // lossless (0xFF: every class, the model's kLossless). `strict`: every class strict
  // (highest first), else DWRR with `dwrr_weights` (missing ones weigh 1). The queue model
  // runs at the fastest port's rate; each egress serialises at its own rate (port_bps) here,
  // so a leaf's slower uplinks take their real time.
  SwitchNode(const fabric::SwitchQueueConfig& base, std::vector<uint64_t> port_bps,
             uint8_t lossless_priorities, bool strict, const std::vector<uint32_t>& dwrr_weights,
             uint64_t seed);

  // Queues per egress (1..8): priority p goes to class min(p, priorities() - 1).
  [[nodiscard]] uint32_t priorities() const { return q_->config().priorities; }
  [[nodiscard]] uint32_t traffic_class(uint32_t priority) const {
    return q_->traffic_class(priority);
  }

  // r.pause: pause (ingress, traffic_class(priority)) upstream.
  SwitchArrival enqueue(uint32_t egress, uint32_t ingress, uint32_t bytes, uint8_t priority,
                        bool ect, uint64_t cookie, TimePoint now);
  // When the egress can start its next transmission (kNever: empty or paused).
  [[nodiscard]] TimePoint next_tx(uint32_t egress) const;
  std::optional<SwitchTx> transmit(uint32_t egress, TimePoint now);
  void set_downstream_paused(uint32_t egress, uint8_t priority, bool paused, TimePoint now);
  [[nodiscard]] bool downstream_paused(uint32_t egress, uint8_t priority) const {
    return q_->egress_paused(egress, priority);
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
  };
  std::unique_ptr<fabric::SwitchQueues> q_;
  std::vector<Port> ports_;
};

}  // namespace uroce::sim
