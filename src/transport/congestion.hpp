// The congestion-control interface point of the engine (RoCE v2 Annex A17.9 reaction point).
// The engine owns one controller per QP (chosen by EngineConfig::cc or QpInitAttr::cc, made
// by cc/factory.hpp) and feeds it what it sees: packets sent, ACKs, CNPs and the controller's
// own timer. It asks the controller when the QP may send its next request packet (pacing:
// the engine keeps that "not before" time in its timer heap) and whether the QP speaks ECN
// (ECT(0) on its packets, CNPs for CE-marked packets it receives). No controller: plain
// RoCE v2, nothing on the wire changes.
#pragma once

#include <cstdint>

#include "uroce/vocab/cc_types.hpp"
#include "uroce/vocab/time.hpp"

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

  // One request packet of `ip_bytes` (IP header .. ICRC) left at `now`.
  virtual void on_sent(TimePoint /*now*/, uint32_t /*ip_bytes*/) {}
  // The earliest time the QP may send its next request packet (<= now: at once).
  [[nodiscard]] virtual TimePoint next_send_time() const { return TimePoint{0}; }
  // True: the QP's packets carry ECT(0) (unless its traffic class sets ECN bits) and a
  // CE-marked packet it receives makes it send a CNP to the peer QP.
  [[nodiscard]] virtual bool uses_ecn() const { return false; }
  // What query_qp reports.
  [[nodiscard]] virtual QpCcState state() const {
    QpCcState s;
    s.algorithm = CcAlgorithm::kNone;
    s.rate_bps = rate_bytes_per_sec() * 8;
    return s;
  }
};

}  // namespace uroce::transport
