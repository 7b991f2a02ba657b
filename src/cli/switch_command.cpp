// `uroce switch --port IF --port IF ... [--mode lossy|ecn|lossless] [--rate R] [--buffer B]
// [--ecn kmin=..,kmax=..,pmax=..] [--pfc xoff=..,xon=..] [--priorities N [--pfc PRIO,..]
// [--dwrr W0,W1,..] [--strict PRIO,..] [--prio-map DSCP=PRIO,..]] [--roce-port PORTS] [--json]
// [--trace FILE.csv]`: a
// user-space Ethernet switch between network interfaces (veths), whose egress ports are the
// switch queue model of src/fabric: a shared bottleneck for real processes, with queue-depth
// ECN marking and a PFC-like lossless mode that this kernel's qdiscs cannot give
// (docs/congestion.md, "A shared bottleneck with real processes"). The loop and what it
// emulates: switch_forwarder.hpp.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <memory>
#include <optional>

#include "cli/command.hpp"
#include "cli/switch_forwarder.hpp"
#include "cli/switch_options.hpp"
#include "config/host_options.hpp"
#include "wire/packet.hpp"

namespace uroce::cli {
namespace {

struct SwitchArgs {
  std::vector<std::string> ports;
  std::string mode = "ecn";
  std::string rate = "1gbit";
  std::string buffer = "512KB";
  std::string shared;
  double alpha = 0;
  std::string ecn;
  std::vector<std::string> pfc;
  uint32_t priorities = 1;
  std::string prio_map;
  std::string dwrr;
  std::string strict;
  uint64_t seed = 1;
  uint32_t frame_slots = 0;  // 0: a 64 MiB pool of slots sized for the ports' MTU
  double duration = 0;
  double stats_every = 0;
  std::string trace;
  double trace_interval_us = 1000;
  bool json = false;
  std::string roce_ports;  // default: UROCE_UDP_PORT, else 4791
};

int fail(const std::string& why) {
  fmt::print(stderr, "uroce switch: {}\n", why);
  return kExitUsage;
}

// The first priority in `mask` at or above n, as an error for `option`; empty if none.
std::string below(PriorityMask mask, uint32_t n, std::string_view option) {
  for (uint32_t p = n; p < fabric::kMaxPriorities; ++p) {
    if ((mask >> p & 1u) != 0) {
      return fmt::format(
          "{}: priority {} is not below --priorities {}; use 0..{} or raise "
          "--priorities",
          option, p, n, n - 1);
    }
  }
  return {};
}

// --priorities, --pfc (thresholds and lossless priorities), --strict, --dwrr, --prio-map into
// o.queue and o.dscp_map; empty on success, else the one-line error.
std::string apply_priorities(const SwitchArgs& a, SwitchRunOptions& o) {
  const uint32_t n = a.priorities;
  if (n == 0 || n > fabric::kMaxPriorities) {
    return fmt::format("--priorities {} is not valid; use 1..8", n);
  }
  o.queue.priorities = n;
  std::string error;
  o.queue.pfc = {.xoff_bytes = 64 * 1024, .xon_bytes = 32 * 1024, .headroom_bytes = 0};
  bool thresholds = false;
  PriorityMask lossless = 0;
  for (const std::string& v : a.pfc) {
    if (!parse_pfc_arg(v, o.queue.pfc, thresholds, lossless, error)) return error;
  }
  if (lossless != 0 && o.mode == SwitchMode::kLossless) {
    return "--pfc PRIO: --mode lossless already makes every priority lossless; use --mode ecn "
           "or lossy for lossless priorities beside lossy ones";
  }
  if (thresholds && lossless == 0 && o.mode != SwitchMode::kLossless) {
    return "--pfc needs --mode lossless, or lossless priorities (e.g. --pfc 3)";
  }
  if (std::string bad = below(lossless, n, "--pfc"); !bad.empty()) return bad;
  PriorityMask strict = 0;
  if (!a.strict.empty()) {
    if (!parse_priorities(a.strict, "--strict", strict, error)) return error;
    if (std::string bad = below(strict, n, "--strict"); !bad.empty()) return bad;
  }
  DwrrWeights weights;
  if (!a.dwrr.empty()) {
    if (!parse_dwrr(a.dwrr, weights, error)) return error;
    if (weights.count != n) {
      return fmt::format("--dwrr has {} weights for {} priorities; give one per priority",
                         weights.count, n);
    }
  }
  for (uint32_t p = 0; p < n; ++p) {
    o.queue.prio[p].lossless = (lossless >> p & 1u) != 0;
    o.queue.prio[p].strict = (strict >> p & 1u) != 0;
    if (weights.count != 0) o.queue.prio[p].dwrr_weight = weights.weight[p];
  }
  o.dscp_map = default_dscp_map();
  if (!a.prio_map.empty()) {
    DscpMap given;
    given.fill(0xFF);
    if (!parse_prio_map(a.prio_map, given, error)) return error;
    for (size_t d = 0; d < given.size(); ++d) {
      if (given[d] == 0xFF) continue;
      if (given[d] >= n) {
        return fmt::format("--prio-map: DSCP {} maps to priority {}, not below --priorities {}", d,
                           given[d], n);
      }
      o.dscp_map[d] = given[d];
    }
  }
  return {};
}

int run(const SwitchArgs& a) {
  SwitchRunOptions o;
  o.ports = a.ports;
  if (o.ports.size() < 2) return fail("give at least two --port interfaces to switch between");
  for (size_t i = 0; i < o.ports.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (o.ports[i] == o.ports[j]) return fail("--port " + o.ports[i] + " is given twice");
    }
  }
  if (a.mode == "lossy") {
    o.mode = SwitchMode::kLossy;
  } else if (a.mode == "ecn") {
    o.mode = SwitchMode::kEcn;
  } else if (a.mode == "lossless") {
    o.mode = SwitchMode::kLossless;
  } else {
    return fail(fmt::format("--mode '{}' is not valid; use lossy, ecn or lossless", a.mode));
  }
  std::string error;
  const auto rate = parse_rate(a.rate, error);
  if (!rate) return fail("--rate: " + error);
  o.unlimited = *rate == 0;
  if (!o.unlimited) o.queue.line_rate_bytes_per_sec = *rate;
  const auto buffer = parse_size(a.buffer, error);
  if (!buffer) return fail("--buffer: " + error);
  o.queue.port_buffer_bytes = *buffer;
  if (!a.shared.empty()) {
    const auto shared = parse_size(a.shared, error);
    if (!shared) return fail("--shared-buffer: " + error);
    o.queue.shared_buffer_bytes = *shared;
  }
  if (a.alpha != 0) {
    if (o.queue.shared_buffer_bytes == 0) {
      return fail("--alpha (dynamic thresholds) needs --shared-buffer");
    }
    o.queue.threshold = fabric::ThresholdMode::kDynamic;
    o.queue.alpha = a.alpha;
  }
  if (!a.ecn.empty()) {
    if (o.mode == SwitchMode::kLossy) {
      return fail("--ecn marks only in --mode ecn or lossless; lossy is tail drop alone");
    }
    if (!parse_ecn(a.ecn, o.queue.red, error)) return fail(error);
  } else if (o.mode == SwitchMode::kEcn) {
    o.queue.red = {.enabled = true,
                   .kmin_bytes = 20 * 1024,
                   .kmax_bytes = 200 * 1024,
                   .pmax = 0.2,
                   .at = fabric::MarkPoint::kDequeue};
  }
  if (const std::string bad = apply_priorities(a, o); !bad.empty()) return fail(bad);
  o.queue.seed = a.seed;
  o.frame_slots = a.frame_slots;
  o.duration_s = a.duration;
  o.stats_every_s = a.stats_every;
  o.trace_path = a.trace;
  o.trace_interval_us = a.trace_interval_us;
  o.json = a.json;
  // --roce-port, else UROCE_UDP_PORT (or its alias) as every uroce command reads it, else
  // 4791; what is resolved here replaces the options' default.
  std::string roce_ports = a.roce_ports;
  if (roce_ports.empty()) {
    const std::optional<config::HostOptions> host = config::HostOptions::from_env(error);
    if (!host) return fail(error);
    roce_ports = std::to_string(host->udp_port.value_or(wire::kRoceV2Port));
  }
  o.roce_ports.reset();
  if (!parse_udp_ports(roce_ports, "--roce-port", o.roce_ports, error)) return fail(error);
  o.roce_ports_text = roce_ports;
  return run_switch(o);
}

}  // namespace

