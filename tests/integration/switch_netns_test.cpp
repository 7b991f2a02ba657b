// A shared bottleneck with real processes (docs/congestion.md): N sender namespaces (2 and
// 4) and one receiver namespace, each joined by a veth pair to a switch namespace where
// either `uroce switch` runs (ECN, lossless, lossy) or a Linux bridge with a tbf qdisc on
// the receiver's port ("naked"). Every sender runs `uroce perf write_bw --verify` to its own
// perf server on the receiver (one TCP port each, one shared UDP port); the test asserts the
// data arrived intact and checks the congestion signals at each layer: marks and drops at
// the switch (its --json), CNPs sent at the receiver (np_cnp_sent) and handled at the
// senders (rp_cnp_handled) from `uroce stat --json`, drops at the qdisc from `tc -s qdisc`.
// Root only (skipped otherwise). Namespaces, TCP and UDP ports are unique per test process.
// Also, without root: `uroce switch`'s one-line errors for bad values.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "shell_run.hpp"

namespace uroce::itest {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Env = std::vector<std::pair<std::string, std::string>>;

using uroce::test::shell_ok;

std::string capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

using uroce::test::uroce_binary;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// One program (in a namespace when `ns` is not empty), stdout/stderr in files; SIGKILLed if
// still running at destruction.
class Process {
 public:
  Process(const std::string& ns, const Env& env, const std::vector<std::string>& argv) {
    char pattern[] = "/tmp/uroce-switch-it-XXXXXX";
    dir_ = mkdtemp(pattern) != nullptr ? pattern : "/tmp";
    pid_ = fork();
    if (pid_ == 0) {
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      if (!freopen((dir_ + "/out").c_str(), "w", stdout) ||
          !freopen((dir_ + "/err").c_str(), "w", stderr)) {
        _exit(127);
      }
      std::vector<std::string> all;
      if (!ns.empty()) all = {"ip", "netns", "exec", ns};
      all.insert(all.end(), argv.begin(), argv.end());
      std::vector<char*> args;
      for (std::string& a : all) args.push_back(a.data());
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
  }
  ~Process() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // Exit status, or -1 (after SIGKILL) when it ran past `limit`.
  int wait(std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      if (!running()) return rc_;
      std::this_thread::sleep_for(20ms);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    reaped_ = true;
    rc_ = -1;
    return -1;
  }
  // Reaps the process when it has exited (its status is kept for wait()).
  [[nodiscard]] bool running() {
    if (reaped_) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return true;
    reaped_ = true;
    rc_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return false;
  }
  // `ip netns exec` execs the program in place, so the pid is the program's.
  void signal(int sig) const { kill(pid_, sig); }
  bool wait_for_stderr(const std::string& text, std::chrono::milliseconds limit) const {
    const auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      if (err().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }
  [[nodiscard]] std::string out() const { return read_file(dir_ + "/out"); }
  [[nodiscard]] std::string err() const { return read_file(dir_ + "/err"); }
  [[nodiscard]] std::string both() const { return "stdout:\n" + out() + "\nstderr:\n" + err(); }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int rc_ = -1;
};

// Sum of one device counter over every uroce process of a namespace (`uroce stat --json`).
uint64_t stat_counter(const std::string& ns, const std::string& name) {
  const auto j = nlohmann::json::parse(
      capture("ip netns exec " + ns + " " + uroce_binary() + " stat --json"), nullptr, false);
  uint64_t sum = 0;
  if (!j.is_array()) return 0;
  for (const auto& dev : j)
    sum += dev.value("counters", nlohmann::json::object()).value(name, 0ull);
  return sum;
}

struct FlowResult {
  int client_rc = -1, server_rc = -1;
  bool verified = false;
  double mb_per_s = 0;
  std::string output;
};

struct RunResult {
  std::vector<FlowResult> flows;
  uint64_t np_cnp_sent = 0;     // receiver, largest seen while the runs were alive
  uint64_t rp_cnp_handled = 0;  // all senders
  uint64_t np_ecn_marked = 0;
};

class SwitchNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    if (!shell_ok("ip -V")) GTEST_SKIP() << "iproute2 (ip) not installed";
    id_ = getpid() % 100000;
    sw_ = "ursw-" + std::to_string(id_);
    rx_ = "urswr-" + std::to_string(id_);
    net_ = "10.76." + std::to_string(id_ % 250) + ".";
    tcp_base_ = 30000 + (id_ % 1000) * 5;
    udp_ = std::to_string(40000 + id_ % 5000);
  }
  void TearDown() override {
    for (const std::string& ns : namespaces_) shell_ok("ip netns del " + ns);
  }

