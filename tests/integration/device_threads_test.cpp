// Threads inside one device, for the ThreadSanitizer build (scripts/test runs it under TSan):
// an application thread that polls a CQ drives the UDP port itself (app_calls_drive) while
// the progress thread repairs the same shared port's reuseport group before it sleeps, and
// a third thread keeps changing that group by opening and closing devices on the port, and
// a fourth sends stray datagrams for every QPN slot.
// Before the repair ran under the device's I/O lock, TSan reported the progress thread's
// UdpPort::reconcile (writing the stash and position) racing the application thread's
// UdpPort::recv_burst. The data check holds in every build: every SEND arrives once, intact.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <thread>

#include "device_integration_util.hpp"

namespace uroce::itest {
namespace {

constexpr size_t kMsg = 4096;
constexpr int kMessages = 100;

OpenOptions churn_options(uint16_t port, const std::string& registry) {
  OpenOptions o = loopback_options(port, registry);
  // Sleep at most 1 ms: the progress thread then runs its group maintenance ~1000 times a
  // second, so it meets the churn while the application thread polls.
  o.progress.max_sleep = std::chrono::milliseconds(1);
  return o;
}

TEST(DeviceThreadsTest, AppPollingAndGroupRepairOnOnePortWhileMembersComeAndGo) {
  TempDir registry;
  const uint16_t port = pick_udp_port();
  auto a = Device::open(churn_options(port, registry.path()));
  ASSERT_TRUE(a.is_ok()) << a.error().message;
  auto b = Device::open(churn_options(port, registry.path()));
  ASSERT_TRUE(b.is_ok()) << b.error().message;
  Side sa(std::move(a.value()), kMessages * kMsg);
  Side sb(std::move(b.value()), kMessages * kMsg);
  QueuePair qa = sa.make_qp(QpType::kRc);
  QueuePair qb = sb.make_qp(QpType::kRc);
  ConnectOptions co;
  co.rnr_retry = 7;
  ASSERT_TRUE(connect_qp(qa, 100, QpEndpoint{qb.qp_num(), 200, sb.gid()}, co));
  ASSERT_TRUE(connect_qp(qb, 200, QpEndpoint{qa.qp_num(), 100, sa.gid()}, co));

  std::atomic<bool> stop{false};
  std::atomic<int> opened{0};
  std::thread churn([&] {
    while (!stop.load()) {
      auto c = Device::open(churn_options(port, registry.path()));
      if (c.is_ok()) opened.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  // Datagrams with a bad ICRC for QPNs of every slot keep arriving (the engines and ports
  // drop and count them).
  std::thread noise([&] {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::array<uint8_t, 16> bth{0x04, 0, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0xDE, 0xAD, 0, 0};
    uint32_t k = 0;
    while (!stop.load()) {
      // Every QPN slot in turn: A's own, B's, the churning members' and unowned ones, so A's
      // receive path consults its view of the group (which the repair rewrites).
      const uint32_t qpn = (k++ % 64) << 18 | 0x100;
      bth[5] = static_cast<uint8_t>(qpn >> 16);
      bth[6] = static_cast<uint8_t>(qpn >> 8);
      bth[7] = static_cast<uint8_t>(qpn);
      (void)sendto(fd, bth.data(), bth.size(), 0, reinterpret_cast<const sockaddr*>(&to),
                   sizeof to);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    close(fd);
  });
  struct Joiner {  // also on a failed ASSERT, which returns early
    std::atomic<bool>& stop;
    std::thread& churn;
    std::thread& noise;
    ~Joiner() {
      stop.store(true);
      churn.join();
      noise.join();
    }
  } joiner{stop, churn, noise};

  // Rounds of kMessages SENDs until the churn has changed the group often enough.
  const auto start = std::chrono::steady_clock::now();
  int rounds = 0;
  while (rounds < 2 || opened.load() < 20 ||
         std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500)) {
    ++rounds;
    fill_pattern(sa.buf.data(), sa.buf.size(), static_cast<uint32_t>(rounds));
    for (int i = 0; i < kMessages; ++i) {
      const Sge r = sb.mr.sge(static_cast<size_t>(i) * kMsg, kMsg);
      ASSERT_TRUE(qb.post_recv(RecvWr{static_cast<uint64_t>(i), std::span<const Sge>(&r, 1)}));
    }
    std::vector<Wc> sent;
    std::vector<Wc> received;
    for (int i = 0; i < kMessages; ++i) {
      const Sge s = sa.mr.sge(static_cast<size_t>(i) * kMsg, kMsg);
      ASSERT_TRUE(qa.post_send(make_wr(1000 + i, WrOpcode::kSend, &s, 1)));
      // Poll both CQs from this thread after every post: application-driven passes.
      auto w = wait_wcs(sa.cq, 1);
      sent.insert(sent.end(), w.begin(), w.end());
      Wc wc[8];
      for (int n = sb.cq.poll(wc); n > 0; n = sb.cq.poll(wc)) {
        received.insert(received.end(), wc, wc + n);
      }
    }
    auto rest = wait_wcs(sb.cq, kMessages - received.size());
    received.insert(received.end(), rest.begin(), rest.end());
    ASSERT_EQ(sent.size(), static_cast<size_t>(kMessages)) << "round " << rounds;
    ASSERT_EQ(received.size(), static_cast<size_t>(kMessages)) << "round " << rounds;
    for (int i = 0; i < kMessages; ++i) {
      ASSERT_EQ(sent[i].wr_id, 1000u + i);
      ASSERT_EQ(sent[i].status, WcStatus::kSuccess) << i;
      ASSERT_EQ(received[i].wr_id, static_cast<uint64_t>(i));
      ASSERT_EQ(received[i].status, WcStatus::kSuccess) << i;
      ASSERT_EQ(received[i].byte_len, kMsg);
    }
    ASSERT_EQ(std::memcmp(sb.buf.data(), sa.buf.data(), sa.buf.size()), 0) << "round " << rounds;
    ASSERT_LT(rounds, 10000) << "the churn thread never got going";
  }
}

}  // namespace
}  // namespace uroce::itest
