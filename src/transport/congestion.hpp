// The congestion-control interface point of the engine (RoCE v2 Annex A17.9 reaction point).
// The engine feeds each QP's controller with the signals it sees; an algorithm (DCQCN,
// later others) implements this interface outside the engine's protocol code. Today the
// engine only counts and forwards CNPs and ACKs; it does not pace by rate() yet.
#pragma once

#include <cstdint>

#include "common/time.hpp"

namespace uroce::transport {

class CongestionControl {
 public:
  virtual ~CongestionControl() = default;

  // A CNP (BTH opcode 0x81) arrived for this QP: the path is congested.
  virtual void on_cnp(TimePoint now) = 0;
  // Positive progress: `acked_bytes` of payload were acknowledged (ACK, READ response or
  // atomic ACK).
  virtual void on_ack(TimePoint now, uint64_t acked_bytes) = 0;
  // The deadline returned by next_timer() passed.
  virtual void on_timer(TimePoint now) = 0;
  [[nodiscard]] virtual TimePoint next_timer() const = 0;  // kNever when none
  // Allowed sending rate in bytes per second; 0 means unlimited.
  [[nodiscard]] virtual uint64_t rate_bytes_per_sec() const = 0;
};

}  // namespace uroce::transport
