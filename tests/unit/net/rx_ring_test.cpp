// RxRing (UROCE_RX_RING): which datagrams the packet socket's ring takes, what it tells of
// each, GSO messages cut back into datagrams, and the UDP socket's filter dropping exactly
// what the ring took. Needs CAP_NET_RAW (skipped without it). Ports are ephemeral or
// 24851.., unique to this file.
#include "net/rx_ring.hpp"

#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "net/reuseport_program.hpp"
#include "net/udp_device.hpp"
#include "net_test_util.hpp"

namespace uroce::net {
namespace {

using namespace std::chrono_literals;
using testing::bth_packet;
using testing::ip;
using testing::send_one;
using testing::unshared;

// Reads the ring until `count` datagrams came or `timeout` passed (copies them out).
std::vector<testing::Got> read_ring(RxRing& ring, size_t count, std::chrono::milliseconds timeout) {
  std::vector<testing::Got> got;
  std::vector<RxDatagram> rx(8);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (got.size() < count && std::chrono::steady_clock::now() < deadline) {
    const size_t n = ring.read(rx);
    for (size_t i = 0; i < n; ++i) {
      got.push_back(
          {std::vector<uint8_t>(rx[i].buf.begin(), rx[i].buf.begin() + rx[i].len), rx[i]});
    }
    ring.release();
    if (n == 0) {
      pollfd p{ring.fd(), POLLIN, 0};
      (void)poll(&p, 1, 5);
    }
  }
  return got;
}

class RxRingTest : public ::testing::Test {
 protected:
  // A receiving port handed over to a ring on its address, and a sending port.
  // `slot`: the receiving port shares fixed port kSharedPort and owns that QPN slot.
  // `ifindexes`: the interfaces the ring watches (`lo`, which all this traffic crosses).
  void open(const char* addr, std::optional<int> slot = std::nullopt, bool sender_gso = false,
            std::vector<int> ifindexes = {kLo}) {
    UdpPortConfig c = slot ? testing::shared(addr, kSharedPort, dir.path(), *slot) : unshared(addr);
    c.gro = true;  // ring mode needs it (UdpPort::hand_data_to_ring)
    auto r = UdpPort::open(c);
    ASSERT_TRUE(r) << r.error().message;
    rx_port = std::move(r.value());
    RxRingConfig rc;
    rc.port = rx_port->port();
    rc.addrs = {ip(addr)};
    rc.slot = rx_port->slot();
    rc.ifindexes = ifindexes;
    auto opened = RxRing::open(rc);
    if (!opened && opened.error().code == EPERM) GTEST_SKIP() << opened.error().message;
    ASSERT_TRUE(opened) << opened.error().message;
    ring = std::move(opened.value());
    ASSERT_EQ(rx_port->hand_data_to_ring(ifindexes), 0);
    UdpPortConfig tc = unshared(addr);
    tc.gso = sender_gso;
    auto t = UdpPort::open(tc);
    ASSERT_TRUE(t) << t.error().message;
    tx_port = std::move(t.value());
  }
  static constexpr uint16_t kSharedPort = 24851;
  static inline const int kLo = static_cast<int>(if_nametoindex("lo"));
  testing::TempDir dir;
  // Sends one data datagram with `tos` from tx_port to rx_port over `addr` and checks what
  // the ring tells of it and that the socket dropped its copy; the datagram's metadata.
  RxDatagram expect_through_ring(const char* addr, uint8_t tos) {
    const auto pkt = bth_packet(0x20, 100, 0xAB);
    EXPECT_EQ(send_one(*tx_port, pkt, ip(addr), rx_port->port(), tos), 1u);
    auto got = read_ring(*ring, 1, 2s);
    if (got.size() != 1) {
      ADD_FAILURE() << got.size() << " datagrams through the ring";
      return {};
    }
    EXPECT_EQ(got[0].bytes, pkt);
    const RxDatagram& m = got[0].meta;
    EXPECT_EQ(m.ip.ipv6, !ip(addr).is_v4());
    EXPECT_EQ(m.ip.src, ip(addr).bytes);
    EXPECT_EQ(m.ip.dst, ip(addr).bytes);
    EXPECT_EQ(m.ip.sport, tx_port->port());
    EXPECT_EQ(m.ip.dport, rx_port->port());
    EXPECT_EQ(m.tos, tos);
    EXPECT_EQ(m.ttl, 64);
    EXPECT_TRUE(m.in_port);
    EXPECT_EQ(ring->counters().datagrams, 1u);
    EXPECT_TRUE(testing::receive(*rx_port, 1, 100ms).empty());  // the socket's filter
    EXPECT_TRUE(read_ring(*ring, 1, 50ms).empty());             // nothing more
    return m;
  }
  std::unique_ptr<UdpPort> rx_port;
  std::unique_ptr<UdpPort> tx_port;
  std::unique_ptr<RxRing> ring;
};

TEST_F(RxRingTest, ADataDatagramComesThroughTheRingWithItsHeadersAndNotThroughTheSocket) {
  open("127.0.0.1");
  if (!ring) return;
  const RxDatagram m = expect_through_ring("127.0.0.1", 0x62);
  // An unconnected DF socket sends IPv4 ID 0 (the ICRC covers it): known exactly here.
  EXPECT_TRUE(m.ip_id_known);
  EXPECT_EQ(m.ip.ipv4_id, 0);
  EXPECT_TRUE(m.ip.ipv4_df);
}

TEST_F(RxRingTest, QpOneProbesRuntsAndOtherPortsStayOnTheSockets) {
  open("127.0.0.1");
  if (!ring) return;
  const auto mad = bth_packet(kGsiQpn, 256, 0x11);
  const auto probe = make_probe(3, 0x1234);
  const std::vector<uint8_t> runt(8, 0x04);
  const auto multicast = bth_packet(kMulticastQpn, 16, 0x22);
  for (const auto* p : {&mad, &multicast}) {
    ASSERT_EQ(send_one(*tx_port, *p, ip("127.0.0.1"), rx_port->port()), 1u);
  }
  ASSERT_EQ(send_one(*tx_port, std::vector<uint8_t>(probe.begin(), probe.end()), ip("127.0.0.1"),
                     rx_port->port()),
            1u);
  ASSERT_EQ(send_one(*tx_port, runt, ip("127.0.0.1"), rx_port->port()), 1u);
  // A data datagram to another port (the sender's own) is not ours either.
  ASSERT_EQ(send_one(*rx_port, bth_packet(0x20), ip("127.0.0.1"), tx_port->port()), 1u);
  auto on_socket = testing::receive(*rx_port, 3, 2s);  // the probe is counted, not returned
  ASSERT_EQ(on_socket.size(), 3u);
  EXPECT_EQ(on_socket[0].bytes, mad);
  EXPECT_EQ(on_socket[1].bytes, multicast);
  EXPECT_EQ(on_socket[2].bytes, runt);
  EXPECT_EQ(rx_port->counters().rx_probes, 1u);
  EXPECT_EQ(testing::receive(*tx_port, 1, 2s).size(), 1u);
  EXPECT_TRUE(read_ring(*ring, 1, 50ms).empty());
  EXPECT_EQ(ring->counters().frames, 0u);
}

TEST_F(RxRingTest, AGsoMessageIsCutIntoItsDatagramsInOrder) {
  open("127.0.0.1", std::nullopt, /*sender_gso=*/true);
  if (!ring) return;
  std::vector<std::vector<uint8_t>> pkts;
  for (uint8_t i = 0; i < 3; ++i)
    pkts.push_back(bth_packet(0x20, 500, static_cast<uint8_t>(i + 1)));
  pkts.push_back(bth_packet(0x20, 100, 9));  // the last may be shorter
  ASSERT_EQ(tx_port->send_burst(testing::to_all(*rx_port, pkts)), pkts.size());
  ASSERT_EQ(tx_port->counters().tx_gso_messages, 1u);
  auto got = read_ring(*ring, pkts.size(), 2s);
  ASSERT_EQ(got.size(), pkts.size());
  for (size_t i = 0; i < pkts.size(); ++i) {
    // The sender reseals a later segment's last 4 bytes (its ICRC) for the IPv4 ID it gets.
    ASSERT_EQ(got[i].bytes.size(), pkts[i].size()) << i;
    const size_t cmp = i == 0 ? pkts[i].size() : pkts[i].size() - 4;
    EXPECT_TRUE(std::equal(pkts[i].begin(), pkts[i].begin() + cmp, got[i].bytes.begin())) << i;
    // Segment k has the IPv4 ID the kernel gives it when it cuts the message: the header's
    // (0: an unconnected DF socket) + k.
    EXPECT_TRUE(got[i].meta.ip_id_known) << i;
    EXPECT_EQ(got[i].meta.ip.ipv4_id, i) << i;
  }
  EXPECT_EQ(ring->counters().frames, 1u);
  EXPECT_EQ(ring->counters().gso_frames, 1u);
  EXPECT_TRUE(testing::receive(*rx_port, 1, 100ms).empty());
}

TEST_F(RxRingTest, AGsoMessageLargerThanAFrameStaysOnTheSocketBehindAMarker) {
  open("127.0.0.1", std::nullopt, /*sender_gso=*/true);
  if (!ring) return;
  std::vector<std::vector<uint8_t>> pkts(3, bth_packet(0x20, 4000, 0x5A));
  ASSERT_EQ(tx_port->send_burst(testing::to_all(*rx_port, pkts)), pkts.size());
  auto on_socket = testing::receive(*rx_port, 3, 2s);
  ASSERT_EQ(on_socket.size(), 3u);
  for (const auto& g : on_socket) {
    ASSERT_EQ(g.bytes.size(), pkts[0].size());
    EXPECT_TRUE(std::equal(pkts[0].begin(), pkts[0].end() - 4, g.bytes.begin()));
  }
  // The ring holds its marker: no datagram, but where it came and for which address.
  EXPECT_TRUE(read_ring(*ring, 1, 50ms).empty());
  ASSERT_TRUE(ring->at_marker());
  EXPECT_EQ(ring->marker_ip().dst, ip("127.0.0.1").bytes);
  EXPECT_EQ(ring->marker_ip().sport, tx_port->port());
  ring->pass_marker(false);
  EXPECT_FALSE(ring->at_marker());
  EXPECT_TRUE(read_ring(*ring, 1, 50ms).empty());
  EXPECT_EQ(ring->counters().markers, 1u);
  EXPECT_EQ(ring->counters().datagrams, 0u);
}

// What the device asks before it reads a socket outside a marker: whether the next message
// is one a marker stands for (read it only at its marker, or it would overtake the ring's
// datagrams that came before it). A look that consumes nothing.
TEST_F(RxRingTest, TheSocketTellsAMarkedMessageWithoutGivingItUp) {
  open("127.0.0.1", std::nullopt, /*sender_gso=*/true);
  if (!ring) return;
  EXPECT_FALSE(rx_port->next_is_ring_message());  // nothing there
  // A CM MAD (QP1) is the socket's own.
  const auto mad = bth_packet(kGsiQpn, 256, 0x11);
  ASSERT_EQ(send_one(*tx_port, mad, ip("127.0.0.1"), rx_port->port()), 1u);
  // A data GSO message too large for a frame: the ring's, behind a marker.
  std::vector<std::vector<uint8_t>> data(3, bth_packet(0x20, 4000, 0x5A));
  ASSERT_EQ(tx_port->send_burst(testing::to_all(*rx_port, data)), data.size());

  const auto deadline = std::chrono::steady_clock::now() + 2s;
  pollfd p{rx_port->fd(), POLLIN, 0};
  while (poll(&p, 1, 5) == 0 && std::chrono::steady_clock::now() < deadline) {
  }
  // One receive message at a time, as the device reads a socket in ring mode: its datagrams.
  std::vector<std::vector<uint8_t>> bufs(8, std::vector<uint8_t>(9000));
  std::vector<RxDatagram> rx(8);
  auto one_message = [&] {
    for (size_t i = 0; i < rx.size(); ++i) rx[i].buf = bufs[i];
    return rx_port->recv_burst(rx, 1);
  };
  EXPECT_FALSE(rx_port->next_is_ring_message());
  ASSERT_EQ(one_message(), 1u);  // the MAD
  EXPECT_TRUE(rx_port->next_is_ring_message());
  EXPECT_TRUE(rx_port->next_is_ring_message());  // still there
  ASSERT_EQ(one_message(), 3u);
  EXPECT_TRUE(std::equal(data[0].begin(), data[0].end() - 4, rx[0].buf.begin()));
  EXPECT_EQ(rx_port->counters().rx_ring_large_messages, 1u);
  EXPECT_FALSE(rx_port->next_is_ring_message());
}

TEST_F(RxRingTest, ASharedPortsRingTakesOnlyItsSlot) {
  constexpr uint32_t kSlot = 5;
  open("127.0.0.1", static_cast<int>(kSlot));
  if (!ring) return;
  ASSERT_EQ(rx_port->slot(), kSlot);
  const QpnRange mine = qpn_range_of_slot(kSlot);
  const QpnRange other = qpn_range_of_slot(kSlot + 1);
  const auto ours = bth_packet(mine.base + 7, 20, 1);
  const auto theirs = bth_packet(other.base + 7, 20, 2);
  ASSERT_EQ(send_one(*tx_port, theirs, ip("127.0.0.1"), rx_port->port()), 1u);
  ASSERT_EQ(send_one(*tx_port, ours, ip("127.0.0.1"), rx_port->port()), 1u);
  auto got = read_ring(*ring, 1, 2s);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].bytes, ours);
  // The other slot's datagram is left to the socket, whose port (alone in its group) gets it
  // and counts it as for a slot nobody owns.
  EXPECT_TRUE(testing::receive(*rx_port, 1, 200ms).empty());
  EXPECT_EQ(rx_port->counters().rx_drop_no_owner, 1u);
}

