// The bottleneck's queue configuration (bottleneck.hpp).
#include "fault/bottleneck.hpp"

namespace uroce::fault {

fabric::SwitchQueueConfig bottleneck_config(const Bottleneck& b, uint32_t limit, uint64_t seed) {
  fabric::SwitchQueueConfig c;
  c.egress_ports = 1;
  c.ingress_ports = 1;
  c.line_rate_bytes_per_sec = b.rate;
  c.queue_packets = limit;
  c.port_buffer_bytes = b.queue;
  c.shared_buffer_bytes = 0;
  c.threshold = fabric::ThresholdMode::kStatic;
  c.mode = fabric::BufferMode::kLossy;
  if (b.pmax != 0) {
    c.red.enabled = true;
    c.red.kmin_bytes = b.kmin;
    c.red.kmax_bytes = b.kmax;
    c.red.pmax = static_cast<double>(b.pmax) / kCertain;
    c.red.at = fabric::MarkPoint::kDequeue;  // as `uroce switch` marks by default
  }
  c.seed = seed;
  return c;
}

}  // namespace uroce::fault
