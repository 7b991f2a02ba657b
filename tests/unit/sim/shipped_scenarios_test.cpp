// Every shipped scenario parses, and scenarios/README.md lists it with its one command.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/scenario_toml.hpp"

namespace uroce::sim {
namespace {

TEST(ShippedScenarios, ParseAndAreListedWithTheirCommand) {
  const std::filesystem::path dir = std::filesystem::path(UROCE_SOURCE_DIR) / "scenarios";
  std::ifstream in(dir / "README.md");
  std::ostringstream os;
  os << in.rdbuf();
  const std::string readme = os.str();
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".toml") continue;
    ++n;
    const std::string file = e.path().filename().string();
    EXPECT_NO_THROW((void)load_scenario(e.path().string())) << file;
    const Scenario sc = load_scenario(e.path().string());
    EXPECT_EQ(sc.name, e.path().stem().string()) << file;
    EXPECT_FALSE(sc.description.empty()) << file;
    EXPECT_NE(readme.find("`build/bin/uroce sim scenarios/" + file + "`"), std::string::npos)
        << file;
  }
  EXPECT_GE(n, 20);
  // And every scenario the README lists exists (a removed one leaves no row behind).
  const std::string cmd = "`build/bin/uroce sim scenarios/";
  for (size_t at = readme.find(cmd); at != std::string::npos; at = readme.find(cmd, at + 1)) {
    const size_t start = at + cmd.size();
    const std::string file = readme.substr(start, readme.find('`', start) - start);
    EXPECT_TRUE(std::filesystem::exists(dir / file)) << "README lists " << file;
  }
}

}  // namespace
}  // namespace uroce::sim