  // The switch namespace, the receiver (address .100, veth end "sr" in the switch) and n
  // senders (.1 ..., veth ends s0 ...). `bridge`: a Linux bridge joins them instead of
  // `uroce switch`.
  void build(int n, bool bridge) {
    n_ = n;
    auto add_ns = [&](const std::string& ns) {
      ASSERT_TRUE(shell_ok("ip netns add " + ns)) << ns;
      namespaces_.push_back(ns);
      ASSERT_TRUE(shell_ok("ip -n " + ns + " link set lo up"));
    };
    add_ns(sw_);
    // The switch namespace takes no part in IP: no IPv6 link-local chatter from it.
    shell_ok("ip netns exec " + sw_ + " sysctl -qw net.ipv6.conf.all.disable_ipv6=1");
    shell_ok("ip netns exec " + sw_ + " sysctl -qw net.ipv6.conf.default.disable_ipv6=1");
    add_ns(rx_);
    std::vector<std::string> cmds = {
        "ip link add p0 netns " + rx_ + " type veth peer name sr netns " + sw_,
        "ip -n " + rx_ + " addr add " + net_ + "100/24 dev p0", "ip -n " + rx_ + " link set p0 up",
        "ip -n " + sw_ + " link set sr up"};
    for (const std::string& c : cmds) ASSERT_TRUE(shell_ok(c)) << c;
    for (int i = 0; i < n; ++i) {
      const std::string s = sender(i);
      add_ns(s);
      const std::string port = "s" + std::to_string(i);
      for (const std::string& c :
           {"ip link add p0 netns " + s + " type veth peer name " + port + " netns " + sw_,
            "ip -n " + s + " addr add " + net_ + std::to_string(i + 1) + "/24 dev p0",
            "ip -n " + s + " link set p0 up", "ip -n " + sw_ + " link set " + port + " up"}) {
        ASSERT_TRUE(shell_ok(c)) << c;
      }
    }
    if (bridge) {
      ASSERT_TRUE(shell_ok("ip -n " + sw_ + " link add br0 type bridge"));
      ASSERT_TRUE(shell_ok("ip -n " + sw_ + " link set sr master br0"));
      for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(shell_ok("ip -n " + sw_ + " link set s" + std::to_string(i) + " master br0"));
      }
      ASSERT_TRUE(shell_ok("ip -n " + sw_ + " link set br0 up"));
    }
  }

  [[nodiscard]] std::string sender(int i) const {
    return "urss" + std::to_string(i) + "-" + std::to_string(id_);
  }

  std::unique_ptr<Process> start_switch(std::vector<std::string> args) {
    std::vector<std::string> argv = {uroce_binary(), "switch", "--roce-port", udp_, "--port", "sr"};
    for (int i = 0; i < n_; ++i) argv.insert(argv.end(), {"--port", "s" + std::to_string(i)});
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--json");
    auto p = std::make_unique<Process>(sw_, Env{}, argv);
    EXPECT_TRUE(p->wait_for_stderr("uroce switch: forwarding between", 10s)) << p->both();
    return p;
  }

  // Stops the switch and returns its JSON counters.
  static nlohmann::json stop_switch(Process& p) {
    p.signal(SIGTERM);
    EXPECT_EQ(p.wait(10s), 0) << p.both();
    const auto j = nlohmann::json::parse(p.out(), nullptr, false);
    EXPECT_TRUE(j.is_object()) << p.both();
    return j;
  }

