// A flood of CM MADs at a live rdma_cm server (Debian's rping over uroce's librdmacm on
// 127.0.0.1 and a private UDP port), forged by a plain UDP socket on 127.0.0.2 with the codec
// (valid ICRC): REQs for a port nobody listens on, REQs for the listener whose cma_hdr rdma_cm
// cannot take, and MADs with random bytes behind a CM header. Each REQ gets exactly the REJ
// the kernel sends (8, then 28), the random ones nothing, the server does not crash, and a
// real client connects and pings afterwards.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <random>
#include <thread>

#include "cm/cm_messages.hpp"
#include "cm/ip_cm_service.hpp"
#include "ibverbs_test_util.hpp"
#include "wire/icrc.hpp"
#include "wire/opcode.hpp"
#include "wire/packet.hpp"

namespace uroce::ibtest {
namespace {

std::array<uint8_t, 16> v4(uint8_t d) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, d};
}

class RdmacmFlood : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(have_program(lib_dir() + "/librdmacm.so.1")) << "build uroce_rdmacm first";
    if (!have_program("/usr/bin/rping")) GTEST_SKIP() << "rdmacm-utils not installed";
    port_ = static_cast<uint16_t>(std::stoi(env_.vars.at("UROCE_PORT")));
    rping_port_ = test::reserve_port();
    sock_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(sock_, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);  // replies come back to the sender's port
    a.sin_addr.s_addr = htonl(0x7F000002);
    ASSERT_EQ(bind(sock_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
    int big = 4 << 20;
    setsockopt(sock_, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  }
  void TearDown() override {
    if (sock_ >= 0) close(sock_);
  }

  // One CM MAD as a RoCE v2 UD SEND to QPN 1 from QP1 of 127.0.0.2.
  void send_mad(std::span<const uint8_t> mad) {
    wire::Headers h{};
    h.bth.opcode = wire::make_opcode(wire::Transport::kUd, wire::Op::kSendOnly);
    h.bth.dqpn = 1;
    h.bth.psn = Psn(psn_++);
    h.deth.qkey = 0x80010000;
    h.deth.src_qp = 1;
    std::vector<uint8_t> bytes(wire::packet_size(h.bth.opcode, mad.size()));
    ASSERT_EQ(wire::build_packet(h, mad, bytes), bytes.size());
    wire::IpContext ip;
    ip.src = v4(2);
    ip.dst = v4(1);
    ip.sport = port_;
    wire::write_icrc(ip, bytes);
    sockaddr_in d{};
    d.sin_family = AF_INET;
    d.sin_port = htons(port_);
    d.sin_addr.s_addr = htonl(0x7F000001);
    ASSERT_EQ(
        sendto(sock_, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&d), sizeof d),
        static_cast<ssize_t>(bytes.size()));
  }

  std::array<uint8_t, cm::kMadSize> req(uint64_t service_id, uint32_t comm_id, bool good_header) {
    cm::Req r;
    r.local_comm_id = comm_id;
    r.service_id = service_id;
    r.local_ca_guid = 0x0200'0000'0000'0000ull | comm_id;
    r.local_qpn = 0x100 + (comm_id & 0xFFFF);
    r.starting_psn = comm_id & 0xFFFFFF;
    r.remote_cm_response_timeout = 20;
    r.local_cm_response_timeout = 20;
    r.max_cm_retries = 15;
    r.path_mtu = 3;
    r.primary.local_gid = v4(2);
    r.primary.remote_gid = v4(1);
    cm::CmaHeader hdr;
    hdr.src_port = 40000;
    hdr.src_addr[12] = 127;
    hdr.src_addr[15] = 2;
    hdr.dst_addr[12] = 127;
    hdr.dst_addr[15] = 1;
    cm::encode_cma_header(hdr, r.private_data);
    if (!good_header) r.private_data[0] = 0x01;  // cma_version 1: rdma_cm refuses it
    cm::MadHeader mh;
    mh.tid = comm_id;
    std::array<uint8_t, cm::kMadSize> out{};
    cm::encode_cm_mad(mh, cm::CmMessage{r}, out);
    return out;
  }

  // Counts the REJs (by reason) that arrive within `quiet` of each other.
  void collect(std::map<uint16_t, int>& rejs, int want, std::chrono::milliseconds quiet) {
    int got = 0;
    while (got < want) {
      pollfd p{sock_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(quiet.count())) <= 0) return;
      std::array<uint8_t, 512> buf{};
      const ssize_t n = recv(sock_, buf.data(), buf.size(), 0);
      // BTH 12 + DETH 8 + MAD 256 + ICRC 4.
      if (n != 12 + 8 + 256 + 4) continue;
      cm::CmMad m;
      if (cm::decode_cm_mad(std::span<const uint8_t>(buf.data() + 20, 256), m) !=
          cm::MadError::kOk) {
        continue;
      }
      if (const auto* rej = std::get_if<cm::Rej>(&m.message)) {
        ++rejs[rej->reason];
        ++got;
      }
    }
  }

  ToolEnv env_;
  uint16_t port_ = 0;
  uint16_t rping_port_ = 0;
  int sock_ = -1;
  uint32_t psn_ = 0;
};