Subcommand add_switch_command(CLI::App& app) {
  auto a = std::make_shared<SwitchArgs>();
  CLI::App* sub = app.add_subcommand(
      "switch",
      "A user-space Ethernet switch between interfaces (AF_PACKET; needs root): rate, buffer, "
      "RED/ECN marking, tail drop or PFC-like lossless mode on every egress port");
  sub->add_option("--port", a->ports, "An interface to switch (twice or more)")->required();
  sub->add_option("--mode", a->mode,
                  "lossy (tail drop), ecn (RED/ECN marking + tail drop) or lossless (pause "
                  "ingresses above XOFF, never drop)")
      ->capture_default_str();
  sub->add_option("--rate", a->rate,
                  "Egress line rate per port, e.g. 1gbit, 100mbit, 125mbps (bytes/s), unlimited")
      ->capture_default_str();
  sub->add_option("--buffer", a->buffer, "Per-port buffer limit (lossy/ecn), e.g. 512KB")
      ->capture_default_str();
  sub->add_option("--shared-buffer", a->shared, "Shared buffer pool across ports, e.g. 1MB");
  sub->add_option("--alpha", a->alpha,
                  "Dynamic thresholds: a port may use alpha x the free shared buffer")
      ->check(CLI::Range(0.0, 1024.0));
  sub->add_option("--ecn", a->ecn,
                  "RED/ECN: kmin=SIZE,kmax=SIZE,pmax=P[,at=enqueue|dequeue] (ecn mode default "
                  "kmin=20KB,kmax=200KB,pmax=0.2)");
  sub->add_option("--pfc", a->pfc,
                  "Lossless thresholds per (ingress, priority): xoff=SIZE,xon=SIZE (default "
                  "xoff=64KB,xon=32KB); and/or lossless priorities PRIO[,PRIO] beside lossy ones "
                  "(--mode lossy or ecn). May be repeated");
  sub->add_option("--priorities", a->priorities,
                  "Priority queues per egress port, 1..8; a frame's priority comes from its "
                  "DSCP (--prio-map)")
      ->capture_default_str();
  sub->add_option("--prio-map", a->prio_map,
                  "DSCP=PRIO[,DSCP=PRIO]: DSCP to priority, over the default DSCP >> 3 (capped "
                  "at --priorities - 1); non-IP frames are priority 0");
  sub->add_option("--dwrr", a->dwrr,
                  "W0,W1,...: DWRR weights, one per priority (quantum W x 1500 B; default all 1)");
  sub->add_option("--strict", a->strict,
                  "PRIO[,PRIO]: strict priorities, served before the DWRR ones, highest first");
  sub->add_option("--seed", a->seed, "Seed of the RED marking draws")->capture_default_str();
  sub->add_option("--frame-slots", a->frame_slots,
                  "Frame buffers for all queues and lossless hold queues, each the largest "
                  "port's MTU plus headers (at least 2 KiB); default: as many as 64 MiB holds, "
                  "at most 32768")
      ->check(CLI::Range(256u, 1u << 19));
  sub->add_option("--duration", a->duration, "Stop after SECONDS (default: at SIGINT/SIGTERM)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--stats-every", a->stats_every,
                  "Print the counters as a JSON line on stderr every SECONDS (also on SIGUSR1)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--trace", a->trace,
                  "Write queue samples as CSV: time_ns,port,depth_bytes,ecn_marked,dropped,"
                  "paused,tx_bytes");
  sub->add_option("--trace-interval", a->trace_interval_us, "Microseconds between trace samples")
      ->check(CLI::Range(10.0, 1e7))
      ->capture_default_str();
  sub->add_flag("--json", a->json, "Print the counters at exit as one JSON object");
  sub->add_option("--roce-port", a->roce_ports,
                  "UDP ports of the RoCE traffic, PORT[-PORT][,...] (default: UROCE_UDP_PORT if "
                  "set, else 4791): a held RC request that its QP's go-back-N resend replaces "
                  "leaves the lossless hold queue (counted as superseded), as a paused NIC would "
                  "not have sent it");
  return {sub, [a] { return run(*a); }};
}

}  // namespace uroce::cli
