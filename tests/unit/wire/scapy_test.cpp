// scapy.contrib.roce builds the packets (tests/unit/wire/scapy_packets.py); our parser must
// read back every field scapy set, and our ICRC must equal scapy's.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "wire/icrc.hpp"
#include "wire/packet.hpp"
#include "wire_test_util.hpp"

namespace uroce::wire {
namespace {

bool have_scapy() {
  int status = 0;
  test::run_command("/usr/bin/python3 -c 'import scapy.contrib.roce' >/dev/null 2>&1", status);
  return status == 0;
}

TEST(Scapy, ParsesScapyPacketsAndAgreesOnTheIcrc) {
  if (!have_scapy()) GTEST_SKIP() << "/usr/bin/python3 with scapy not found (python3-scapy)";
  test::TempDir dir;
  const std::string pcap = (dir.path() / "scapy.pcap").string();
  const std::string json_path = (dir.path() / "scapy.json").string();
  int status = 0;
  const std::string out =
      test::run_command("/usr/bin/python3 " UROCE_SOURCE_DIR "/tests/unit/wire/scapy_packets.py '" +
                            pcap + "' '" + json_path + "' 4791 2>&1",
                        status);
  ASSERT_EQ(status, 0) << out;
  std::ifstream in(json_path);
  const nlohmann::json expected = nlohmann::json::parse(in);
  ASSERT_GT(expected.size(), 0u);

  size_t i = 0;
  size_t ipv4 = 0;
  test::for_each_roce_frame(pcap, [&](const test::CaptureRoce& c) {
    ASSERT_LT(i, expected.size());
    const nlohmann::json& e = expected[i++];
    ParsedPacket p;
    ASSERT_EQ(parse_packet(c.frame.roce, p), ParseError::kOk) << e.dump();
    SCOPED_TRACE(testing::Message() << "frame " << c.number << " " << p.info->name);
    const Headers& h = p.hdr;
    EXPECT_EQ(h.bth.opcode, e["opcode"].get<int>());
    EXPECT_EQ(h.bth.se, e["solicited"].get<int>() != 0);
    EXPECT_EQ(h.bth.migreq, e["migreq"].get<int>() != 0);
    EXPECT_EQ(h.bth.padcnt, e["padcount"].get<int>());
    EXPECT_EQ(h.bth.pkey, e["pkey"].get<int>());
    EXPECT_EQ(h.bth.fecn, e["fecn"].get<int>() != 0);
    EXPECT_EQ(h.bth.becn, e["becn"].get<int>() != 0);
    EXPECT_EQ(h.bth.dqpn, e["dqpn"].get<uint32_t>());
    EXPECT_EQ(h.bth.ackreq, e["ackreq"].get<int>() != 0);
    EXPECT_EQ(h.bth.psn.value(), e["psn"].get<uint32_t>());
    if (e.contains("syndrome")) {
      EXPECT_EQ(h.aeth.syndrome, e["syndrome"].get<int>());
      EXPECT_EQ(h.aeth.msn, e["msn"].get<uint32_t>());
    }
    if (e.contains("dma_len")) {
      EXPECT_EQ(h.reth.va, e["va"].get<uint64_t>());
      EXPECT_EQ(h.reth.rkey, e["rkey"].get<uint32_t>());
      EXPECT_EQ(h.reth.dma_len, e["dma_len"].get<uint32_t>());
    }
    if (e.contains("swap_add")) {
      EXPECT_EQ(h.atomic_eth.va, e["va"].get<uint64_t>());
      EXPECT_EQ(h.atomic_eth.rkey, e["rkey"].get<uint32_t>());
      EXPECT_EQ(h.atomic_eth.swap_add, e["swap_add"].get<uint64_t>());
      EXPECT_EQ(h.atomic_eth.compare, e["compare"].get<uint64_t>());
    }
    if (e.contains("orig")) {
      EXPECT_EQ(h.atomic_ack_eth.orig, e["orig"].get<uint64_t>());
    }
    if (e.contains("qkey")) {
      EXPECT_EQ(h.deth.qkey, e["qkey"].get<uint32_t>());
      EXPECT_EQ(h.deth.src_qp, e["src_qp"].get<uint32_t>());
    }
    if (e.contains("immdt")) {
      EXPECT_EQ(h.immdt, e["immdt"].get<uint32_t>());
    }
    if (e.contains("ieth_rkey")) {
      EXPECT_EQ(h.ieth_rkey, e["ieth_rkey"].get<uint32_t>());
    }
    EXPECT_EQ(test::hex(p.payload), e["payload"].get<std::string>());
    for (const char* key :
         {"syndrome", "dma_len", "swap_add", "orig", "qkey", "immdt", "ieth_rkey"}) {
      const bool present = e.contains(key);
      const uint16_t hs = p.info->headers;
      const std::string k = key;
      const bool ours =
          (k == "syndrome" && (hs & kHasAeth)) || (k == "dma_len" && (hs & kHasReth)) ||
          (k == "swap_add" && (hs & kHasAtomicEth)) || (k == "orig" && (hs & kHasAtomicAckEth)) ||
          (k == "qkey" && (hs & kHasDeth)) || (k == "immdt" && (hs & kHasImmDt)) ||
          (k == "ieth_rkey" && (hs & kHasIeth));
      EXPECT_EQ(present, ours) << key;
    }

    // The ICRC scapy wrote, computed our ways.
    const auto icrc = e["icrc"].get<uint32_t>();
    EXPECT_EQ(p.icrc, icrc);
    const auto& d = c.frame.ip_datagram;
    EXPECT_EQ(icrc_of_ip_datagram(d.first(d.size() - kIcrcLen)), icrc);
    EXPECT_TRUE(verify_icrc_ip_datagram(d));
    EXPECT_EQ(verify_icrc_udp(c.frame.ip, c.frame.roce), IcrcResult::kOk);
    IpContext hidden = c.frame.ip;
    hidden.ipv4_id = 0;
    hidden.ipv4_df = true;
    const IcrcResult r = verify_icrc_udp(hidden, c.frame.roce);
    if (e["ipv6"].get<bool>()) {
      EXPECT_EQ(r, IcrcResult::kOk);
    } else {
      ++ipv4;
      EXPECT_EQ(c.frame.ip.ipv4_id, e["ipv4_id"].get<uint16_t>());
      EXPECT_EQ(c.frame.ip.ipv4_df, e["ipv4_df"].get<bool>());
      const bool zero = e["ipv4_id"].get<int>() == 0 && e["ipv4_df"].get<bool>();
      EXPECT_EQ(r, zero ? IcrcResult::kOk : IcrcResult::kOkModuloIpv4Id);
    }
    std::vector<uint8_t> rebuilt(c.frame.roce.size());
    ASSERT_EQ(build_packet(h, p.payload, rebuilt), rebuilt.size());
    write_icrc(c.frame.ip, rebuilt);
    // FECN/BECN are masked, reserved bits are not: scapy leaves them zero as we do.
    EXPECT_TRUE(
        std::equal(rebuilt.begin(), rebuilt.end(), c.frame.roce.begin(), c.frame.roce.end()));
  });
  EXPECT_EQ(i, expected.size());
  EXPECT_GT(ipv4, 0u);
}

}  // namespace
}  // namespace uroce::wire
