// librdmacm.so.1 drop-in: Debian's unmodified rdma_cm programs (rdmacm-utils, perftest -R,
// qperf -cm1) between two network namespaces over uroce's librdmacm and libibverbs, with no
// uroce variable: the connection is made by the IB CM on QP1 (REQ/REP/RTU, DREQ/DREP; SIDR for
// UD), as between two kernel RoCE hosts. Also the library's ABI against Debian's librdmacm1.
//
// rdma_cm servers do not listen on TCP: a client starts once uroce's reuseport registry shows
// the server's listener (before that, the server's CM would answer REJ 8, as a kernel's does).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "netns_pair.hpp"

namespace uroce::ibtest {
namespace {

// True once a process in the namespace of `env`'s registry directory listens on CM service
// `service_id`: uroce's reuseport registry (per user and namespace, under XDG_RUNTIME_DIR)
// records each listener on its member's line as listen=<16 hex digits> (docs/cm.md).
bool listening_on(const ToolEnv& env, uint64_t service_id) {
  char want[32];
  std::snprintf(want, sizeof want, "listen=%016llx", static_cast<unsigned long long>(service_id));
  const std::filesystem::path dir = env.vars.at("XDG_RUNTIME_DIR") + "/uroce";
  std::error_code ec;
  for (const auto& ns : std::filesystem::directory_iterator(dir, ec)) {
    std::ifstream in(ns.path() / "port-4791.reg");
    for (std::string line; std::getline(in, line);) {
      if (line.find(want) != std::string::npos) return true;
    }
  }
  return false;
}

// Waits until the server listens on `service_id` (or exits, or 15 s pass).
void wait_listening_on(const ToolEnv& env, uint64_t service_id, Process& server) {
  const auto deadline = Clock::now() + 15s;
  while (!listening_on(env, service_id) && Clock::now() < deadline &&
         waitpid(server.pid(), nullptr, WNOHANG) == 0) {
    std::this_thread::sleep_for(20ms);
  }
}

constexpr uint64_t tcp_service(uint16_t port) {
  return 0x0000000001060000ull | port;  // RDMA_PS_TCP (IBA Annex A11)
}

class RdmacmNetns : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(have_program(lib_dir() + "/librdmacm.so.1")) << "build uroce_rdmacm first";
    if (const std::string skip = hosts_.create("cm", 79); !skip.empty()) GTEST_SKIP() << skip;
    ASSERT_FALSE(HasFailure());
  }

  // The server in A; once it listens on `service_id`, the client in B. {server, client}; again
  // while perftest could not calibrate its clock.
  std::pair<ProcResult, ProcResult> run(const std::vector<std::string>& server_argv,
                                        uint64_t service_id,
                                        const std::vector<std::string>& client_argv,
                                        std::chrono::seconds timeout) {
    return rerun_if_perftest_uncalibrated([&]() -> std::pair<ProcResult, ProcResult> {
      Process server(NetnsPair::in(hosts_.ns_a, server_argv), hosts_.env_a);
      wait_listening_on(hosts_.env_a, service_id, server);
      Process client(NetnsPair::in(hosts_.ns_b, client_argv), hosts_.env_b);
      ProcResult c = client.wait(timeout);
      ProcResult s = server.wait(c.timed_out ? 1s : 20s);
      return {s, c};
    });
  }

  NetnsPair hosts_;
};

// perftest's result row: "#bytes #iterations <numbers>".
int result_rows(const std::string& out) {
  static const std::regex kRow(R"(^ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+.*$)");
  std::istringstream in(out);
  int rows = 0;
  for (std::string line; std::getline(in, line);) rows += std::regex_match(line, kRow) ? 1 : 0;
  return rows;
}

TEST_F(RdmacmNetns, RpingConnectsPingsAndDisconnects) {
  if (!have_program("/usr/bin/rping")) GTEST_SKIP() << "rdmacm-utils not installed";
  const std::string port = std::to_string(hosts_.tcp);
  auto [s, c] =
      run({"rping", "-s", "-a", hosts_.addr_a, "-p", port, "-C", "50"}, tcp_service(hosts_.tcp),
          {"rping", "-c", "-a", hosts_.addr_a, "-p", port, "-C", "50", "-v"}, 60s);
  ASSERT_FALSE(c.timed_out) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(c.exit_code, 0) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  // rping verifies every ping's bytes itself (RDMA READ of the client's buffer, RDMA WRITE
  // back); -v prints each one: "ping data: rdma-ping-<n>: <64 rotating characters>".
  EXPECT_EQ(count_lines_with(c.output, "ping data: rdma-ping-"), 50) << c.output;
  EXPECT_EQ(count_lines_with(c.output, "ping data: rdma-ping-49: "), 1) << c.output;
  EXPECT_EQ(count_lines_with(c.output + s.output, "error"), 0) << c.output << s.output;
}

