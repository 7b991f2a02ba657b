// DCQCN reaction point; the rules are listed in dcqcn.hpp.
#include "transport/cc/dcqcn.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace uroce::transport {
namespace {

constexpr uint64_t kMbps = 1'000'000;

Nanos us(uint32_t v) {
  return std::chrono::microseconds(v);
}

}  // namespace

Dcqcn::Dcqcn(const DcqcnParams& params, uint32_t line_rate_mbps)
    : p_(params),
      g_(static_cast<double>(1024 - std::min<uint32_t>(params.dce_tcp_g, 1024)) / 1024.0),
      alpha_period_(us(std::max<uint32_t>(params.dce_tcp_rtt, 1))),
      max_bps_((params.rpg_max_rate != 0 ? params.rpg_max_rate : line_rate_mbps) * kMbps),
      min_bps_(std::min<uint64_t>(uint64_t{params.rpg_min_rate} * kMbps, max_bps_)),
      rc_(max_bps_),
      rt_(max_bps_),
      pacer_(params.pacer_burst_bytes) {}

void Dcqcn::set_rate(TimePoint now, uint64_t rc) {
  // The pacer's pending gap follows at once (a NIC rate limiter's change applies to the
  // next packet), or a gap computed at the floor would outlast the recovery.
  pacer_.on_rate_change(now, rc_, rc);
  rc_ = rc;
}

Nanos Dcqcn::cut_period() const {
  return us(p_.rate_reduce_monitor_period);
}

void Dcqcn::update_alpha(TimePoint now) {
  if (!alpha_running_ || now < alpha_tick_) return;
  // The period that ends at alpha_tick_ saw a CNP or not; every later one that ended by
  // `now` saw none (a CNP would have brought us here first).
  alpha_ = (1.0 - g_) * alpha_ + (cnp_in_period_ ? g_ : 0.0);
  cnp_in_period_ = false;
  alpha_tick_ += alpha_period_;
  if (now >= alpha_tick_) {
    const int64_t n = (now - alpha_tick_) / alpha_period_ + 1;
    alpha_ *= std::pow(1.0 - g_, static_cast<double>(n));
    alpha_tick_ += alpha_period_ * n;
  }
}

void Dcqcn::on_cnp(TimePoint now) {
  update_alpha(now);
  if (first_cnp_) {
    first_cnp_ = false;
    alpha_ = static_cast<double>(std::min<uint32_t>(p_.initial_alpha_value, 1024)) / 1024.0;
    alpha_running_ = true;
    alpha_tick_ = now + alpha_period_;
    cnp_in_period_ = true;
    if (p_.rate_to_set_on_first_cnp != 0) {
      // mlx5 rate_to_set_on_first_cnp: the first CNP sets the rate instead of cutting it.
      rt_ = rc_;
      set_rate(now, std::clamp(uint64_t{p_.rate_to_set_on_first_cnp} * kMbps, min_bps_, max_bps_));
      last_cut_ = now;
      ++cuts_;
      time_stage_ = byte_stage_ = 0;
      bytes_ = 0;
      stage_ = Stage::kFastRecovery;
      rate_timer_ = now + us(p_.rpg_time_reset);
      return;
    }
  } else {
    cnp_in_period_ = true;
  }
  if (last_cut_ == kNever || now >= last_cut_ + cut_period()) {
    cut(now);
  } else {
    cut_pending_ = true;  // rate_reduce_monitor_period: cut at the period's end
  }
}

