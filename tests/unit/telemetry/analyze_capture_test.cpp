// `uroce dump --analyze`: a narrated synthetic capture with every retransmission cause, and
// exact summaries of the real Soft-RoCE captures in tests/data/rxe.
#include "cli/analyze_capture.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "wire/icrc.hpp"
#include "wire/packet.hpp"

namespace uroce::cli {
namespace {

using wire::IpContext;

constexpr uint32_t kA = 0x11;  // requester QP at 10.0.0.1
constexpr uint32_t kB = 0x12;  // responder QP at 10.0.0.2

IpContext ip(uint8_t from, uint8_t to) {
  IpContext c;
  c.src = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, from};
  c.dst = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, to};
  c.sport = 50000;
  return c;
}

class CaptureScript {
 public:
  explicit CaptureScript(const std::string& path) : path_(path) { EXPECT_TRUE(w_.open(path)); }
  // At `ms` milliseconds: A sends SEND ONLY with `psn` (64 bytes) to B.
  void send(double ms, uint32_t psn) {
    wire::Headers h;
    h.bth.opcode = 0x04;
    h.bth.dqpn = kB;
    h.bth.psn = Psn(psn);
    h.bth.ackreq = true;
    put(ms, h, ip(1, 2), std::vector<uint8_t>(64, 1));
  }
  // At `ms`: B answers A with an ACK / NAK / RNR NAK carrying `syndrome`.
  void respond(double ms, uint32_t psn, uint8_t syndrome) {
    wire::Headers h;
    h.bth.opcode = 0x11;
    h.bth.dqpn = kA;
    h.bth.psn = Psn(psn);
    h.aeth.syndrome = syndrome;
    put(ms, h, ip(2, 1), {});
  }
  void cnp(double ms) {
    wire::Headers h;
    h.bth.opcode = wire::kCnpOpcode;
    h.bth.dqpn = kA;
    put(ms, h, ip(2, 1), {});
  }
  void close() { w_.close(); }

 private:
  void put(double ms, const wire::Headers& h, const IpContext& c,
           const std::vector<uint8_t>& payload) {
    std::vector<uint8_t> buf(512);
    buf.resize(wire::build_packet(h, payload, buf));
    ASSERT_GT(buf.size(), 0u);
    wire::write_icrc(c, buf);
    ASSERT_TRUE(w_.write_roce(TimePoint(std::chrono::seconds(1000)) +
                                  std::chrono::nanoseconds(static_cast<int64_t>(ms * 1e6)),
                              c, 0, buf));
  }
  std::string path_;
  wire::PcapWriter w_;
};

TEST(AnalyzeCaptureTest, EveryRetransmissionCauseNakCodeGapAndCnp) {
  const std::string path = std::filesystem::temp_directory_path() /
                           ("uroce-analyze-" + std::to_string(getpid()) + ".pcap");
  CaptureScript s(path);
  s.send(0.0, 0);            // frame 1
  s.respond(1.0, 0, 0x1f);   // 2: ACK
  s.send(2.0, 1);            // 3
  s.send(3.0, 3);            // 4: PSN 2 never reached the capture point: a gap of 1
  s.respond(4.0, 2, 0x60);   // 5: NAK PSN sequence error, expecting 2
  s.send(4.5, 2);            // 6: go-back-N from 2 ...
  s.send(4.6, 3);            // 7: ... and 3: one episode of 2 packets
  s.respond(5.0, 3, 0x1f);   // 8
  s.send(6.0, 4);            // 9
  s.respond(7.0, 4, 0x2e);   // 10: RNR NAK
  s.send(8.2, 4);            // 11: resent 1.2 ms after the RNR NAK
  s.respond(9.0, 4, 0x1f);   // 12
  s.send(10.0, 5);           // 13
  s.send(30.0, 5);           // 14: nothing came back: timeout, 20 ms after the first send
  s.respond(31.0, 5, 0x1f);  // 15
  s.cnp(32.0);               // 16: CNP for QP A
  s.close();

  CaptureAnalysis a;
  ASSERT_TRUE(analyze_capture(path, a)) << a.error;
  std::filesystem::remove(path);
  EXPECT_EQ(a.frames, 16u);
  EXPECT_EQ(a.roce_packets, 16u);
  ASSERT_EQ(a.connections.size(), 1u);
  const ConnectionSummary& c = a.connections[0];
  EXPECT_EQ(c.transport, "RC");
  EXPECT_EQ(c.src, "10.0.0.1");
  EXPECT_EQ(c.dst, "10.0.0.2");
  EXPECT_EQ(c.src_qpn, kA);
  EXPECT_EQ(c.dst_qpn, kB);
  EXPECT_EQ(c.request_packets, 9u);
  EXPECT_EQ(c.messages, 5u);
  EXPECT_EQ(c.messages_by_kind.at("SEND"), 5u);
  EXPECT_EQ(c.retransmitted_packets, 4u);
  ASSERT_EQ(c.episodes.size(), 3u);
  EXPECT_EQ(c.episodes[0].frame, 6u);
  EXPECT_EQ(c.episodes[0].cause, "nak_seq_err");
  EXPECT_EQ(c.episodes[0].psn, 2u);
  EXPECT_EQ(c.episodes[0].packets, 2u);
  EXPECT_NEAR(c.episodes[0].wait_s, 0.0005, 1e-9);
  EXPECT_EQ(c.episodes[1].frame, 11u);
  EXPECT_EQ(c.episodes[1].cause, "rnr_nak");
  EXPECT_NEAR(c.episodes[1].wait_s, 0.0012, 1e-9);
  EXPECT_EQ(c.episodes[2].frame, 14u);
  EXPECT_EQ(c.episodes[2].cause, "timeout");
  EXPECT_NEAR(c.episodes[2].wait_s, 0.020, 1e-9);
  EXPECT_EQ(c.acks, 4u);
  EXPECT_EQ(c.naks.at("psn_sequence_error"), 1u);
  EXPECT_EQ(c.rnr_naks, 1u);
  EXPECT_NEAR(c.rnr_wait_s, 0.0012, 1e-9);
  EXPECT_EQ(c.psn_gaps, 1u);
  EXPECT_EQ(c.psn_gap_packets, 1u);
  EXPECT_EQ(c.cnps, 1u);

  const std::string text = format_analysis_text(a);
  EXPECT_NE(text.find("RC 10.0.0.1 QP 0x000011 -> 10.0.0.2 QP 0x000012: 5 messages (SEND 5)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("frame 6 at 0.004500 s PSN 0x000002, 2 packets: after a NAK PSN sequence "
                      "error, resent 0.500 ms later"),
            std::string::npos)
      << text;
}

