// Capture: sent and received packets land in a pcap whose IPv4 headers (ID 0 + DF) make the
// carried ICRC verify, and tshark dissects them as InfiniBand over UDP 4791.
#include "telemetry/capture_sink.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "wire/frame.hpp"
#include "wire/icrc.hpp"
#include "wire/packet.hpp"

namespace uroce::telemetry {
namespace {

transport::PacketMeta meta(uint8_t a, uint8_t b) {
  transport::PacketMeta m;
  m.ip.src = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, a};
  m.ip.dst = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, b};
  m.ip.sport = 49152;
  m.ip.dport = 4791;
  m.ip.ipv4_id = 0;
  m.ip.ipv4_df = true;
  return m;
}

std::vector<uint8_t> send_only(const transport::PacketMeta& m, uint32_t dqpn, uint32_t psn) {
  wire::Headers h;
  h.bth.opcode = 0x04;
  h.bth.dqpn = dqpn;
  h.bth.psn = Psn(psn);
  h.bth.ackreq = true;
  const std::vector<uint8_t> payload(64, 0xab);
  std::vector<uint8_t> buf(256);
  buf.resize(wire::build_packet(h, payload, buf));
  wire::write_icrc(m.ip, buf);
  return buf;
}

TEST(CaptureSinkTest, SentAndReceivedFramesVerifyAndDissect) {
  const std::string path = std::filesystem::temp_directory_path() /
                           ("uroce-capture-test-" + std::to_string(getpid()) + ".pcap");
  {
    std::string error;
    auto sink = CaptureSink::open(path, &error);
    ASSERT_NE(sink, nullptr) << error;
    EXPECT_EQ(CaptureSink::open(path, nullptr), sink);  // one sink per file per process

    auto tx_meta = meta(1, 2);
    auto tx = send_only(tx_meta, 0x12, 100);
    transport::TxSlot slot;
    slot.buf = tx;
    slot.len = tx.size();
    slot.meta = tx_meta;
    sink->write_sent(std::span<const transport::TxSlot>(&slot, 1));

    // Received: a UDP socket does not know the ID; the sender (a uroce peer) used 0 + DF.
    auto rx_meta = meta(2, 1);
    auto rx = send_only(rx_meta, 0x11, 200);
    device::RxPacket pkt;
    pkt.buf = rx;
    pkt.len = rx.size();
    pkt.meta = rx_meta;
    pkt.meta.ip.ipv4_id = 0x1234;  // whatever the driver left there: not known
    pkt.meta.ip_id_known = false;
    sink->write_received(std::span<const device::RxPacket>(&pkt, 1));
    EXPECT_EQ(sink->frames(), 2u);
  }
  wire::PcapReader reader;
  ASSERT_TRUE(reader.open(path)) << reader.error();
  wire::CapturedFrame f;
  int frames = 0;
  while (reader.next(f)) {
    wire::RoceFrame rf;
    ASSERT_EQ(wire::decap_frame(reader.link_type(), f.bytes, rf), wire::FrameError::kOk);
    EXPECT_EQ(rf.ip.ipv4_id, 0);
    EXPECT_TRUE(rf.ip.ipv4_df);
    EXPECT_TRUE(wire::verify_icrc_ip_datagram(rf.ip_datagram)) << "frame " << frames;
    ++frames;
  }
  EXPECT_EQ(frames, 2);

  if (std::filesystem::exists("/usr/bin/tshark")) {
    FILE* p = popen(("/usr/bin/tshark -r " + path +
                     " -T fields -e infiniband.bth.opcode -e infiniband.bth.destqp "
                     "-e infiniband.bth.psn 2>/dev/null")
                        .c_str(),
                    "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[1024];
    while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
    pclose(p);
    EXPECT_EQ(out, "4\t0x000012\t100\n4\t0x000011\t200\n");
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace uroce::telemetry
