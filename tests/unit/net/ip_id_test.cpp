// What the kernel writes into the IPv4 header of uroce's datagrams, read back with an
// AF_PACKET capture on lo (needs CAP_NET_RAW, so skipped otherwise). The ICRC covers the IPv4
// ID and flags (docs/wire-facts.md), so uroce relies on this: an unconnected socket with
// IP_PMTUDISC_DO sends DF and ID 0, from the main socket and from source-port sockets alike.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "net/udp_port.hpp"
#include "net_test_util.hpp"

namespace uroce::net {
namespace {

using testing::bth_packet;
using testing::send_one;
using testing::unshared;

struct Ipv4Seen {
  uint16_t id = 0;
  uint16_t frag = 0;
  uint8_t tos = 0;
  uint8_t ttl = 0;
  uint16_t udp_csum = 0;
};

TEST(IpId, UnconnectedDfSocketSendsIdZero) {
  int cap = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (cap < 0) GTEST_SKIP() << "AF_PACKET capture needs CAP_NET_RAW (not root)";
  sockaddr_ll ll{};
  ll.sll_family = AF_PACKET;
  ll.sll_protocol = htons(ETH_P_ALL);
  ll.sll_ifindex = static_cast<int>(if_nametoindex("lo"));
  ASSERT_EQ(bind(cap, reinterpret_cast<sockaddr*>(&ll), sizeof ll), 0);

  auto tx = UdpPort::open(unshared("127.0.0.1"));
  auto rx = UdpPort::open(unshared("127.0.0.1"));
  ASSERT_TRUE(tx.ok() && rx.ok());
  const uint16_t dport = rx.value()->port();
  constexpr uint16_t kQpSport = 0xC1D5;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(send_one(*tx.value(), bth_packet(0x11, 32), tx.value()->local(), dport, 0x6A), 1u);
    ASSERT_EQ(
        send_one(*tx.value(), bth_packet(0x12, 32), tx.value()->local(), dport, 0x02, kQpSport),
        1u);
  }
  std::vector<std::pair<uint16_t, Ipv4Seen>> seen;  // (udp sport, header)
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  uint8_t frame[2048];
  while (seen.size() < 6 && std::chrono::steady_clock::now() < deadline) {
    pollfd p{cap, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    sockaddr_ll from{};
    socklen_t len = sizeof from;
    ssize_t n = recvfrom(cap, frame, sizeof frame, 0, reinterpret_cast<sockaddr*>(&from), &len);
    // lo shows every packet twice (outgoing and host); count the outgoing copy.
    if (n < 14 + 28 || from.sll_pkttype != PACKET_OUTGOING) continue;
    const uint8_t* ip = frame + 14;
    if ((ip[0] >> 4) != 4 || ip[9] != 17) continue;
    const uint8_t* udp = ip + (ip[0] & 0x0f) * 4;
    const uint16_t sport = static_cast<uint16_t>((udp[0] << 8) | udp[1]);
    const uint16_t port = static_cast<uint16_t>((udp[2] << 8) | udp[3]);
    if (port != dport) continue;
    Ipv4Seen s;
    s.tos = ip[1];
    s.id = static_cast<uint16_t>((ip[4] << 8) | ip[5]);
    s.frag = static_cast<uint16_t>((ip[6] << 8) | ip[7]);
    s.ttl = ip[8];
    s.udp_csum = static_cast<uint16_t>((udp[6] << 8) | udp[7]);
    seen.emplace_back(sport, s);
  }
  close(cap);
  ASSERT_EQ(seen.size(), 6u);
  for (const auto& [sport, s] : seen) {
    EXPECT_EQ(s.id, 0) << "sport " << sport;
    EXPECT_EQ(s.frag, 0x4000) << "DF set, no fragment offset";
    EXPECT_EQ(s.ttl, 64);
    if (sport == kQpSport) {
      EXPECT_EQ(s.tos, 0x02);
    } else {
      EXPECT_EQ(sport, tx.value()->port());
      EXPECT_EQ(s.tos, 0x6A);
    }
  }
}

}  // namespace
}  // namespace uroce::net