  // n flows, each `uroce perf write_bw --verify -D secs` from sender i to server i.
  // `tos[i]`, when given, is sender i's TOS byte (uroce perf -T), i.e. its DSCP << 2.
  RunResult run_flows(const std::string& cc, int secs, const std::vector<int>& tos = {}) {
    const Env env = {{"UROCE_UDP_PORT", udp_}, {"UROCE_CC", cc}};
    std::vector<std::unique_ptr<Process>> servers, clients;
    auto perf = [&](int i, const std::string& host) {
      std::vector<std::string> a = {uroce_binary(), "perf", "write_bw"};
      if (!host.empty()) a.push_back(host);
      a.insert(a.end(), {"-p", std::to_string(tcp_base_ + i), "-D", std::to_string(secs),
                         "--verify", "--json", "--timeout", "40"});
      return a;
    };
    for (int i = 0; i < n_; ++i)
      servers.push_back(std::make_unique<Process>(rx_, env, perf(i, "")));
    std::this_thread::sleep_for(300ms);
    for (int i = 0; i < n_; ++i) {
      std::vector<std::string> a = perf(i, net_ + "100");
      if (static_cast<size_t>(i) < tos.size()) a.insert(a.end(), {"-T", std::to_string(tos[i])});
      clients.push_back(std::make_unique<Process>(sender(i), env, a));
    }
    RunResult r;
    // The counters live in the processes' segments: sample them while the runs are alive.
    const auto end = Clock::now() + std::chrono::seconds(secs + 30);
    for (;;) {
      bool alive = false;
      for (auto& c : clients) alive = c->running() || alive;
      if (!alive || Clock::now() > end) break;
      r.np_cnp_sent = std::max(r.np_cnp_sent, stat_counter(rx_, "np_cnp_sent"));
      r.np_ecn_marked = std::max(r.np_ecn_marked, stat_counter(rx_, "np_ecn_marked_roce_packets"));
      uint64_t handled = 0;
      for (int i = 0; i < n_; ++i) handled += stat_counter(sender(i), "rp_cnp_handled");
      r.rp_cnp_handled = std::max(r.rp_cnp_handled, handled);
      std::this_thread::sleep_for(200ms);
    }
    // The final counters each client reports (its own and its server's) as well: a short
    // run can end between two samples with its CNPs counted in neither.
    uint64_t final_cnp_sent = 0, final_ecn_marked = 0, final_cnp_handled = 0;
    for (int i = 0; i < n_; ++i) {
      FlowResult f;
      f.client_rc = clients[i]->wait(std::chrono::seconds(secs + 30));
      f.server_rc = servers[i]->wait(15s);
      f.output = clients[i]->both() + "\nserver:\n" + servers[i]->both();
      const auto j = nlohmann::json::parse(clients[i]->out(), nullptr, false);
      if (j.is_object()) {
        f.verified = j.contains("verify") && j["verify"].value("passed", false) &&
                     j["verify"].value("checked_bytes", 0ull) > 0;
        if (j.contains("results") && !j["results"].empty()) {
          f.mb_per_s = j["results"][0].value("bw_average", 0.0);
        }
        const nlohmann::json none = nlohmann::json::object();
        const nlohmann::json& mine = j.value("local", none).value("counters", none);
        const nlohmann::json& peer = j.value("remote", none).value("counters", none);
        final_cnp_handled += mine.value("rp_cnp_handled", 0ull);
        final_cnp_sent += peer.value("np_cnp_sent", 0ull);
        final_ecn_marked += peer.value("np_ecn_marked_roce_packets", 0ull);
      }
      r.flows.push_back(f);
    }
    r.np_cnp_sent = std::max(r.np_cnp_sent, final_cnp_sent);
    r.np_ecn_marked = std::max(r.np_ecn_marked, final_ecn_marked);
    r.rp_cnp_handled = std::max(r.rp_cnp_handled, final_cnp_handled);
    return r;
  }

  static void expect_all_verified(const RunResult& r) {
    for (size_t i = 0; i < r.flows.size(); ++i) {
      const FlowResult& f = r.flows[i];
      EXPECT_EQ(f.client_rc, 0) << "flow " << i << "\n" << f.output;
      EXPECT_EQ(f.server_rc, 0) << "flow " << i << "\n" << f.output;
      EXPECT_TRUE(f.verified) << "flow " << i << "\n" << f.output;
      EXPECT_GT(f.mb_per_s, 0.0) << "flow " << i;
    }
  }

  static uint64_t total(const nlohmann::json& sw, const std::string& key) {
    return sw["totals"].value(key, 0ull);
  }
  static const nlohmann::json& port(const nlohmann::json& sw, const std::string& name) {
    for (const auto& p : sw["ports"]) {
      if (p["name"] == name) return p;
    }
    static const nlohmann::json none = nlohmann::json::object();
    return none;
  }

  int id_ = 0;
  int n_ = 0;
  int tcp_base_ = 0;
  std::string sw_, rx_, net_, udp_;
  std::vector<std::string> namespaces_;
};

// ECN marking with DCQCN on: the switch marks the senders' ECT packets at the receiver's
// port, the receiver answers with CNPs, the senders' DCQCN handles them; data intact.
void expect_dcqcn_reacts(const nlohmann::json& sw, const RunResult& r) {
  EXPECT_GT(sw["totals"].value("ecn_marked", 0ull), 0u) << sw.dump();
  EXPECT_GT(r.np_ecn_marked, 0u);
  EXPECT_GT(r.np_cnp_sent, 0u);
  EXPECT_GT(r.rp_cnp_handled, 0u);
}

TEST_F(SwitchNetnsTest, TwoSendersEcnWithDcqcnMarksAndCnps) {
  build(2, false);
  auto sw = start_switch(
      {"--mode", "ecn", "--rate", "200mbit", "--ecn", "kmin=10KB,kmax=100KB,pmax=0.2"});
  const RunResult r = run_flows("dcqcn", 3);
  const nlohmann::json j = stop_switch(*sw);
  expect_all_verified(r);
  expect_dcqcn_reacts(j, r);
  EXPECT_GT(port(j, "sr").value("ecn_marked", 0ull), 0u);
  EXPECT_EQ(total(j, "kernel_drops"), 0u) << j.dump();
}

