// The one configuration surface: strict parsing of every variable (each bad value gives its
// exact one-line message), the UROCE_PORT alias, the unknown-variable warning, and the table
// that docs/configuration.md and `uroce --help` are rendered from.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "config/env_table.hpp"
#include "config/host_options.hpp"

namespace uroce::config {
namespace {

struct Env {
  std::map<std::string, std::string> vars;
  HostOptions::Getenv getter() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

std::string error_of(const std::map<std::string, std::string>& vars) {
  Env env{vars};
  std::string error;
  auto o = HostOptions::from_env(error, env.getter());
  EXPECT_FALSE(o.has_value());
  return error;
}

HostOptions options_of(const std::map<std::string, std::string>& vars) {
  Env env{vars};
  std::string error;
  auto o = HostOptions::from_env(error, env.getter());
  EXPECT_TRUE(o.has_value()) << error;
  return o.value_or(HostOptions{});
}

TEST(HostOptions, NothingSetIsAllDefaults) {
  const HostOptions o = options_of({});
  EXPECT_FALSE(o.udp_port.has_value());
  EXPECT_TRUE(o.netdevs.empty());
  EXPECT_TRUE(o.device_addrs.empty());
  EXPECT_FALSE(o.mtu.has_value());
  EXPECT_FALSE(o.spin_us.has_value());
  EXPECT_FALSE(o.batch_posts.has_value());
  EXPECT_FALSE(o.peer.has_value());
  EXPECT_FALSE(o.quiet);
  // An empty value counts as unset, as the drop-in always treated it.
  EXPECT_FALSE(options_of({{"UROCE_UDP_PORT", ""}}).udp_port.has_value());
}

TEST(HostOptions, GoodValues) {
  const HostOptions o = options_of({{"UROCE_UDP_PORT", "4791"},
                                    {"UROCE_NETDEVS", "eth0,,lo"},
                                    {"UROCE_DEVICE_ADDR", "192.0.2.2,fd00::2"},
                                    {"UROCE_MTU", "1024"},
                                    {"UROCE_SPIN_US", "0"},
                                    {"UROCE_PEER", "10.0.0.2"},
                                    {"UROCE_QUIET", "1"},
                                    {"UROCE_STAT", "0"}});
  EXPECT_EQ(o.udp_port, 4791);
  EXPECT_EQ(o.netdevs, (std::vector<std::string>{"eth0", "lo"}));
  EXPECT_EQ(o.device_addrs, (std::vector<std::string>{"192.0.2.2", "fd00::2"}));
  EXPECT_EQ(o.mtu, 1024u);
  EXPECT_EQ(o.spin_us, 0u);
  EXPECT_EQ(o.peer, "10.0.0.2");
  EXPECT_TRUE(o.quiet);
  EXPECT_EQ(options_of({{"UROCE_UDP_PORT", "65535"}}).udp_port, 65535);
  EXPECT_EQ(options_of({{"UROCE_SPIN_US", "1000000"}}).spin_us, 1000000u);
  EXPECT_EQ(options_of({{"UROCE_HANDOFF_US", "0"}}).handoff_us, 0u);
  EXPECT_EQ(options_of({{"UROCE_HANDOFF_US", "250"}}).handoff_us, 250u);
  EXPECT_EQ(options_of({{"UROCE_BATCH_POSTS", "0"}}).batch_posts, false);
  EXPECT_EQ(options_of({{"UROCE_BATCH_POSTS", "1"}}).batch_posts, true);
  EXPECT_EQ(options_of({{"UROCE_PROGRESS_CPUS", "1"}}).progress_cpus, std::vector<int>{1});
  EXPECT_EQ(options_of({{"UROCE_PROGRESS_CPUS", "6,0-3"}}).progress_cpus,
            (std::vector<int>{0, 1, 2, 3, 6}));
  EXPECT_EQ(options_of({{"UROCE_PROGRESS_CPUS", "3,3,2-3,1023"}}).progress_cpus,
            (std::vector<int>{2, 3, 1023}));
  EXPECT_TRUE(options_of({}).progress_cpus.empty());
}

TEST(HostOptions, AProgressCpuListIsWhatTasksetTakes) {
  for (const char* bad : {"a", "1-", "-1", "3-1", "1,,2", "1,", " 1", "1 ", "1024", "0-1024", "0x1",
                          "1.5", "2--3", "99999"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(error_of({{"UROCE_PROGRESS_CPUS", bad}}),
              std::string("UROCE_PROGRESS_CPUS=") + bad +
                  " is not a CPU list (CPU numbers 0 .. 1023 and ranges, like 2 or 0-3,6)");
  }
}

TEST(HostOptions, ACpuListFormatsAsItParses) {
  EXPECT_EQ(config::format_cpu_list({}), "");
  EXPECT_EQ(config::format_cpu_list({3}), "3");
  EXPECT_EQ(config::format_cpu_list({0, 1, 2, 5}), "0-2,5");
  EXPECT_EQ(config::format_cpu_list({0, 2, 3, 4, 7, 8, 1023}), "0,2-4,7-8,1023");
  for (const char* text : {"0", "0-3,6", "1,3,5-9,11-12"}) {
    std::string error;
    const auto cpus = config::parse_cpu_list_var("UROCE_PROGRESS_CPUS", text, error);
    ASSERT_TRUE(cpus.has_value()) << error;
    EXPECT_EQ(config::format_cpu_list(*cpus), text);
  }
}

TEST(HostOptions, EachBadValueNamesTheVariableTheValueAndTheRange) {
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {{{"UROCE_UDP_PORT", "123abc"}}, "UROCE_UDP_PORT=123abc is not a UDP port (1 .. 65535)"},
      // Control bytes are shown, so the message stays one line (found by fuzz_env_options).
      {{{"UROCE_UDP_PORT", "47\n91"}}, "UROCE_UDP_PORT=47\\x0a91 is not a UDP port (1 .. 65535)"},
      {{{"UROCE_DEVICE_ADDR", "\n"}},
       "UROCE_DEVICE_ADDR=\\x0a: '\\x0a' is not an IPv4 or IPv6 address"},
      {{{"UROCE_UDP_PORT", "0"}}, "UROCE_UDP_PORT=0 is not a UDP port (1 .. 65535)"},
      {{{"UROCE_UDP_PORT", "65536"}}, "UROCE_UDP_PORT=65536 is not a UDP port (1 .. 65535)"},
      {{{"UROCE_UDP_PORT", "-1"}}, "UROCE_UDP_PORT=-1 is not a UDP port (1 .. 65535)"},
      {{{"UROCE_UDP_PORT", " 4791"}}, "UROCE_UDP_PORT= 4791 is not a UDP port (1 .. 65535)"},
      {{{"UROCE_UDP_PORT", "0x12b7"}}, "UROCE_UDP_PORT=0x12b7 is not a UDP port (1 .. 65535)"},
      {{{"UROCE_UDP_PORT", "99999999999999999999999"}},
       "UROCE_UDP_PORT=99999999999999999999999 is not a UDP port (1 .. 65535)"},
      {{{"UROCE_PORT", "notaport"}}, "UROCE_PORT=notaport is not a UDP port (1 .. 65535)"},
      {{{"UROCE_MTU", "1500"}}, "UROCE_MTU=1500 is not an IB MTU (256, 512, 1024, 2048 or 4096)"},
      {{{"UROCE_MTU", "8192"}}, "UROCE_MTU=8192 is not an IB MTU (256, 512, 1024, 2048 or 4096)"},
      {{{"UROCE_MTU", "1024B"}}, "UROCE_MTU=1024B is not an IB MTU (256, 512, 1024, 2048 or 4096)"},
      {{{"UROCE_SPIN_US", "1000001"}},
       "UROCE_SPIN_US=1000001 is not a number of microseconds (0 .. 1000000)"},
      {{{"UROCE_HANDOFF_US", "500us"}},
       "UROCE_HANDOFF_US=500us is not a number of microseconds (0 .. 1000000)"},
      {{{"UROCE_SPIN_US", "30us"}},
       "UROCE_SPIN_US=30us is not a number of microseconds (0 .. 1000000)"},
      {{{"UROCE_DEVICE_ADDR", "192.0.2.2,eth0"}},
       "UROCE_DEVICE_ADDR=192.0.2.2,eth0: 'eth0' is not an IPv4 or IPv6 address"},
      {{{"UROCE_PEER", "host.example"}}, "UROCE_PEER=host.example is not an IPv4 or IPv6 address"},
      {{{"UROCE_QUIET", "yes"}}, "UROCE_QUIET=yes is not 0 or 1"},
      {{{"UROCE_STAT", "off"}}, "UROCE_STAT=off is not 0 or 1"},
      {{{"UROCE_BATCH_POSTS", "yes"}}, "UROCE_BATCH_POSTS=yes is not 0 or 1"},
      {{{"UROCE_NETDEVS", ",,"}}, "UROCE_NETDEVS=,, names no netdev (comma-separated names)"},
  };
  for (const auto& [vars, message] : cases) {
    SCOPED_TRACE(vars.begin()->first + "=" + vars.begin()->second);
    EXPECT_EQ(error_of(vars), message);
  }
}

TEST(HostOptions, UroceUdpPortIsTheNameUrocePortAnAlias) {
  EXPECT_EQ(options_of({{"UROCE_UDP_PORT", "5000"}}).udp_port, 5000);
  EXPECT_EQ(options_of({{"UROCE_PORT", "5001"}}).udp_port, 5001);
  EXPECT_EQ(options_of({{"UROCE_PORT", "5002"}, {"UROCE_UDP_PORT", "5002"}}).udp_port, 5002);
  EXPECT_EQ(error_of({{"UROCE_PORT", "5003"}, {"UROCE_UDP_PORT", "5004"}}),
            "UROCE_UDP_PORT=5004 and its alias UROCE_PORT=5003 disagree; set only UROCE_UDP_PORT");
  const EnvVar* alias = find_env_var("UROCE_PORT");
  ASSERT_NE(alias, nullptr);
  EXPECT_EQ(alias->alias_of, "UROCE_UDP_PORT");
}

TEST(EnvTable, UnknownVariablesAreWarnedWithTheClosestKnownName) {
  const std::vector<std::string> environ_entries = {
      "PATH=/usr/bin", "UROCE_UDP_PORT=4791",          "UROCE_PROT=4791", "UROCE_NETDEV=eth0",
      "UROCE_SAPM=1",  "UROCE_COMPLETELY_DIFFERENT=1", "UROCEX=1",        "UROCE_QUIET"};
  EXPECT_EQ(unknown_env_warnings(environ_entries),
            (std::vector<std::string>{
                "uroce: unknown environment variable UROCE_PROT is ignored (did you mean "
                "UROCE_PORT?)",
                "uroce: unknown environment variable UROCE_NETDEV is ignored (did you mean "
                "UROCE_NETDEVS?)",
                "uroce: unknown environment variable UROCE_SAPM is ignored (did you mean "
                "UROCE_STAT?)",
                "uroce: unknown environment variable UROCE_COMPLETELY_DIFFERENT is ignored "
                "(`uroce --help` lists the known ones)"}));
  EXPECT_EQ(closest_env_var("UROCE_MTUU"), "UROCE_MTU");
  EXPECT_FALSE(closest_env_var("UROCE_SOMETHING_ELSE").has_value());
}

TEST(EnvTable, EveryRowIsComplete) {
  std::set<std::string_view> names;
  for (const EnvVar& v : env_table()) {
    SCOPED_TRACE(std::string(v.name));
    EXPECT_TRUE(v.name.starts_with("UROCE_"));
    EXPECT_TRUE(names.insert(v.name).second) << "listed twice";
    EXPECT_FALSE(v.meaning.empty());
    EXPECT_FALSE(v.default_text.empty());
    EXPECT_FALSE(v.range_text.empty());
    EXPECT_FALSE(v.readers.empty());
    if (v.kind == EnvKind::kUint) {
      EXPECT_LE(v.min, v.max);
      EXPECT_FALSE(v.what.empty());
    }
    if (!v.alias_of.empty()) {
      EXPECT_NE(find_env_var(v.alias_of), nullptr);
    }
  }
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// docs/configuration.md carries the table between two markers, byte for byte as rendered,
// so the documentation cannot drift from the code.
TEST(EnvTable, DocsConfigurationCarriesExactlyTheTable) {
  const std::string doc = slurp(std::string(UROCE_SOURCE_DIR) + "/docs/configuration.md");
  const std::string begin = "<!-- env-table begin -->\n";
  const std::string end = "<!-- env-table end -->";
  const size_t b = doc.find(begin);
  const size_t e = doc.find(end);
  ASSERT_NE(b, std::string::npos) << "docs/configuration.md lacks " << begin;
  ASSERT_NE(e, std::string::npos) << "docs/configuration.md lacks " << end;
  const std::string block = doc.substr(b + begin.size(), e - b - begin.size());
  EXPECT_EQ(block, render_env_table_markdown())
      << "put this between the markers in docs/configuration.md:\n"
      << render_env_table_markdown();
  // Exactly the table's variables are documented there (no stale row elsewhere in the doc).
  std::set<std::string> in_doc;
  static const std::regex kRow(R"(^\| `(UROCE_[A-Z0-9_]+)` \|)");
  std::istringstream lines(doc);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, kRow)) in_doc.insert(m[1]);
  }
  std::set<std::string> in_table;
  for (const EnvVar& v : env_table()) in_table.insert(std::string(v.name));
  EXPECT_EQ(in_doc, in_table);
}

// Every getenv("UROCE_...") in src/ reads a variable of the table.
TEST(EnvTable, EveryVariableTheSourcesReadIsInTheTable) {
  static const std::regex kGetenv(R"re(getenv\("(UROCE_[A-Z0-9_]+)"\))re");
  size_t seen = 0;
  for (const auto& f :
       std::filesystem::recursive_directory_iterator(std::string(UROCE_SOURCE_DIR) + "/src")) {
    if (!f.is_regular_file()) continue;
    const std::string text = slurp(f.path());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kGetenv);
         it != std::sregex_iterator(); ++it) {
      ++seen;
      EXPECT_NE(find_env_var((*it)[1].str()), nullptr)
          << f.path() << " reads " << (*it)[1].str() << ", which env_table.cpp lacks";
    }
  }
  EXPECT_GT(seen, 3u);
}

}  // namespace
}  // namespace uroce::config
