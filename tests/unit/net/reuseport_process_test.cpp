// The reuseport group across real processes: helpers (net_port_helper) and this test process
// share 127.0.0.1:<port>; one helper is killed with SIGKILL and the survivors must repair the
// steering by themselves; a newcomer joins; a helper leaves cleanly.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "net/udp_port.hpp"
#include "net_test_util.hpp"

namespace uroce::net {
namespace {

using namespace std::chrono_literals;
using testing::bth_packet;
using testing::ip;
using testing::send_one;
using testing::shared;
using testing::unshared;

struct Helper {
  pid_t pid = -1;
  uint32_t slot = 0;
  uint32_t position = 0;
};

std::optional<Helper> spawn_helper(uint16_t port, const std::string& dir) {
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  const std::string port_s = std::to_string(port);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl(NET_PORT_HELPER, NET_PORT_HELPER, "127.0.0.1", port_s.c_str(), dir.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string line;
  char ch = 0;
  while (read(fds[0], &ch, 1) == 1 && ch != '\n') line += ch;
  close(fds[0]);
  std::istringstream in(line);
  std::string word;
  Helper h;
  h.pid = pid;
  if (!(in >> word >> h.slot >> h.position) || word != "ready") {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    ADD_FAILURE() << "helper said: " << line;
    return std::nullopt;
  }
  return h;
}

void stop(Helper& h, int sig) {
  if (h.pid <= 0) return;
  kill(h.pid, sig);
  int status = 0;
  waitpid(h.pid, &status, 0);  // reaped: no zombie holds on to anything
  h.pid = -1;
}

// Who got a datagram for `dqpn`: the slot of the helper that answered, the slot of `local`
// if it arrived there, or nullopt if nobody within the timeout.
class Prober {
 public:
  Prober(UdpPort& local, uint16_t port) : local_(local), port_(port) {
    auto s = UdpPort::open(unshared("127.0.0.1"));
    sender_ = std::move(s.value());
  }
  std::optional<uint32_t> who_gets(uint32_t dqpn, std::chrono::milliseconds timeout = 100ms) {
    (void)send_one(*sender_, bth_packet(dqpn), ip("127.0.0.1"), port_);
    std::vector<uint8_t> b0(2048), b1(2048);
    RxDatagram rx[1];
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      rx[0].buf = b0;
      if (local_.recv_burst(rx) == 1) return *local_.slot();
      rx[0].buf = b1;
      if (sender_->recv_burst(rx) == 1) {
        std::istringstream in(
            std::string(b1.begin(), b1.begin() + static_cast<ptrdiff_t>(rx[0].len)));
        std::string word;
        uint32_t slot = 0, q = 0;
        in >> word >> slot >> q;
        if (q == dqpn) return slot;
        continue;  // a late answer to an earlier question
      }
      (void)local_.wait(2ms);
    }
    return std::nullopt;
  }

  // True once `rounds` consecutive datagrams for each slot reach their owner.
  bool converges(const std::vector<uint32_t>& slots, std::chrono::milliseconds budget,
                 int rounds = 10) {
    const auto deadline = std::chrono::steady_clock::now() + budget;
    int good = 0;
    uint32_t n = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      bool all = true;
      for (uint32_t slot : slots) {
        const uint32_t q = qpn_range_of_slot(slot).base + 1 + (n++ % 1000);
        if (who_gets(q, 50ms) != slot) all = false;
      }
      good = all ? good + 1 : 0;
      if (good >= rounds) return true;
    }
    return false;
  }

