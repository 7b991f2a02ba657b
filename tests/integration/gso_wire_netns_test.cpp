// UDP GSO as a peer that checks the real IP header sees it (root only; skipped otherwise, and
// without ethtool): namespace A sends a run of RoCE packets sealed for IPv4 ID 0 as one GSO
// message over a veth whose UDP segmentation offload is off, so A's kernel cuts the message
// into datagrams in software, numbering the IPv4 IDs 0, 1, 2, ... as a NIC doing USO does.
// An AF_PACKET capture in namespace B reads every frame with its real IP header, and every
// ICRC must verify exactly against it (what Linux rxe or an RNIC checks; a wrong ICRC is a
// silent drop there). Over IPv6 there is no ID, and the packets must arrive as sealed.
//
// Namespaces and veths are named after the pid; the test process enters A, a helper thread
// enters B to open the capture and a UDP socket that consumes the datagrams.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "net/ip_addr.hpp"
#include "net/udp_port.hpp"
#include "wire/byte_order.hpp"
#include "wire/icrc.hpp"
#include "wire/packet.hpp"

namespace uroce::net {
namespace {

int run(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str());
}

int enter(const std::string& ns) {
  const int fd = open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const int rc = setns(fd, CLONE_NEWNET);
  close(fd);
  return rc;
}

constexpr uint16_t kPort = 4791;  // each namespace has its own

class GsoWireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    if (run("ip -V") != 0) GTEST_SKIP() << "iproute2 (ip) not installed";
    if (run("ethtool --version") != 0) GTEST_SKIP() << "ethtool not installed (scripts/deps)";
    const int id = getpid() % 100000;
    ns_a_ = "uroce-gsoa-" + std::to_string(id);
    ns_b_ = "uroce-gsob-" + std::to_string(id);
    veth_a_ = "urgsa" + std::to_string(id);
    veth_b_ = "urgsb" + std::to_string(id);
    const std::string net = "10.74." + std::to_string(id % 250) + ".";
    addr_a4_ = net + "1";
    addr_b4_ = net + "2";
    addr_a6_ = "fd79::" + std::to_string(id % 9000 + 1000) + ":1";
    addr_b6_ = "fd79::" + std::to_string(id % 9000 + 1000) + ":2";
    original_ns_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(original_ns_, 0);
    created_ = true;
    for (const std::string& cmd :
         {"ip netns add " + ns_a_, "ip netns add " + ns_b_,
          "ip link add " + veth_a_ + " type veth peer name " + veth_b_,
          "ip link set " + veth_a_ + " netns " + ns_a_,
          "ip link set " + veth_b_ + " netns " + ns_b_,
          "ip -n " + ns_a_ + " addr add " + addr_a4_ + "/24 dev " + veth_a_,
          "ip -n " + ns_b_ + " addr add " + addr_b4_ + "/24 dev " + veth_b_,
          "ip -n " + ns_a_ + " addr add " + addr_a6_ + "/64 dev " + veth_a_ + " nodad",
          "ip -n " + ns_b_ + " addr add " + addr_b6_ + "/64 dev " + veth_b_ + " nodad",
          "ip -n " + ns_a_ + " link set " + veth_a_ + " up",
          "ip -n " + ns_b_ + " link set " + veth_b_ + " up",
          // A segments in software: what leaves the veth is what a wire would carry.
          "ip netns exec " + ns_a_ + " ethtool -K " + veth_a_ + " tx-udp-segmentation off"}) {
      ASSERT_EQ(run(cmd), 0) << cmd;
    }
    ASSERT_EQ(enter(ns_a_), 0) << std::strerror(errno);
    entered_ = true;
  }

  void TearDown() override {
    if (entered_) {
      EXPECT_EQ(setns(original_ns_, CLONE_NEWNET), 0);
    }
    if (original_ns_ >= 0) close(original_ns_);
    if (created_) {
      run("ip netns del " + ns_a_);
      run("ip netns del " + ns_b_);
    }
  }

  // Sends `count` RDMA WRITE Middle packets of `payload` bytes (and a shorter WRITE Last)
  // from A to B as one GSO message and returns the IP datagrams B's capture saw.
  std::vector<std::vector<uint8_t>> send_run_and_capture(bool ipv6, size_t count, size_t payload,
                                                         std::vector<std::vector<uint8_t>>& sent,
                                                         uint64_t& gso_messages) {
    const IpAddr src = IpAddr::parse(ipv6 ? addr_a6_ : addr_a4_).value();
    const IpAddr dst = IpAddr::parse(ipv6 ? addr_b6_ : addr_b4_).value();
    int cap = -1;
    int sink = -1;
    std::thread in_b([&] {
      if (enter(ns_b_) != 0) return;
      cap = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ALL));
      sockaddr_ll ll{};
      ll.sll_family = AF_PACKET;
      ll.sll_protocol = htons(ETH_P_ALL);
      ll.sll_ifindex = static_cast<int>(if_nametoindex(veth_b_.c_str()));
      if (cap >= 0 && bind(cap, reinterpret_cast<sockaddr*>(&ll), sizeof ll) != 0) {
        close(cap);
        cap = -1;
      }
      // A socket on B's port so the datagrams are consumed instead of answered with ICMP.
      sink = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      const SockAddr at = SockAddr::make(dst, kPort, 0);
      if (sink >= 0 && bind(sink, at.get(), at.len) != 0) {
        close(sink);
        sink = -1;
      }
    });
    in_b.join();
    EXPECT_GE(cap, 0) << "AF_PACKET capture in B";
    EXPECT_GE(sink, 0) << "UDP socket in B";
    std::vector<std::vector<uint8_t>> seen;
    if (cap < 0 || sink < 0) return seen;

    UdpPortConfig config;
    config.local = src;
    config.port = kPort;
    config.share = false;
    config.gso = true;
    auto port = UdpPort::open(config);
    EXPECT_TRUE(port.ok());
    if (!port.ok()) return seen;

    // Real packets, each sealed for ID 0 as the engine seals them.
    wire::IpContext ctx;
    ctx.ipv6 = ipv6;
    ctx.src = src.bytes;
    ctx.dst = dst.bytes;
    ctx.sport = kPort;
    ctx.dport = kPort;
    std::mt19937_64 rng(ipv6 ? 6 : 4);
    sent.clear();
    for (size_t i = 0; i <= count; ++i) {
      wire::Headers h;
      h.bth.opcode = i < count ? 0x07 : 0x08;  // RC RDMA WRITE Middle, then Last
      h.bth.dqpn = 0x000123;
      h.bth.psn = Psn(static_cast<uint32_t>(0x100 + i));
      const size_t len = i < count ? payload : payload / 2;
      std::vector<uint8_t> data(len);
      for (auto& b : data) b = static_cast<uint8_t>(rng());
      std::vector<uint8_t> pkt(wire::packet_size(h.bth.opcode, len));
      EXPECT_EQ(wire::build_packet(h, data, pkt), pkt.size());
      wire::write_icrc(ctx, pkt);
      sent.push_back(std::move(pkt));
    }
    std::vector<TxDatagram> burst;
    for (const auto& p : sent) {
      TxDatagram d;
      d.data = p;
      d.ip.dst = dst.bytes;
      d.ip.dport = kPort;
      burst.push_back(d);
    }
    EXPECT_EQ(port.value()->send_burst(burst), sent.size());
    gso_messages = port.value()->counters().tx_gso_messages;

    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    std::vector<uint8_t> frame(65536);
    while (seen.size() < sent.size() && std::chrono::steady_clock::now() < deadline) {
      pollfd p{cap, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = recv(cap, frame.data(), frame.size(), 0);
      if (n <= 0) continue;
      const uint8_t version = frame[0] >> 4;
      const size_t ip_len = version == 4 ? size_t{frame[0] & 0x0Fu} * 4 : 40;
      const uint8_t proto = version == 4 ? frame[9] : frame[6];
      if (version != (ipv6 ? 6 : 4) || proto != 17 || size_t(n) < ip_len + 8) continue;
      if (wire::load_be16(&frame[ip_len + 2]) != kPort) continue;
      seen.emplace_back(frame.begin(), frame.begin() + n);
    }
    close(cap);
    close(sink);
    return seen;
  }

  std::string ns_a_, ns_b_, veth_a_, veth_b_, addr_a4_, addr_b4_, addr_a6_, addr_b6_;
  int original_ns_ = -1;
  bool created_ = false;
  bool entered_ = false;
};