TEST_F(RxRingTest, IPv6DatagramsComeWithTheirTrafficClass) {
  open("::1");
  if (!ring) return;
  EXPECT_FALSE(expect_through_ring("::1", 0x8A).ip_id_known);  // IPv6 has no ID
}

// A datagram to our address that came in on an interface the ring does not watch (here: it
// watches only an ifindex nobody has) is the socket's, not lost between the two filters.
TEST_F(RxRingTest, ADatagramOnAnInterfaceTheRingDoesNotWatchStaysOnTheSocket) {
  open("127.0.0.1", std::nullopt, false, {kLo + 100000});
  if (!ring) return;
  const auto pkt = bth_packet(0x20, 100, 0x3C);
  ASSERT_EQ(send_one(*tx_port, pkt, ip("127.0.0.1"), rx_port->port()), 1u);
  auto on_socket = testing::receive(*rx_port, 1, 2s);
  ASSERT_EQ(on_socket.size(), 1u);
  EXPECT_EQ(on_socket[0].bytes, pkt);
  EXPECT_TRUE(read_ring(*ring, 1, 50ms).empty());
  EXPECT_EQ(ring->counters().frames, 0u);
}

TEST(RxRingFilter, TooManyAddressesAreRefusedWithTheFix) {
  RxRingConfig rc;
  for (int i = 0; i <= RxRing::kMaxAddresses; ++i) {
    rc.addrs.push_back(IpAddr::v4(10, 0, 0, static_cast<uint8_t>(i + 1)));
  }
  EXPECT_TRUE(build_ring_filter(rc).empty());
  auto r = RxRing::open(rc);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EINVAL);
  EXPECT_NE(r.error().message.find("UROCE_DEVICE_ADDR"), std::string::npos) << r.error().message;
  rc.addrs.pop_back();
  EXPECT_FALSE(build_ring_filter(rc).empty());
}

