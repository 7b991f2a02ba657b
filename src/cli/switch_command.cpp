// `uroce switch --port IF --port IF ... [--mode lossy|ecn|lossless] [--rate R] [--buffer B]
// [--ecn kmin=..,kmax=..,pmax=..] [--pfc xoff=..,xon=..] [--json] [--trace FILE.csv]`: a
// user-space Ethernet switch between network interfaces (veths), whose egress ports are the
// switch queue model of src/fabric: a shared bottleneck for real processes, with queue-depth
// ECN marking and a PFC-like lossless mode that this kernel's qdiscs cannot give
// (docs/congestion.md, "A shared bottleneck with real processes"). The loop and what it
// emulates: switch_forwarder.hpp.
#include <fmt/format.h>

#include <memory>

#include "cli/command.hpp"
#include "cli/switch_forwarder.hpp"
#include "cli/switch_options.hpp"

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
  std::string pfc;
  uint64_t seed = 1;
  uint32_t frame_slots = 32768;
  double duration = 0;
  double stats_every = 0;
  std::string trace;
  double trace_interval_us = 1000;
  bool json = false;
};

int fail(const std::string& why) {
  fmt::print(stderr, "uroce switch: {}\n", why);
  return kExitUsage;
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
  if (!a.pfc.empty()) {
    if (o.mode != SwitchMode::kLossless) return fail("--pfc needs --mode lossless");
    if (!parse_pfc(a.pfc, o.queue.pfc, error)) return fail(error);
  } else {
    o.queue.pfc = {.xoff_bytes = 64 * 1024, .xon_bytes = 32 * 1024, .headroom_bytes = 0};
  }
  // The forwarder pauses with no reaction time: one frame past XOFF is the most it queues.
  o.queue.pfc.headroom_bytes = std::max<uint64_t>(o.queue.pfc.headroom_bytes, o.slot_bytes);
  o.queue.seed = a.seed;
  o.frame_slots = a.frame_slots;
  o.duration_s = a.duration;
  o.stats_every_s = a.stats_every;
  o.trace_path = a.trace;
  o.trace_interval_us = a.trace_interval_us;
  o.json = a.json;
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
  sub->add_option(
      "--pfc", a->pfc,
      "Lossless thresholds per ingress: xoff=SIZE,xon=SIZE (default xoff=64KB,xon=32KB)");
  sub->add_option("--seed", a->seed, "Seed of the RED marking draws")->capture_default_str();
  sub->add_option("--frame-slots", a->frame_slots,
                  "Frame buffers (2 KiB each) for all queues and lossless hold queues")
      ->check(CLI::Range(256u, 1u << 19))
      ->capture_default_str();
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
  return {sub, [a] { return run(*a); }};
}

}  // namespace uroce::cli
