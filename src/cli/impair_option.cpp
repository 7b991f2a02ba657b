// `--impair SPEC` on `uroce perf` and `uroce pingpong`: sets UROCE_IMPAIR while the command
// line is parsed, before the command opens its device, and the device takes it from the
// environment like any uroce process (src/net/impaired_packet_io.hpp). The spec is checked
// here too, so a malformed one is a usage error (exit 2) before anything starts.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>

#include "cli/diagnose_commands.hpp"
#include "fault/impair_spec.hpp"

namespace uroce::cli {

void add_impair_option(CLI::App& app) {
  for_each_device_command(app, [](CLI::App& cmd) {
    CLI::App* sub = &cmd;
    sub->add_option_function<std::string>(
           "--impair",
           [](const std::string& v) {
             fault::ImpairSpec spec;
             if (std::string e = fault::parse_impair_spec("--impair", v, spec); !e.empty()) {
               throw CLI::ValidationError(e);
             }
             setenv("UROCE_IMPAIR", v.c_str(), 1);
           },
           "Impair this process's RoCE packets, e.g. loss=2%,delay=50us (docs/impairment.md)")
        ->type_name("SPEC");
  });
}

}  // namespace uroce::cli
