// `--metrics ADDR:PORT` and `--capture FILE.pcap` on `uroce perf` and `uroce pingpong`.
// They set UROCE_METRICS / UROCE_CAPTURE while the command line is parsed, before the
// command opens its device, and the device takes them from the environment like any uroce
// process (src/telemetry/device_telemetry.hpp) — so the commands' own code is untouched.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>

#include "cli/diagnose_commands.hpp"

namespace uroce::cli {

void add_telemetry_options(CLI::App& app) {
  for_each_device_command(app, [](CLI::App& cmd) {
    CLI::App* sub = &cmd;
    sub->add_option_function<std::string>(
           "--metrics", [](const std::string& v) { setenv("UROCE_METRICS", v.c_str(), 1); },
           "Serve Prometheus metrics on ADDR:PORT (GET /metrics) while running")
        ->type_name("ADDR:PORT");
    sub->add_option_function<std::string>(
           "--capture", [](const std::string& v) { setenv("UROCE_CAPTURE", v.c_str(), 1); },
           "Write every RoCE packet sent and received to this pcap file")
        ->type_name("FILE.pcap");
  });
}

}  // namespace uroce::cli
