// UdpPacketIo's receive side with several sockets (an IPv4 and an IPv6 address): it reads
// the socket that last had traffic without asking the others, so a busy-polling program pays
// one system call per pass; every other socket is still looked at: every few passes while it
// has traffic too, down to every 100 us while it stays quiet, and at once after wait() saw it
// readable. Nothing may be lost or reordered on the way.
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "net/udp_device.hpp"
#include "net/udp_port.hpp"
#include "net_test_util.hpp"

namespace uroce::net {
namespace {

using namespace std::chrono_literals;
using testing::bth_packet;
using testing::ip;
using testing::send_one;
using testing::unshared;

constexpr uint16_t kPort = 24841;

// A device's I/O on 127.0.0.1 and ::1 (both on `port`), and a sender for each family. Each
// test gives its own port: ctest runs the tests of this file in parallel, and two receivers
// bound to one port (SO_REUSEADDR) would each get some of the other's datagrams.
struct TwoAddressIo {
  uint16_t port = 0;
  std::unique_ptr<UdpPacketIo> io;
  int fd4 = -1;  // the receiving sockets, owned by `io`
  int fd6 = -1;
  std::unique_ptr<UdpPort> tx4;
  std::unique_ptr<UdpPort> tx6;
  std::vector<std::vector<uint8_t>> bufs = std::vector<std::vector<uint8_t>>(
      UdpPort::kMaxBurst, std::vector<uint8_t>(device::kPacketBufferSize));
  std::vector<device::RxPacket> rx = std::vector<device::RxPacket>(UdpPort::kMaxBurst);

  // A datagram carrying `mark` from the IPv4 / IPv6 sender to the device's address.
  void send4(uint8_t mark) { send_mark(*tx4, "127.0.0.1", mark); }
  void send6(uint8_t mark) { send_mark(*tx6, "::1", mark); }
  void send_mark(UdpPort& from, const char* to, uint8_t mark) {
    ASSERT_EQ(send_one(from, bth_packet(0x11, 4, mark), ip(to), port), 1U);
  }

  // One rx_burst: the first payload byte (after the BTH) of each datagram it returned, and
  // those of the datagrams that came from ::1 also in `from6` if given.
  std::vector<uint8_t> pass(std::vector<uint8_t>* from6 = nullptr) {
    for (size_t i = 0; i < rx.size(); ++i) rx[i].buf = bufs[i];
    const size_t n = io->rx_burst(rx);
    std::vector<uint8_t> marks;
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(rx[i].len, 16U);
      const uint8_t mark = rx[i].bytes()[12];
      marks.push_back(mark);
      if (from6 != nullptr && rx[i].meta.ip.src == ip("::1").bytes) from6->push_back(mark);
    }
    return marks;
  }
};

// Skips (returns false) on a host without ::1.
bool open_two_address_io(TwoAddressIo& t, uint16_t port) {
  t.port = port;
  std::vector<std::unique_ptr<UdpPort>> ports;
  for (const char* addr : {"127.0.0.1", "::1"}) {
    auto p = UdpPort::open(unshared(addr, port));
    if (!p.ok() && p.error().code == EADDRNOTAVAIL) return false;
    EXPECT_TRUE(p.ok()) << p.error().message;
    if (!p.ok()) return false;
    ports.push_back(std::move(p.value()));
  }
  t.fd4 = ports[0]->fd();
  t.fd6 = ports[1]->fd();
  t.io = std::make_unique<UdpPacketIo>(std::move(ports), port);
  t.tx4 = std::move(UdpPort::open(unshared("127.0.0.1")).value());
  t.tx6 = std::move(UdpPort::open(unshared("::1")).value());
  return true;
}

// Loopback usually delivers within the sending system call, but a loaded machine may leave
// it to ksoftirqd for a while: the tests that count passes start once the datagram is on
// the receiving socket. A poll reads nothing, so the passes still have it all to find.
void wait_readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1) << "the datagram never reached the socket";
}

// Traffic on IPv4 makes that socket the one read directly: one datagram, received.
void make_ipv4_busy(TwoAddressIo& t) {
  t.send4(1);
  std::vector<uint8_t> got;
  for (int i = 0; i < 1000 && got.empty(); ++i) got = t.pass();
  ASSERT_EQ(got, std::vector<uint8_t>{1});
}

