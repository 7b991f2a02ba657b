// Loss recovery of RC QPs (docs/congestion.md "Loss recovery"):
//   - go-back-N, the RoCE v2 wire behaviour every peer understands, with an adaptive
//     retransmission timer (RFC 6298 SRTT/RTTVAR, floored, never longer than the QP's
//     configured 4.096 us x 2^timeout) as mlx5's adaptive retransmission does;
//   - selective repeat in the spirit of IRN (SIGCOMM 2018) for QPs whose application set
//     QpAttr::recovery after *both* ends agreed (uroce perf does it over its TCP side
//     channel); the engine never turns it on by itself, so rxe, NICs and the libibverbs
//     drop-in only ever see go-back-N.
// Everything here is sans-IO: times are given by the caller.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "uroce/vocab/psn.hpp"
#include "uroce/vocab/time.hpp"

namespace uroce::transport {

enum class Recovery : uint8_t {
  kGoBackN,          // RoCE v2 go-back-N (IBA 9.7.5.2.4)
  kSelectiveRepeat,  // uroce <-> uroce only, after an explicit agreement
};

struct RecoveryConfig {
  // UROCE_ADAPTIVE_RETRANS: false gives rxe-style go-back-N (the configured timeout only).
  bool adaptive = true;
  // The adaptive timer never fires sooner than this after the last progress.
  Nanos min_rto = Nanos(200'000);
  // UROCE_RECOVERY: what this device's tools offer their peer; applied to a QP only by
  // QpAttr::recovery (never by the engine on its own).
  Recovery offer = Recovery::kGoBackN;
};

// "gbn" / "sr"; returns a one-line error naming `what` otherwise.
[[nodiscard]] std::string parse_recovery(std::string_view what, std::string_view text,
                                         Recovery& out);
[[nodiscard]] std::string_view recovery_name(Recovery r);

// RFC 6298 round-trip estimator with Karn's rule left to the caller (only packets sent once
// are timed). rto() = B + max(floor, 4 RTTVAR, B - min RTT) with B = max(SRTT, latest
// sample), at most cap, doubled per consecutive expiry (backoff), and `cap` while no sample
// exists. Beyond RFC 6298 (docs/congestion.md "Loss recovery"):
//   - the floor bounds the margin above the RTT, not the RTO (as Linux floors RTTVAR at
//     tcp_rto_min): with a steady RTT, RTTVAR decays to nothing and an RTO of SRTT + 1 us
//     fired at the first window that waited longer (validate-loss-0-gbn: a go-back of 53
//     packets with the floor on the RTO alone);
//   - B: SRTT lags a queue that deepens (its gain is 1/8); the latest sample does not (as
//     QUIC's loss timer uses max(smoothed_rtt, latest_rtt), RFC 9002 6.1.2);
//   - B - min RTT, the queueing delay the samples show (min RTT: the path without a queue):
//     a queue may double before the next ACK (fed at twice its drain rate, as when as many
//     flows again start into it), which RTTVAR learnt from a steady queue does not foresee.
class RttEstimator {
 public:
  void sample(Nanos r) {
    if (r < Nanos(0)) r = Nanos(0);
    latest_ = r;
    if (!have_) {
      srtt_ = r;
      rttvar_ = r / 2;
      min_ = r;
      have_ = true;
    } else {
      min_ = std::min(min_, r);
      const Nanos err = srtt_ > r ? srtt_ - r : r - srtt_;
      rttvar_ = (rttvar_ * 3 + err) / 4;
      srtt_ = (srtt_ * 7 + r) / 8;
    }
  }
  [[nodiscard]] Nanos rto(Nanos floor, Nanos cap) const {
    if (!have_) return cap;
    const Nanos base = std::max(srtt_, latest_);
    Nanos v = base + std::max({kGranularity, floor, rttvar_ * 4, base - min_});
    for (uint32_t i = 0; i < backoff_ && v < cap; ++i) v *= 2;
    return std::min(v, cap);
  }
  // The Eifel response to a spurious timeout (RFC 4015): the estimate covers the stall `r`
  // at once, SRTT = max(SRTT, r) and RTTVAR = max(RTTVAR, r/2), where one EWMA sample would
  // add only r/8; the new estimate replaces the backoff the timeout added.
  void raise_to(Nanos r) {
    if (!have_) {
      sample(r);
    } else {
      srtt_ = std::max(srtt_, r);
      rttvar_ = std::max(rttvar_, r / 2);
    }
    backoff_ = 0;
  }
  void backoff() {
    if (backoff_ < 16) ++backoff_;
  }
  void reset_backoff() { backoff_ = 0; }
  void clear() { *this = RttEstimator{}; }
  [[nodiscard]] bool have_sample() const { return have_; }
  [[nodiscard]] Nanos srtt() const { return srtt_; }
  [[nodiscard]] Nanos rttvar() const { return rttvar_; }
  [[nodiscard]] Nanos min_rtt() const { return min_; }  // 0 before the first sample

 private:
  static constexpr Nanos kGranularity = Nanos(1000);
  Nanos srtt_{0};
  Nanos rttvar_{0};
  Nanos latest_{0};
  Nanos min_{0};  // the smallest sample: the path without a queue
  bool have_ = false;
  uint32_t backoff_ = 0;
};

// Selective repeat window: one bit per PSN, indexed by PSN modulo the window, so the state per
// QP is fixed (2 x 32 bytes: the requester's SACK bits and the responder's arrival bits). The
// requester never has more than kMaxUnackedPsns + 1 PSNs outstanding, well inside it.
inline constexpr uint32_t kSrWindow = 256;

class PsnBitmap {
 public:
  [[nodiscard]] bool test(Psn p) const {
    const uint32_t i = p.value() % kSrWindow;
    return ((words_[i / 64] >> (i % 64)) & 1u) != 0;
  }
  void set(Psn p) {
    const uint32_t i = p.value() % kSrWindow;
    words_[i / 64] |= uint64_t{1} << (i % 64);
  }
  void reset(Psn p) {
    const uint32_t i = p.value() % kSrWindow;
    words_[i / 64] &= ~(uint64_t{1} << (i % 64));
  }
  void clear() { words_ = {}; }

 private:
  std::array<uint64_t, kSrWindow / 64> words_{};
};

}  // namespace uroce::transport