// The same with DCQCN off: no ECT on the packets, so no marks, no CNPs.
TEST_F(SwitchNetnsTest, TwoSendersEcnWithoutCcHasNoMarksNoCnps) {
  build(2, false);
  auto sw = start_switch(
      {"--mode", "ecn", "--rate", "200mbit", "--ecn", "kmin=10KB,kmax=100KB,pmax=0.2"});
  const RunResult r = run_flows("none", 3);
  const nlohmann::json j = stop_switch(*sw);
  expect_all_verified(r);
  EXPECT_EQ(total(j, "ecn_marked"), 0u) << j.dump();
  EXPECT_GT(port(j, "sr").value("max_depth_bytes", 0ull), 10u * 1024) << j.dump();  // congested
  EXPECT_EQ(r.np_ecn_marked, 0u);
  EXPECT_EQ(r.np_cnp_sent, 0u);
  EXPECT_EQ(r.rp_cnp_handled, 0u);
}

TEST_F(SwitchNetnsTest, FourSendersEcnWithDcqcnMarksAndCnps) {
  build(4, false);
  auto sw = start_switch(
      {"--mode", "ecn", "--rate", "200mbit", "--ecn", "kmin=10KB,kmax=100KB,pmax=0.2"});
  const RunResult r = run_flows("dcqcn", 3);
  const nlohmann::json j = stop_switch(*sw);
  expect_all_verified(r);
  expect_dcqcn_reacts(j, r);
}

// Lossless: four senders into a 64 KB XOFF per ingress and a port buffer far smaller than
// what they keep in flight. Pauses happen; nothing is dropped, neither by the model nor by
// the kernel.
TEST_F(SwitchNetnsTest, FourSendersLosslessNeverDrops) {
  build(4, false);
  auto sw = start_switch({"--mode", "lossless", "--rate", "200mbit", "--pfc", "xoff=32KB,xon=16KB",
                          "--buffer", "16KB"});
  const RunResult r = run_flows("none", 3);
  const nlohmann::json j = stop_switch(*sw);
  expect_all_verified(r);
  EXPECT_EQ(total(j, "dropped"), 0u) << j.dump();
  EXPECT_EQ(total(j, "kernel_drops"), 0u) << j.dump();
  EXPECT_GT(total(j, "pause_events"), 0u) << j.dump();
  uint64_t paused_ns = 0;
  for (const auto& p : j["ports"]) paused_ns += p.value("paused_ns", 0ull);
  EXPECT_GT(paused_ns, 0u);
}

// Priorities: sender 0 at DSCP 0 (priority 0), sender 1 at DSCP 26 (priority 3 by the default
// map DSCP >> 3), DWRR weights 1:1:1:3, every priority lossless. While both flows run, the
// receiver's port sends three times the bytes of priority 3 as of priority 0: measured from
// the switch's --stats-every samples, as the median over the 250 ms intervals in which both
// queues sent (the flows start and stop a little apart). A flow keeps about 135 KB in flight
// (its transport window), so its queue stays backlogged only while the sender keeps up:
// 50 Mbit/s gives priority 3 ~30 ms of queue, which rides out a loaded machine's scheduling
// gaps (at 200 Mbit/s, 11 ms did not: medians fell to 2.5 under load). A deeper queue is no
// cure: at 20 Mbit/s, or 50 Mbit/s over jumbo veths (priority 0's queue delay 200-340 ms),
// some ASan runs hung until the 40 s timeout (the retransmission timer firing on packets that
// were only held: the go-back-N collapse src/cli/switch_hold_queue.hpp describes and prevents
// since; the test kept its 50 Mbit/s).
TEST_F(SwitchNetnsTest, TwoSendersDwrrSharesTheBottleneckByWeight) {
#if defined(__SANITIZE_ADDRESS__)
  // A share of bytes per 250 ms needs both senders to keep their queues backlogged; sanitized
  // senders beside the rest of the suite (ctest -j2) do not always, and the work-conserving
  // scheduler then rightly gives the idle share away (median 2.48 and 1.29 in two CI dry runs,
  // with UDP GSO on or off). Measured in the Release tree, like congestion_report_test.
  GTEST_SKIP() << "byte shares under a sanitizer's slowdown measure the sanitizer";
#endif
  build(2, false);
  auto sw = start_switch({"--mode", "lossless", "--rate", "50mbit", "--priorities", "4", "--dwrr",
                          "1,1,1,3", "--pfc", "xoff=1MB,xon=512KB", "--stats-every", "0.25"});
  const RunResult r = run_flows("none", 3, {0, 26 << 2});
  const nlohmann::json j = stop_switch(*sw);
  expect_all_verified(r);
  EXPECT_EQ(total(j, "dropped"), 0u) << j.dump();
  EXPECT_EQ(j.value("priorities", 0u), 4u);
  const nlohmann::json& prios = port(j, "sr")["priorities"];
  ASSERT_EQ(prios.size(), 4u) << j.dump();
  EXPECT_GT(prios[0].value("dequeued_bytes", 0ull), 0u);
  EXPECT_GT(prios[3].value("dequeued_bytes", 0ull), 0u);
  EXPECT_EQ(prios[1].value("enqueued", 1ull), 0u);
  EXPECT_EQ(prios[2].value("enqueued", 1ull), 0u);
  EXPECT_EQ(port(j, "s0")["priorities"][3].value("held", 1ull), 0u);
  EXPECT_EQ(port(j, "s1")["priorities"][0].value("held", 1ull), 0u);

  // sr's dequeued bytes of priorities 0 and 3 at each sample.
  std::vector<std::pair<uint64_t, uint64_t>> samples;
  std::istringstream err(sw->err());
  for (std::string line; std::getline(err, line);) {
    if (line.empty() || line[0] != '{') continue;
    const auto s = nlohmann::json::parse(line, nullptr, false);
    if (!s.is_object()) continue;
    const nlohmann::json& p = port(s, "sr")["priorities"];
    samples.emplace_back(p[0].value("dequeued_bytes", 0ull), p[3].value("dequeued_bytes", 0ull));
  }
  std::vector<double> ratios;  // priority 3 / priority 0 bytes, intervals where both sent
  for (size_t i = 1; i < samples.size(); ++i) {
    const uint64_t d0 = samples[i].first - samples[i - 1].first;
    const uint64_t d3 = samples[i].second - samples[i - 1].second;
    if (d0 > 0 && d3 > 0) ratios.push_back(static_cast<double>(d3) / static_cast<double>(d0));
  }
  ASSERT_GE(ratios.size(), 4u) << sw->err();
  std::sort(ratios.begin(), ratios.end());
  const double median = ratios[ratios.size() / 2];
  std::printf(
      "sr, %zu intervals of 250 ms with both flows: median priority 3 / priority 0 "
      "bytes %.3f (min %.3f, max %.3f)\n",
      ratios.size(), median, ratios.front(), ratios.back());
  EXPECT_GT(median, 2.8) << sw->err();
  EXPECT_LT(median, 3.2) << sw->err();
}

