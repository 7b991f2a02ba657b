// `uroce stat [--qp N] [--watch SECONDS] [--all] [--json] [--pid PID] [-d DEV]`: the counters
// of running uroce processes (of this network namespace), read from the shared-memory
// segments they publish (src/telemetry/shm_layout.hpp), like `rdma statistic show`. Works
// from outside the processes and without root for the user's own; segments of dead processes
// are removed. --watch opens each refresh with a timestamp and shows per-second rates; the
// text hides counters that are 0 unless --all.
//
// Kernel RDMA devices (rxe, mlx5, ...) are listed after the processes: each port's
// hw_counters and port counters from sysfs under uroce's names (src/kdev/kernel_counters.hpp),
// same text, rates and JSON. `--metrics ADDR:PORT` serves them on a Prometheus endpoint
// (the uroce_* families of the exporter) until interrupted, so one dashboard shows kernel
// devices and uroce processes (which serve their own with UROCE_METRICS / --metrics).
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "cli/diagnose_commands.hpp"
#include "cli/kernel_device_format.hpp"
#include "cli/stat_format.hpp"
#include "kdev/kernel_device.hpp"
#include "telemetry/metrics_server.hpp"
#include "telemetry/shm_segment.hpp"
#include "telemetry/wall_clock.hpp"

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
  std::string metrics;  // --metrics ADDR:PORT: serve the kernel devices' counters
};

// The kernel devices `uroce stat` shows: none with --pid or --qp (a kernel device has no
// process, and sysfs no per-QP counters), the one -d names, else all.
std::vector<kdev::KernelDevice> stat_kernel_devices(const StatOptions& o) {
  if (o.pid || o.qpn) return {};
  std::vector<kdev::KernelDevice> all = kdev::read_kernel_devices(kdev::sysfs_root(), false);
  if (o.device.empty()) return all;
  std::vector<kdev::KernelDevice> one;
  for (kdev::KernelDevice& d : all) {
    if (d.name == o.device) one.push_back(std::move(d));
  }
  return one;
}

// One port of a kernel device for the exporter: every scrape reads its counters again.
class KernelPortSource : public telemetry::SnapshotSource {
 public:
  KernelPortSource(kdev::KernelDevice dev, size_t port) : dev_(std::move(dev)), port_(port) {}
  [[nodiscard]] telemetry::DeviceSnapshot latest_snapshot() const override {
    kdev::KernelPort p = dev_.ports[port_];
    kdev::read_port_counters(kdev::sysfs_root(), dev_.name, p);
    return kernel_snapshot(dev_, p, telemetry::unix_ns());
  }

 private:
  kdev::KernelDevice dev_;
  size_t port_;
};

int serve_kernel_metrics(const StatOptions& o) {
  const std::vector<kdev::KernelDevice> devices = stat_kernel_devices(o);
  if (devices.empty()) {
    fmt::print(stderr,
               "uroce stat --metrics: no kernel RDMA device{} in {}/class/infiniband (kernel "
               "devices: {}); uroce processes serve their own: UROCE_METRICS=ADDR:PORT or "
               "--metrics on uroce perf / pingpong\n",
               o.device.empty() ? std::string() : " " + o.device, kdev::sysfs_root(),
               kdev::kernel_device_names(kdev::read_kernel_devices(kdev::sysfs_root(), false)));
    return kExitUsage;
  }
  // SIGINT/SIGTERM end the server cleanly: blocked before the server's thread starts (it
  // inherits the mask), then waited for here.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::vector<std::unique_ptr<KernelPortSource>> sources;
  std::vector<const telemetry::SnapshotSource*> served;
  std::string shown;
  for (const kdev::KernelDevice& d : devices) {
    for (size_t i = 0; i < d.ports.size(); ++i) {
      sources.push_back(std::make_unique<KernelPortSource>(d, i));
      served.push_back(sources.back().get());
      shown += fmt::format("{}{}/{}", shown.empty() ? "" : ", ", d.name, d.ports[i].port_num);
    }
  }
  std::string error;
  auto server = telemetry::MetricsServer::get(o.metrics, served, &error);
  if (!server) {
    fmt::print(stderr, "uroce stat --metrics: {}\n", error);
    return kExitUsage;
  }
  fmt::print("uroce stat: serving {} on port {} (GET /metrics) until interrupted\n", shown,
             server->port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  for (const auto& s : sources) server->remove(s.get());
  return kExitOk;
}

int run_stat(const StatOptions& o) {
  if (!o.metrics.empty()) return serve_kernel_metrics(o);
  std::map<std::pair<int, std::string>, telemetry::DeviceSnapshot> previous;
  std::vector<kdev::KernelDevice> kernel = stat_kernel_devices(o);
  for (unsigned round = 0;; ++round) {
    const uint64_t now_ns = telemetry::unix_ns();
    std::vector<std::string> notes;
    telemetry::ReadOptions ro;
    ro.pid = o.pid;
    ro.device = o.device;
    std::vector<telemetry::DeviceSnapshot> snaps = telemetry::read_segments(ro, &notes);
    for (const std::string& n : notes) fmt::print(stderr, "uroce stat: {}\n", n);
    for (kdev::KernelDevice& d : kernel) {
      for (kdev::KernelPort& p : d.ports) {
        kdev::read_port_counters(kdev::sysfs_root(), d.name, p);
        snaps.push_back(kernel_snapshot(d, p, now_ns));
      }
    }
    if (snaps.empty()) {
      const auto all_kernel = kdev::read_kernel_devices(kdev::sysfs_root(), false);
      fmt::print(stderr,
                 "uroce stat: no running uroce process{} of this network namespace publishes "
                 "counters in {}{}\n",
                 o.pid ? fmt::format(" with pid {}", *o.pid) : std::string(), telemetry::shm_dir(),
                 all_kernel.empty() || o.device.empty()
                     ? std::string()
                     : fmt::format(", and no kernel RDMA device is called {} (kernel devices: {})",
                                   o.device, kdev::kernel_device_names(all_kernel)));
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
      if (s.kernel_driver.empty()) view.program = telemetry::process_program(s.pid);
      auto prev = previous.find({s.pid, s.device + "/" + std::to_string(s.port_num)});
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
    for (const auto& s : snaps) {
      previous.emplace(std::make_pair(s.pid, s.device + "/" + std::to_string(s.port_num)), s);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(o.watch_s));
    if (!o.json) fmt::print("\n");
  }
}

}  // namespace

Subcommand add_stat_command(CLI::App& app) {
  auto o = std::make_shared<StatOptions>();
  CLI::App* sub =
      app.add_subcommand("stat",
                         "Counters of running uroce processes and kernel RDMA devices, like rdma "
                         "statistic show");
  sub->add_option("--qp", o->qpn, "Only this QP (all its counters)");
  sub->add_option("--watch", o->watch_s,
                  "Print again every SECONDS: a timestamp, then per-second rates (+N/s)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--iterations", o->iterations, "With --watch: stop after N prints");
  sub->add_flag("--all", o->all, "Also show the counters that are 0 (text; JSON has them all)");
  sub->add_flag("--json", o->json, "JSON output (one array per print)");
  sub->add_option("--pid", o->pid, "Only this process");
  sub->add_option("-d,--ib-dev", o->device, "Only this device (uroce's or a kernel one: rxe0)");
  sub->add_option("--metrics", o->metrics,
                  "Serve the kernel RDMA devices' counters on ADDR:PORT (GET /metrics) until "
                  "interrupted")
      ->type_name("ADDR:PORT");
  return Subcommand{sub, [o] { return run_stat(*o); }};
}

}  // namespace uroce::cli