// UdpPacketIo in ring mode over an unshared port of 127.0.0.1 with UDP GRO, and a sending
// port with UDP GSO.
class RxRingPacketIo : public ::testing::Test {
 protected:
  void SetUp() override { open_io(RxRing::kFrames); }
  void open_io(uint32_t frames) {
    UdpPortConfig c = unshared("127.0.0.1");
    c.gro = true;
    auto rx = UdpPort::open(c);
    ASSERT_TRUE(rx) << rx.error().message;
    port = rx.value()->port();
    RxRingConfig rc;
    rc.port = port;
    rc.addrs = {ip("127.0.0.1")};
    rc.ifindexes = {static_cast<int>(if_nametoindex("lo"))};
    auto ring = RxRing::open(rc, frames);
    if (!ring && ring.error().code == EPERM) GTEST_SKIP() << ring.error().message;
    ASSERT_TRUE(ring) << ring.error().message;
    ASSERT_EQ(rx.value()->hand_data_to_ring(rc.ifindexes), 0);
    std::vector<std::unique_ptr<UdpPort>> ports;
    ports.push_back(std::move(rx.value()));
    io = std::make_unique<UdpPacketIo>(std::move(ports), port, nullptr, std::move(ring.value()));
    UdpPortConfig tc = unshared("127.0.0.1");
    tc.gso = true;
    auto t = UdpPort::open(tc);
    ASSERT_TRUE(t) << t.error().message;
    tx = std::move(t.value());
  }
  // Sends `count` datagrams of `payload` bytes after a BTH in one send_burst (one GSO message
  // when there are several); `fill(i)` gives datagram i's contents.
  template <typename Fill>
  void send(size_t count, size_t payload, Fill fill) {
    std::vector<std::vector<uint8_t>> store(count);
    for (size_t i = 0; i < count; ++i) {
      store[i] = bth_packet(0x20, payload);
      fill(i, store[i]);
    }
    ASSERT_EQ(tx->send_burst(testing::to_all(ip("127.0.0.1"), port, store)), count);
  }
  uint16_t port = 0;
  std::unique_ptr<UdpPacketIo> io;
  std::unique_ptr<UdpPort> tx;
};

