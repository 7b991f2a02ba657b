#include "sim/ideal_fct.hpp"

#include <algorithm>
#include <vector>

#include "sim/packet_pool.hpp"

namespace uroce::sim {

namespace {

uint64_t ser(uint64_t bytes, uint64_t bps) {
  return bytes * 8'000'000'000ull / bps;
}

}  // namespace

uint64_t ideal_fct_ns(const PathInfo& p, const MessagePattern& m) {
  constexpr uint64_t kPacketExtra = 12 + 4 + kWireOverheadBytes;  // BTH, ICRC, wire overhead
  constexpr uint64_t kAck = 12 + 4 + 4 + kWireOverheadBytes;      // BTH, AETH, ICRC
  // A message's time beyond its train at the slowest link: one full packet at each other
  // link, propagation both ways, the ACK at every link.
  const auto latency = [&](uint64_t len) {
    const uint64_t full = std::min<uint64_t>(len, m.mtu) + kPacketExtra;
    uint64_t ns = 2 * p.delay_ns;
    bool bottleneck_counted = false;
    for (const uint64_t bps : p.link_bps) {
      ns += ser(kAck, bps);
      if (bps == p.min_bps && !bottleneck_counted) {
        bottleneck_counted = true;  // its share is the train itself
      } else {
        ns += ser(full, bps);
      }
    }
    return ns;
  };
  const uint64_t msg = std::min(m.message_bytes, m.bytes);
  const uint64_t n = (m.bytes + msg - 1) / msg;
  const uint64_t last_len = m.bytes - (n - 1) * msg;
  const uint64_t lat_full = latency(msg);
  const uint64_t lat_last = latency(last_len);
  // The slowest link as the simulator's links run: back-to-back packets carry the sub-ns
  // remainder, a link that went idle starts afresh.
  std::vector<uint64_t> done(m.window, 0);  // completion of the message k - window (ring)
  uint64_t free_at = 0;
  uint64_t residual = 0;
  uint64_t end = 0;
  // Beyond this many messages the pattern repeats: scale the time so far.
  constexpr uint64_t kMaxSteps = 10'000'000;
  const uint64_t steps = std::min(n, kMaxSteps);
  for (uint64_t k = 0; k < steps; ++k) {
    const uint64_t len = k == n - 1 ? last_len : msg;
    const uint64_t post = k < m.window ? 0 : done[k % m.window];
    const uint64_t start = std::max(free_at, post);
    if (start > free_at) residual = 0;
    const uint64_t wire = len + (len + m.mtu - 1) / m.mtu * kPacketExtra;
    const uint64_t total = wire * 8'000'000'000ull + residual;
    free_at = start + total / p.min_bps;
    residual = total % p.min_bps;
    done[k % m.window] = free_at + (k == n - 1 ? lat_last : lat_full);
    end = std::max(end, done[k % m.window]);
  }
  if (steps < n)
    end = static_cast<uint64_t>(static_cast<double>(end) * static_cast<double>(n) /
                                static_cast<double>(steps));
  return end;
}

}  // namespace uroce::sim
