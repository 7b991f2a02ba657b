// `uroce perf` between two processes on loopback with UROCE_RX_RING=1 (src/net/rx_ring.hpp):
// data through the packet socket's ring, large GSO messages through the sockets in the place
// their markers hold. Every byte checked, nothing lost or out of order, and the ring really
// carried the traffic. Needs CAP_NET_RAW (skipped without it).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_process.hpp"

namespace uroce::test {
namespace {

using std::chrono::seconds;

bool have_cap_net_raw() {
  const int fd = socket(AF_PACKET, SOCK_RAW, 0);
  if (fd < 0) return false;
  close(fd);
  return true;
}

void ring_on() {
  setenv("UROCE_RX_RING", "1", 1);
}

// `uroce perf TEST -s SIZE` server and client (with `client_args` too), both with the ring:
// the client's JSON report (null after a failure, already reported).
nlohmann::json run_perf(const std::string& test, const std::string& size,
                        const std::vector<std::string>& client_args) {
  const uint16_t tcp = next_port();
  const uint16_t udp = next_port();
  Process srv({"perf", test, "-p", std::to_string(tcp), "-s", size, "--timeout", "60"}, udp,
              ring_on);
  std::vector<std::string> args = {"perf", test, "127.0.0.1", "-p",        std::to_string(tcp),
                                   "-s",   size, "--json",    "--timeout", "60"};
  args.insert(args.end(), client_args.begin(), client_args.end());
  Process cli(args, udp, ring_on);
  const int cli_rc = cli.wait(seconds(90));
  const int srv_rc = srv.wait(seconds(30));
  EXPECT_EQ(cli_rc, 0) << cli.err();
  EXPECT_EQ(srv_rc, 0) << srv.err();
  if (cli_rc != 0 || srv_rc != 0) return {};
  return nlohmann::json::parse(cli.out());
}

// write_bw --verify with `size`-byte WRITEs through the ring; checks both sides' counters.
void verify_write_bw(const std::string& size, int count) {
  const auto j = run_perf("write_bw", size, {"-n", std::to_string(count), "--verify"});
  ASSERT_FALSE(j.is_null());
  ASSERT_EQ(j["ok"], true);
  EXPECT_EQ(j["verify"]["passed"], true);
  EXPECT_EQ(j["verify"]["checked_bytes"], static_cast<uint64_t>(count) * std::stoull(size));
  const auto& lc = j["local"]["counters"];
  const auto& rc = j["remote"]["counters"];
  EXPECT_EQ(rc["rx_write_requests"], count);
  EXPECT_EQ(rc["rcvd_pkts"], lc["sent_pkts"]);
  EXPECT_EQ(rc["icrc_errors"], 0);
  // The ring and the sockets together kept every QP's packets in order. (A spurious
  // retransmission on a busy machine resends packets the receiver had: duplicates, never a
  // gap.)
  EXPECT_EQ(rc["out_of_sequence"], 0) << lc.dump() << rc.dump();
  EXPECT_EQ(rc["rx_ring_marker_timeouts"], 0);
  // The receiver's ACKs came back through the sender's ring.
  EXPECT_GT(lc["rx_ring_datagrams"], 0);
}

TEST(CliPerfRxRing, LargeWritesKeepTheirOrderBetweenRingAndSocket) {
  if (!have_cap_net_raw()) GTEST_SKIP() << "needs CAP_NET_RAW";
  // 64 KiB WRITEs leave as GSO messages larger than a ring frame: the socket carries them.
  verify_write_bw("65536", 300);
}

TEST(CliPerfRxRing, MixedSizesKeepTheirOrderBetweenRingAndSocket) {
  if (!have_cap_net_raw()) GTEST_SKIP() << "needs CAP_NET_RAW";
  // 3000-byte WRITEs: lone packets and two-packet GSO messages fit a frame, longer runs do
  // not, so one QP's packets come both ways.
  verify_write_bw("3000", 3000);
}

TEST(CliPerfRxRing, SendLatRunsThroughTheRing) {
  if (!have_cap_net_raw()) GTEST_SKIP() << "needs CAP_NET_RAW";
  const auto j = run_perf("send_lat", "8", {"-n", "2000"});
  ASSERT_FALSE(j.is_null());
  ASSERT_EQ(j["ok"], true);
  const auto& lc = j["local"]["counters"];
  const auto& rc = j["remote"]["counters"];
  // Every reply (and its ACK) reached the client through its ring, every ping the server's.
  EXPECT_GE(lc["rx_ring_datagrams"], 2000);
  EXPECT_GE(rc["rx_ring_datagrams"], 2000);
  EXPECT_EQ(rc["icrc_errors"], 0);
  EXPECT_EQ(lc["icrc_errors"], 0);
  // The ring tells the IPv4 ID: no packet needed the check modulo the ID.
  EXPECT_EQ(rc["icrc_ok_modulo_ip_id"], 0);
}

TEST(CliPerfRxRing, WithoutCapNetRawTheErrorNamesTheFix) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to become another user";
  const uint16_t udp = next_port();
  // -d opens the device before the side channel waits for a peer.
  Process p(
      {"perf", "send_lat", "-d", "uroce_lo", "-p", std::to_string(next_port()), "--timeout", "5"},
      udp, [] {
        ring_on();
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(126);
      });
  const int rc = p.wait(seconds(30));
  EXPECT_NE(rc, 0);
  EXPECT_NE(p.err().find("UROCE_RX_RING=1 needs CAP_NET_RAW"), std::string::npos) << p.err();
  EXPECT_NE(p.err().find("unset UROCE_RX_RING"), std::string::npos) << p.err();
}

}  // namespace
}  // namespace uroce::test