// A message too large for a frame comes from the socket, but in
// the place its marker holds in the ring: a message too large for a frame comes from the socket,
// but in the place its marker holds in the ring: after what arrived before it, before what after.
TEST_F(RxRingPacketIo, ALargeMessageKeepsItsPlaceAmongTheRingsDatagrams) {
  // small, large GSO message (3 x 4000), small: in three sends, so three messages.
  auto fill_with = [](uint8_t v) {
    return [v](size_t, std::vector<uint8_t>& d) { std::fill(d.begin() + 12, d.end(), v); };
  };
  send(1, 100, fill_with(1));
  send(3, 4000, fill_with(2));
  send(1, 100, fill_with(3));

  std::vector<std::vector<uint8_t>> bufs(64, std::vector<uint8_t>(device::kPacketBufferSize));
  std::vector<device::RxPacket> pkts(64);
  std::vector<uint8_t> fills;
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (fills.size() < 5 && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < pkts.size(); ++i) pkts[i].buf = bufs[i];
    const size_t n = io->rx_burst(pkts);
    for (size_t i = 0; i < n; ++i) fills.push_back(pkts[i].bytes()[20]);
    if (n == 0) io->wait(5ms, false);
  }
  EXPECT_EQ(fills, (std::vector<uint8_t>{1, 2, 2, 2, 3}));
  EXPECT_EQ(io->ring()->counters().markers, 1u);
  EXPECT_EQ(io->ring()->counters().marker_timeouts, 0u);
  EXPECT_EQ(io->ring()->counters().datagrams, 2u);
}

