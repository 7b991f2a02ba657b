// The diagnosing subcommands (kept out of command.hpp so their owner adds them without
// touching the others' declarations): `uroce stat`, `uroce doctor`.
#pragma once

#include "cli/command.hpp"

namespace uroce::cli {

// `uroce stat [--qp N] [--watch S] [--json] [--pid PID]`: counters of running processes.
Subcommand add_stat_command(CLI::App& app);
// `uroce doctor [--peer HOST] [--listen] [--json]`: the classic RoCE misconfigurations.
Subcommand add_doctor_command(CLI::App& app);
// Adds --metrics ADDR:PORT and --capture FILE.pcap to `uroce perf` and `uroce pingpong`
// (call after every subcommand was added).
// Calls fn(sub) for the subcommands that open a device and take the options that set its
// environment before it opens (--metrics, --capture, --impair): perf and pingpong.
template <class Fn>
void for_each_device_command(CLI::App& app, Fn fn) {
  for (const char* name : {"perf", "pingpong"}) {
    try {
      fn(*app.get_subcommand(name));
    } catch (const CLI::OptionNotFound&) {
      // not registered in this build of the command line
    }
  }
}

void add_telemetry_options(CLI::App& app);
void add_impair_option(CLI::App& app);  // --impair on perf and pingpong (impair_option.cpp)

}  // namespace uroce::cli