// Passes until one returns something, for at most `limit`: what it returned, and how many
// passes that took.
std::pair<std::vector<uint8_t>, int> pass_until_any(TwoAddressIo& t,
                                                    std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  std::vector<uint8_t> got;
  int passes = 0;
  while (got.empty() && std::chrono::steady_clock::now() < end) {
    got = t.pass();
    ++passes;
  }
  return {got, passes};
}

TEST(UdpPacketIoRx, ASocketQuietForLongIsStillReadWhileAnotherIsBusy) {
  TwoAddressIo t;
  if (!open_two_address_io(t, kPort + 2)) GTEST_SKIP() << "no ::1 on this host";
  ASSERT_NO_FATAL_FAILURE(make_ipv4_busy(t));
  // Empty passes for a while: every full look finds the IPv6 socket quiet, so they space
  // out to the longest interval.
  for (const auto end = std::chrono::steady_clock::now() + 5ms;
       std::chrono::steady_clock::now() < end;) {
    ASSERT_TRUE(t.pass().empty());
  }
  t.send6(2);
  ASSERT_NO_FATAL_FAILURE(wait_readable(t.fd6));
  const auto start = std::chrono::steady_clock::now();
  const auto [got, passes] = pass_until_any(t, 2000ms);
  EXPECT_EQ(got, std::vector<uint8_t>{2});
  // The design bound is 100 us and a pass; this only catches a socket left for good (a
  // loaded CI machine may stall a pass for milliseconds).
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1000ms) << passes << " passes";
}

TEST(UdpPacketIoRx, AfterAQuietSocketDeliversTheOthersAreLookedAtEveryFifthPass) {
  TwoAddressIo t;
  if (!open_two_address_io(t, kPort + 3)) GTEST_SKIP() << "no ::1 on this host";
  ASSERT_NO_FATAL_FAILURE(make_ipv4_busy(t));
  // The traffic moves to IPv6: a full look finds it, and that socket is read directly now.
  t.send6(2);
  const auto [got6, passes6] = pass_until_any(t, 2000ms);
  ASSERT_EQ(got6, std::vector<uint8_t>{2});
  // The IPv4 socket had traffic a moment ago: it is looked at every few passes, not after
  // the long interval of a socket that stays quiet.
  t.send4(3);
  ASSERT_NO_FATAL_FAILURE(wait_readable(t.fd4));
  const auto [got4, passes4] = pass_until_any(t, 2000ms);
  EXPECT_EQ(got4, std::vector<uint8_t>{3});
  EXPECT_LE(passes4, 5) << "after traffic on another socket a full look is due every 5th pass";
}

TEST(UdpPacketIoRx, BothAddressesBusyLoseNothingAndKeepEachSocketsOrder) {
  TwoAddressIo t;
  if (!open_two_address_io(t, kPort + 4)) GTEST_SKIP() << "no ::1 on this host";
  std::vector<uint8_t> all;
  std::vector<uint8_t> got6;
  auto take = [&] {
    for (const uint8_t m : t.pass(&got6)) all.push_back(m);
  };
  // Uneven on purpose, and switching: IPv4 busy first, then IPv6, so the socket read
  // directly changes with the load.
  uint8_t next4 = 0;
  uint8_t next6 = 100;
  for (int r = 0; r < 40; ++r) {
    const bool v4_busy = r < 20;
    for (int k = 0; k < (v4_busy ? 3 : 1); ++k) t.send4(next4++);
    for (int k = 0; k < (v4_busy ? 1 : 3); ++k) t.send6(next6++);
    take();
  }
  // Then passes until all have come (a loaded machine may deliver late), and 20 more: a
  // datagram returned twice would show.
  const size_t sent = static_cast<size_t>(next4) + (next6 - 100U);
  for (const auto end = std::chrono::steady_clock::now() + 2s;
       all.size() < sent && std::chrono::steady_clock::now() < end;) {
    take();
  }
  for (int i = 0; i < 20; ++i) take();
  std::vector<uint8_t> got4;
  for (const uint8_t m : all) {
    if (m < 100) got4.push_back(m);
  }
  std::vector<uint8_t> want4(next4);
  std::vector<uint8_t> want6(next6 - 100);
  for (size_t i = 0; i < want4.size(); ++i) want4[i] = static_cast<uint8_t>(i);
  for (size_t i = 0; i < want6.size(); ++i) want6[i] = static_cast<uint8_t>(100 + i);
  EXPECT_EQ(got4, want4);
  EXPECT_EQ(got6, want6);
  EXPECT_EQ(all.size(), sent);
}