// Many messages of three kinds (a lone datagram, a GSO message that fits a frame, one that
// does not), received in passes of varying room: every datagram comes once, in order.
TEST_F(RxRingPacketIo, MixedMessagesArriveInOrderWhateverTheRoomPerPass) {
  // Datagram k carries k in bytes 12..15 (after the BTH).
  uint32_t next = 0;
  auto message = [&](size_t count, size_t payload) {
    send(count, payload, [&](size_t, std::vector<uint8_t>& d) {
      std::memcpy(d.data() + 12, &next, 4);
      ++next;
    });
  };
  std::vector<uint32_t> got;
  std::vector<std::vector<uint8_t>> bufs(64, std::vector<uint8_t>(device::kPacketBufferSize));
  std::vector<device::RxPacket> pkts(64);
  size_t room = 1;
  auto receive = [&](uint32_t until, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (got.size() < until && std::chrono::steady_clock::now() < deadline) {
      room = room % 7 + 1;  // 2, 3, .. 7, 1, ..: passes that cut messages anywhere
      for (size_t i = 0; i < room; ++i) pkts[i].buf = bufs[i];
      const size_t n = io->rx_burst(std::span(pkts).first(room));
      for (size_t i = 0; i < n; ++i) {
        uint32_t k = 0;
        std::memcpy(&k, pkts[i].bytes().data() + 12, 4);
        got.push_back(k);
      }
      if (n == 0) io->wait(1ms, false);
    }
  };
  for (int round = 0; round < 40; ++round) {
    message(1, 200);                        // the ring
    message(5, 1000);                       // the ring, one GSO frame
    message(6, 2000);                       // the socket, a marker in the ring
    message(1, 3000);                       // the ring
    message(3, 3000);                       // the socket
    if (round % 4 == 3) receive(next, 2s);  // let a few rounds queue up, then drain
  }
  receive(next, 2s);
  std::vector<uint32_t> want(next);
  for (uint32_t k = 0; k < next; ++k) want[k] = k;
  EXPECT_EQ(got, want);
  EXPECT_EQ(io->ring()->counters().markers, 80u);
  EXPECT_EQ(io->ring()->counters().marker_timeouts, 0u);
}

