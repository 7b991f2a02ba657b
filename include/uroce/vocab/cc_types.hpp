// Congestion-control vocabulary shared by the engine, its configuration and its users: which
// algorithm a QP runs, the DCQCN parameters (names, units and defaults of mlx5's cc_params,
// docs/congestion.md) and what a QP query reports about its controller. Plain data only.
#pragma once

#include <cstdint>

namespace uroce::transport {

enum class CcAlgorithm : uint8_t {
  kDefault = 0,  // QpInitAttr only: the engine's EngineConfig::cc.algorithm
  kNone = 1,     // no ECN, no CNPs, no pacing: the wire is plain RoCE v2 (what rxe does)
  kDcqcn = 2,    // DCQCN (SIGCOMM 2015) reaction point plus notification point, ECT(0)
};

// DCQCN parameters. Names follow mlx5's debugfs cc_params / mlxconfig fields; times in µs,
// rates in Mb/s, alpha and g in units of 1/1024. See docs/congestion.md for each default's
// source.
struct DcqcnParams {
  // Reaction point.
  uint32_t initial_alpha_value = 1023;  // alpha at the first CNP, /1024
  // alpha keeps dce_tcp_g/1024 of itself per period: g = (1024 - dce_tcp_g)/1024 (mlx5's
  // documented default 1019 only makes sense this way; docs/congestion.md).
  uint32_t dce_tcp_g = 1019;
  uint32_t dce_tcp_rtt = 1;                    // alpha update period K, µs (paper: 55)
  uint32_t rate_reduce_monitor_period = 4;     // minimum time between two rate cuts, µs
  uint32_t rpg_time_reset = 300;               // increase timer T, µs
  uint32_t rpg_byte_reset = 32767;             // byte counter B, bytes; 0 disables it
  uint32_t rpg_threshold = 1;                  // F: stages of fast recovery
  uint32_t rpg_ai_rate = 5;                    // additive increase R_AI, Mb/s
  uint32_t rpg_hai_rate = 50;                  // hyper increase R_HAI, Mb/s
  uint32_t rpg_gd = 11;                        // cut = RC * (1 - alpha_fx / 2^rpg_gd)
  uint32_t rpg_min_dec_fac = 50;               // one cut keeps at least this % of RC
  uint32_t rpg_min_rate = 1;                   // minimum rate, Mb/s
  uint32_t rpg_max_rate = 0;                   // maximum rate, Mb/s; 0: EngineConfig line rate
  uint32_t rate_to_set_on_first_cnp = 0;       // Mb/s; 0: cut the current rate as usual
  uint32_t clamp_tgt_rate = 0;                 // 1: every cut sets target = current rate
  uint32_t clamp_tgt_rate_after_time_inc = 1;  // 1: also after a timer-driven increase
  // uroce: bytes an idle QP may send back to back; 128 KiB (105 µs at 10 Gb/s) covers the
  // wake-up latency of a UDP device's progress thread (docs/congestion.md "Measured").
  uint32_t pacer_burst_bytes = 131072;
  // Notification point.
  uint32_t min_time_between_cnps = 4;  // µs between two CNPs of one QP
  uint32_t cnp_dscp = 48;              // DSCP of the CNPs this NP sends
};

struct CcConfig {
  CcAlgorithm algorithm = CcAlgorithm::kNone;
  uint32_t line_rate_mbps = 10000;  // the port speed DCQCN starts at (rpg_max_rate = 0)
  DcqcnParams dcqcn;
};

// A QP's congestion-control state as query_qp reports it (QpAttr::cc).
struct QpCcState {
  CcAlgorithm algorithm = CcAlgorithm::kNone;
  uint64_t rate_bps = 0;         // current rate RC in bit/s; 0: unlimited (no controller)
  uint64_t target_rate_bps = 0;  // target rate RT in bit/s
  uint32_t alpha = 0;            // congestion estimate, /1024
};

}  // namespace uroce::transport
