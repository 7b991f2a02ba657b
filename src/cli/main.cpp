// `uroce`: dispatches to the subcommand named on the command line.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <array>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/diagnose_commands.hpp"
#include "cli/version.hpp"
#include "config/env_table.hpp"

namespace {

using AddCommand = uroce::cli::Subcommand (*)(CLI::App&);

constexpr std::array<AddCommand, 10> kCommands = {
    &uroce::cli::add_dump_command,     &uroce::cli::add_devinfo_command,
    &uroce::cli::add_gids_command,     &uroce::cli::add_perf_command,
    &uroce::cli::add_pingpong_command, &uroce::cli::add_stat_command,
    &uroce::cli::add_doctor_command,   &uroce::cli::add_switch_command,
    &uroce::cli::add_sim_command,      &uroce::cli::add_exec_command};

// One line a user can act on: what is wrong, then where the usage is.
std::string one_line_failure(const CLI::App* app, const CLI::Error& e) {
  std::string where = "uroce";
  for (const CLI::App* sub : app->get_subcommands()) where += " " + sub->get_name();
  return fmt::format("{}: {}; run '{} --help' for usage\n", where, e.what(), where);
}

}  // namespace

int main(int argc, char** argv) {
  uroce::config::warn_unknown_env_once();  // every subcommand, also those opening no device
  CLI::App app{"uroce: RoCE v2 in user space", "uroce"};
  const std::string git = uroce::cli::kGitDescribe;
  app.set_version_flag("--version", fmt::format("uroce {}{}", uroce::cli::kProjectVersion,
                                                git.empty() ? "" : " (git " + git + ")"));
  // The environment table, generated from the same rows as docs/configuration.md.
  app.footer("\n" + uroce::config::render_env_table_text());
  app.require_subcommand(1);
  app.failure_message(one_line_failure);
  std::vector<uroce::cli::Subcommand> commands;
  commands.reserve(kCommands.size());
  for (AddCommand add : kCommands) commands.push_back(add(app));
  uroce::cli::add_telemetry_options(app);
  uroce::cli::add_impair_option(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? uroce::cli::kExitOk : uroce::cli::kExitUsage;
  }
  for (const auto& command : commands) {
    if (command.parser->parsed()) return command.run();
  }
  return uroce::cli::kExitUsage;
}