TEST_F(RdmacmFlood, RequestsAreAnsweredGarbageIsDroppedAndTheServerStillServes) {
  env_.vars["UROCE_NETDEVS"] = "lo";
  const std::string port = std::to_string(rping_port_);
  Process server({"rping", "-s", "-a", "127.0.0.1", "-p", port, "-C", "5"}, env_);
  // The server's CM is up once its first REQ is answered; until then REQs may find no socket.
  const uint64_t listened = cm::ip_service_id(cm::kPsTcp, rping_port_);
  const uint64_t nobody = cm::ip_service_id(cm::kPsTcp, static_cast<uint16_t>(rping_port_ + 1));
  std::map<uint16_t, int> rejs;
  // Until rping listens its CM answers REJ 8 (or, before it is up, nothing).
  for (int i = 0; i < 150 && rejs[28] == 0; ++i) {
    send_mad(req(listened, 0x10000 + i, /*good_header=*/false));
    collect(rejs, 1, 100ms);
  }
  ASSERT_GE(rejs[28], 1) << "the server never answered: " << server.read_output();
  collect(rejs, 1000, 500ms);  // late answers to the probes above
  rejs.clear();

  // One refused REQ alone, nothing after it: its REJ 28 comes by itself, not with the
  // answer to whatever the peer sends next.
  send_mad(req(listened, 0x18000, /*good_header=*/false));
  collect(rejs, 1, 1000ms);
  ASSERT_EQ(rejs[28], 1) << "no REJ 28 within 1 s for a lone REQ rdma_cm refuses";
  rejs.clear();

  constexpr int kRounds = 40;
  constexpr int kPerRound = 50;  // paced, so no socket buffer drops anything
  uint32_t comm_id = 0x20000;
  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < kPerRound; ++i) {
      send_mad(req(i % 2 == 0 ? nobody : listened, comm_id++, /*good_header=*/false));
    }
    collect(rejs, kPerRound, 2000ms);
  }
  // REJ 8 (invalid service ID) for the port nobody listens on; REJ 28 (consumer) for a REQ
  // rdma_cm refuses, as the kernel's cm_destroy_id sends; nothing else.
  EXPECT_EQ(rejs[8], kRounds * kPerRound / 2);
  EXPECT_EQ(rejs[28], kRounds * kPerRound / 2);
  EXPECT_EQ(rejs.size(), 2u);

  // Random bytes behind a valid CM header, and runts. The runts are dropped; the others get
  // what a stray message of their attribute gets (a REQ for an unknown service REJ 8, a REP
  // for no request REJ 6, a DREQ a DREP, a SIDR_REQ a SIDR_REP) or nothing.
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::array<uint8_t, cm::kMadSize> mad = req(nobody, comm_id++, true);
    for (size_t b = cm::kMadHeaderSize; b < mad.size(); ++b) mad[b] = static_cast<uint8_t>(rng());
    mad[16] = 0;
    mad[17] = static_cast<uint8_t>(0x10 + rng() % 9);  // some CM attribute
    send_mad(i % 10 == 0 ? std::span<const uint8_t>(mad).first(100)
                         : std::span<const uint8_t>(mad));
    if (i % 50 == 49) std::this_thread::sleep_for(5ms);
  }
  rejs.clear();
  collect(rejs, 100000, 500ms);
  for (const auto& [reason, n] : rejs) EXPECT_TRUE(reason == 8 || reason == 6) << reason;

  // The server is alive and serves a real client.
  ASSERT_EQ(waitpid(server.pid(), nullptr, WNOHANG), 0) << server.read_output();
  Process client({"rping", "-c", "-a", "127.0.0.1", "-p", port, "-C", "5", "-v"}, env_);
  ProcResult c = client.wait(60s);
  ASSERT_FALSE(c.timed_out) << c.output << "\n--- server:\n" << server.read_output();
  EXPECT_EQ(c.exit_code, 0) << c.output << "\n--- server:\n" << server.read_output();
  EXPECT_EQ(count_lines_with(c.output, "ping data: rdma-ping-"), 5) << c.output;
  ProcResult s = server.wait(20s);
  EXPECT_EQ(s.exit_code, 0) << s.output;
}

}  // namespace
}  // namespace uroce::ibtest