TEST_F(RdmacmNetns, RpingToAPortNobodyListensOnIsRejectedAtOnce) {
  if (!have_program("/usr/bin/rping")) GTEST_SKIP() << "rdmacm-utils not installed";
  const std::string port = std::to_string(hosts_.tcp);
  const std::string other = std::to_string(hosts_.tcp + 1);
  Process server(NetnsPair::in(hosts_.ns_a, {"rping", "-s", "-a", hosts_.addr_a, "-p", port}),
                 hosts_.env_a);
  wait_listening_on(hosts_.env_a, tcp_service(hosts_.tcp), server);  // its CM answers all
  const auto start = Clock::now();
  Process client(NetnsPair::in(hosts_.ns_b, {"rping", "-c", "-a", hosts_.addr_a, "-p", other}),
                 hosts_.env_b);
  ProcResult c = client.wait(30s);
  ASSERT_FALSE(c.timed_out) << c.output;
  EXPECT_NE(c.exit_code, 0) << c.output;
  // REJ 8 (invalid service ID), what a kernel CM answers for a port nobody listens on.
  EXPECT_EQ(count_lines_with(c.output, "cma event RDMA_CM_EVENT_REJECTED, error 8"), 1) << c.output;
  EXPECT_LT(Clock::now() - start, 10s);
  server.kill_group();
}

// The client's output once it contains `want`, or as it is after `limit`.
std::string output_once_it_says(Process& client, const std::string& want,
                                std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  std::string out;
  while (out.find(want) == std::string::npos && Clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
    out = client.read_output();
  }
  return out;
}

// An address on the subnet that nobody has: the kernel's failed ARP comes back as ICMP host
// unreachable, and the first resend says so in those words.
TEST_F(RdmacmNetns, ARequestToAnAddressNobodyHasIsExplainedAtTheFirstResend) {
  if (!have_program("/usr/bin/rping")) GTEST_SKIP() << "rdmacm-utils not installed";
  const std::string nobody = hosts_.addr_a.substr(0, hosts_.addr_a.rfind('.')) + ".77";
  Process client(
      NetnsPair::in(hosts_.ns_b, {"rping", "-c", "-a", nobody, "-p", std::to_string(hosts_.tcp)}),
      hosts_.env_b);
  const std::string want =
      "uroce rdmacm: no answer from " + nobody +
      " to the connection request: the network answers host unreachable or administratively "
      "prohibited (on this host's subnet: nothing answers ARP for it, is it up and the address "
      "right?; else a firewall or route on the way); the request is resent for 74 s";
  // ARP gives up after 3 s, resends every 4.6 s.
  const std::string out = output_once_it_says(client, want, 40s);
  EXPECT_EQ(count_lines_with(out, want), 1) << out;
  client.kill_group();
}

// Nothing runs RoCE v2 on the server host: the REQ is resent for 74 s as on a kernel, but the
// first resend says why (the ICMP port unreachable its datagrams got).
TEST_F(RdmacmNetns, ARequestToAHostWithoutRoceIsExplainedAtTheFirstResend) {
  if (!have_program("/usr/bin/rping")) GTEST_SKIP() << "rdmacm-utils not installed";
  Process client(NetnsPair::in(hosts_.ns_b, {"rping", "-c", "-a", hosts_.addr_a, "-p",
                                             std::to_string(hosts_.tcp)}),
                 hosts_.env_b);
  const std::string want = "uroce rdmacm: no answer from " + hosts_.addr_a +
                           " to the connection request: it answers ICMP port unreachable for "
                           "UDP 4791, so nothing runs RoCE v2 there";
  const std::string out = output_once_it_says(client, want, 30s);  // resends every 4.6 s
  EXPECT_EQ(count_lines_with(out, want), 1) << out;
  client.kill_group();
}

