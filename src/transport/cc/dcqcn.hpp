// DCQCN reaction point (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments",
// SIGCOMM 2015, §3), with the parameters and the per-period rate-cut / alpha-update rules of
// mlx5's cc_params (docs/congestion.md has the table and the sources):
//   CNP        the first cut is at once, later ones at most once per
//              rate_reduce_monitor_period: RT = RC (clamp rules below), RC = RC * max(1 -
//              alpha/2^(rpg_gd-10), rpg_min_dec_fac %), never below rpg_min_rate; then the
//              increase timer T and byte counter B restart and both stages go to 0;
//   alpha      set to initial_alpha_value at the first CNP, then once per dce_tcp_rtt:
//              alpha = (1-g) alpha + g if a CNP arrived in that period, else (1-g) alpha;
//              computed lazily (no timer per period);
//   increase   each expiry of T (time stage) or of B bytes sent (byte stage): while both
//              stages are <= F (rpg_threshold) fast recovery RC = (RT + RC)/2; then additive
//              RT += rpg_ai_rate; once both exceed F hyper RT += rpg_hai_rate * (min - F);
//              RC = (RT + RC)/2 after each; back at the maximum rate everything stops.
// RC drives a Pacer; every change of RC applies to the pacer's pending gap at once. With
// rpg_byte_reset = 0 the byte counter is off: F fast-recovery steps, one additive step, then hyper
// increase, all driven by T.
#pragma once

#include <cstdint>

#include "transport/cc/pacer.hpp"
#include "transport/congestion.hpp"
#include "uroce/vocab/cc_types.hpp"

namespace uroce::transport {

class Dcqcn final : public CongestionControl {
 public:
  enum class Stage : uint8_t { kIdle, kFastRecovery, kAdditive, kHyper };

  Dcqcn(const DcqcnParams& params, uint32_t line_rate_mbps);

  void on_cnp(TimePoint now) override;
  void on_ack(TimePoint /*now*/, uint64_t /*acked_bytes*/) override {}
  void on_timer(TimePoint now) override;
  [[nodiscard]] TimePoint next_timer() const override;
  [[nodiscard]] uint64_t rate_bytes_per_sec() const override { return rc_ / 8; }
  void on_sent(TimePoint now, uint32_t ip_bytes) override;
  [[nodiscard]] TimePoint next_send_time() const override { return pacer_.next_send_time(); }
  [[nodiscard]] bool uses_ecn() const override { return true; }
  [[nodiscard]] QpCcState state() const override;

  [[nodiscard]] uint64_t rate_bps() const { return rc_; }
  [[nodiscard]] uint64_t target_bps() const { return rt_; }
  [[nodiscard]] uint64_t max_bps() const { return max_bps_; }
  [[nodiscard]] uint64_t min_bps() const { return min_bps_; }
  // alpha as of the last event (the periods since then are applied at the next one).
  [[nodiscard]] double alpha() const { return alpha_; }
  // alpha after the periods that ended by `now` (updates the lazy state).
  double alpha_at(TimePoint now) {
    update_alpha(now);
    return alpha_;
  }
  [[nodiscard]] Stage stage() const { return stage_; }
  [[nodiscard]] uint32_t time_stage() const { return time_stage_; }
  [[nodiscard]] uint32_t byte_stage() const { return byte_stage_; }
  [[nodiscard]] uint64_t cuts() const { return cuts_; }

 private:
  void update_alpha(TimePoint now);
  void cut(TimePoint now);
  void increase(TimePoint now);
  // RC = rc from `now` on, the pacer's pending gap rescaled to it.
  void set_rate(TimePoint now, uint64_t rc);
  [[nodiscard]] Nanos cut_period() const;

  DcqcnParams p_;
  double g_;
  Nanos alpha_period_;
  uint64_t max_bps_;
  uint64_t min_bps_;
  uint64_t rc_;
  uint64_t rt_;
  double alpha_ = 0.0;
  bool alpha_running_ = false;
  bool cnp_in_period_ = false;
  TimePoint alpha_tick_ = kNever;  // end of the current alpha period
  bool first_cnp_ = true;
  bool cut_pending_ = false;
  TimePoint last_cut_ = kNever;
  TimePoint rate_timer_ = kNever;  // next expiry of T while recovering
  uint32_t time_stage_ = 0;
  uint32_t byte_stage_ = 0;
  uint64_t bytes_ = 0;  // sent since the byte counter last expired
  Stage stage_ = Stage::kIdle;
  uint64_t cuts_ = 0;
  Pacer pacer_;
};

}  // namespace uroce::transport
