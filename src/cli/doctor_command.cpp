// `uroce doctor [--peer HOST] [--json] [--port N]` and `uroce doctor --listen`: checks the
// classic RoCE v2 misconfigurations of this host (and of the path to a peer running
// `uroce doctor --listen`) and prints PASS / WARN / FAIL with the command that fixes each.
// Exit status: 0 when nothing FAILed, 1 otherwise, 2 for usage errors.
//
// Kernel RDMA devices (rxe, mlx5, ...) get their own checks after uroce's (doctor_kernel.hpp);
// -d limits them to one device. With --peer, each kernel port on the route to the peer has
// its active_mtu compared with the peer's.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

#include "cli/diagnose_commands.hpp"
#include "cli/doctor_checks.hpp"
#include "cli/doctor_kernel.hpp"
#include "cli/doctor_probe.hpp"
#include "kdev/kernel_device.hpp"

namespace uroce::cli {
namespace {

struct DoctorOptions {
  std::string peer;
  bool json = false;
  bool listen = false;
  std::string bind;
  uint16_t port = 4791;
  unsigned count = 0;
  double timeout_s = 0;
  std::string device;  // -d: only this kernel device
};

int run_doctor(const DoctorOptions& o) {
  if (o.listen) {
    fmt::print("uroce doctor: answering probes on UDP {}{}\n", o.bind.empty() ? "" : o.bind + ":",
               o.port);
    std::fflush(stdout);
    return run_probe_listener(o.bind, o.port, o.count, o.timeout_s);
  }
  std::vector<kdev::KernelDevice> kernel = kdev::read_kernel_devices(kdev::sysfs_root());
  if (!o.device.empty()) {
    std::erase_if(kernel, [&](const kdev::KernelDevice& d) { return d.name != o.device; });
    if (kernel.empty()) {
      fmt::print(stderr,
                 "uroce doctor: no kernel RDMA device {} in {}/class/infiniband (kernel devices: "
                 "{}); leave out -d to check uroce's devices only\n",
                 o.device, kdev::sysfs_root(),
                 kdev::kernel_device_names(kdev::read_kernel_devices(kdev::sysfs_root(), false)));
      return kExitUsage;
    }
  }
  std::vector<CheckResult> results = run_local_checks(o.peer, o.port);
  std::optional<Route> route;
  if (!o.peer.empty()) {
    std::string error;
    route = route_to(o.peer, &error);
    if (route) {
      for (CheckResult& r : run_peer_checks(o.peer, o.port, route)) results.push_back(std::move(r));
    }
  }
  if (!kernel.empty()) {
    const KernelDoctorEnv env = live_kernel_doctor_env(kernel);
    for (const kdev::KernelDevice& d : kernel) {
      for (CheckResult& r : check_kernel_device(d, env)) results.push_back(std::move(r));
    }
    results.push_back(check_kernel_memlock(env.memlock_soft, env.root_user));
  }
  if (route && !kernel.empty()) {
    std::optional<ProbeReply> reply;
    for (const kdev::KernelDevice& d : kernel) {
      for (const kdev::KernelPort& p : d.ports) {
        if (p.netdev != route->netdev) continue;
        if (!reply) {
          std::string error;
          reply = send_probe(o.peer, o.port, 64, route->mtu, p.active_mtu, 3, 700, &error);
          if (!reply) break;  // udp_reachability above already says so
        }
        results.push_back(
            check_kernel_peer_mtu(d, p, o.peer, reply->netdev_mtu, reply->active_mtu));
      }
    }
  }
  bool failed = false;
  for (const CheckResult& r : results) failed = failed || r.level == CheckLevel::kFail;
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const CheckResult& r : results) j.push_back(check_json(r));
    fmt::print("{}\n", j.dump(2));
  } else {
    for (const CheckResult& r : results) std::fputs(format_check(r).c_str(), stdout);
  }
  return failed ? kExitFailure : kExitOk;
}

}  // namespace

Subcommand add_doctor_command(CLI::App& app) {
  auto o = std::make_shared<DoctorOptions>();
  CLI::App* sub = app.add_subcommand(
      "doctor", "Check this host and the path to a peer for RoCE v2 misconfigurations");
  sub->add_option("--peer", o->peer, "Peer host running `uroce doctor --listen`");
  sub->add_flag("--json", o->json, "JSON output");
  sub->add_flag("--listen", o->listen,
                "Answer the probes of `uroce doctor --peer` from another host");
  sub->add_option("--bind", o->bind, "With --listen: the address to listen on (default: all)");
  sub->add_option("--port", o->port, "UDP port of the probes (default 4791, RoCE v2's)");
  sub->add_option("--count", o->count, "With --listen: exit after answering N probes");
  sub->add_option("--timeout", o->timeout_s, "With --listen: exit after SECONDS without a probe");
  sub->add_option("-d,--ib-dev", o->device,
                  "Only this kernel RDMA device (rxe0, mlx5_0; default: every one)");
  return Subcommand{sub, [o] { return run_doctor(*o); }};
}

}  // namespace uroce::cli
