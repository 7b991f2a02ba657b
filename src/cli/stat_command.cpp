// `uroce stat [--qp N] [--watch SECONDS] [--all] [--json] [--pid PID] [-d DEV]`: the counters
// of running uroce processes (of this network namespace), read from the shared-memory
// segments they publish (src/telemetry/shm_layout.hpp), like `rdma statistic show`. Works
// from outside the processes and without root for the user's own; segments of dead processes
// are removed. --watch opens each refresh with a timestamp and shows per-second rates; the
// text hides counters that are 0 unless --all.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "cli/diagnose_commands.hpp"
#include "cli/stat_format.hpp"
#include "telemetry/shm_segment.hpp"

namespace uroce::cli {
namespace {

struct StatOptions {
  std::optional<uint32_t> qpn;
  double watch_s = 0;
  unsigned iterations = 0;  // --watch: stop after this many (0: until interrupted)
  bool json = false;
  bool all = false;
  std::optional<int> pid;
  std::string device;
};

uint64_t unix_now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

int run_stat(const StatOptions& o) {
  std::map<std::pair<int, std::string>, telemetry::DeviceSnapshot> previous;
  for (unsigned round = 0;; ++round) {
    const uint64_t now_ns = unix_now_ns();
    std::vector<std::string> notes;
    telemetry::ReadOptions ro;
    ro.pid = o.pid;
    ro.device = o.device;
    const std::vector<telemetry::DeviceSnapshot> snaps = telemetry::read_segments(ro, &notes);
    for (const std::string& n : notes) fmt::print(stderr, "uroce stat: {}\n", n);
    if (snaps.empty()) {
      fmt::print(stderr,
                 "uroce stat: no running uroce process{} of this network namespace publishes "
                 "counters in {}\n",
                 o.pid ? fmt::format(" with pid {}", *o.pid) : std::string(), telemetry::shm_dir());
      return kExitFailure;
    }
    if (o.qpn) {
      bool found = false;
      for (const auto& s : snaps) found = found || s.qp(*o.qpn) != nullptr;
      if (!found) {
        fmt::print(stderr, "uroce stat: no QP {} in any running uroce process\n", *o.qpn);
        return kExitFailure;
      }
    }
    nlohmann::json all = nlohmann::json::array();
    std::string text = o.watch_s > 0 ? format_refresh_header(now_ns) : std::string();
    for (const auto& s : snaps) {
      StatView view;
      view.qpn = o.qpn;
      view.all = o.all;
      view.program = telemetry::process_program(s.pid);
      auto prev = previous.find({s.pid, s.device});
      if (prev != previous.end()) {
        view.previous = &prev->second;
        view.interval_s =
            static_cast<double>(s.published_unix_ns - prev->second.published_unix_ns) / 1e9;
      }
      if (o.json) {
        all.push_back(stat_json(s, view));
        if (o.watch_s > 0) all.back()["read_unix_ns"] = now_ns;
      } else {
        text += format_stat_text(s, view);
      }
    }
    if (o.json) {
      fmt::print("{}\n", all.dump(o.watch_s > 0 ? -1 : 2));
    } else {
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
    std::fflush(stdout);
    if (o.watch_s <= 0 || (o.iterations != 0 && round + 1 >= o.iterations)) return kExitOk;
    previous.clear();
    for (const auto& s : snaps) previous.emplace(std::make_pair(s.pid, s.device), s);
    std::this_thread::sleep_for(std::chrono::duration<double>(o.watch_s));
    if (!o.json) fmt::print("\n");
  }
}

}  // namespace

Subcommand add_stat_command(CLI::App& app) {
  auto o = std::make_shared<StatOptions>();
  CLI::App* sub =
      app.add_subcommand("stat", "Counters of running uroce processes, like rdma statistic show");
  sub->add_option("--qp", o->qpn, "Only this QP (all its counters)");
  sub->add_option("--watch", o->watch_s,
                  "Print again every SECONDS: a timestamp, then per-second rates (+N/s)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--iterations", o->iterations, "With --watch: stop after N prints");
  sub->add_flag("--all", o->all, "Also show the counters that are 0 (text; JSON has them all)");
  sub->add_flag("--json", o->json, "JSON output (one array per print)");
  sub->add_option("--pid", o->pid, "Only this process");
  sub->add_option("-d,--ib-dev", o->device, "Only this device");
  return Subcommand{sub, [o] { return run_stat(*o); }};
}

}  // namespace uroce::cli
