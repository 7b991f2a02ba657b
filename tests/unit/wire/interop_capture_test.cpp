// Captures from the interop matrix (tests/data/interop: rxe in a VM talking to uroce over a
// bridge): both stacks' packets decode, their ICRC checks exactly with the full IP header
// and, with only what a UDP socket sees, exactly (uroce: ID 0 + DF) or modulo the IPv4 ID
// (rxe's counter IDs), and rebuilding each from its parsed fields gives the same bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "wire/icrc.hpp"
#include "wire/packet.hpp"
#include "wire_test_util.hpp"

namespace uroce::wire {
namespace {

std::vector<std::filesystem::path> interop_captures() {
  std::vector<std::filesystem::path> out;
  const std::filesystem::path dir = std::filesystem::path(UROCE_SOURCE_DIR) / "tests/data/interop";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".pcap") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(InteropCaptures, BothStacksPacketsDecodeVerifyAndRebuild) {
  const auto files = interop_captures();
  ASSERT_GE(files.size(), 7u);
  for (const auto& file : files) {
    SCOPED_TRACE(file.filename().string());
    int packets = 0;
    int id_zero = 0;
    int modulo_id = 0;
    test::for_each_roce_frame(file, [&](const test::CaptureRoce& c) {
      SCOPED_TRACE(testing::Message() << "frame " << c.number);
      const RoceFrame& f = c.frame;
      ParsedPacket p;
      ASSERT_EQ(parse_packet(f.roce, p), ParseError::kOk);
      ++packets;
      EXPECT_TRUE(verify_icrc_ip_datagram(f.ip_datagram));
      IpContext hidden = f.ip;
      hidden.ipv4_id = 0;
      hidden.ipv4_df = true;
      const IcrcResult r = verify_icrc_udp(hidden, f.roce);
      if (f.ip.ipv4_id == 0 && f.ip.ipv4_df) {
        EXPECT_EQ(r, IcrcResult::kOk);
        ++id_zero;
      } else {
        EXPECT_EQ(r, IcrcResult::kOkModuloIpv4Id);
        ++modulo_id;
      }
      std::vector<uint8_t> rebuilt(packet_size(p.hdr.bth.opcode, p.payload.size()));
      ASSERT_EQ(build_packet(p.hdr, p.payload, rebuilt), f.roce.size());
      write_icrc(f.ip, rebuilt);
      EXPECT_TRUE(std::equal(rebuilt.begin(), rebuilt.end(), f.roce.begin(), f.roce.end()));
    });
    EXPECT_GT(packets, 0);
    // Every capture holds both directions: uroce's ID-0 packets and rxe's counter IDs.
    EXPECT_GT(id_zero, 0) << "no uroce packet (IPv4 ID 0, DF)";
    EXPECT_GT(modulo_id, 0) << "no rxe packet (non-zero IPv4 ID)";
  }
}

}  // namespace
}  // namespace uroce::wire