// A ring with few frames, for its overflow.
class RxRingOverflow : public RxRingPacketIo {
 protected:
  static constexpr uint32_t kSmallRing = 8;
  void SetUp() override { open_io(kSmallRing); }
  // Sends datagrams first .. first + count - 1, each alone (a frame each), carrying its
  // number in bytes 12..15; `payload` bytes after the BTH.
  void send_numbered(uint32_t first, uint32_t count, size_t payload = 100) {
    for (uint32_t k = first; k < first + count; ++k) {
      send(1, payload, [k](size_t, std::vector<uint8_t>& d) { std::memcpy(d.data() + 12, &k, 4); });
    }
  }
  // Whether this process maps the ring's socket (/proc/self/maps names it socket:[inode]).
  bool ring_is_mapped() const {
    struct stat st {};
    if (fstat(io->ring()->fd(), &st) != 0) return false;
    std::ifstream maps("/proc/self/maps");
    const std::string name = "socket:[" + std::to_string(st.st_ino) + "]";
    for (std::string line; std::getline(maps, line);) {
      if (line.find(name) != std::string::npos) return true;
    }
    return false;
  }
  // Receives until `want` datagrams came or 2 s passed; their numbers, in order.
  std::vector<uint32_t> receive(size_t want) {
    std::vector<uint32_t> got;
    std::vector<std::vector<uint8_t>> bufs(64, std::vector<uint8_t>(device::kPacketBufferSize));
    std::vector<device::RxPacket> pkts(64);
    const auto deadline = std::chrono::steady_clock::now() + 2s;
    bool first = true;  // receive(0) makes one pass
    while ((first || got.size() < want) && std::chrono::steady_clock::now() < deadline) {
      first = false;
      for (size_t i = 0; i < pkts.size(); ++i) pkts[i].buf = bufs[i];
      const size_t n = io->rx_burst(pkts);
      for (size_t i = 0; i < n; ++i) {
        uint32_t k = 0;
        std::memcpy(&k, pkts[i].bytes().data() + 12, 4);
        got.push_back(k);
      }
      if (n == 0) io->wait(1ms, false);
    }
    return got;
  }
};

// An overflow (go-back-N resending into the same full ring was a collapse with many QPs)
// hands the data to the socket: what the ring holds comes first, then everything comes
// through the socket, in order, however many datagrams wait at once.
TEST_F(RxRingOverflow, AnOverflowedRingHandsTheDataToTheSocketWithoutLosingMore) {
  EXPECT_TRUE(ring_is_mapped());
  send_numbered(0, 20);  // 8 frames: datagrams 8..19 find none and are lost
  EXPECT_EQ(receive(8), (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(io->io_counters().rx_ring_given_back, 0u);
  // The kernel flags the frames it fills while its drop count is not zero. (A pass first,
  // which gives the kernel back the frames the last one read, as the device's next would.)
  EXPECT_TRUE(receive(0).empty());
  send_numbered(20, 1);
  EXPECT_EQ(receive(1), (std::vector<uint32_t>{20}));
  EXPECT_TRUE(io->ring()->overflowed());

  // More than the ring could hold, and a GSO message too large for a frame: all through the
  // socket now, none lost, in order.
  send_numbered(100, 3 * kSmallRing);
  send(3, 4000, [](size_t i, std::vector<uint8_t>& d) {
    const uint32_t k = 200 + static_cast<uint32_t>(i);
    std::memcpy(d.data() + 12, &k, 4);
  });
  send_numbered(300, 2);
  std::vector<uint32_t> want;
  for (uint32_t k = 100; k < 100 + 3 * kSmallRing; ++k) want.push_back(k);
  want.insert(want.end(), {200, 201, 202, 300, 301});
  EXPECT_EQ(receive(want.size()), want);

  const device::IoCounters c = io->io_counters();
  EXPECT_EQ(c.rx_ring_given_back, 1u);
  EXPECT_EQ(c.rx_ring_datagrams, 9u);  // 0..7 and 20
  EXPECT_EQ(c.rx_discards, 12u);       // the ring's; the socket filter's are not counted
  EXPECT_EQ(io->ring()->counters().markers, 0u);
  EXPECT_FALSE(io->ports()[0]->ring_takes_data());

  // Its frames are gone: unmapped, and freed in the kernel, which sets up a new ring on the
  // same socket only when it has none.
  EXPECT_TRUE(io->ring()->frames_freed());
  EXPECT_FALSE(ring_is_mapped());
  tpacket_req one_frame{RxRing::kFrameBytes, 1, RxRing::kFrameBytes, 1};
  EXPECT_EQ(setsockopt(io->ring()->fd(), SOL_PACKET, PACKET_RX_RING, &one_frame, sizeof one_frame),
            0)
      << std::strerror(errno);
}

}  // namespace
}  // namespace uroce::net