// Mixed: --mode ecn with priority 3 lossless (--pfc 3, XOFF 32 KB below a flow's ~135 KB in
// flight) and a 16 KB buffer for the lossy rest. Sender 1 (DSCP 26, priority 3) is paused
// and held, never dropped; sender 0 (DSCP 0, priority 0) is tail-dropped at the port limit
// and recovers by go-back-N. Both deliver every byte.
TEST_F(SwitchNetnsTest, TwoSendersMixedLossyAndLosslessPriorities) {
  build(2, false);
  auto sw = start_switch({"--mode", "ecn", "--rate", "100mbit", "--priorities", "4", "--pfc",
                          "3,xoff=32KB,xon=16KB", "--buffer", "16KB"});
  const RunResult r = run_flows("none", 3, {0, 26 << 2});
  const nlohmann::json j = stop_switch(*sw);
  expect_all_verified(r);
  const nlohmann::json& sr = port(j, "sr")["priorities"];
  ASSERT_EQ(sr.size(), 4u) << j.dump();
  EXPECT_GT(sr[0].value("dropped_tail", 0ull), 0u) << j.dump();
  EXPECT_LE(sr[0].value("max_depth_bytes", 1ull << 40), 16u * 1024) << j.dump();
  EXPECT_EQ(sr[3].value("dropped_tail", 1ull), 0u) << j.dump();
  EXPECT_EQ(sr[3].value("dropped_headroom", 1ull), 0u) << j.dump();
  EXPECT_GT(sr[3].value("dequeued_bytes", 0ull), 0u) << j.dump();
  // Sender 1's port as an ingress: priority 3 paused and held, priority 0 never.
  const nlohmann::json& s1 = port(j, "s1")["priorities"];
  EXPECT_GT(s1[3].value("pause_events", 0ull), 0u) << j.dump();
  EXPECT_GT(s1[3].value("held", 0ull), 0u) << j.dump();
  EXPECT_EQ(s1[0].value("pause_events", 1ull), 0u) << j.dump();
  EXPECT_EQ(port(j, "s0")["priorities"][0].value("pause_events", 1ull), 0u) << j.dump();
  EXPECT_EQ(j["scheduling"][3].value("lossless", false), true) << j.dump();
  EXPECT_EQ(j["scheduling"][0].value("lossless", true), false) << j.dump();
}

