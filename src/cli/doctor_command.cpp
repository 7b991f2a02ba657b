// `uroce doctor [--peer HOST] [--json] [--port N]` and `uroce doctor --listen`: checks the
// classic RoCE v2 misconfigurations of this host (and of the path to a peer running
// `uroce doctor --listen`) and prints PASS / WARN / FAIL with the command that fixes each.
// Exit status: 0 when nothing FAILed, 1 otherwise, 2 for usage errors.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "cli/diagnose_commands.hpp"
#include "cli/doctor_checks.hpp"
#include "cli/doctor_probe.hpp"

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
};

int run_doctor(const DoctorOptions& o) {
  if (o.listen) {
    fmt::print("uroce doctor: answering probes on UDP {}{}\n", o.bind.empty() ? "" : o.bind + ":",
               o.port);
    std::fflush(stdout);
    return run_probe_listener(o.bind, o.port, o.count, o.timeout_s);
  }
  std::vector<CheckResult> results = run_local_checks(o.peer, o.port);
  if (!o.peer.empty()) {
    std::string error;
    const std::optional<Route> route = route_to(o.peer, &error);
    if (route) {
      for (CheckResult& r : run_peer_checks(o.peer, o.port, route)) results.push_back(std::move(r));
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
  return Subcommand{sub, [o] { return run_doctor(*o); }};
}

}  // namespace uroce::cli
