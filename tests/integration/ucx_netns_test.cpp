// UCX and Open MPI over uroce, unmodified, between two network namespaces joined by a veth
// pair, each program started as a user would: `uroce exec -- PROGRAM`, which gives it the
// libibverbs drop-in and the /sys/class/infiniband and /dev/infiniband files UCX looks for.
//
// Both namespaces name their veth the same (`V`), so both hosts have a device uroce_V: UCX's
// perftest server runs the test the client describes, device name included, as rxe users
// name their devices alike (rxe0) on both hosts.
//
// Each case checks the run completed every iteration ("Final: N ..."), and that uroce carried
// it: the client reads its device's hw_counters/sent_pkts in the view after the run
// (`uroce exec` refreshes the files once a second from the device's counters).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "ibverbs_test_util.hpp"
#include "shell_run.hpp"

namespace {

using namespace uroce::ibtest;
using uroce::test::run_shell;

using uroce::test::shell_ok;

using uroce::test::uroce_binary;

class UcxNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    if (!have_program("/usr/bin/ucx_perftest")) GTEST_SKIP() << "ucx-utils not installed";
    const int id = getpid() % 100000;
    a_ = "urxa-" + std::to_string(id);
    b_ = "urxb-" + std::to_string(id);
    veth_ = "urxv" + std::to_string(id);
    dev_ = "uroce_" + veth_;
    const std::string net = "10.81." + std::to_string(id % 250) + ".";
    addr_a_ = net + "1";
    addr_b_ = net + "2";
    port_ = static_cast<uint16_t>(20000 + id % 10000);
    created_ = true;
    // Created under two names, then both renamed to veth_ inside their namespaces.
    for (const std::string& cmd :
         {"ip netns add " + a_, "ip netns add " + b_,
          "ip link add " + veth_ + "a type veth peer name " + veth_ + "b",
          "ip link set " + veth_ + "a netns " + a_, "ip link set " + veth_ + "b netns " + b_,
          "ip -n " + a_ + " link set " + veth_ + "a name " + veth_,
          "ip -n " + b_ + " link set " + veth_ + "b name " + veth_,
          "ip -n " + a_ + " addr add " + addr_a_ + "/24 dev " + veth_,
          "ip -n " + b_ + " addr add " + addr_b_ + "/24 dev " + veth_,
          "ip -n " + a_ + " link set " + veth_ + " up",
          "ip -n " + b_ + " link set " + veth_ + " up", "ip -n " + a_ + " link set lo up",
          "ip -n " + b_ + " link set lo up"}) {
      ASSERT_TRUE(shell_ok(cmd)) << cmd;
    }
  }
  void TearDown() override {
    if (created_) {
      shell_ok("ip netns del " + a_);
      shell_ok("ip netns del " + b_);
    }
  }

  // `ip netns exec NS env VARS... uroce exec --netdev V -- ARGV`.
  std::vector<std::string> in_ns(const std::string& ns, const std::vector<std::string>& vars,
                                 const std::vector<std::string>& argv) const {
    std::vector<std::string> a = {"ip", "netns", "exec", ns, "env"};
    a.insert(a.end(), vars.begin(), vars.end());
    a.insert(a.end(), {uroce_binary(), "exec", "--netdev", veth_, "--"});
    a.insert(a.end(), argv.begin(), argv.end());
    return a;
  }

  struct PerfRun {
    ProcResult server, client;
    long iterations = -1;  // from the client's "Final:" line
    uint64_t sent_pkts = 0;
  };

  // Runs ucx_perftest's server in A and its client in B with `tls` and `args`; the client's
  // shell prints the device's sent_pkts after the run.
  PerfRun perftest(const std::string& tls, const std::vector<std::string>& args,
                   const std::vector<std::string>& extra_vars = {}) {
    std::vector<std::string> vars = {"UCX_TLS=" + tls, "UCX_NET_DEVICES=" + dev_ + ":1"};
    vars.insert(vars.end(), extra_vars.begin(), extra_vars.end());
    const std::string port = std::to_string(port_);
    Process server(in_ns(a_, vars, {"ucx_perftest", "-p", port}), env_);
    PerfRun r;
    const auto deadline = Clock::now() + 20s;
    while (!listening_in(server.pid(), port_) && Clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
    std::string client = "ucx_perftest " + addr_a_ + " -p " + port;
    for (const std::string& a : args) client += " " + a;
    const std::string counter = "/sys/class/infiniband/" + dev_ + "/ports/1/hw_counters/sent_pkts";
    Process c(
        in_ns(b_, vars,
              {"sh", "-c",
               client + "; rc=$?; sleep 1.5; echo sent_pkts=$(cat " + counter + "); exit $rc"}),
        env_);
    r.client = c.wait(90s);
    r.server = server.wait(r.client.timed_out ? 1s : 10s);
    std::smatch m;
    if (std::regex_search(r.client.output, m, std::regex(R"(Final:\s+(\d+)\s)"))) {
      r.iterations = std::stol(m[1]);
    }
    if (std::regex_search(r.client.output, m, std::regex(R"(sent_pkts=(\d+))"))) {
      r.sent_pkts = std::stoull(m[1]);
    }
    return r;
  }

  void expect_complete(const PerfRun& r, long iterations) {
    EXPECT_EQ(r.client.exit_code, 0) << r.client.output << "\n--- server:\n" << r.server.output;
    EXPECT_EQ(r.server.exit_code, 0) << r.server.output;
    EXPECT_EQ(r.iterations, iterations) << r.client.output;
    // Every iteration sent at least one packet from the client's uroce device.
    EXPECT_GE(r.sent_pkts, static_cast<uint64_t>(iterations)) << r.client.output;
  }

  ToolEnv env_;
  std::string a_, b_, veth_, dev_, addr_a_, addr_b_;
  uint16_t port_ = 0;
  bool created_ = false;
};

