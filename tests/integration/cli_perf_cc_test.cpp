// `uroce perf --cc/-T` between two processes on loopback: the JSON carries both sides' device
// counters and each QP's congestion state, and the traffic class given with -T is what the
// packets carry — checked in the captures of the side that RECEIVED them (the TOS of a received
// datagram comes from the kernel, IP_RECVTOS, so it is the byte that was on the wire).
//
// The rule (docs/congestion.md "Command line"): with DCQCN a QP's packets carry ECT(0) unless
// its traffic class already sets ECN bits; without it, the traffic class goes out unchanged.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <nlohmann/json.hpp>

#include <map>
#include <sstream>
#include <string>

#include "cli_process.hpp"

namespace uroce::test {
namespace {

using std::chrono::seconds;

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/uroce-perf-cc-XXXXXX";
    path_ = mkdtemp(pattern) != nullptr ? pattern : "/tmp";
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// TOS bytes (DSCP << 2 | ECN) of the captured packets, by destination QPN, counted.
std::map<uint32_t, std::map<int, int>> tos_by_dqpn(const std::string& pcap, uint16_t udp) {
  Process dump({"dump", "--json", "--port", std::to_string(udp), pcap}, udp);
  EXPECT_EQ(dump.wait(seconds(30)), 0) << dump.err();
  std::map<uint32_t, std::map<int, int>> out;
  std::istringstream lines(dump.out());
  static const std::map<std::string, int> kEcn = {
      {"Not-ECT", 0}, {"ECT(1)", 1}, {"ECT(0)", 2}, {"CE", 3}};
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("dqpn")) {
      ADD_FAILURE() << "not a decoded packet: " << line;
      continue;
    }
    const int tos = (j["dscp"].get<int>() << 2) | kEcn.at(j["ecn"].get<std::string>());
    ++out[j["dqpn"].get<uint32_t>()][tos];
  }
  return out;
}

// Every packet to the server's QP (its WRITEs: 200 or more with retransmissions) has
// `to_server`, every packet to the client's (the ACKs) `to_client`, and there is nothing else
// (no CNP: nothing marks CE on loopback).
void expect_tos(const std::string& pcap, uint16_t udp, uint32_t server_qpn, int to_server,
                uint32_t client_qpn, int to_client) {
  const auto seen = tos_by_dqpn(pcap, udp);
  EXPECT_EQ(seen.size(), 2u) << pcap;
  ASSERT_EQ(seen.count(server_qpn), 1u) << pcap;
  ASSERT_EQ(seen.count(client_qpn), 1u) << pcap;
  ASSERT_EQ(seen.at(server_qpn).size(), 1u) << pcap;
  EXPECT_EQ(seen.at(server_qpn).begin()->first, to_server) << pcap;
  EXPECT_GE(seen.at(server_qpn).begin()->second, 200) << pcap;
  ASSERT_EQ(seen.at(client_qpn).size(), 1u) << pcap;
  EXPECT_EQ(seen.at(client_qpn).begin()->first, to_client) << pcap;
}

