// `uroce perf --json` carries the server's counters as of the client's "end" message. That
// message goes over TCP and can overtake the client's last UDP packets: the retransmissions it
// sent just before the ACK that completed its last WRITE. Here the server gets little CPU
// (pinned to one CPU next to a busy thread, at nice 10: about a tenth of that CPU), so its
// progress thread falls behind and its sockets still hold some of those packets when "end"
// arrives: the report must still count every packet the client sent, as none was lost on
// loopback.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_process.hpp"

namespace uroce::test {
namespace {

using std::chrono::seconds;

// The highest CPU this process may run on.
int last_allowed_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  int last = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) last = c;
  }
  return last;
}

// A thread spinning on one CPU for as long as it lives.
class CpuHog {
 public:
  explicit CpuHog(int cpu) {
    thread_ = std::thread([this] {
      while (!stop_.load(std::memory_order_relaxed)) {
      }
    });
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(thread_.native_handle(), sizeof set, &set);
  }
  ~CpuHog() {
    stop_ = true;
    thread_.join();
  }
  CpuHog(const CpuHog&) = delete;
  CpuHog& operator=(const CpuHog&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(CliPerfServerReport, TheServersCountersHoldEveryPacketTheClientSentWhenTheServerIsStarved) {
  const uint16_t tcp = next_port();
  const uint16_t udp = next_port();
  const int cpu = last_allowed_cpu();
  CpuHog hog(cpu);
  Process srv({"perf", "write_bw", "-p", std::to_string(tcp), "--timeout", "120"}, udp, [cpu] {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
    setpriority(PRIO_PROCESS, 0, 10);
  });
  Process cli({"perf", "write_bw", "127.0.0.1", "-p", std::to_string(tcp), "-s", "4096", "-n",
               "200", "--json", "--timeout", "120"},
              udp);
  ASSERT_EQ(cli.wait(seconds(150)), 0) << cli.err();
  ASSERT_EQ(srv.wait(seconds(30)), 0) << srv.err();
  const auto j = nlohmann::json::parse(cli.out());
  ASSERT_EQ(j["ok"], true);
  const auto& lc = j["local"]["counters"];
  const auto& rc = j["remote"]["counters"];
  EXPECT_EQ(rc["rx_write_requests"], 200);
  EXPECT_EQ(lc["sent_pkts"].get<uint64_t>(), 200 + lc["retransmitted_pkts"].get<uint64_t>());
  // Duplicates count as received: every packet sent is one received.
  EXPECT_EQ(rc["rcvd_pkts"], lc["sent_pkts"])
      << "client retransmitted " << lc["retransmitted_pkts"] << ", server saw "
      << rc["duplicate_request"] << " duplicates";
  EXPECT_EQ(rc["rx_discards"], 0);  // the kernel dropped none (64 MiB receive buffer)
  EXPECT_EQ(lc["tx_drop_error"], 0);
}

}  // namespace
}  // namespace uroce::test