// Lossy with a small buffer: tail drops at the receiver's port; go-back-N still delivers
// every byte.
TEST_F(SwitchNetnsTest, TwoSendersLossyTailDropsAndDataStaysCorrect) {
  build(2, false);
  auto sw = start_switch({"--mode", "lossy", "--rate", "200mbit", "--buffer", "32KB"});
  const RunResult r = run_flows("none", 3);
  const nlohmann::json j = stop_switch(*sw);
  expect_all_verified(r);
  EXPECT_GT(port(j, "sr").value("dropped_tail", 0ull), 0u) << j.dump();
  EXPECT_LE(port(j, "sr").value("max_depth_bytes", 0ull), 32u * 1024) << j.dump();
  EXPECT_EQ(total(j, "ecn_marked"), 0u);
}

// "Naked": a Linux bridge with a tbf qdisc (rate-limited tail-drop FIFO) on the receiver's
// port drops at the qdisc; data stays correct.
TEST_F(SwitchNetnsTest, TwoSendersThroughATbfBridgePortDropAtTheQdisc) {
  if (!shell_ok("tc -V")) GTEST_SKIP() << "tc not installed";
  build(2, true);
  ASSERT_TRUE(shell_ok("ip netns exec " + sw_ +
                       " tc qdisc add dev sr root tbf rate 200mbit burst 32kb limit 32kb"));
  const RunResult r = run_flows("none", 3);
  expect_all_verified(r);
  const std::string tc = capture("ip netns exec " + sw_ + " tc -s qdisc show dev sr");
  const size_t at = tc.find("dropped ");
  ASSERT_NE(at, std::string::npos) << tc;
  EXPECT_GT(std::stoull(tc.substr(at + 8)), 0u) << tc;
}

// UDP GSO through the switch: a sender hands the kernel 32 datagrams per sendmsg
// (UDP_SEGMENT), which the veth passes to the switch as one super-frame; the switch must
// cut it and put every datagram through the model. The receiver (a plain UDP socket, so the
// kernel verifies each UDP checksum; InCsumErrors must stay 0) checks every datagram's
// length and bytes and counts the CE marks it reads through IP_RECVTOS.
constexpr const char* kGsoPeer = R"PY(
import json, socket, struct, sys, time
role, host, port, count, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def body(i):
    return struct.pack('!Q', i) + bytes((i * 7 + j) & 0xFF for j in range(size - 8))
if role == 'recv':
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    s.bind((host, port))
    print('ready', flush=True)
    s.settimeout(20)
    got, bad, ce, first, last = set(), 0, 0, None, None
    try:
        while len(got) < count:
            data, anc, _, _ = s.recvmsg(65536, 64)
            now = time.monotonic()
            first = first if first is not None else now
            last = now
            tos = next((a[2][0] for a in anc if a[1] == socket.IP_TOS), 0)
            ce += (tos & 3) == 3
            i = struct.unpack('!Q', data[:8])[0] if len(data) >= 8 else -1
            if len(data) != size or i >= count or data != body(i): bad += 1
            else: got.add(i)
            s.settimeout(3)
    except socket.timeout:
        pass
    print(json.dumps({'got': len(got), 'bad': bad, 'ce': ce,
                      'elapsed': (last - first) if first is not None else 0}), flush=True)
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 2)  # ECT(0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 << 20)
    s.setsockopt(socket.IPPROTO_UDP, 103, size)  # UDP_SEGMENT
    s.connect((host, port))
    for b in range(0, count, 32):
        s.send(b''.join(body(i) for i in range(b, min(count, b + 32))))
)PY";

struct GsoRun {
  nlohmann::json rx, sw;
  uint64_t csum_errors = 0;
};

class SwitchGsoTest : public SwitchNetnsTest {
 protected:
  GsoRun run_gso(const std::vector<std::string>& switch_args, int count, int size) {
    GsoRun r;
    build(1, false);
    if (HasFatalFailure()) return r;
    const std::string script = "/tmp/uroce-switch-gso-" + std::to_string(id_) + ".py";
    std::ofstream(script) << kGsoPeer;
    auto sw = start_switch(switch_args);
    const std::string port = std::to_string(20000 + id_ % 10000);
    Process rx(rx_, Env{},
               {"python3", script, "recv", net_ + "100", port, std::to_string(count),
                std::to_string(size)});
    EXPECT_TRUE([&] {
      for (int k = 0; k < 200 && rx.out().find("ready") == std::string::npos; ++k)
        std::this_thread::sleep_for(50ms);
      return rx.out().find("ready") != std::string::npos;
    }()) << rx.both();
    Process tx(sender(0), Env{},
               {"python3", script, "send", net_ + "100", port, std::to_string(count),
                std::to_string(size)});
    EXPECT_EQ(tx.wait(30s), 0) << tx.both();
    EXPECT_EQ(rx.wait(60s), 0) << rx.both();
    const std::string out = rx.out();
    r.rx = nlohmann::json::parse(out.substr(out.find('{')), nullptr, false);
    r.sw = stop_switch(*sw);
    const std::string snmp = capture("ip netns exec " + rx_ + " cat /proc/net/snmp");
    // "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors"
    const size_t head = snmp.find("Udp: ");
    const size_t vals = snmp.find("Udp: ", head + 1);
    if (head != std::string::npos && vals != std::string::npos) {
      std::istringstream names(snmp.substr(head + 5, snmp.find('\n', head) - head - 5));
      std::istringstream nums(snmp.substr(vals + 5));
      std::string name;
      uint64_t v = 0;
      while (names >> name && nums >> v)
        if (name == "InCsumErrors") r.csum_errors = v;
    }
    std::remove(script.c_str());
    return r;
  }
  static const nlohmann::json& port(const nlohmann::json& sw, const std::string& name) {
    for (const auto& p : sw["ports"])
      if (p["name"] == name) return p;
    static const nlohmann::json none;
    return none;
  }
};

