// The ideal FCT of a flow, the denominator of its slowdown: how long the flow would take
// alone on its idle path with its own message pattern. Each message (WR) of the flow is a
// train of packets through the path, store and forward: all of it at the slowest link, one
// full packet at every other link, propagation both ways and an ACK at every link on the way
// back. A message is posted when one of the `window` before it completes, as the simulator's
// flows do, so a window-limited flow (window 1: one message per round trip) pays a round
// trip per message and a flow with enough outstanding bytes is one back-to-back train.
#pragma once

#include <cstdint>

#include "sim/topology.hpp"

namespace uroce::sim {

struct MessagePattern {
  uint64_t bytes = 0;          // the flow's bytes (> 0)
  uint64_t message_bytes = 0;  // WR size (the last one may be shorter)
  uint32_t window = 1;         // WRs outstanding
  uint32_t mtu = 4096;         // path MTU: payload bytes per packet
};

[[nodiscard]] uint64_t ideal_fct_ns(const PathInfo& path, const MessagePattern& m);

}  // namespace uroce::sim
