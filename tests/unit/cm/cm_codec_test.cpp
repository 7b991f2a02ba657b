// The CM MAD codec: a REQ as rdma_cm sends it lands on the byte offsets and bit positions of
// IBA 12.6 / the kernel's ibta_vol1_c12.h; every message survives encode -> decode with all
// its fields; random bytes behind a valid header decode to fields that re-encode to the same
// fields; malformed MADs are refused with their reason; the Annex A11 service IDs and the
// cma_hdr match Linux's.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cm/cm_messages.hpp"
#include "cm/ip_cm_service.hpp"

namespace uroce::cm {
namespace {

// MAD offset of message offset `off` (the CM_FIELD macros add the 24-byte MAD header).
constexpr size_t at(size_t off) {
  return kMadHeaderSize + off;
}

Gid v4_gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  Gid g{};
  g[10] = g[11] = 0xFF;
  g[12] = a;
  g[13] = b;
  g[14] = c;
  g[15] = d;
  return g;
}

// A REQ as Linux rdma_cm builds it for rping to 10.0.0.2:7174 (docs/cm.md, "REQ").
Req rping_req() {
  Req r;
  r.local_comm_id = 0x1A2B3C4D;
  r.service_id = ip_service_id(kPsTcp, 7174);
  r.local_ca_guid = 0x0200'5EFF'FE10'0001;
  r.local_qpn = 0x000011;
  r.responder_resources = 16;
  r.initiator_depth = 16;
  r.remote_cm_response_timeout = 20;
  r.transport = CmTransport::kRc;
  r.starting_psn = 0xABCDEF;
  r.local_cm_response_timeout = 20;
  r.retry_count = 7;
  r.path_mtu = 3;  // 1024
  r.rnr_retry_count = 7;
  r.max_cm_retries = 15;
  r.primary.local_gid = v4_gid(10, 0, 0, 1);
  r.primary.remote_gid = v4_gid(10, 0, 0, 2);
  r.primary.flow_label = 0xABCDE;
  r.primary.hop_limit = 64;
  r.primary.local_ack_timeout = 17;
  CmaHeader h;
  h.src_port = 0xC001;
  h.src_addr[12] = 10;
  h.src_addr[15] = 1;
  h.dst_addr[12] = 10;
  h.dst_addr[15] = 2;
  encode_cma_header(h, r.private_data);
  r.private_data[kCmaHeaderSize] = 'u';
  return r;
}

TEST(CmCodec, ReqLandsOnTheKernelsOffsets) {
  std::array<uint8_t, kMadSize> mad{};
  MadHeader hdr;
  hdr.tid = 0x0000'0001'1A2B'3C4Dull;
  encode_cm_mad(hdr, rping_req(), mad);
  // MAD header: base 1, class 0x07, version 2, method Send, TID, attribute REQ.
  EXPECT_EQ(mad[0], 1);
  EXPECT_EQ(mad[1], 0x07);
  EXPECT_EQ(mad[2], 2);
  EXPECT_EQ(mad[3], 0x03);
  EXPECT_EQ(std::vector<uint8_t>(mad.begin() + 8, mad.begin() + 16),
            (std::vector<uint8_t>{0, 0, 0, 1, 0x1A, 0x2B, 0x3C, 0x4D}));
  EXPECT_EQ(mad[16], 0x00);
  EXPECT_EQ(mad[17], 0x10);
  // Local comm ID, service ID 0x0000000001061C06 (rping's port 7174), CA GUID.
  EXPECT_EQ(mad[at(0)], 0x1A);
  EXPECT_EQ(mad[at(3)], 0x4D);
  EXPECT_EQ(std::vector<uint8_t>(mad.begin() + at(8), mad.begin() + at(16)),
            (std::vector<uint8_t>{0, 0, 0, 0, 0x01, 0x06, 0x1C, 0x06}));
  EXPECT_EQ(mad[at(16)], 0x02);
  EXPECT_EQ(mad[at(23)], 0x01);
  // QPN and responder resources share a word, as do EECN and initiator depth.
  EXPECT_EQ(mad[at(34)], 0x11);
  EXPECT_EQ(mad[at(35)], 16);
  EXPECT_EQ(mad[at(39)], 16);
  EXPECT_EQ(mad[at(43)], 20 << 3);  // remote CM response timeout 20, RC (0), no E2E FC
  EXPECT_EQ(mad[at(44)], 0xAB);
  EXPECT_EQ(mad[at(46)], 0xEF);
  EXPECT_EQ(mad[at(47)], (20 << 3) | 7);
  EXPECT_EQ(mad[at(48)], 0xFF);  // P_Key 0xFFFF
  EXPECT_EQ(mad[at(49)], 0xFF);
  EXPECT_EQ(mad[at(50)], (3 << 4) | 7);  // MTU 1024, RNR retry 7
  EXPECT_EQ(mad[at(51)], 15 << 4);       // max CM retries 15
  EXPECT_EQ(mad[at(52)], 0xFF);          // permissive LIDs
  EXPECT_EQ(mad[at(55)], 0xFF);
  EXPECT_EQ(mad[at(56 + 10)], 0xFF);  // local GID ::ffff:10.0.0.1
  EXPECT_EQ(mad[at(56 + 15)], 1);
  EXPECT_EQ(mad[at(72 + 15)], 2);
  // Flow label in the top 20 bits of the word at 88, hop limit, ACK timeout in [7:3] of 95.
  EXPECT_EQ(mad[at(88)], 0xAB);
  EXPECT_EQ(mad[at(89)], 0xCD);
  EXPECT_EQ(mad[at(90)], 0xE0);
  EXPECT_EQ(mad[at(93)], 64);
  EXPECT_EQ(mad[at(95)], 17 << 3);
  // No alternate path: its LIDs are zero.
  EXPECT_EQ(mad[at(96)], 0);
  EXPECT_EQ(mad[at(97)], 0);
  // Private data at 140: the cma_hdr (version 0, IPv4, source port, addresses in the last
  // four bytes of each 16), then the application's bytes.
  EXPECT_EQ(mad[at(140)], 0x00);
  EXPECT_EQ(mad[at(141)], 0x40);
  EXPECT_EQ(mad[at(142)], 0xC0);
  EXPECT_EQ(mad[at(143)], 0x01);
  EXPECT_EQ(mad[at(144)], 0);
  EXPECT_EQ(mad[at(144 + 12)], 10);
  EXPECT_EQ(mad[at(144 + 15)], 1);
  EXPECT_EQ(mad[at(160 + 15)], 2);
  EXPECT_EQ(mad[at(176)], 'u');

  CmMad back;
  ASSERT_EQ(decode_cm_mad(mad, back), MadError::kOk);
  EXPECT_EQ(back.header.tid, hdr.tid);
  EXPECT_EQ(back.header.attr_id, 0x10);
  ASSERT_TRUE(std::holds_alternative<Req>(back.message));
  EXPECT_EQ(std::get<Req>(back.message), rping_req());
  const auto cma = decode_cma_header(std::get<Req>(back.message).private_data);
  ASSERT_TRUE(cma.has_value());
  EXPECT_EQ(cma->ip_version, 4);
  EXPECT_EQ(cma->src_port, 0xC001);
}

TEST(CmCodec, RepRejMraDreqAndSidrRepFieldsLandWhereTheTablesSay) {
  std::array<uint8_t, kMadSize> mad{};
  Rep rep;
  rep.local_comm_id = 1;
  rep.remote_comm_id = 2;
  rep.local_qpn = 0x123456;
  rep.starting_psn = 0x654321;
  rep.vendor_id = 0xA1B2C3;  // bytes 15, 19, 23
  rep.target_ack_delay = 15;
  rep.rnr_retry_count = 7;
  rep.srq = true;
  rep.local_ca_guid = 0x1122334455667788;
  encode_cm_mad({}, rep, mad);
  EXPECT_EQ(mad[17], 0x13);
  EXPECT_EQ(mad[at(12)], 0x12);
  EXPECT_EQ(mad[at(15)], 0xA1);
  EXPECT_EQ(mad[at(19)], 0xB2);
  EXPECT_EQ(mad[at(23)], 0xC3);
  EXPECT_EQ(mad[at(20)], 0x65);
  EXPECT_EQ(mad[at(26)], 15 << 3);
  EXPECT_EQ(mad[at(27)], (7 << 5) | (1 << 4));
  EXPECT_EQ(mad[at(28)], 0x11);

  Rej rej;
  rej.message_rejected = CmMsgResponse::kRep;
  rej.ari_length = 8;
  rej.reason = static_cast<uint16_t>(RejReason::kTimeout);
  rej.ari[0] = 0xEE;
  rej.private_data[0] = 0xDD;
  encode_cm_mad({}, rej, mad);
  EXPECT_EQ(mad[17], 0x12);
  EXPECT_EQ(mad[at(8)], 1 << 6);
  EXPECT_EQ(mad[at(9)], 8 << 1);
  EXPECT_EQ(mad[at(11)], 4);
  EXPECT_EQ(mad[at(12)], 0xEE);
  EXPECT_EQ(mad[at(84)], 0xDD);

  Mra mra;
  mra.message_mraed = CmMsgResponse::kOther;
  mra.service_timeout = 24;
  encode_cm_mad({}, mra, mad);
  EXPECT_EQ(mad[at(8)], 2 << 6);
  EXPECT_EQ(mad[at(9)], 24 << 3);

  Dreq dreq;
  dreq.remote_qpn = 0xABCDEF;
  dreq.private_data[0] = 0x77;
  encode_cm_mad({}, dreq, mad);
  EXPECT_EQ(mad[at(8)], 0xAB);
  EXPECT_EQ(mad[at(10)], 0xEF);
  EXPECT_EQ(mad[at(11)], 0);
  EXPECT_EQ(mad[at(12)], 0x77);

  SidrRep sr;
  sr.status = static_cast<uint8_t>(SidrStatus::kUnsupported);
  sr.vendor_id = 0x010203;
  sr.qpn = 0x0A0B0C;
  sr.service_id = ip_service_id(kPsUdp, 4791);
  sr.qkey = 0x11111111;
  encode_cm_mad({}, sr, mad);
  EXPECT_EQ(mad[at(4)], 1);
  EXPECT_EQ(mad[at(6)], 0x01);
  EXPECT_EQ(mad[at(7)], 0x02);
  EXPECT_EQ(mad[at(11)], 0x03);
  EXPECT_EQ(mad[at(8)], 0x0A);
  EXPECT_EQ(mad[at(12 + 5)], 0x11);  // port space 0x0111
  EXPECT_EQ(mad[at(20)], 0x11);
}

// Random values in every field, each within its width.
template <typename T>
T rnd(std::mt19937_64& rng, int width) {
  return static_cast<T>(rng() & ((uint64_t{1} << width) - 1));
}

template <size_t N>
void fill(std::array<uint8_t, N>& a, std::mt19937_64& rng) {
  for (auto& b : a) b = static_cast<uint8_t>(rng());
}

CmPath random_path(std::mt19937_64& rng) {
  CmPath c;
  c.local_lid = static_cast<uint16_t>(rng() | 1);
  c.remote_lid = rnd<uint16_t>(rng, 16);
  fill(c.local_gid, rng);
  fill(c.remote_gid, rng);
  c.flow_label = rnd<uint32_t>(rng, 20);
  c.packet_rate = rnd<uint8_t>(rng, 6);
  c.traffic_class = rnd<uint8_t>(rng, 8);
  c.hop_limit = rnd<uint8_t>(rng, 8);
  c.sl = rnd<uint8_t>(rng, 4);
  c.subnet_local = rng() & 1;
  c.local_ack_timeout = rnd<uint8_t>(rng, 5);
  return c;
}

std::vector<CmMessage> random_messages(std::mt19937_64& rng) {
  Req req;
  req.local_comm_id = rnd<uint32_t>(rng, 32);
  req.vendor_id = rnd<uint32_t>(rng, 24);
  req.service_id = rng();
  req.local_ca_guid = rng();
  req.local_qkey = rnd<uint32_t>(rng, 32);
  req.local_qpn = rnd<uint32_t>(rng, 24);
  req.responder_resources = rnd<uint8_t>(rng, 8);
  req.local_eecn = rnd<uint32_t>(rng, 24);
  req.initiator_depth = rnd<uint8_t>(rng, 8);
  req.remote_eecn = rnd<uint32_t>(rng, 24);
  req.remote_cm_response_timeout = rnd<uint8_t>(rng, 5);
  req.transport = static_cast<CmTransport>(rnd<uint8_t>(rng, 2));
  req.e2e_flow_control = rng() & 1;
  req.starting_psn = rnd<uint32_t>(rng, 24);
  req.local_cm_response_timeout = rnd<uint8_t>(rng, 5);
  req.retry_count = rnd<uint8_t>(rng, 3);
  req.pkey = rnd<uint16_t>(rng, 16);
  req.path_mtu = rnd<uint8_t>(rng, 4);
  req.rdc_exists = rng() & 1;
  req.rnr_retry_count = rnd<uint8_t>(rng, 3);
  req.max_cm_retries = rnd<uint8_t>(rng, 4);
  req.srq = rng() & 1;
  req.extended_transport = rnd<uint8_t>(rng, 3);
  req.primary = random_path(rng);
  if (rng() & 1) req.alternate = random_path(rng);
  fill(req.private_data, rng);

  Mra mra{rnd<uint32_t>(rng, 32),
          rnd<uint32_t>(rng, 32),
          static_cast<CmMsgResponse>(rnd<uint8_t>(rng, 2) % 3),
          rnd<uint8_t>(rng, 5),
          {}};
  fill(mra.private_data, rng);
  Rej rej{rnd<uint32_t>(rng, 32),
          rnd<uint32_t>(rng, 32),
          static_cast<CmMsgResponse>(rnd<uint8_t>(rng, 2) % 3),
          rnd<uint8_t>(rng, 7),
          rnd<uint16_t>(rng, 16),
          {},
          {}};
  fill(rej.ari, rng);
  fill(rej.private_data, rng);
  Rep rep;
  rep.local_comm_id = rnd<uint32_t>(rng, 32);
  rep.remote_comm_id = rnd<uint32_t>(rng, 32);
  rep.local_qkey = rnd<uint32_t>(rng, 32);
  rep.local_qpn = rnd<uint32_t>(rng, 24);
  rep.local_eecn = rnd<uint32_t>(rng, 24);
  rep.starting_psn = rnd<uint32_t>(rng, 24);
  rep.vendor_id = rnd<uint32_t>(rng, 24);
  rep.responder_resources = rnd<uint8_t>(rng, 8);
  rep.initiator_depth = rnd<uint8_t>(rng, 8);
  rep.target_ack_delay = rnd<uint8_t>(rng, 5);
  rep.failover_accepted = rnd<uint8_t>(rng, 2);
  rep.e2e_flow_control = rng() & 1;
  rep.rnr_retry_count = rnd<uint8_t>(rng, 3);
  rep.srq = rng() & 1;
  rep.local_ca_guid = rng();
  fill(rep.private_data, rng);
  Rtu rtu{rnd<uint32_t>(rng, 32), rnd<uint32_t>(rng, 32), {}};
  fill(rtu.private_data, rng);
  Dreq dreq{rnd<uint32_t>(rng, 32), rnd<uint32_t>(rng, 32), rnd<uint32_t>(rng, 24), {}};
  fill(dreq.private_data, rng);
  Drep drep{rnd<uint32_t>(rng, 32), rnd<uint32_t>(rng, 32), {}};
  fill(drep.private_data, rng);
  SidrReq sreq{rnd<uint32_t>(rng, 32), rnd<uint16_t>(rng, 16), rng(), {}};
  fill(sreq.private_data, rng);
  SidrRep srep{rnd<uint32_t>(rng, 32),
               rnd<uint8_t>(rng, 8),
               rnd<uint8_t>(rng, 8),
               rnd<uint32_t>(rng, 24),
               rnd<uint32_t>(rng, 24),
               rng(),
               rnd<uint32_t>(rng, 32),
               {},
               {}};
  fill(srep.info, rng);
  fill(srep.private_data, rng);
  return {req, mra, rej, rep, rtu, dreq, drep, sreq, srep};
}

TEST(CmCodec, EveryMessageRoundTripsWithAllItsFields) {
  std::mt19937_64 rng(0xC0FFEE);
  for (int round = 0; round < 200; ++round) {
    for (const CmMessage& m : random_messages(rng)) {
      MadHeader h;
      h.tid = rng();
      h.attr_mod = rnd<uint32_t>(rng, 32);
      std::array<uint8_t, kMadSize> mad{};
      encode_cm_mad(h, m, mad);
      CmMad back;
      ASSERT_EQ(decode_cm_mad(mad, back), MadError::kOk);
      h.attr_id = static_cast<uint16_t>(attr_id_of(m));
      EXPECT_EQ(back.header, h);
      ASSERT_EQ(back.message.index(), m.index());
      EXPECT_TRUE(back.message == m) << "message type " << m.index() << " round " << round;
    }
  }
}

TEST(CmCodec, RandomBytesBehindAValidHeaderKeepTheirFieldsThroughReencoding) {
  std::mt19937_64 rng(7);
  const uint16_t attrs[] = {0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18};
  for (int i = 0; i < 2000; ++i) {
    std::array<uint8_t, kMadSize> mad{};
    for (auto& b : mad) b = static_cast<uint8_t>(rng());
    MadHeader h;
    h.tid = rng();
    h.attr_id = attrs[i % std::size(attrs)];
    encode_mad_header(h, std::span<uint8_t, kMadHeaderSize>(mad.data(), kMadHeaderSize));
    CmMad first;
    ASSERT_EQ(decode_cm_mad(mad, first), MadError::kOk);
    std::array<uint8_t, kMadSize> again{};
    encode_cm_mad(first.header, first.message, again);
    CmMad second;
    ASSERT_EQ(decode_cm_mad(again, second), MadError::kOk);
    EXPECT_TRUE(second.message == first.message) << "attribute " << h.attr_id;
    EXPECT_EQ(second.header, first.header);
  }
}

TEST(CmCodec, MalformedMadsAreRefusedWithTheirReason) {
  std::array<uint8_t, kMadSize> good{};
  encode_cm_mad({}, Rtu{}, good);
  CmMad out;
  ASSERT_EQ(decode_cm_mad(good, out), MadError::kOk);
  EXPECT_EQ(decode_cm_mad(std::span(good).first(255), out), MadError::kWrongSize);
  std::vector<uint8_t> longer(good.begin(), good.end());
  longer.push_back(0);
  EXPECT_EQ(decode_cm_mad(longer, out), MadError::kWrongSize);
  EXPECT_EQ(decode_cm_mad({}, out), MadError::kWrongSize);
  const auto with = [&](size_t off, uint8_t value) {
    std::array<uint8_t, kMadSize> m = good;
    m[off] = value;
    return decode_cm_mad(m, out);
  };
  EXPECT_EQ(with(0, 2), MadError::kBadBaseVersion);
  EXPECT_EQ(with(1, 0x04), MadError::kNotCm);  // performance management
  EXPECT_EQ(with(2, 1), MadError::kBadClassVersion);
  EXPECT_EQ(with(3, 0x81), MadError::kNotSend);            // GetResp
  EXPECT_EQ(with(3, 0x01), MadError::kNotSend);            // Get (ClassPortInfo)
  EXPECT_EQ(with(17, 0x19), MadError::kUnknownAttribute);  // LAP
  EXPECT_EQ(with(17, 0x01), MadError::kUnknownAttribute);  // ClassPortInfo
  EXPECT_EQ(with(17, 0x00), MadError::kUnknownAttribute);
  EXPECT_STREQ(mad_error_name(MadError::kNotSend), "not_send_method");
}

TEST(CmCodec, IpServiceIdsAndTheCmaHeaderAreLinuxs) {
  EXPECT_EQ(ip_service_id(kPsTcp, 7174), 0x0000000001061C06ull);   // rping
  EXPECT_EQ(ip_service_id(kPsTcp, 18515), 0x0000000001064853ull);  // perftest -R
  EXPECT_EQ(service_port(0x0000000001064853ull), 18515);
  EXPECT_EQ(service_port_space(0x0000000001064853ull), kPsTcp);
  EXPECT_TRUE(is_ip_service_id(ip_service_id(kPsUdp, 1)));
  EXPECT_FALSE(is_ip_service_id(0x0000000101061C06ull));
  EXPECT_FALSE(is_ip_service_id(0x0000000001231C06ull));
  EXPECT_EQ(kReqUserPrivateData, 56u);
  EXPECT_EQ(kSidrReqUserPrivateData, 180u);

  CmaHeader v6;
  v6.ip_version = 6;
  v6.src_port = 4791;
  for (size_t i = 0; i < 16; ++i) {
    v6.src_addr[i] = static_cast<uint8_t>(i);
    v6.dst_addr[i] = static_cast<uint8_t>(0xF0 + i);
  }
  std::array<uint8_t, kReqPrivateData> pd{};
  encode_cma_header(v6, pd);
  EXPECT_EQ(pd[1], 0x60);
  EXPECT_EQ(pd[2], 0x12);
  EXPECT_EQ(pd[3], 0xB7);
  EXPECT_EQ(pd[4], 0);
  EXPECT_EQ(pd[35], 0xFF);
  EXPECT_EQ(decode_cma_header(pd), v6);
  pd[0] = 1;  // another cma_version
  EXPECT_FALSE(decode_cma_header(pd).has_value());
  pd[0] = 0;
  pd[1] = 0x50;  // IP version 5
  EXPECT_FALSE(decode_cma_header(pd).has_value());
  EXPECT_FALSE(decode_cma_header(std::span(pd).first(35)).has_value());
}

}  // namespace
}  // namespace uroce::cm
