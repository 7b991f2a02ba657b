// Real Linux Soft-RoCE traffic (tests/data/rxe): every RoCE frame decodes, its ICRC
// checks exactly with the full IP header and modulo the IPv4 ID with only what a UDP socket
// sees, and rebuilding it from the parsed fields gives rxe's bytes back.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "wire/icrc.hpp"
#include "wire/packet.hpp"
#include "wire_test_util.hpp"

namespace uroce::wire {
namespace {

using test::capture_files;
using test::for_each_roce_frame;

// Opcode -> packet count per capture, as tshark counts them (`-Y infiniband`).
const std::map<std::string, std::map<int, int>> kExpectedOpcodes = {
    {"atomic_faa.pcap", {{0x12, 200}, {0x14, 200}}},
    {"imm.pcap",
     {{0x00, 1},
      {0x01, 1},
      {0x03, 1},
      {0x05, 1},
      {0x06, 1},
      {0x07, 1},
      {0x09, 1},
      {0x0A, 1},
      {0x0B, 1},
      {0x0C, 1},
      {0x10, 1},
      {0x11, 5}}},
    {"rc_pingpong.pcap", {{0x04, 20}, {0x11, 20}}},
    {"read_bw.pcap", {{0x0C, 200}, {0x0D, 200}, {0x0E, 400}, {0x0F, 200}}},
    {"send_lat.pcap", {{0x04, 400}, {0x11, 400}}},
    {"ud_pingpong.pcap", {{0x64, 20}}},
    {"write_bw.pcap", {{0x06, 200}, {0x07, 400}, {0x08, 200}, {0x11, 200}}},
};

TEST(Captures, AllPresent) {
  std::map<std::string, int> found;
  for (const auto& f : capture_files()) found[f.filename().string()] = 1;
  for (const auto& [name, ops] : kExpectedOpcodes) EXPECT_TRUE(found.count(name)) << name;
}

TEST(Captures, EveryRoceFrameDecodesWithGoodIcrcAndRebuildsByteForByte) {
  for (const auto& file : capture_files()) {
    SCOPED_TRACE(file.filename().string());
    std::map<int, int> opcodes;
    int modulo_id = 0;
    for_each_roce_frame(file, [&](const test::CaptureRoce& c) {
      SCOPED_TRACE(testing::Message() << "frame " << c.number);
      const RoceFrame& f = c.frame;
      ParsedPacket p;
      ASSERT_EQ(parse_packet(f.roce, p), ParseError::kOk);
      ++opcodes[p.hdr.bth.opcode];
      EXPECT_EQ(p.hdr.bth.pkey, kDefaultPkey);

      // Exact ICRC with the full IP datagram, and with the IP context decap read.
      EXPECT_TRUE(verify_icrc_ip_datagram(f.ip_datagram));
      EXPECT_EQ(icrc_of_ip_datagram(f.ip_datagram.first(f.ip_datagram.size() - kIcrcLen)), p.icrc);
      EXPECT_EQ(verify_icrc_udp(f.ip, f.roce), IcrcResult::kOk);

      // What a UDP socket knows: addresses and ports, not the ID.
      IpContext hidden = f.ip;
      hidden.ipv4_id = 0;
      hidden.ipv4_df = true;
      const IcrcResult r = verify_icrc_udp(hidden, f.roce);
      const bool id_zero = f.ip.ipv4_id == 0 && f.ip.ipv4_df;
      EXPECT_EQ(r, id_zero ? IcrcResult::kOk : IcrcResult::kOkModuloIpv4Id);
      modulo_id += r == IcrcResult::kOkModuloIpv4Id;

      // A flipped bit in the payload (or, without payload, in the PSN) must fail.
      std::vector<uint8_t> bad(f.roce.begin(), f.roce.end());
      const size_t at = p.payload.empty() ? 11 : p.header_len + p.payload.size() / 2;
      bad[at] ^= 0x10;
      EXPECT_EQ(verify_icrc_udp(hidden, bad), IcrcResult::kBad);
      EXPECT_EQ(verify_icrc_udp(f.ip, bad), IcrcResult::kBad);

      // Building the parsed fields again reproduces rxe's packet, ICRC included.
      std::vector<uint8_t> rebuilt(packet_size(p.hdr.bth.opcode, p.payload.size()));
      ASSERT_EQ(build_packet(p.hdr, p.payload, rebuilt), f.roce.size());
      write_icrc(f.ip, rebuilt);
      EXPECT_TRUE(std::equal(rebuilt.begin(), rebuilt.end(), f.roce.begin(), f.roce.end()));
    });
    EXPECT_EQ(opcodes, kExpectedOpcodes.at(file.filename().string()));
    EXPECT_GT(modulo_id, 0) << "rxe sends non-zero IDs; the modulo path must have been used";
  }
}

}  // namespace
}  // namespace uroce::wire