TEST_F(RdmacmNetns, UcmatoseTwoConnectionsExchangeMessages) {
  if (!have_program("/usr/bin/ucmatose")) GTEST_SKIP() << "rdmacm-utils not installed";
  const std::string port = std::to_string(hosts_.tcp);
  auto [s, c] = run({"ucmatose", "-b", hosts_.addr_a, "-p", port, "-c", "2", "-C", "20"},
                    tcp_service(hosts_.tcp),
                    {"ucmatose", "-s", hosts_.addr_a, "-p", port, "-c", "2", "-C", "20"}, 60s);
  ASSERT_FALSE(c.timed_out) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(c.exit_code, 0) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  for (const ProcResult* r : {&s, &c}) {
    EXPECT_EQ(count_lines_with(r->output, "data transfers complete"), 1) << r->output;
    EXPECT_EQ(count_lines_with(r->output, "return status 0"), 1) << r->output;
  }
  EXPECT_EQ(count_lines_with(s.output, "disconnected"), 1) << s.output;
}

TEST_F(RdmacmNetns, UdaddyResolvesTheServiceWithSidrAndExchangesDatagrams) {
  if (!have_program("/usr/bin/udaddy")) GTEST_SKIP() << "rdmacm-utils not installed";
  // udaddy's -p is the port space; it always uses port 7174 (private to the namespace).
  auto [s, c] = run({"udaddy", "-b", hosts_.addr_a, "-C", "20"},
                    0x0000000001110000ull | 7174,  // RDMA_PS_UDP
                    {"udaddy", "-s", hosts_.addr_a, "-C", "20"}, 60s);
  ASSERT_FALSE(c.timed_out) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(c.exit_code, 0) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  for (const ProcResult* r : {&s, &c}) {
    EXPECT_EQ(count_lines_with(r->output, "data transfers complete"), 1) << r->output;
    EXPECT_EQ(count_lines_with(r->output, "return status 0"), 1) << r->output;
  }
}

TEST_F(RdmacmNetns, RdmaServerAndClientUseTheSynchronousEndpointApi) {
  if (!have_program("/usr/bin/rdma_server")) GTEST_SKIP() << "rdmacm-utils not installed";
  const std::string port = std::to_string(hosts_.tcp);
  auto [s, c] = run({"rdma_server", "-s", hosts_.addr_a, "-p", port}, tcp_service(hosts_.tcp),
                    {"rdma_client", "-s", hosts_.addr_a, "-p", port}, 60s);
  ASSERT_FALSE(c.timed_out) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(c.exit_code, 0) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(count_lines_with(c.output, "rdma_client: end 0"), 1) << c.output;
  EXPECT_EQ(count_lines_with(s.output, "rdma_server: end 0"), 1) << s.output;
}

struct PerftestCase {
  const char* program;
  const char* name;
};

class RdmacmPerftest : public RdmacmNetns, public ::testing::WithParamInterface<PerftestCase> {};

// perftest -R connects its test QPs with rdma_cm and exchanges its keys over them.
TEST_P(RdmacmPerftest, ConnectsWithRdmaCmAndReports) {
  const std::string program = std::string("/usr/bin/") + GetParam().program;
  if (!have_program(program)) GTEST_SKIP() << "perftest not installed";
  const std::string port = std::to_string(hosts_.tcp);
  const std::vector<std::string> server = {GetParam().program, "-R", "-n", "500", "-p", port};
  std::vector<std::string> client = server;
  client.push_back(hosts_.addr_a);
  auto [s, c] = run(server, tcp_service(hosts_.tcp), client, 120s);
  ASSERT_FALSE(c.timed_out) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(c.exit_code, 0) << c.output << "\n--- server:\n" << s.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(count_lines_with(c.output, "Device         : uroce_" + hosts_.vb), 1) << c.output;
  EXPECT_EQ(result_rows(c.output), 1) << c.output;
}

INSTANTIATE_TEST_SUITE_P(Debian, RdmacmPerftest,
                         ::testing::Values(PerftestCase{"ib_write_bw", "WriteBw"},
                                           PerftestCase{"ib_send_lat", "SendLat"},
                                           PerftestCase{"ib_read_bw", "ReadBw"}),
                         [](const auto& i) { return std::string(i.param.name); });

