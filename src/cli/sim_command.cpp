// `uroce sim SCENARIO.toml [--out DIR] [--seed N] [--progress] [--no-report]`: runs one
// scenario of the deterministic fabric simulator (src/sim, docs/simulator-scenarios.md),
// writes its result files into DIR, then run.json (wall time and speed: the one file that
// is not a pure function of scenario and seed) and, when bench/sim-report exists in the
// source tree this binary was built from, the HTML report.
#include <fmt/format.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>

#include "cli/command.hpp"
#include "cli/version.hpp"
#include "sim/output.hpp"
#include "sim/scenario_toml.hpp"
#include "sim/simulator.hpp"

extern char** environ;

namespace uroce::cli {
namespace {

struct SimArgs {
  std::string scenario;
  std::string out;
  std::optional<uint64_t> seed;
  bool progress = false;
  bool no_report = false;
};

struct Progress {
  std::chrono::steady_clock::time_point start;
  double end_ns = 1;
};

void show_progress(void* ctx, TimePoint now, uint64_t events) {
  auto* p = static_cast<Progress*>(ctx);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - p->start).count();
  const double frac = std::min(1.0, static_cast<double>(now.count()) / p->end_ns);
  const int filled = static_cast<int>(frac * 30);
  fmt::print(stderr, "\r[{:<30}] {:9.3f} us of {:.0f} us  {:6.2f} M events/s",
             std::string(filled, '#'), static_cast<double>(now.count()) / 1e3, p->end_ns / 1e3,
             wall > 0 ? static_cast<double>(events) / wall / 1e6 : 0.0);
}

// CPU seconds this process used (the machine may be shared: wall time alone understates the
// simulator's speed there).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The report generator, if this source tree has one; returns one line when it cannot run.
std::string run_report(const std::string& dir) {
  const std::string script = std::string(UROCE_SIM_SOURCE_DIR) + "/bench/sim-report";
  if (!std::filesystem::exists(script)) return "no report: " + script + " is not there";
  if (access("/usr/bin/python3", X_OK) != 0) return "no report: /usr/bin/python3 is missing";
  std::vector<std::string> args = {"/usr/bin/python3", script, dir};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
    return "no report: cannot start /usr/bin/python3";
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return fmt::format("no report: bench/sim-report failed (status {})", status);
  }
  return "";
}

int run_sim(const SimArgs& a) {
  sim::Scenario sc;
  try {
    sc = sim::load_scenario(a.scenario);
    if (a.seed) sc.seed = *a.seed;
  } catch (const sim::ScenarioError& e) {
    fmt::print(stderr, "uroce sim: {}\n", e.what());
    return kExitUsage;
  }
  const std::string out = a.out.empty() ? "sim-" + sc.name : a.out;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    sim::Simulator s(sc, a.scenario);
    Progress prog{t0, static_cast<double>(sc.duration_ns)};
    if (a.progress || isatty(STDERR_FILENO) != 0) s.set_progress(&show_progress, &prog);
    const auto t1 = std::chrono::steady_clock::now();
    const double cpu1 = cpu_seconds();
    prog.start = t1;
    s.run();
    const auto t2 = std::chrono::steady_clock::now();
    const double cpu = cpu_seconds() - cpu1;
    const sim::OutputFiles files = sim::render_outputs(s);
    // Speed counts the event loop only (setup registers every host's buffer once).
    const double wall = std::chrono::duration<double>(t2 - t1).count();
    const double total =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (a.progress || isatty(STDERR_FILENO) != 0) fmt::print(stderr, "\n");
    sim::write_outputs(files, out);
    const double eps = wall > 0 ? static_cast<double>(s.events()) / wall : 0;
    const double hps = wall > 0 ? static_cast<double>(s.packet_hops()) / wall : 0;
    const std::string git = kGitDescribe;
    const double hps_cpu = cpu > 0 ? static_cast<double>(s.packet_hops()) / cpu : 0;
    // wall_s: the whole command; run_s / cpu_s: the event loop only, in wall and CPU time.
    std::ofstream(std::filesystem::path(out) / "run.json") << fmt::format(
        "{{\"wall_s\": {:.6g}, \"run_s\": {:.6g}, \"cpu_s\": {:.6g}, \"events_per_s\": {:.6g}, "
        "\"packet_hops_per_s\": {:.6g}, \"packet_hops_per_cpu_s\": {:.6g}, \"uroce_version\": "
        "\"{}{}\"}}\n",
        total, wall, cpu, eps, hps, hps_cpu, kProjectVersion, git.empty() ? "" : "-" + git);
    uint64_t done = 0;
    for (const auto& f : s.flows()) done += f.completed ? 1 : 0;
    if (s.failed_flows() != 0) {
      fmt::print(stderr,
                 "uroce sim: {}: {} flows failed (a work completion with an error status, e.g. "
                 "retries exhausted); flows.csv marks them completed = 0\n",
                 sc.name, s.failed_flows());
    }
    fmt::print(stderr,
               "uroce sim: {}: {}/{} flows completed in {:.3f} us simulated; {} events, {} packet "
               "hops in {:.2f} s ({:.3f} M events/s, {:.3f} M packet-hops/s; {:.3f} M "
               "packet-hops per CPU second); results in {}\n",
               sc.name, done, s.flows().size(), static_cast<double>(s.now().count()) / 1e3,
               s.events(), s.packet_hops(), wall, eps / 1e6, hps / 1e6, hps_cpu / 1e6, out);
  } catch (const sim::ScenarioError& e) {
    fmt::print(stderr, "uroce sim: {}\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "uroce sim: {}\n", e.what());
    return kExitFailure;
  }
  if (!a.no_report) {
    const std::string why = run_report(out);
    if (!why.empty()) fmt::print(stderr, "uroce sim: {}\n", why);
  }
  return kExitOk;
}

}  // namespace

Subcommand add_sim_command(CLI::App& app) {
  auto a = std::make_shared<SimArgs>();
  CLI::App* sub = app.add_subcommand(
      "sim",
      "Deterministic packet-level fabric simulator: runs the transport engine on a virtual "
      "clock over a scenario's topology, switches and workload (docs/simulator-scenarios.md)");
  sub->add_option("SCENARIO", a->scenario,
                  "Scenario file (TOML), e.g. scenarios/incast-lossless.toml")
      ->required();
  sub->add_option("--out", a->out, "Directory for the result files (default: sim-NAME)");
  sub->add_option("--seed", a->seed, "Override the scenario's seed");
  sub->add_flag("--progress", a->progress, "Show the progress bar even when stderr is not a tty");
  sub->add_flag("--no-report", a->no_report, "Do not run bench/sim-report for report.html");
  return {sub, [a] { return run_sim(*a); }};
}

}  // namespace uroce::cli