TEST(UdpPacketIoRx, AfterWaitSawAQuietSocketReadableTheNextPassReadsIt) {
  TwoAddressIo t;
  if (!open_two_address_io(t, kPort + 5)) GTEST_SKIP() << "no ::1 on this host";
  ASSERT_NO_FATAL_FAILURE(make_ipv4_busy(t));
  EXPECT_TRUE(t.pass().empty());  // the IPv4 socket is the one read directly now
  t.send6(2);
  ASSERT_NO_FATAL_FAILURE(wait_readable(t.fd6));
  t.io->wait(1s, false);  // returns at once: ::1 is readable
  EXPECT_EQ(t.pass(), std::vector<uint8_t>{2});
}

// A pass with room for fewer datagrams than a UDP GRO message held leaves the rest in the
// port, on no socket: the next wait() must return at once (and the rest come next pass),
// not sleep as if nothing were there.
TEST(UdpPacketIoGro, WaitDoesNotSleepOnDatagramsAPassLeftInAPort) {
  constexpr uint16_t kGroPort = kPort + 1;
  UdpPortConfig rx_cfg = unshared("127.0.0.1", kGroPort);
  rx_cfg.gro = true;
  auto rx_port = UdpPort::open(rx_cfg);
  ASSERT_TRUE(rx_port.ok()) << rx_port.error().message;
  std::vector<std::unique_ptr<UdpPort>> ports;
  ports.push_back(std::move(rx_port.value()));
  UdpPacketIo io(std::move(ports), kGroPort);
  UdpPortConfig tx_cfg = unshared("127.0.0.1");
  tx_cfg.gso = true;
  auto tx = UdpPort::open(tx_cfg);
  ASSERT_TRUE(tx.ok());
  std::vector<std::vector<uint8_t>> payloads;
  std::vector<TxDatagram> burst;
  // Byte 12 marks each; the last 4 (the ICRC) are re-sealed per segment for its IPv4 ID.
  for (uint8_t i = 0; i < 10; ++i) payloads.push_back(bth_packet(0x11, 8, i));
  for (const auto& p : payloads) {
    TxDatagram d;
    d.data = p;
    d.ip.dst = ip("127.0.0.1").bytes;
    d.ip.dport = kGroPort;
    burst.push_back(d);
  }
  ASSERT_EQ(tx.value()->send_burst(burst), 10U);
  ASSERT_EQ(tx.value()->counters().tx_gso_messages, 1U);  // one message: GRO keeps it whole
  std::vector<std::vector<uint8_t>> bufs(3, std::vector<uint8_t>(device::kPacketBufferSize));
  std::vector<device::RxPacket> rx(3);
  const auto take = [&] {
    for (size_t i = 0; i < rx.size(); ++i) rx[i].buf = bufs[i];
    std::vector<uint8_t> marks;
    const size_t n = io.rx_burst(rx);
    for (size_t i = 0; i < n; ++i) marks.push_back(rx[i].bytes()[12]);
    return marks;
  };
  io.wait(2s, false);  // the message arrives
  ASSERT_EQ(take(), (std::vector<uint8_t>{0, 1, 2}));
  for (uint8_t first = 3; first < 10; first = static_cast<uint8_t>(first + 3)) {
    const auto t0 = std::chrono::steady_clock::now();
    io.wait(5s, false);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s) << "slept on datagrams it had";
    std::vector<uint8_t> want;
    for (uint8_t m = first; m < 10 && m < first + 3; ++m) want.push_back(m);
    EXPECT_EQ(take(), want);
  }
}

}  // namespace
}  // namespace uroce::net