TEST_F(RdmacmNetns, QperfCm1RcBwAndLatency) {
  if (!have_program("/usr/bin/qperf")) GTEST_SKIP() << "qperf not installed";
  const std::string port = std::to_string(hosts_.tcp);
  Process server(NetnsPair::in(hosts_.ns_a, {"qperf", "-lp", port}), hosts_.env_a);
  const auto deadline = Clock::now() + 15s;
  while (!listening_in(server.pid(), hosts_.tcp) && Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  Process client(NetnsPair::in(hosts_.ns_b, {"qperf", hosts_.addr_a, "-lp", port, "-cm1", "-t", "1",
                                             "rc_bw", "rc_lat"}),
                 hosts_.env_b);
  ProcResult c = client.wait(60s);
  ASSERT_FALSE(c.timed_out) << c.output << "\n--- server:\n" << server.read_output();
  EXPECT_EQ(c.exit_code, 0) << c.output << "\n--- server:\n" << server.read_output();
  EXPECT_EQ(count_lines_with(c.output, "rc_bw:"), 1) << c.output;
  EXPECT_EQ(count_lines_with(c.output, "    bw  =  "), 1) << c.output;
  EXPECT_EQ(count_lines_with(c.output, "    latency  =  "), 1) << c.output;
  server.kill_group();
}

// Several processes share QP1 on one address: two rping servers on two ports and two
// clients, all in one namespace, at once. REQs reach the process listening on their service
// ID, replies the process whose communication ID they name (docs/cm.md).
TEST_F(RdmacmNetns, TwoServersAndTwoClientsOnOneHost) {
  if (!have_program("/usr/bin/rping")) GTEST_SKIP() << "rdmacm-utils not installed";
  const std::string p1 = std::to_string(hosts_.tcp);
  const std::string p2 = std::to_string(hosts_.tcp + 1);
  Process s1(NetnsPair::in(hosts_.ns_a, {"rping", "-s", "-a", hosts_.addr_a, "-p", p1, "-C", "30"}),
             hosts_.env_a);
  Process s2(NetnsPair::in(hosts_.ns_a, {"rping", "-s", "-a", hosts_.addr_a, "-p", p2, "-C", "30"}),
             hosts_.env_a);
  wait_listening_on(hosts_.env_a, tcp_service(hosts_.tcp), s1);
  wait_listening_on(hosts_.env_a, tcp_service(hosts_.tcp + 1), s2);
  std::vector<std::unique_ptr<Process>> clients;
  for (const std::string& port : {p1, p2}) {
    clients.push_back(std::make_unique<Process>(
        NetnsPair::in(hosts_.ns_a,
                      {"rping", "-c", "-a", hosts_.addr_a, "-p", port, "-C", "30", "-v"}),
        hosts_.env_a));
  }
  std::array<ProcResult, 2> results = {clients[0]->wait(60s), clients[1]->wait(60s)};
  const ProcResult r1 = s1.wait(20s);
  const ProcResult r2 = s2.wait(20s);
  for (const ProcResult* r : {&results[0], &results[1]}) {
    ASSERT_FALSE(r->timed_out) << r->output << "\n--- servers:\n" << r1.output << r2.output;
    EXPECT_EQ(r->exit_code, 0) << r->output << "\n--- servers:\n" << r1.output << r2.output;
    EXPECT_EQ(count_lines_with(r->output, "ping data: rdma-ping-"), 30) << r->output;
  }
  EXPECT_EQ(r1.exit_code, 0) << r1.output;
  EXPECT_EQ(r2.exit_code, 0) << r2.output;
}

TEST(RdmacmAbi, ExportsEverySymbolOfRdmaCoreWithItsVersion) {
  const std::string debian = "/usr/lib/x86_64-linux-gnu/librdmacm.so.1";
  if (!have_program("/usr/bin/objdump") || access(debian.c_str(), R_OK) != 0) {
    GTEST_SKIP() << "objdump or Debian's librdmacm1 missing";
  }
  const auto want = default_exports(debian, "RDMACM_1.");
  ASSERT_GT(want.size(), 60u);
  EXPECT_EQ(want, default_exports(lib_dir() + "/librdmacm.so.1", "RDMACM_1."));
}

}  // namespace
}  // namespace uroce::ibtest