TEST_F(SwitchGsoTest, LosslessCutsUdpGsoSuperFramesAndShapesEachDatagram) {
  constexpr int kCount = 2048, kSize = 1000;
  // 20 Mbit/s: 2048 frames of 1042 bytes take about 0.85 s.
  const GsoRun r = run_gso({"--mode", "lossless", "--rate", "20mbit"}, kCount, kSize);
  ASSERT_TRUE(r.rx.is_object());
  EXPECT_EQ(r.rx["got"], kCount) << r.rx.dump();
  EXPECT_EQ(r.rx["bad"], 0) << r.rx.dump();
  EXPECT_EQ(r.csum_errors, 0u);
  const auto& sr = port(r.sw, "sr");
  const auto& s0 = port(r.sw, "s0");
  EXPECT_EQ(sr["enqueued"], kCount) << r.sw.dump();
  EXPECT_EQ(sr["dequeued"], kCount) << r.sw.dump();
  EXPECT_GE(s0["gso_segmented"].get<uint64_t>(), kCount / 32u) << r.sw.dump();
  EXPECT_EQ(s0["oversized"], 0) << r.sw.dump();
  const double frame = 14 + 20 + 8 + kSize;
  const double ideal = (kCount - 1) * frame / (20e6 / 8);
  EXPECT_GE(r.rx["elapsed"].get<double>(), 0.8 * ideal) << r.rx.dump();
}

// 256 frame slots (the least allowed): a burst of super-frames (32 datagrams each) needs more than
// there are, so datagrams wait for slots (backpressure, arrival order kept) and none is lost.
TEST_F(SwitchGsoTest, LosslessShortOfFrameSlotsWaitsAndLosesNothing) {
  constexpr int kCount = 2048, kSize = 1000;
  const GsoRun r =
      run_gso({"--mode", "lossless", "--rate", "50mbit", "--frame-slots", "256"}, kCount, kSize);
  ASSERT_TRUE(r.rx.is_object());
  EXPECT_EQ(r.rx["got"], kCount) << r.rx.dump();
  EXPECT_EQ(r.rx["bad"], 0) << r.rx.dump();
  EXPECT_EQ(r.csum_errors, 0u);
  const auto& sr = port(r.sw, "sr");
  EXPECT_EQ(sr["enqueued"], kCount) << r.sw.dump();
  EXPECT_EQ(sr["dequeued"], kCount) << r.sw.dump();
  EXPECT_EQ(r.sw["totals"]["dropped"], 0) << r.sw.dump();
  EXPECT_EQ(r.sw["totals"]["kernel_drops"], 0) << r.sw.dump();
  EXPECT_EQ(port(r.sw, "s0")["oversized"], 0) << r.sw.dump();
}

TEST_F(SwitchGsoTest, EcnMarksUdpGsoSegmentsOneByOne) {
  constexpr int kCount = 1024, kSize = 1000;
  const GsoRun r = run_gso(
      {"--mode", "ecn", "--rate", "50mbit", "--buffer", "4MB", "--ecn", "kmin=4KB,kmax=8KB,pmax=1"},
      kCount, kSize);
  ASSERT_TRUE(r.rx.is_object());
  EXPECT_EQ(r.rx["got"], kCount) << r.rx.dump();
  EXPECT_EQ(r.rx["bad"], 0) << r.rx.dump();
  EXPECT_EQ(r.csum_errors, 0u);
  const auto& sr = port(r.sw, "sr");
  EXPECT_EQ(sr["enqueued"], kCount) << r.sw.dump();
  EXPECT_EQ(sr["dropped_tail"], 0) << r.sw.dump();
  // Every datagram queued behind 8 KB or more is marked; the receiver sees each mark.
  const uint64_t marked = sr["ecn_marked"].get<uint64_t>();
  EXPECT_GT(marked, kCount / 2u) << r.sw.dump();
  EXPECT_LT(marked, uint64_t{kCount}) << r.sw.dump();
  EXPECT_EQ(r.rx["ce"].get<uint64_t>(), marked) << r.rx.dump();
  EXPECT_GT(port(r.sw, "s0")["gso_segmented"].get<uint64_t>(), 0u) << r.sw.dump();
}

