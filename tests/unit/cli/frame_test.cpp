// decap_frame() on every link type uroce reads, and encap_frame()'s exact bytes.
#include "wire/frame.hpp"

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <vector>

#include "test_frames.hpp"
#include "wire/packet.hpp"

namespace uroce::wire {
namespace {

using test::Bytes;

// Stands in for BTH .. ICRC; decap does not look inside.
const Bytes kRoce = {0x04, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00,
                     0x12, 0x67, 0xAA, 0xBB, 0xCC, 0xDD, 0x01, 0x02, 0x03, 0x04};

std::array<uint8_t, 16> mapped(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, a, b, c, d};
}

Bytes v4_datagram(uint16_t dport = kRoceV2Port, test::Ipv4Fields f = {}) {
  return test::ipv4(f, test::udp(49152, dport, kRoce));
}

Bytes v6_datagram(uint16_t dport = kRoceV2Port) {
  return test::ipv6(test::udp(50000, dport, kRoce), 17, 0x8A, 32);
}

bool same(std::span<const uint8_t> a, const Bytes& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

// Decodes from a heap copy of exactly `frame.size()` bytes so ASan flags any over-read. The
// copies live until the test program ends because `out` points into them.
FrameError decap(LinkType link, const Bytes& frame, RoceFrame& out) {
  static std::vector<std::unique_ptr<uint8_t[]>> copies;
  copies.push_back(std::make_unique<uint8_t[]>(frame.size()));
  std::copy(frame.begin(), frame.end(), copies.back().get());
  return decap_frame(link, std::span<const uint8_t>(copies.back().get(), frame.size()), out);
}

void expect_v4(const RoceFrame& f, const Bytes& datagram) {
  EXPECT_FALSE(f.ip.ipv6);
  EXPECT_EQ(f.ip.src, mapped(10, 77, 0, 3));
  EXPECT_EQ(f.ip.dst, mapped(10, 77, 0, 2));
  EXPECT_EQ(f.ip.sport, 49152);
  EXPECT_EQ(f.ip.dport, 4791);
  EXPECT_EQ(f.ip.ipv4_id, 0x1234);
  EXPECT_TRUE(f.ip.ipv4_df);
  EXPECT_EQ(f.ttl, 64);
  EXPECT_TRUE(same(f.ip_datagram, datagram));
  EXPECT_TRUE(same(f.roce, kRoce));
}

void expect_v6(const RoceFrame& f, const Bytes& datagram) {
  EXPECT_TRUE(f.ip.ipv6);
  EXPECT_EQ(f.ip.src[0], 0xFD);
  EXPECT_EQ(f.ip.src[15], 15);
  EXPECT_EQ(f.ip.dst[15], 0x2F);
  EXPECT_EQ(f.ip.sport, 50000);
  EXPECT_EQ(f.ip.dport, 4791);
  EXPECT_EQ(f.tos, 0x8A);
  EXPECT_EQ(f.ttl, 32);
  EXPECT_TRUE(same(f.ip_datagram, datagram));
  EXPECT_TRUE(same(f.roce, kRoce));
}

TEST(DecapFrame, EthernetIpv4) {
  const Bytes dg = v4_datagram(kRoceV2Port, {.tos = 0x8B});
  RoceFrame f;
  ASSERT_EQ(decap(LinkType::kEthernet, test::ethernet(0x0800, dg), f), FrameError::kOk);
  expect_v4(f, dg);
  EXPECT_EQ(f.tos, 0x8B);
}

// `uroce dump --port N`: RoCE on another UDP port is found only when asked for, and the port
// asked for survives the next call.
TEST(DecapFrame, RocePortIsAnInputThatPersists) {
  const Bytes dg = v4_datagram(23874);
  RoceFrame f;
  EXPECT_EQ(decap(LinkType::kEthernet, test::ethernet(0x0800, dg), f), FrameError::kNotRoce);
  f.roce_port = 23874;
  ASSERT_EQ(decap(LinkType::kEthernet, test::ethernet(0x0800, dg), f), FrameError::kOk);
  EXPECT_EQ(f.ip.dport, 23874);
  EXPECT_EQ(f.roce_port, 23874);
  ASSERT_EQ(decap(LinkType::kEthernet, test::ethernet(0x0800, dg), f), FrameError::kOk);
  EXPECT_EQ(decap(LinkType::kEthernet, test::ethernet(0x0800, v4_datagram(kRoceV2Port)), f),
            FrameError::kNotRoce);
}

TEST(DecapFrame, EthernetIpv6) {
  const Bytes dg = v6_datagram();
  RoceFrame f;
  ASSERT_EQ(decap(LinkType::kEthernet, test::ethernet(0x86DD, dg), f), FrameError::kOk);
  expect_v6(f, dg);
}

TEST(DecapFrame, Vlan8021Q) {
  const Bytes dg = v4_datagram();
  RoceFrame f;
  ASSERT_EQ(decap(LinkType::kEthernet, test::ethernet(0x0800, dg, {{0x8100, 0x6064}}), f),
            FrameError::kOk);
  expect_v4(f, dg);
}

TEST(DecapFrame, QinQAndStackedTags) {
  const Bytes dg = v6_datagram();
  RoceFrame f;
  ASSERT_EQ(decap(LinkType::kEthernet,
                  test::ethernet(0x86DD, dg, {{0x88A8, 0x0010}, {0x8100, 0x0064}}), f),
            FrameError::kOk);
  expect_v6(f, dg);
  ASSERT_EQ(decap(LinkType::kEthernet,
                  test::ethernet(0x86DD, dg, {{0x9100, 1}, {0x88A8, 2}, {0x8100, 3}}), f),
            FrameError::kOk);
  expect_v6(f, dg);
}

TEST(DecapFrame, LinuxCookedV1) {
  const Bytes dg = v4_datagram();
  RoceFrame f;
  ASSERT_EQ(decap(LinkType::kLinuxSll, test::sll(0x0800, dg), f), FrameError::kOk);
  expect_v4(f, dg);
  // A VLAN tag the kernel did not strip sits after the SLL header.
  Bytes tagged = test::sll(0x8100, {0x00, 0x64, 0x08, 0x00});
  tagged = test::cat(tagged, dg);
  ASSERT_EQ(decap(LinkType::kLinuxSll, tagged, f), FrameError::kOk);
  expect_v4(f, dg);
}

TEST(DecapFrame, LinuxCookedV2) {
  const Bytes dg = v6_datagram();
  RoceFrame f;
  ASSERT_EQ(decap(LinkType::kLinuxSll2, test::sll2(0x86DD, dg), f), FrameError::kOk);
  expect_v6(f, dg);
  const Bytes dg4 = v4_datagram();
  ASSERT_EQ(decap(LinkType::kLinuxSll2, test::sll2(0x0800, dg4), f), FrameError::kOk);
  expect_v4(f, dg4);
}

TEST(DecapFrame, RawIp) {
  const Bytes dg4 = v4_datagram();
  const Bytes dg6 = v6_datagram();
  RoceFrame f;
  ASSERT_EQ(decap(LinkType::kRawIp, dg4, f), FrameError::kOk);
  expect_v4(f, dg4);
  ASSERT_EQ(decap(LinkType::kRawIp, dg6, f), FrameError::kOk);
  expect_v6(f, dg6);
  ASSERT_EQ(decap(LinkType::kIpv4, dg4, f), FrameError::kOk);
  expect_v4(f, dg4);
  ASSERT_EQ(decap(LinkType::kIpv6, dg6, f), FrameError::kOk);
  expect_v6(f, dg6);
  // LINKTYPE_IPV4 / IPV6 promise one version; the other is not what they carry.
  EXPECT_EQ(decap(LinkType::kIpv4, dg6, f), FrameError::kNotIp);
  EXPECT_EQ(decap(LinkType::kIpv6, dg4, f), FrameError::kNotIp);
  EXPECT_EQ(decap(LinkType::kRawIp, {0x50, 0, 0, 0}, f), FrameError::kNotIp);
}

TEST(DecapFrame, EthernetTrailerIsCutOff) {
  const Bytes dg = v4_datagram();
  Bytes frame = test::ethernet(0x0800, dg);
  frame.resize(frame.size() + 22, 0x00);  // padding up to the minimum size plus an FCS
  frame.back() = 0xEE;
  RoceFrame f;
  ASSERT_EQ(decap(LinkType::kEthernet, frame, f), FrameError::kOk);
  expect_v4(f, dg);
  EXPECT_EQ(f.ip_datagram.size(), 20 + 8 + kRoce.size());
}

TEST(DecapFrame, Ipv4OptionsAreSkipped) {
  const Bytes dg = v4_datagram(kRoceV2Port, {.ihl = 7});
  RoceFrame f;
  ASSERT_EQ(decap(LinkType::kEthernet, test::ethernet(0x0800, dg), f), FrameError::kOk);
  expect_v4(f, dg);
  EXPECT_EQ(f.roce.data(), f.ip_datagram.data() + 28 + 8);
}

TEST(DecapFrame, DfAndIdAsCarried) {
  RoceFrame f;
  ASSERT_EQ(decap(LinkType::kRawIp, v4_datagram(kRoceV2Port, {.id = 0, .flags_frag = 0}), f),
            FrameError::kOk);
  EXPECT_FALSE(f.ip.ipv4_df);
  EXPECT_EQ(f.ip.ipv4_id, 0);
}

TEST(DecapFrame, FragmentsAreNotUdp) {
  RoceFrame f;
  EXPECT_EQ(decap(LinkType::kRawIp, v4_datagram(kRoceV2Port, {.flags_frag = 0x2000}), f),
            FrameError::kNotUdp);  // MF: first fragment
  EXPECT_EQ(decap(LinkType::kRawIp, v4_datagram(kRoceV2Port, {.flags_frag = 0x0010}), f),
            FrameError::kNotUdp);  // a later fragment
}

TEST(DecapFrame, NotUdpNotRoceNotIp) {
  RoceFrame f;
  EXPECT_EQ(decap(LinkType::kRawIp, v4_datagram(kRoceV2Port, {.proto = 6}), f),
            FrameError::kNotUdp);
  EXPECT_EQ(decap(LinkType::kRawIp, test::ipv6(test::udp(1, 4791, kRoce), 0), f),
            FrameError::kNotUdp);  // a hop-by-hop extension header comes first
  EXPECT_EQ(decap(LinkType::kRawIp, v4_datagram(4790), f), FrameError::kNotRoce);
  EXPECT_EQ(decap(LinkType::kRawIp, test::ipv4({}, test::udp(4791, 53, kRoce)), f),
            FrameError::kNotRoce);  // source port 4791 is a reply, not RoCE v2
  EXPECT_EQ(decap(LinkType::kEthernet, test::ethernet(0x0806, Bytes(28, 0)), f),
            FrameError::kNotIp);
  EXPECT_EQ(decap(LinkType::kEthernet, test::ethernet(0x88CC, Bytes(40, 0)), f),
            FrameError::kNotIp);
  EXPECT_EQ(decap(static_cast<LinkType>(105), v4_datagram(), f), FrameError::kUnsupportedLink);
}

TEST(DecapFrame, MalformedLengths) {
  RoceFrame f;
  Bytes bad_ihl = v4_datagram();
  bad_ihl[0] = 0x44;
  EXPECT_EQ(decap(LinkType::kRawIp, bad_ihl, f), FrameError::kMalformed);
  EXPECT_EQ(decap(LinkType::kRawIp,
                  v4_datagram(kRoceV2Port, {.total_len_delta = -static_cast<int>(8 + 20 + 1)}), f),
            FrameError::kMalformed);  // total length 19 < IHL 20
  Bytes bad_udp_len = v4_datagram();
  bad_udp_len[20 + 5] -= 4;  // UDP length 4 short of the IP payload
  EXPECT_EQ(decap(LinkType::kRawIp, bad_udp_len, f), FrameError::kMalformed);
  // An IP datagram too short for the UDP header it announces.
  EXPECT_EQ(decap(LinkType::kRawIp, test::ipv4({.total_len_delta = -4}, test::udp(1, 4791, {})), f),
            FrameError::kMalformed);
}

// Cuts a frame at every length: a header that is cut gives kTruncated, a RoCE datagram cut
// after its UDP header gives kRoceCut with the captured bytes, never kOk or an over-read.
void check_every_cut(LinkType link, const Bytes& frame, size_t l2_len, size_t ip_header_len) {
  const size_t roce_start = l2_len + ip_header_len + 8;
  for (size_t len = 0; len < frame.size(); ++len) {
    SCOPED_TRACE(testing::Message() << "cut at " << len << " of " << frame.size());
    const Bytes cut(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(len));
    RoceFrame f;
    const FrameError e = decap(link, cut, f);
    if (len < roce_start) {
      EXPECT_EQ(e, FrameError::kTruncated);
    } else {
      ASSERT_EQ(e, FrameError::kRoceCut);
      EXPECT_EQ(f.ip.dport, 4791);
      EXPECT_EQ(f.roce.size(), len - roce_start);
      EXPECT_EQ(f.ip_datagram.size(), len - l2_len);
    }
  }
}

TEST(DecapFrame, EveryTruncationLength) {
  check_every_cut(LinkType::kEthernet, test::ethernet(0x0800, v4_datagram()), 14, 20);
  check_every_cut(LinkType::kEthernet,
                  test::ethernet(0x86DD, v6_datagram(), {{0x88A8, 1}, {0x8100, 2}}), 22, 40);
  check_every_cut(LinkType::kLinuxSll, test::sll(0x0800, v4_datagram(kRoceV2Port, {.ihl = 6})), 16,
                  24);
  check_every_cut(LinkType::kLinuxSll2, test::sll2(0x86DD, v6_datagram()), 20, 40);
  check_every_cut(LinkType::kRawIp, v4_datagram(), 0, 20);
  check_every_cut(LinkType::kIpv6, v6_datagram(), 0, 40);
}

// Mutated and cut frames of every link type: whatever decap_frame() answers, the spans it
// returns lie inside the frame, the RoCE bytes inside the IP datagram, and kOk means the
// IP and UDP length fields agree with what was returned.
TEST(DecapFrame, MutatedFramesKeepSpansInside) {
  const std::pair<LinkType, Bytes> seeds[] = {
      {LinkType::kEthernet, test::ethernet(0x0800, v4_datagram(), {{0x8100, 1}})},
      {LinkType::kEthernet, test::ethernet(0x86DD, v6_datagram())},
      {LinkType::kLinuxSll, test::sll(0x0800, v4_datagram(kRoceV2Port, {.ihl = 6}))},
      {LinkType::kLinuxSll2, test::sll2(0x86DD, v6_datagram())},
      {LinkType::kRawIp, v4_datagram()},
  };
  uint32_t rng = 12345;
  auto next = [&rng] {
    rng = rng * 1103515245 + 12345;
    return rng >> 8;
  };
  int ok = 0;
  for (int i = 0; i < 20000; ++i) {
    const auto& [link, seed] = seeds[next() % std::size(seeds)];
    Bytes frame = seed;
    for (uint32_t flips = next() % 4; flips > 0; --flips) {
      frame[next() % frame.size()] = static_cast<uint8_t>(next());
    }
    frame.resize(next() % (frame.size() + 8));
    RoceFrame f;
    const FrameError e = decap(link, frame, f);
    if (e != FrameError::kOk && e != FrameError::kRoceCut) continue;
    ok += e == FrameError::kOk;
    ASSERT_FALSE(f.ip_datagram.empty());
    // `decap` copied the frame; compare offsets within the datagram only.
    ASSERT_LE(f.ip_datagram.size(), frame.size());
    ASSERT_GE(f.roce.data(), f.ip_datagram.data());
    ASSERT_LE(f.roce.data() + f.roce.size(), f.ip_datagram.data() + f.ip_datagram.size());
    if (e == FrameError::kOk) {
      ASSERT_EQ(f.ip.dport, kRoceV2Port);
      const size_t udp_len = f.roce.size() + 8;
      ASSERT_EQ(static_cast<size_t>(f.roce.data() - f.ip_datagram.data()) + f.roce.size(),
                f.ip_datagram.size());
      const auto* udp = f.roce.data() - 8;
      ASSERT_EQ(static_cast<size_t>(udp[4] << 8 | udp[5]), udp_len);
    }
  }
  EXPECT_GT(ok, 100);  // the mutations leave enough frames intact to exercise the kOk path
}

TEST(DecapFrame, ErrorNames) {
  EXPECT_EQ(frame_error_name(FrameError::kOk), "ok");
  EXPECT_EQ(frame_error_name(FrameError::kTruncated), "truncated");
  EXPECT_EQ(frame_error_name(FrameError::kNotIp), "not_ip");
  EXPECT_EQ(frame_error_name(FrameError::kNotUdp), "not_udp");
  EXPECT_EQ(frame_error_name(FrameError::kNotRoce), "not_roce");
  EXPECT_EQ(frame_error_name(FrameError::kUnsupportedLink), "unsupported_link");
  EXPECT_EQ(frame_error_name(FrameError::kMalformed), "malformed");
  EXPECT_EQ(frame_error_name(FrameError::kRoceCut), "roce_cut");
}

IpContext v4_context() {
  IpContext ip;
  ip.src = mapped(10, 77, 0, 3);
  ip.dst = mapped(10, 77, 0, 2);
  ip.sport = 0xC001;
  ip.ipv4_id = 0x0102;
  return ip;
}

TEST(EncapFrame, Ipv4ExactBytes) {
  const IpContext ip = v4_context();
  ASSERT_EQ(frame_size(ip, kRoce.size()), 14u + 20 + 8 + kRoce.size());
  Bytes out(frame_size(ip, kRoce.size()), 0xEE);
  ASSERT_EQ(encap_frame(ip, 0x02, 64, kRoce, out), out.size());
  // Header checksum computed independently: RFC 791 one's complement sum of the 16-bit words.
  const Bytes expected_headers = {
      0x02, 0x00, 10,   77,   0,    2,    0x02, 0x00, 10,   77,   0,    3,    0x08, 0x00,  // Eth
      0x45, 0x02, 0x00, 0x30, 0x01, 0x02, 0x40, 0x00, 0x40, 0x11, 0x25, 0x1B,              // IPv4
      10,   77,   0,    3,    10,   77,   0,    2,                                         //
      0xC0, 0x01, 0x12, 0xB7, 0x00, 0x1C, 0x00, 0x00};                                     // UDP
  EXPECT_EQ(Bytes(out.begin(), out.begin() + 42), expected_headers);
  EXPECT_EQ(Bytes(out.begin() + 42, out.end()), kRoce);

  RoceFrame f;
  ASSERT_EQ(decap(LinkType::kEthernet, out, f), FrameError::kOk);
  EXPECT_EQ(f.ip.src, ip.src);
  EXPECT_EQ(f.ip.dst, ip.dst);
  EXPECT_EQ(f.ip.sport, ip.sport);
  EXPECT_EQ(f.ip.ipv4_id, ip.ipv4_id);
  EXPECT_TRUE(f.ip.ipv4_df);
  EXPECT_EQ(f.tos, 0x02);
  EXPECT_TRUE(same(f.roce, kRoce));
}

TEST(EncapFrame, Ipv4HeaderChecksumVerifies) {
  IpContext ip = v4_context();
  ip.ipv4_df = false;
  ip.ipv4_id = 0xFFFF;
  ip.src = mapped(255, 255, 255, 254);
  Bytes out(frame_size(ip, kRoce.size()));
  ASSERT_EQ(encap_frame(ip, 0xFF, 255, kRoce, out), out.size());
  EXPECT_EQ(out[20], 0x00);  // no DF
  uint32_t sum = 0;
  for (size_t i = 14; i < 34; i += 2) sum += static_cast<uint32_t>(out[i] << 8 | out[i + 1]);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  EXPECT_EQ(sum, 0xFFFFu);
}

TEST(EncapFrame, Ipv6) {
  IpContext ip;
  ip.ipv6 = true;
  for (int i = 0; i < 16; ++i) {
    ip.src[i] = static_cast<uint8_t>(0xA0 + i);
    ip.dst[i] = static_cast<uint8_t>(0xB0 + i);
  }
  ip.sport = 0xD000;
  Bytes out(frame_size(ip, kRoce.size()));
  ASSERT_EQ(out.size(), 14u + 40 + 8 + kRoce.size());
  ASSERT_EQ(encap_frame(ip, 0x6A, 7, kRoce, out), out.size());
  const Bytes expected_l2_l3 = {0x02, 0x00, 0xBC, 0xBD, 0xBE, 0xBF, 0x02, 0x00, 0xAC, 0xAD, 0xAE,
                                0xAF, 0x86, 0xDD, 0x66, 0xA0, 0x00, 0x00, 0x00, 0x1C, 0x11, 0x07};
  EXPECT_EQ(Bytes(out.begin(), out.begin() + 22), expected_l2_l3);
  EXPECT_EQ(Bytes(out.begin() + 22, out.begin() + 38), Bytes(ip.src.begin(), ip.src.end()));
  EXPECT_EQ(Bytes(out.begin() + 38, out.begin() + 54), Bytes(ip.dst.begin(), ip.dst.end()));
  EXPECT_EQ(Bytes(out.begin() + 54, out.begin() + 62),
            (Bytes{0xD0, 0x00, 0x12, 0xB7, 0x00, 0x1C, 0x00, 0x00}));
  RoceFrame f;
  ASSERT_EQ(decap(LinkType::kEthernet, out, f), FrameError::kOk);
  EXPECT_TRUE(f.ip.ipv6);
  EXPECT_EQ(f.ip.src, ip.src);
  EXPECT_EQ(f.ip.dst, ip.dst);
  EXPECT_EQ(f.tos, 0x6A);
  EXPECT_EQ(f.ttl, 7);
  EXPECT_TRUE(same(f.roce, kRoce));
}

TEST(EncapFrame, RefusesWhatDoesNotFit) {
  const IpContext ip = v4_context();
  Bytes small(frame_size(ip, kRoce.size()) - 1);
  EXPECT_EQ(encap_frame(ip, 0, 64, kRoce, small), 0u);
  const Bytes huge(65535 - 28 + 1);
  Bytes out(frame_size(ip, huge.size()));
  EXPECT_EQ(encap_frame(ip, 0, 64, huge, out), 0u);  // IPv4 total length would overflow
  const Bytes largest(65535 - 28);
  Bytes out2(frame_size(ip, largest.size()));
  EXPECT_EQ(encap_frame(ip, 0, 64, largest, out2), out2.size());
}

}  // namespace
}  // namespace uroce::wire
