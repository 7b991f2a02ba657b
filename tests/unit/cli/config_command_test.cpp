// The `uroce` binary and the environment: --help carries the table docs/configuration.md
// carries, --version, every malformed value is one line naming the variable, and the CLI
// honours the variables the drop-in honours (UROCE_NETDEVS, UROCE_MTU, UROCE_UDP_PORT).
// Devices are restricted to lo so the expectations hold on any host.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "config/env_table.hpp"
#include "run_command.hpp"

namespace uroce::test {
namespace {

const std::string kUroce = std::string(UROCE_BINARY_DIR) + "/bin/uroce";

// A private UDP port so devinfo's device never meets another test's.
std::string private_port() {
  return "UROCE_UDP_PORT=" + std::to_string(42000 + getpid() % 20000) + " ";
}

TEST(CliConfig, HelpListsEveryVariableFromTheTable) {
  const CommandResult r = run(kUroce + " --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(config::render_env_table_text()), std::string::npos) << r.out;
  for (const config::EnvVar& v : config::env_table()) {
    EXPECT_NE(r.out.find("  " + std::string(v.name) + " "), std::string::npos) << v.name;
  }
}

TEST(CliConfig, Version) {
  const CommandResult r = run(kUroce + " --version");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("uroce 0.1.0")) << r.out;
  EXPECT_EQ(lines(r.out).size(), 1u) << r.out;
}

TEST(CliConfig, MalformedValuesAreOneLineNamingTheVariable) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"UROCE_UDP_PORT=123abc",
       "uroce devinfo: UROCE_UDP_PORT=123abc is not a UDP port (1 .. 65535)\n"},
      {"UROCE_PORT=99999", "uroce devinfo: UROCE_PORT=99999 is not a UDP port (1 .. 65535)\n"},
      {"UROCE_MTU=1500",
       "uroce devinfo: UROCE_MTU=1500 is not an IB MTU (256, 512, 1024, 2048 or 4096)\n"},
      {"UROCE_SPIN_US=-1",
       "uroce devinfo: UROCE_SPIN_US=-1 is not a number of microseconds (0 .. 1000000)\n"},
      {"UROCE_STAT=yes", "uroce devinfo: UROCE_STAT=yes is not 0 or 1\n"},
  };
  for (const auto& [assignment, message] : cases) {
    const CommandResult r = run(assignment + " UROCE_NETDEVS=lo " + kUroce + " devinfo");
    EXPECT_EQ(r.exit_code, 1) << assignment;
    EXPECT_EQ(r.err, message) << assignment;
    EXPECT_EQ(r.out, "") << assignment;
  }
}

TEST(CliConfig, UnknownVariableIsWarnedOnceAndTheCommandRuns) {
  const CommandResult r = run("UROCE_NETDEV=lo UROCE_NETDEVS=lo " + kUroce + " gids");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err,
            "uroce: unknown environment variable UROCE_NETDEV is ignored (did you mean "
            "UROCE_NETDEVS?)\n");
}

TEST(CliConfig, NetdevsRestrictTheCliDevicesAndMtuApplies) {
  const CommandResult gids = run("UROCE_NETDEVS=lo " + kUroce + " gids");
  ASSERT_EQ(gids.exit_code, 0) << gids.err;
  EXPECT_EQ(gids.out,
            "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4\t\tVER\tDEV\n"
            "---\t----\t-----\t---\t\t\t\t\t------------\t---\t---\n"
            "uroce_lo\t1\t0\t0000:0000:0000:0000:0000:0000:0000:0001\t               \tv2\tlo\n"
            "uroce_lo\t1\t1\t0000:0000:0000:0000:0000:ffff:7f00:0001\t127.0.0.1      \tv2\tlo\n"
            "n_gids_found=2\n");

  const CommandResult info =
      run(private_port() + "UROCE_NETDEVS=lo UROCE_MTU=1024 " + kUroce + " devinfo");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("hca_id:\turoce_lo\n"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("\t\t\tactive_mtu:\t\t1024 (3)\n"), std::string::npos) << info.out;
}

TEST(CliConfig, DeviceNamesAndTheDeprecatedAlias) {
  const std::string env = private_port() + "UROCE_NETDEVS=lo ";
  // uroce0, the old single device, is accepted as the first device.
  const CommandResult alias = run(env + kUroce + " devinfo -l -d uroce0");
  ASSERT_EQ(alias.exit_code, 0) << alias.err;
  EXPECT_EQ(alias.out, "1 HCA found:\n\turoce_lo\n\n");
  const CommandResult named = run(env + kUroce + " gids -d uroce_lo");
  EXPECT_EQ(named.exit_code, 0) << named.err;
  EXPECT_EQ(lines(named.out).back(), "n_gids_found=2");
  const CommandResult none = run(env + kUroce + " gids -d uroce_nosuch0");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.err, "uroce gids: IB device uroce_nosuch0 not found; uroce provides uroce_lo\n");
  const CommandResult none_info = run(env + kUroce + " devinfo -d mlx5_0");
  EXPECT_EQ(none_info.exit_code, 2);
  EXPECT_EQ(none_info.err, "uroce devinfo: IB device mlx5_0 not found; uroce provides uroce_lo\n");
}

}  // namespace
}  // namespace uroce::test