 private:
  UdpPort& local_;
  uint16_t port_;
  std::unique_ptr<UdpPort> sender_;
};

TEST(ReuseportProcesses, CrashedMemberIsRepairedAndNewcomersJoin) {
  testing::TempDir dir;
  constexpr uint16_t kPort = 24821;
  auto h1 = spawn_helper(kPort, dir.path());
  ASSERT_TRUE(h1.has_value());
  auto h2 = spawn_helper(kPort, dir.path());
  ASSERT_TRUE(h2.has_value());
  auto me = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  ASSERT_TRUE(me.ok()) << me.error().message;
  EXPECT_EQ(h1->slot, 0u);
  EXPECT_EQ(h2->slot, 1u);
  EXPECT_EQ(me.value()->slot(), 2u);
  EXPECT_EQ(h1->position, 0u);
  EXPECT_EQ(h2->position, 1u);
  EXPECT_EQ(me.value()->position(), 2u);
  Prober probe(*me.value(), kPort);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(probe.who_gets(qpn_range_of_slot(0).base + static_cast<uint32_t>(i)), 0u);
    EXPECT_EQ(probe.who_gets(qpn_range_of_slot(1).base + static_cast<uint32_t>(i)), 1u);
    EXPECT_EQ(probe.who_gets(qpn_range_of_slot(2).base + static_cast<uint32_t>(i)), 2u);
  }

  // SIGKILL the member at position 0: the kernel moves us (the last) into position 0 and the
  // group's program is stale until a survivor notices.
  stop(*h1, SIGKILL);
  EXPECT_TRUE(probe.converges({1, 2}, 5s)) << "survivors did not repair the steering";
  me.value()->maintain();  // position() is what the last look at the registry said
  EXPECT_EQ(me.value()->position(), 0u);
  // The dead slot's datagrams reach nobody as data.
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(probe.who_gets(qpn_range_of_slot(0).base + static_cast<uint32_t>(i), 30ms),
              std::nullopt);

  // A newcomer joins after the crash: it gets the freed slot 0 and the next position.
  auto h3 = spawn_helper(kPort, dir.path());
  ASSERT_TRUE(h3.has_value());
  EXPECT_EQ(h3->slot, 0u);
  EXPECT_EQ(h3->position, 2u);
  EXPECT_TRUE(probe.converges({0, 1, 2}, 5s));

  // A clean leave: h2 re-points the program before it closes.
  stop(*h2, SIGTERM);
  EXPECT_TRUE(probe.converges({0, 2}, 5s));
  EXPECT_EQ(probe.who_gets(qpn_range_of_slot(1).base, 30ms), std::nullopt);
  stop(*h3, SIGTERM);
  EXPECT_TRUE(probe.converges({2}, 2s));
}

TEST(ReuseportProcesses, TwoCrashesAtOnceAreResolvedByProbes) {
  testing::TempDir dir;
  constexpr uint16_t kPort = 24822;
  // Positions: h1 0, h2 1, me 2, h3 3. Killing h1 and h2 together leaves the kernel's order
  // depending on which socket closed first; the registry cannot know, the probes can.
  auto h1 = spawn_helper(kPort, dir.path());
  auto h2 = spawn_helper(kPort, dir.path());
  ASSERT_TRUE(h1 && h2);
  auto me = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  ASSERT_TRUE(me.ok());
  auto h3 = spawn_helper(kPort, dir.path());
  ASSERT_TRUE(h3.has_value());
  Prober probe(*me.value(), kPort);
  EXPECT_TRUE(probe.converges({0, 1, 2, 3}, 3s, 3));
  kill(h2->pid, SIGKILL);
  kill(h1->pid, SIGKILL);
  stop(*h1, SIGKILL);
  stop(*h2, SIGKILL);
  EXPECT_TRUE(probe.converges({2, 3}, 5s)) << "positions after a double crash were not recovered";
  me.value()->maintain();
  // The crash bumped the registry epoch, so this member proved its position with probes.
  EXPECT_GE(me.value()->counters().reuseport_probes, 1u);
  EXPECT_EQ(me.value()->counters().reuseport_probe_failures, 0u);
  const uint32_t pos = *me.value()->position();
  EXPECT_LT(pos, 2u);
  stop(*h3, SIGTERM);
}

}  // namespace
}  // namespace uroce::net
