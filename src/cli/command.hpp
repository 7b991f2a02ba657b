// The `uroce` command's subcommands. Each lives in its own file and adds itself to the
// top-level CLI11 parser through an add_*_command() function listed in main.cpp; main()
// parses the command line once and runs the subcommand the user picked.
#pragma once

#include <functional>

#include "cli/cli11_fwd.hpp"

namespace uroce::cli {

// Exit statuses shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the work failed part-way (e.g. a damaged capture)
inline constexpr int kExitUsage = 2;    // bad arguments or an input that cannot be opened

struct Subcommand {
  CLI::App* parser = nullptr;  // owned by the top-level CLI::App
  std::function<int()> run;    // returns the process exit status
};

// `uroce dump FILE [--json]`: decode the RoCE v2 packets of a pcap/pcapng file.
Subcommand add_dump_command(CLI::App& app);

// `uroce devinfo [-v]`: device and port attributes like ibv_devinfo.
Subcommand add_devinfo_command(CLI::App& app);
// `uroce gids`: the GID tables like show_gids.
Subcommand add_gids_command(CLI::App& app);
// `uroce perf TEST [HOST]`: perftest-style bandwidth and latency tests.
Subcommand add_perf_command(CLI::App& app);
// `uroce pingpong [--transport rc|uc|ud] [--srq] [HOST]`: rdma-core's pingpong examples.
Subcommand add_pingpong_command(CLI::App& app);
// `uroce switch --port IF --port IF ...`: a user-space switch with the fabric queue model.
Subcommand add_switch_command(CLI::App& app);
// `uroce sim SCENARIO [--out DIR] [--seed N]`: the deterministic fabric simulator.
Subcommand add_sim_command(CLI::App& app);
// `uroce exec -- PROGRAM [ARGS...]`: an unmodified RDMA program on uroce (drop-in + sysfs view).
Subcommand add_exec_command(CLI::App& app);

}  // namespace uroce::cli