std::string rxe_capture(const std::string& name) {
  return std::string(UROCE_SOURCE_DIR) + "/tests/data/rxe/" + name;
}

TEST(AnalyzeCaptureTest, RealRxeWriteBandwidthCapture) {
  CaptureAnalysis a;
  ASSERT_TRUE(analyze_capture(rxe_capture("write_bw.pcap"), a)) << a.error;
  EXPECT_EQ(a.frames, 1042u);
  EXPECT_EQ(a.roce_packets, 1000u);
  ASSERT_EQ(a.connections.size(), 1u);
  const ConnectionSummary& c = a.connections[0];
  EXPECT_EQ(c.src, "10.77.0.3");
  EXPECT_EQ(c.dst, "10.77.0.2");
  EXPECT_EQ(c.messages_by_kind.at("WRITE"), 200u);
  EXPECT_EQ(c.request_packets, 800u);
  EXPECT_EQ(c.request_bytes, 819200u);
  EXPECT_EQ(c.acks, 200u);
  EXPECT_EQ(c.retransmitted_packets, 0u);
  EXPECT_EQ(c.psn_gaps, 0u);
  EXPECT_EQ(c.src_qpn, 0x16);
}

TEST(AnalyzeCaptureTest, RealRxeReadAndAtomicCaptures) {
  CaptureAnalysis r;
  ASSERT_TRUE(analyze_capture(rxe_capture("read_bw.pcap"), r));
  ASSERT_EQ(r.connections.size(), 1u);
  EXPECT_EQ(r.connections[0].messages_by_kind.at("READ"), 200u);
  EXPECT_EQ(r.connections[0].read_responses, 800u);
  EXPECT_EQ(r.connections[0].read_response_bytes, 819200u);
  EXPECT_EQ(r.connections[0].psn_gaps, 0u);
  EXPECT_EQ(r.connections[0].retransmitted_packets, 0u);

  CaptureAnalysis f;
  ASSERT_TRUE(analyze_capture(rxe_capture("atomic_faa.pcap"), f));
  ASSERT_EQ(f.connections.size(), 1u);
  EXPECT_EQ(f.connections[0].messages_by_kind.at("ATOMIC"), 200u);
  EXPECT_EQ(f.connections[0].atomic_acks, 200u);
}

TEST(AnalyzeCaptureTest, PingPongCapturesHaveTwoConnections) {
  for (const char* name : {"rc_pingpong.pcap", "ud_pingpong.pcap", "send_lat.pcap"}) {
    CaptureAnalysis a;
    ASSERT_TRUE(analyze_capture(rxe_capture(name), a)) << name;
    ASSERT_EQ(a.connections.size(), 2u) << name;
    for (const ConnectionSummary& c : a.connections) {
      EXPECT_EQ(c.retransmitted_packets, 0u) << name;
      EXPECT_EQ(c.psn_gaps, 0u) << name;
      EXPECT_EQ(c.messages, c.messages_by_kind.at("SEND")) << name;
    }
  }
}

TEST(AnalyzeCaptureTest, CommandPrintsJsonAndFailsOnAMissingFile) {
  const std::string uroce = std::string(UROCE_BINARY_DIR) + "/bin/uroce";
  FILE* p = popen((uroce + " dump --analyze --json " + rxe_capture("imm.pcap")).c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  EXPECT_EQ(WEXITSTATUS(pclose(p)), 0);
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["roce_packets"], 16);
  EXPECT_EQ(j["connections"][0]["messages"], 6);
  EXPECT_EQ(
      WEXITSTATUS(std::system((uroce + " dump --analyze /nonexistent.pcap 2>/dev/null").c_str())),
      2);
}

}  // namespace
}  // namespace uroce::cli