TEST(CliPerfCc, DcqcnJsonHasRatesAndCountersAndTclassIsOnTheWire) {
  TempDir dir;
  const uint16_t tcp = next_port();
  const uint16_t udp = next_port();
  // Server: DSCP 46 with ECN 00, so DCQCN adds ECT(0): 184 | 2 = 186 on its ACKs.
  Process srv({"perf", "write_bw", "-p", std::to_string(tcp), "--timeout", "60", "--cc", "dcqcn",
               "-T", "184", "--capture", dir.file("srv.pcap")},
              udp);
  // Client: 106 = DSCP 26 (AF31) with ECT(0) already: sent as it is.
  Process cli({"perf", "write_bw", "127.0.0.1", "-p", std::to_string(tcp), "-s", "4096", "-n",
               "200", "--json", "--cc", "dcqcn", "-T", "106", "--capture", dir.file("cli.pcap"),
               "--timeout", "60"},
              udp);
  ASSERT_EQ(cli.wait(seconds(90)), 0) << cli.err();
  ASSERT_EQ(srv.wait(seconds(30)), 0) << srv.err();
  const auto j = nlohmann::json::parse(cli.out());
  ASSERT_EQ(j["ok"], true);
  const auto& local = j["local"];
  const auto& remote = j["remote"];
  EXPECT_EQ(local["cc"], "dcqcn");
  EXPECT_EQ(local["traffic_class"], 106);
  EXPECT_EQ(local["line_rate_mbps"], 10000);  // lo has no speed: the default
  EXPECT_EQ(local["max_rate_mbps"], 10000);
  EXPECT_EQ(remote["cc"], "dcqcn");
  EXPECT_EQ(remote["traffic_class"], 184);
  // The whole counter set of each device at the end of the run.
  const auto& lc = local["counters"];
  const auto& rc = remote["counters"];
  EXPECT_EQ(lc.size(), rc.size());
  EXPECT_EQ(lc["sent_pkts"].get<uint64_t>(), 200 + lc["retransmitted_pkts"].get<uint64_t>());
  EXPECT_EQ(lc["bytes_sent"].get<uint64_t>() >= 200u * 4096u, true);
  EXPECT_EQ(rc["rx_write_requests"], 200);
  EXPECT_EQ(rc["rcvd_pkts"], lc["sent_pkts"]);
  EXPECT_EQ(lc["np_cnp_sent"], 0);  // nothing marks CE on loopback
  EXPECT_EQ(rc["np_cnp_sent"], 0);
  EXPECT_EQ(lc["rx_discards"], 0);
  EXPECT_EQ(rc["rx_discards"], 0);
  // Both processes share the UDP port: nothing went to the other one.
  EXPECT_EQ(lc["rx_misdelivered"], 0);
  EXPECT_EQ(rc["rx_misdelivered"], 0);
  EXPECT_EQ(lc["rx_no_owner"], 0);
  EXPECT_EQ(rc["rx_no_owner"], 0);
  // Each QP's final rate: no CNP, so DCQCN's rate stayed at the line rate.
  ASSERT_EQ(local["qps"].size(), 1u);
  ASSERT_EQ(remote["qps"].size(), 1u);
  for (const auto* side : {&local, &remote}) {
    const auto& q = (*side)["qps"][0];
    EXPECT_EQ(q["cc"], "dcqcn");
    EXPECT_EQ(q["rate_bps"], 10'000'000'000ull);
    EXPECT_EQ(q["target_rate_bps"], 10'000'000'000ull);
    EXPECT_EQ(q["alpha"], 0);
  }
  const uint32_t client_qpn = local["qps"][0]["qpn"];
  const uint32_t server_qpn = remote["qps"][0]["qpn"];
  expect_tos(dir.file("srv.pcap"), udp, server_qpn, 106, client_qpn, 186);
  expect_tos(dir.file("cli.pcap"), udp, server_qpn, 106, client_qpn, 186);
}

// --cc none wins over UROCE_CC=dcqcn; without DCQCN the traffic class goes out unchanged, even
// ECT(1), and the QPs have no rate.
TEST(CliPerfCc, CommandLineWinsOverTheEnvironmentAndNoneKeepsTheByte) {
  TempDir dir;
  const uint16_t tcp = next_port();
  const uint16_t udp = next_port();
  setenv("UROCE_CC", "dcqcn", 1);
  Process srv({"perf", "write_bw", "-p", std::to_string(tcp), "--timeout", "60", "--cc", "none",
               "--capture", dir.file("srv.pcap")},
              udp);
  Process cli({"perf", "write_bw", "127.0.0.1", "-p", std::to_string(tcp), "-s", "4096", "-n",
               "100", "--json", "--cc", "none", "--tclass", "105", "--timeout", "60"},
              udp);
  unsetenv("UROCE_CC");
  ASSERT_EQ(cli.wait(seconds(90)), 0) << cli.err();
  ASSERT_EQ(srv.wait(seconds(30)), 0) << srv.err();
  const auto j = nlohmann::json::parse(cli.out());
  EXPECT_EQ(j["local"]["cc"], "none");
  EXPECT_EQ(j["remote"]["cc"], "none");
  EXPECT_EQ(j["local"]["qps"][0]["cc"], "none");
  EXPECT_EQ(j["local"]["qps"][0]["rate_bps"], 0);
  const auto seen = tos_by_dqpn(dir.file("srv.pcap"), udp);
  const uint32_t client_qpn = j["local"]["qps"][0]["qpn"];
  const uint32_t server_qpn = j["remote"]["qps"][0]["qpn"];
  ASSERT_EQ(seen.count(server_qpn), 1u);
  ASSERT_EQ(seen.at(server_qpn).size(), 1u);
  EXPECT_EQ(seen.at(server_qpn).begin()->first, 105);  // ECT(1) kept, not replaced
  EXPECT_GE(seen.at(server_qpn).begin()->second, 100);
  ASSERT_EQ(seen.count(client_qpn), 1u);
  ASSERT_EQ(seen.at(client_qpn).size(), 1u);
  EXPECT_EQ(seen.at(client_qpn).begin()->first, 0);  // the server's ACKs: traffic class 0
}

// devinfo -v shows what a run would use: UROCE_CC/UROCE_DCQCN, with --cc/--dcqcn on top (a
// --dcqcn name replaces the variable's, the variable's other names stay).
TEST(CliPerfCc, DevinfoShowsTheParametersInEffect) {
  setenv("UROCE_CC", "dcqcn", 1);
  setenv("UROCE_DCQCN", "rpg_ai_rate=40,rpg_time_reset=100", 1);
  Process env_only({"devinfo", "-v", "-d", "uroce_lo"}, next_port());
  Process both({"devinfo", "-v", "-d", "uroce_lo", "--cc", "none", "--dcqcn", "rpg_time_reset=55"},
               next_port());
  unsetenv("UROCE_CC");
  unsetenv("UROCE_DCQCN");
  ASSERT_EQ(env_only.wait(seconds(30)), 0) << env_only.err();
  ASSERT_EQ(both.wait(seconds(30)), 0) << both.err();
  const std::string e = env_only.out();
  EXPECT_NE(e.find("\tcongestion_control:\t\tdcqcn\n"), std::string::npos) << e;
  EXPECT_NE(e.find("\tcc_line_rate_mbps:\t\t10000 (default: the speed of lo is unknown)\n"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("\t\trpg_ai_rate = 40\n"), std::string::npos) << e;
  EXPECT_NE(e.find("\t\trpg_time_reset = 100\n"), std::string::npos) << e;
  const std::string b = both.out();
  EXPECT_NE(b.find("\tcongestion_control:\t\tnone\n"), std::string::npos) << b;
  EXPECT_NE(b.find("\t\trpg_ai_rate = 40\n"), std::string::npos) << b;
  EXPECT_NE(b.find("\t\trpg_time_reset = 55\n"), std::string::npos) << b;
}

// A bad --cc or -T is one line naming the flag, status 2, before anything connects.
TEST(CliPerfCc, BadCongestionFlagsAreOneLineErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"perf", "write_bw", "--cc", "cubic"},
       "uroce perf: --cc: unknown congestion control 'cubic'; use none or dcqcn; run 'uroce "
       "perf --help' for usage\n"},
      {{"perf", "write_bw", "-T", "300"},
       "uroce perf: -T/--tclass 300 is out of range; give 0..255 (the IP TOS byte: DSCP << 2 | "
       "ECN); run 'uroce perf --help' for usage\n"},
  };
  for (const auto& [args, message] : cases) {
    Process p(args, next_port());
    EXPECT_EQ(p.wait(seconds(20)), 2) << args.back();
    EXPECT_EQ(p.err(), message);
    EXPECT_EQ(p.out(), "");
  }
  Process pp({"pingpong", "--cc", "cubic"}, next_port());
  EXPECT_EQ(pp.wait(seconds(20)), 1);
  EXPECT_EQ(pp.err(),
            "uroce pingpong: --cc: unknown congestion control 'cubic'; use none or dcqcn\n");
}

// `uroce pingpong --cc dcqcn` runs (rdma-core's flags plus ours) on both sides.
TEST(CliPerfCc, PingpongRunsWithDcqcn) {
  const uint16_t tcp = next_port();
  const uint16_t udp = next_port();
  Process srv(
      {"pingpong", "-p", std::to_string(tcp), "-n", "20", "--cc", "dcqcn", "--timeout", "60"}, udp);
  Process cli({"pingpong", "127.0.0.1", "-p", std::to_string(tcp), "-n", "20", "--cc", "dcqcn",
               "--dcqcn", "min_time_between_cnps=50", "--timeout", "60"},
              udp);
  ASSERT_EQ(cli.wait(seconds(60)), 0) << cli.err();
  ASSERT_EQ(srv.wait(seconds(30)), 0) << srv.err();
  EXPECT_NE(cli.out().find("20 iters in"), std::string::npos) << cli.out();
}

}  // namespace
}  // namespace uroce::test