TEST_F(GsoWireTest, Ipv4SegmentsCarryTheIcrcForTheIdTheKernelGivesThem) {
  std::vector<std::vector<uint8_t>> sent;
  uint64_t gso_messages = 0;
  const auto seen = send_run_and_capture(false, 20, 1024, sent, gso_messages);
  EXPECT_EQ(gso_messages, 1u);
  ASSERT_EQ(seen.size(), sent.size()) << "frames captured in B";
  for (size_t i = 0; i < seen.size(); ++i) {
    const auto& d = seen[i];
    EXPECT_EQ(wire::load_be16(&d[4]), i) << "IPv4 ID of segment " << i;
    EXPECT_EQ(d[6] & 0x40, 0x40) << "DF on segment " << i;
    EXPECT_TRUE(wire::verify_icrc_ip_datagram(d)) << "ICRC of segment " << i;
    // The packet is as sealed but for its ICRC (segment 0 keeps even that).
    const std::vector<uint8_t> roce(d.begin() + 28, d.end());
    ASSERT_EQ(roce.size(), sent[i].size()) << i;
    EXPECT_TRUE(std::equal(roce.begin(), roce.end() - 4, sent[i].begin())) << i;
    EXPECT_EQ(i == 0, std::equal(roce.end() - 4, roce.end(), sent[i].end() - 4)) << i;
  }
}

TEST_F(GsoWireTest, Ipv6SegmentsArriveAsSealed) {
  std::vector<std::vector<uint8_t>> sent;
  uint64_t gso_messages = 0;
  const auto seen = send_run_and_capture(true, 20, 1024, sent, gso_messages);
  EXPECT_EQ(gso_messages, 1u);
  ASSERT_EQ(seen.size(), sent.size()) << "frames captured in B";
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_TRUE(wire::verify_icrc_ip_datagram(seen[i])) << "ICRC of segment " << i;
    const std::vector<uint8_t> roce(seen[i].begin() + 48, seen[i].end());
    EXPECT_EQ(roce, sent[i]) << i;
  }
}

}  // namespace
}  // namespace uroce::net