// Bad values: one line naming the option and what is accepted, exit status 2 (no root).
TEST(SwitchCli, BadValuesGiveOneLineErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
    Env env = {};
  };
  const std::vector<Case> cases = {
      {{"--port", "a", "--port", "b", "--rate", "1gbits"},
       "uroce switch: --rate: rate '1gbits' is not valid; use e.g. 1gbit, 100mbit, 125mbps "
       "(bytes/s) or unlimited\n"},
      {{"--port", "a", "--port", "b", "--buffer", "12XB"},
       "uroce switch: --buffer: size '12XB' is not valid; use bytes with an optional unit, e.g. "
       "1500, 512KB, 2MB\n"},
      {{"--port", "a", "--port", "b", "--ecn", "kmin=20KB,kmax=10KB,pmax=0.1"},
       "uroce switch: --ecn: kmax (10240 B) must be above kmin (20480 B)\n"},
      {{"--port", "a", "--port", "b", "--ecn", "kmin=1KB,kmax=10KB,pmax=2"},
       "uroce switch: --ecn pmax '2' is not valid; use a probability in (0, 1], e.g. 0.2\n"},
      {{"--port", "a", "--port", "b", "--ecn", "kmin=1KB,kmax=10KB"},
       "uroce switch: --ecn needs kmin, kmax and pmax, e.g. kmin=20KB,kmax=200KB,pmax=0.2\n"},
      {{"--port", "a", "--port", "b", "--mode", "pfc"},
       "uroce switch: --mode 'pfc' is not valid; use lossy, ecn or lossless\n"},
      {{"--port", "a", "--port", "b", "--mode", "lossy", "--ecn", "kmin=1KB,kmax=10KB,pmax=0.1"},
       "uroce switch: --ecn marks only in --mode ecn or lossless; lossy is tail drop alone\n"},
      {{"--port", "a", "--port", "b", "--mode", "lossless", "--pfc", "xoff=10KB,xon=20KB"},
       "uroce switch: --pfc: xoff (10240 B) must be above 0 and xon (20480 B) not above it\n"},
      {{"--port", "a", "--port", "b", "--priorities", "9"},
       "uroce switch: --priorities 9 is not valid; use 1..8\n"},
      {{"--port", "a", "--port", "b", "--priorities", "4", "--pfc", "4"},
       "uroce switch: --pfc: priority 4 is not below --priorities 4; use 0..3 or raise "
       "--priorities\n"},
      {{"--port", "a", "--port", "b", "--mode", "lossless", "--priorities", "4", "--pfc", "3"},
       "uroce switch: --pfc PRIO: --mode lossless already makes every priority lossless; use "
       "--mode ecn or lossy for lossless priorities beside lossy ones\n"},
      {{"--port", "a", "--port", "b", "--mode", "ecn", "--pfc", "xoff=64KB,xon=32KB"},
       "uroce switch: --pfc needs --mode lossless, or lossless priorities (e.g. --pfc 3)\n"},
      {{"--port", "a", "--port", "b", "--priorities", "2", "--strict", "2"},
       "uroce switch: --strict: priority 2 is not below --priorities 2; use 0..1 or raise "
       "--priorities\n"},
      {{"--port", "a", "--port", "b", "--priorities", "4", "--dwrr", "1,2"},
       "uroce switch: --dwrr has 2 weights for 4 priorities; give one per priority\n"},
      {{"--port", "a", "--port", "b", "--priorities", "4", "--prio-map", "26=5"},
       "uroce switch: --prio-map: DSCP 26 maps to priority 5, not below --priorities 4\n"},
      {{"--port", "a", "--port", "b", "--prio-map", "26"},
       "uroce switch: --prio-map: '26' is not DSCP=PRIO, e.g. 26=3,48=6\n"},
      {{"--port", "a"}, "uroce switch: give at least two --port interfaces to switch between\n"},
      {{"--port", "a", "--port", "a"}, "uroce switch: --port a is given twice\n"},
      {{"--port", "a", "--port", "b", "--roce-port", "0"},
       "uroce switch: --roce-port: '0' is not a UDP port or range; use e.g. 4791, 4791-4799 or "
       "4791,5000 (ports 1..65535)\n"},
      {{"--port", "a", "--port", "b"},
       "uroce switch: UROCE_UDP_PORT=99999 is not a UDP port (1 .. 65535)\n",
       {{"UROCE_UDP_PORT", "99999"}}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {uroce_binary(), "switch"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    Process p("", c.env, argv);
    EXPECT_EQ(p.wait(10s), 2) << p.both();
    EXPECT_EQ(p.err(), c.message);
  }
}

}  // namespace
}  // namespace uroce::itest