void Dcqcn::cut(TimePoint now) {
  // Target clamp (mlx5 clamp_tgt_rate / clamp_tgt_rate_after_time_inc, ns3-rdma): a cut
  // right after another one keeps the old target, so recovery aims at the rate before the
  // congestion episode; after an increase the target follows the current rate.
  if (p_.clamp_tgt_rate != 0 || byte_stage_ > 0 ||
      (p_.clamp_tgt_rate_after_time_inc != 0 && time_stage_ > 0) || stage_ == Stage::kIdle) {
    rt_ = rc_;
  }
  const double gd = std::ldexp(1.0, static_cast<int>(std::min<uint32_t>(p_.rpg_gd, 30)));
  double factor = 1.0 - alpha_ * 1024.0 / gd;
  factor =
      std::max(factor, static_cast<double>(std::min<uint32_t>(p_.rpg_min_dec_fac, 100)) / 100.0);
  const auto next = static_cast<uint64_t>(static_cast<double>(rc_) * factor);
  set_rate(now, std::max(min_bps_, std::min(next, rc_)));
  last_cut_ = now;
  cut_pending_ = false;
  ++cuts_;
  time_stage_ = byte_stage_ = 0;
  bytes_ = 0;
  stage_ = Stage::kFastRecovery;
  rate_timer_ = now + us(p_.rpg_time_reset);
}

void Dcqcn::increase(TimePoint now) {
  const uint32_t f = p_.rpg_threshold;
  const uint32_t ts = time_stage_;
  // Byte counter off: the timer alone gives F fast-recovery steps, one additive step, then
  // hyper increase (the stage rule of HPCC's model of mlx5 DCQCN, docs/congestion.md).
  const uint32_t bs =
      p_.rpg_byte_reset != 0 ? byte_stage_ : (time_stage_ > 0 ? time_stage_ - 1 : 0);
  const uint32_t hi = std::max(ts, bs);
  const uint32_t lo = std::min(ts, bs);
  if (hi <= f) {
    stage_ = Stage::kFastRecovery;
  } else if (lo <= f) {
    stage_ = Stage::kAdditive;
    rt_ = std::min(max_bps_, rt_ + uint64_t{p_.rpg_ai_rate} * kMbps);
  } else {
    stage_ = Stage::kHyper;
    rt_ = std::min(max_bps_, rt_ + uint64_t{p_.rpg_hai_rate} * kMbps * (lo - f));
  }
  set_rate(now, std::min(max_bps_, (rt_ + rc_ + 1) / 2));  // rounded up, so RC reaches RT
  if (rc_ == max_bps_) {
    // Back at the line rate: nothing left to recover, no timer runs.
    rt_ = max_bps_;
    stage_ = Stage::kIdle;
    rate_timer_ = kNever;
    time_stage_ = byte_stage_ = 0;
    bytes_ = 0;
  }
}

void Dcqcn::on_timer(TimePoint now) {
  if (cut_pending_ && now >= last_cut_ + cut_period()) {
    update_alpha(now);
    cut(now);
  }
  if (stage_ != Stage::kIdle && now >= rate_timer_) {
    rate_timer_ = now + us(p_.rpg_time_reset);
    ++time_stage_;
    increase(now);
  }
}

TimePoint Dcqcn::next_timer() const {
  TimePoint t = stage_ != Stage::kIdle ? rate_timer_ : kNever;
  if (cut_pending_) t = std::min(t, last_cut_ + cut_period());
  return t;
}

void Dcqcn::on_sent(TimePoint now, uint32_t ip_bytes) {
  pacer_.on_sent(now, ip_bytes, rc_);
  if (stage_ == Stage::kIdle || p_.rpg_byte_reset == 0) return;
  bytes_ += ip_bytes;
  while (stage_ != Stage::kIdle && bytes_ >= p_.rpg_byte_reset) {
    bytes_ -= p_.rpg_byte_reset;
    ++byte_stage_;
    increase(now);
  }
}

QpCcState Dcqcn::state() const {
  QpCcState s;
  s.algorithm = CcAlgorithm::kDcqcn;
  s.rate_bps = rc_;
  s.target_rate_bps = rt_;
  s.alpha = static_cast<uint32_t>(std::lround(alpha_ * 1024.0));
  return s;
}

}  // namespace uroce::transport