TEST_F(UcxNetnsTest, UcxInfoListsTheUroceDeviceWithRcAndUdVerbs) {
  Process p(in_ns(a_, {}, {"ucx_info", "-d"}), env_);
  const ProcResult r = p.wait(60s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Memory domain: " + dev_), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Transport: rc_verbs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Transport: ud_verbs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Device: " + dev_ + ":1"), std::string::npos) << r.output;
}

TEST_F(UcxNetnsTest, UctRcVerbsActiveMessageLatency) {
  expect_complete(
      perftest("rc_verbs", {"-t", "am_lat", "-x", "rc_verbs", "-d", dev_ + ":1", "-n", "5000"}),
      5000);
}

TEST_F(UcxNetnsTest, UctRcVerbsPutBandwidthZeroCopy64KiB) {
  expect_complete(perftest("rc_verbs", {"-t", "put_bw", "-x", "rc_verbs", "-d", dev_ + ":1", "-D",
                                        "zcopy", "-s", "65536", "-n", "1000"}),
                  1000);
}

TEST_F(UcxNetnsTest, UctUdVerbsActiveMessageLatency) {
  expect_complete(
      perftest("ud_verbs", {"-t", "am_lat", "-x", "ud_verbs", "-d", dev_ + ":1", "-n", "5000"}),
      5000);
}

// UCP over RC needs a second transport to set up its connections (ud_verbs here).
TEST_F(UcxNetnsTest, UcpTagLatencyOverRc) {
  expect_complete(perftest("rc_verbs,ud_verbs", {"-t", "tag_lat", "-n", "5000"}), 5000);
}

TEST_F(UcxNetnsTest, UcpTagLatencyOverUd) {
  expect_complete(perftest("ud_verbs", {"-t", "tag_lat", "-n", "5000"}), 5000);
}

TEST_F(UcxNetnsTest, UcpTagBandwidth64KiB) {
  expect_complete(perftest("rc_verbs,ud_verbs", {"-t", "tag_bw", "-s", "65536", "-n", "1000"}),
                  1000);
}

TEST_F(UcxNetnsTest, UcpPutBandwidth64KiB) {
  expect_complete(perftest("rc_verbs,ud_verbs", {"-t", "ucp_put_bw", "-s", "65536", "-n", "1000"}),
                  1000);
}

// 1 MiB tagged messages with the rendezvous protocol forced (threshold below the size): the
// receiver READs the data from the sender's registered buffer.
TEST_F(UcxNetnsTest, UcpRendezvous1MiB) {
  expect_complete(perftest("rc_verbs,ud_verbs", {"-t", "tag_bw", "-s", "1048576", "-n", "100"},
                           {"UCX_RNDV_THRESH=65536"}),
                  100);
}

// Open MPI (pml ucx) with two ranks, one per namespace: mpirun starts rank 1 in B through an
// rsh agent that runs the command with `ip netns exec` (the namespace is the "host" name).
TEST_F(UcxNetnsTest, OpenMpiPingPongOverPmlUcx) {
  const std::string prog = std::string(UROCE_BINARY_DIR) + "/bin/uroce_mpi_pingpong";
  if (!have_program("/usr/bin/mpirun") || !have_program(prog)) {
    GTEST_SKIP() << "Open MPI (openmpi-bin, libopenmpi-dev) not installed";
  }
  char tmpl[] = "/tmp/uroce-mpi-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string agent = dir + "/netns-rsh";
  uroce::test::spit(agent,
                    "#!/bin/sh\n# HOST COMMAND... -> COMMAND in network namespace HOST\n"
                    "host=\"$1\"; shift\nexec ip netns exec \"$host\" sh -c \"$*\"\n");
  std::filesystem::permissions(agent, std::filesystem::perms::owner_all);
  uroce::test::spit(dir + "/hosts", a_ + " slots=1\n" + b_ + " slots=1\n");
  const std::vector<std::string> argv = {
      "ip", "netns", "exec", a_, "mpirun", "--allow-run-as-root", "-np", "2", "--bind-to", "none",
      "--hostfile", dir + "/hosts", "--mca", "plm_rsh_agent", agent,
      // Session directories of this run only: the "hosts" share /tmp, where a stale one
      // made orted fail ("mkdir ... File exists").
      "--mca", "orte_tmpdir_base", dir,
      // Nothing is bound (--bind-to none), so the hwloc run-time control is not needed; its
      // shared-memory topology write crashed orted once in a CI dry run (SIGSEGV in
      // hwloc_shmem_topology_write, at an address of the mapping it chose).
      "--mca", "rtc", "^hwloc", "--mca", "oob_tcp_if_include", veth_, "--mca", "pml", "ucx",
      "--mca", "btl", "^vader,tcp,openib", "-x", "UCX_TLS=rc_verbs,ud_verbs", "-x",
      "UCX_NET_DEVICES=" + dev_ + ":1", "-x", "UROCE_PORT", uroce_binary(), "exec", "--netdev",
      veth_, "--", prog};
  Process p(argv, env_);
  const ProcResult r = p.wait(180s);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // 1 B to 1 MiB by powers of four, each size's messages checked byte for byte by both ranks.
  EXPECT_EQ(count_lines_with(r.output, "size "), 11) << r.output;
  EXPECT_NE(r.output.find("size 1048576 iters 50"), std::string::npos) << r.output;
}

}  // namespace
