// Error completions explained from the QP's counters: the exact line for each cause.
#include "telemetry/explain.hpp"

#include <gtest/gtest.h>

namespace uroce::telemetry {
namespace {

struct Fixture {
  DeviceSnapshot snap;
  QpSnapshot qp;
  Fixture(std::vector<std::pair<std::string, uint64_t>> counters) {
    for (auto& [n, v] : counters) {
      snap.names.push_back(n);
      qp.values.push_back(v);
    }
    qp.qpn = 0x11;
    qp.remote_qpn = 0x12;
    qp.remote_gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};
  }
};

TEST(ExplainTest, RetryExceededWithNothingReceivedPointsAtReachability) {
  Fixture f({{"retry_exceeded_err", 1}, {"rcvd_pkts", 0}, {"local_ack_timeout_err", 8}});
  EXPECT_EQ(explain_completion(12, f.snap, f.qp),
            "retry_exceeded_err=1 with 0 packets received from 10.0.0.2: peer unreachable or UDP "
            "4791 blocked — run uroce doctor --peer 10.0.0.2");
  EXPECT_EQ(wc_status_name(12), "IBV_WC_RETRY_EXC_ERR");
}

TEST(ExplainTest, RetryExceededAfterSequenceNaksPointsAtLoss) {
  Fixture f({{"retry_exceeded_err", 1},
             {"rcvd_pkts", 40},
             {"rcvd_seq_err", 3},
             {"local_ack_timeout_err", 8}});
  EXPECT_EQ(explain_completion(12, f.snap, f.qp),
            "retry_exceeded_err=1 after 3 NAK sequence errors and 8 ACK timeouts from 10.0.0.2: "
            "packets are lost on the path (MTU mismatch, drops, full socket buffers) — run uroce "
            "doctor --peer 10.0.0.2");
}

TEST(ExplainTest, RetryExceededAfterTrafficPointsAtAPeerThatStopped) {
  Fixture f({{"retry_exceeded_err", 1}, {"rcvd_pkts", 5}, {"local_ack_timeout_err", 8}});
  EXPECT_EQ(explain_completion(12, f.snap, f.qp),
            "retry_exceeded_err=1 after 8 ACK timeouts; 5 packets were received from 10.0.0.2 "
            "before: the peer stopped answering (process gone, QP no longer in RTS, or the path "
            "started dropping) — run uroce doctor --peer 10.0.0.2");
}

TEST(ExplainTest, RnrRetryExceeded) {
  Fixture f({{"rcvd_rnr_err", 8}, {"retry_rnr_exceeded_err", 1}});
  EXPECT_EQ(explain_completion(13, f.snap, f.qp),
            "rcvd_rnr_err=8 retry_rnr_exceeded_err=1: 10.0.0.2 had no receive WQE posted for QP "
            "0x12; post receives before the sender sends, or raise rnr_retry (7 retries forever)");
  EXPECT_EQ(wc_status_name(13), "IBV_WC_RNR_RETRY_EXC_ERR");
}

TEST(ExplainTest, UnknownStatusNamesItself) {
  Fixture f({});
  EXPECT_EQ(explain_completion(19, f.snap, f.qp), "IBV_WC_FATAL_ERR on QP 0x11 to 10.0.0.2");
  EXPECT_EQ(wc_status_name(200), "IBV_WC_UNKNOWN");
}

// explain_stall: one exact line per cause, most certain first.
struct Stall : Fixture {
  StallEvidence ev;
  explicit Stall(uint64_t rcvd) : Fixture({{"rcvd_pkts", rcvd}}) {
    ev.local_gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
    ev.local_gid_index = 1;
    ev.path_mtu = 4096;
    ev.netdev_mtu = 9000;
    ev.path.udp_port = 4791;
  }
};

TEST(ExplainStallTest, NothingBackNamesThePortAndDoctor) {
  Stall s(0);
  EXPECT_EQ(explain_stall(s.snap, s.qp, s.ev),
            "nothing at all came back from 10.0.0.2: UDP 4791 is dropped on the way (a firewall: "
            "nft list ruleset | grep 4791), the peer uses another UDP port, or there is no route "
            "— run uroce doctor --peer 10.0.0.2");
}

TEST(ExplainStallTest, GidFamilyMismatchNamesTheIndexToUse) {
  Stall s(0);
  s.ev.local_gid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  s.ev.local_gid_index = 0;
  s.ev.peer_family_gid_index = 1;
  EXPECT_EQ(explain_stall(s.snap, s.qp, s.ev),
            "the QP sends from GID index 0 (fe80::1, IPv6) but 10.0.0.2 is an IPv4 address: "
            "packets cannot go from one IP family to the other — use GID index 1 (-g 1 / -x 1; "
            "see uroce gids)");
}

TEST(ExplainStallTest, IcmpPortUnreachableBeforeAndAfterAnswers) {
  Stall never(0);
  never.ev.path.port_unreachable = 3;
  EXPECT_EQ(explain_stall(never.snap, never.qp, never.ev),
            "10.0.0.2 reports that nothing listens on UDP 4791 (ICMP port unreachable): the peer "
            "is not running, uses another UDP port (UROCE_UDP_PORT), or a firewall rejects UDP "
            "4791 — run uroce doctor --peer 10.0.0.2");
  Stall gone(40);
  gone.ev.path.port_unreachable = 1;
  EXPECT_EQ(explain_stall(gone.snap, gone.qp, gone.ev),
            "10.0.0.2 answered 40 packets, then reported UDP 4791 closed (ICMP port unreachable): "
            "the peer's process is gone or closed its device — restart it");
}

TEST(ExplainStallTest, TooBigFromTheNetworkNamesTheMtuThatFits) {
  Stall s(5);
  s.ev.path.too_big = 7;
  s.ev.path.mtu = 1500;
  EXPECT_EQ(explain_stall(s.snap, s.qp, s.ev),
            "the network refused 7 packets to 10.0.0.2 as too big (ICMP fragmentation needed or "
            "EMSGSIZE, MTU 1500): path MTU 4096 does not fit this path — use -m 1024 or raise the "
            "MTU on the path");
  EXPECT_EQ(ib_mtu_fitting(1500), 1024u);
  EXPECT_EQ(ib_mtu_fitting(9000), 4096u);
  EXPECT_EQ(ib_mtu_fitting(300), 0u);
}

// The fix names the option of the program that stalled: qperf's -m is its message size.
TEST(ExplainStallTest, TheMtuFixUsesTheProgramsOwnOption) {
  EXPECT_EQ(path_mtu_option("ib_write_bw"), "-m");
  EXPECT_EQ(path_mtu_option("ibv_rc_pingpong"), "-m");
  EXPECT_EQ(path_mtu_option("uroce"), "-m");
  EXPECT_EQ(path_mtu_option("qperf"), "-mt");
  EXPECT_EQ(path_mtu_option("my_app"), "");
  Stall s(5);
  s.ev.path.too_big = 7;
  s.ev.path.mtu = 1500;
  const std::string head =
      "the network refused 7 packets to 10.0.0.2 as too big (ICMP fragmentation needed or "
      "EMSGSIZE, MTU 1500): path MTU 4096 does not fit this path — ";
  s.ev.mtu_option = "-mt";
  EXPECT_EQ(explain_stall(s.snap, s.qp, s.ev), head + "use -mt 1024 or raise the MTU on the path");
  s.ev.mtu_option = "";
  EXPECT_EQ(explain_stall(s.snap, s.qp, s.ev),
            head + "set path_mtu to IBV_MTU_1024 (ibv_modify_qp) or raise the MTU on the path");
  s.ev.path.mtu = 0;  // EMSGSIZE without the MTU: nothing known to fit
  EXPECT_EQ(explain_stall(s.snap, s.qp, s.ev),
            "the network refused 7 packets to 10.0.0.2 as too big (ICMP fragmentation needed or "
            "EMSGSIZE): path MTU 4096 does not fit this path — set a smaller path_mtu "
            "(ibv_modify_qp) or raise the MTU on the path");
}

TEST(ExplainStallTest, SmallAnsweredBigNotIsThePathMtu) {
  Stall s(12);
  s.ev.sizes.largest_answered = 1084;
  s.ev.sizes.largest_received = 60;
  s.ev.sizes.largest_unanswered = 4140;
  EXPECT_EQ(explain_stall(s.snap, s.qp, s.ev),
            "small packets are answered but full-size ones are not: path MTU 4096 (4140-byte "
            "packets) but packets over ~1084 B get no answer (netdev MTU here 9000) — use -m "
            "1024 or raise the MTU on the path; run uroce doctor --peer 10.0.0.2");
}

TEST(ExplainStallTest, RnrNaksOnlyMeanNoReceivePosted) {
  Stall s(30);
  s.ev.rnr_naks = 30;
  EXPECT_EQ(explain_stall(s.snap, s.qp, s.ev),
            "10.0.0.2 answers with 30 RNR NAKs (receiver not ready): its application has no "
            "receive posted for QP 0x12 — post receives before the sender sends (rnr_retry 7 "
            "retries forever)");
}

TEST(ExplainStallTest, AnsweredBeforeAtTheSameSizeIsAPeerThatStopped) {
  Stall s(12);
  // A WRITE stream: the AckReq LAST packets (1068 B) were answered, the FIRST ones carry a
  // RETH (1084 B): the same path MTU, not a size problem.
  s.ev.sizes.largest_answered = 1068;
  s.ev.sizes.largest_unanswered = 1084;
  EXPECT_EQ(explain_stall(s.snap, s.qp, s.ev),
            "10.0.0.2 answered 12 packets before and then stopped: the peer's process is gone, "
            "its QP left RTS, or the path started dropping — run uroce doctor --peer 10.0.0.2");
}

// Tail drops without flow control: the peer answers (full-size packets included) but most
// packets are resent; the verdict is congestion, neither a dead peer nor the MTU.
TEST(ExplainStallTest, MostPacketsResentIsACongestedLossyPath) {
  Stall s(1453);
  s.snap.names.insert(s.snap.names.end(),
                      {"sent_pkts", "retransmitted_pkts", "rcvd_seq_err", "local_ack_timeout_err"});
  s.qp.values.insert(s.qp.values.end(), {148684, 132300, 1081, 118});
  s.ev.sizes.largest_answered = 1084;
  s.ev.sizes.largest_unanswered = 1084;
  EXPECT_EQ(explain_stall(s.snap, s.qp, s.ev),
            "10.0.0.2 still answers, but the path loses most packets: 132300 of the 148684 "
            "packets sent were retransmissions (1081 sequence NAKs, 118 ACK timeouts) — a "
            "congested or lossy path without PFC, where go-back-N resends whole windows: lower "
            "the offered load (fewer QPs or senders), enable congestion control with an "
            "ECN-marking switch (UROCE_CC=dcqcn), use selective repeat between uroce peers "
            "(--recovery sr) or a lossless (PFC) network; run uroce doctor --peer 10.0.0.2");
  // Half resent is the threshold; fewer is a peer that stopped.
  s.qp.values[2] = 74341;
  EXPECT_NE(explain_stall(s.snap, s.qp, s.ev)
                .find("answered 1453 packets before and then "
                      "stopped"),
            std::string::npos);
}

}  // namespace
}  // namespace uroce::telemetry
