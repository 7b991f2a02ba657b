// Encoding and decoding of the CM messages (cm_messages.hpp). Offsets are message offsets
// (the MAD offset minus 24), as in IBA 12.6 and the kernel's CM_FIELD*_LOC macros; a field
// "[hi:lo] of byte N" is the bit range counted from the byte's least significant bit.
#include "cm/cm_messages.hpp"

#include <algorithm>
#include <cstring>

#include "wire/byte_order.hpp"

namespace uroce::cm {
namespace {

using wire::load_be16;
using wire::load_be24;
using wire::load_be32;
using wire::load_be64;
using wire::store_be16;
using wire::store_be24;
using wire::store_be32;
using wire::store_be64;

constexpr uint8_t bits(uint8_t byte, int hi, int lo) {
  return static_cast<uint8_t>((byte >> lo) & ((1u << (hi - lo + 1)) - 1));
}
constexpr uint8_t put(uint32_t value, int hi, int lo) {
  return static_cast<uint8_t>((value & ((1u << (hi - lo + 1)) - 1)) << lo);
}

template <size_t N>
void copy_in(uint8_t* dst, const std::array<uint8_t, N>& src) {
  std::memcpy(dst, src.data(), N);
}
template <size_t N>
void copy_out(std::array<uint8_t, N>& dst, const uint8_t* src) {
  std::memcpy(dst.data(), src, N);
}

// A REQ path: 44 bytes at `p` (message offset 52 or 96).
void encode_path(const CmPath& c, uint8_t* p) {
  store_be16(p + 0, c.local_lid);
  store_be16(p + 2, c.remote_lid);
  std::memcpy(p + 4, c.local_gid.data(), 16);
  std::memcpy(p + 20, c.remote_gid.data(), 16);
  store_be32(p + 36, (c.flow_label & 0xFFFFF) << 12 | (c.packet_rate & 0x3Fu));
  p[40] = c.traffic_class;
  p[41] = c.hop_limit;
  p[42] = static_cast<uint8_t>(put(c.sl, 7, 4) | put(c.subnet_local ? 1 : 0, 3, 3));
  p[43] = put(c.local_ack_timeout, 7, 3);
}

CmPath decode_path(const uint8_t* p) {
  CmPath c;
  c.local_lid = load_be16(p + 0);
  c.remote_lid = load_be16(p + 2);
  std::memcpy(c.local_gid.data(), p + 4, 16);
  std::memcpy(c.remote_gid.data(), p + 20, 16);
  const uint32_t w = load_be32(p + 36);
  c.flow_label = w >> 12;
  c.packet_rate = static_cast<uint8_t>(w & 0x3F);
  c.traffic_class = p[40];
  c.hop_limit = p[41];
  c.sl = bits(p[42], 7, 4);
  c.subnet_local = bits(p[42], 3, 3) != 0;
  c.local_ack_timeout = bits(p[43], 7, 3);
  return c;
}

void encode(const Req& m, uint8_t* p) {
  store_be32(p + 0, m.local_comm_id);
  store_be24(p + 5, m.vendor_id);
  store_be64(p + 8, m.service_id);
  store_be64(p + 16, m.local_ca_guid);
  store_be32(p + 28, m.local_qkey);
  store_be24(p + 32, m.local_qpn);
  p[35] = m.responder_resources;
  store_be24(p + 36, m.local_eecn);
  p[39] = m.initiator_depth;
  store_be24(p + 40, m.remote_eecn);
  p[43] = static_cast<uint8_t>(put(m.remote_cm_response_timeout, 7, 3) |
                               put(static_cast<uint8_t>(m.transport), 2, 1) |
                               put(m.e2e_flow_control ? 1 : 0, 0, 0));
  store_be24(p + 44, m.starting_psn);
  p[47] = static_cast<uint8_t>(put(m.local_cm_response_timeout, 7, 3) | put(m.retry_count, 2, 0));
  store_be16(p + 48, m.pkey);
  p[50] = static_cast<uint8_t>(put(m.path_mtu, 7, 4) | put(m.rdc_exists ? 1 : 0, 3, 3) |
                               put(m.rnr_retry_count, 2, 0));
  p[51] = static_cast<uint8_t>(put(m.max_cm_retries, 7, 4) | put(m.srq ? 1 : 0, 3, 3) |
                               put(m.extended_transport, 2, 0));
  encode_path(m.primary, p + 52);
  if (m.alternate) encode_path(*m.alternate, p + 96);
  copy_in(p + 140, m.private_data);
}

Req decode_req(const uint8_t* p) {
  Req m;
  m.local_comm_id = load_be32(p + 0);
  m.vendor_id = load_be24(p + 5);
  m.service_id = load_be64(p + 8);
  m.local_ca_guid = load_be64(p + 16);
  m.local_qkey = load_be32(p + 28);
  m.local_qpn = load_be24(p + 32);
  m.responder_resources = p[35];
  m.local_eecn = load_be24(p + 36);
  m.initiator_depth = p[39];
  m.remote_eecn = load_be24(p + 40);
  m.remote_cm_response_timeout = bits(p[43], 7, 3);
  m.transport = static_cast<CmTransport>(bits(p[43], 2, 1));
  m.e2e_flow_control = bits(p[43], 0, 0) != 0;
  m.starting_psn = load_be24(p + 44);
  m.local_cm_response_timeout = bits(p[47], 7, 3);
  m.retry_count = bits(p[47], 2, 0);
  m.pkey = load_be16(p + 48);
  m.path_mtu = bits(p[50], 7, 4);
  m.rdc_exists = bits(p[50], 3, 3) != 0;
  m.rnr_retry_count = bits(p[50], 2, 0);
  m.max_cm_retries = bits(p[51], 7, 4);
  m.srq = bits(p[51], 3, 3) != 0;
  m.extended_transport = bits(p[51], 2, 0);
  m.primary = decode_path(p + 52);
  if (load_be16(p + 96) != 0) m.alternate = decode_path(p + 96);
  copy_out(m.private_data, p + 140);
  return m;
}

void encode(const Mra& m, uint8_t* p) {
  store_be32(p + 0, m.local_comm_id);
  store_be32(p + 4, m.remote_comm_id);
  p[8] = put(static_cast<uint8_t>(m.message_mraed), 7, 6);
  p[9] = put(m.service_timeout, 7, 3);
  copy_in(p + 10, m.private_data);
}

Mra decode_mra(const uint8_t* p) {
  Mra m;
  m.local_comm_id = load_be32(p + 0);
  m.remote_comm_id = load_be32(p + 4);
  m.message_mraed = static_cast<CmMsgResponse>(bits(p[8], 7, 6));
  m.service_timeout = bits(p[9], 7, 3);
  copy_out(m.private_data, p + 10);
  return m;
}

void encode(const Rej& m, uint8_t* p) {
  store_be32(p + 0, m.local_comm_id);
  store_be32(p + 4, m.remote_comm_id);
  p[8] = put(static_cast<uint8_t>(m.message_rejected), 7, 6);
  p[9] = put(m.ari_length, 7, 1);
  store_be16(p + 10, m.reason);
  copy_in(p + 12, m.ari);
  copy_in(p + 84, m.private_data);
}

Rej decode_rej(const uint8_t* p) {
  Rej m;
  m.local_comm_id = load_be32(p + 0);
  m.remote_comm_id = load_be32(p + 4);
  m.message_rejected = static_cast<CmMsgResponse>(bits(p[8], 7, 6));
  m.ari_length = bits(p[9], 7, 1);
  m.reason = load_be16(p + 10);
  copy_out(m.ari, p + 12);
  copy_out(m.private_data, p + 84);
  return m;
}

void encode(const Rep& m, uint8_t* p) {
  store_be32(p + 0, m.local_comm_id);
  store_be32(p + 4, m.remote_comm_id);
  store_be32(p + 8, m.local_qkey);
  store_be24(p + 12, m.local_qpn);
  p[15] = static_cast<uint8_t>(m.vendor_id >> 16);
  store_be24(p + 16, m.local_eecn);
  p[19] = static_cast<uint8_t>(m.vendor_id >> 8);
  store_be24(p + 20, m.starting_psn);
  p[23] = static_cast<uint8_t>(m.vendor_id);
  p[24] = m.responder_resources;
  p[25] = m.initiator_depth;
  p[26] = static_cast<uint8_t>(put(m.target_ack_delay, 7, 3) | put(m.failover_accepted, 2, 1) |
                               put(m.e2e_flow_control ? 1 : 0, 0, 0));
  p[27] = static_cast<uint8_t>(put(m.rnr_retry_count, 7, 5) | put(m.srq ? 1 : 0, 4, 4));
  store_be64(p + 28, m.local_ca_guid);
  copy_in(p + 36, m.private_data);
}

Rep decode_rep(const uint8_t* p) {
  Rep m;
  m.local_comm_id = load_be32(p + 0);
  m.remote_comm_id = load_be32(p + 4);
  m.local_qkey = load_be32(p + 8);
  m.local_qpn = load_be24(p + 12);
  m.local_eecn = load_be24(p + 16);
  m.starting_psn = load_be24(p + 20);
  m.vendor_id = uint32_t{p[15]} << 16 | uint32_t{p[19]} << 8 | p[23];
  m.responder_resources = p[24];
  m.initiator_depth = p[25];
  m.target_ack_delay = bits(p[26], 7, 3);
  m.failover_accepted = bits(p[26], 2, 1);
  m.e2e_flow_control = bits(p[26], 0, 0) != 0;
  m.rnr_retry_count = bits(p[27], 7, 5);
  m.srq = bits(p[27], 4, 4) != 0;
  m.local_ca_guid = load_be64(p + 28);
  copy_out(m.private_data, p + 36);
  return m;
}

// RTU and DREP: the two comm IDs and 224 bytes of private data.
template <typename M>
void encode_ids_and_data(const M& m, uint8_t* p) {
  store_be32(p + 0, m.local_comm_id);
  store_be32(p + 4, m.remote_comm_id);
  copy_in(p + 8, m.private_data);
}
template <typename M>
M decode_ids_and_data(const uint8_t* p) {
  M m;
  m.local_comm_id = load_be32(p + 0);
  m.remote_comm_id = load_be32(p + 4);
  copy_out(m.private_data, p + 8);
  return m;
}

void encode(const Rtu& m, uint8_t* p) {
  encode_ids_and_data(m, p);
}
void encode(const Drep& m, uint8_t* p) {
  encode_ids_and_data(m, p);
}

void encode(const Dreq& m, uint8_t* p) {
  store_be32(p + 0, m.local_comm_id);
  store_be32(p + 4, m.remote_comm_id);
  store_be24(p + 8, m.remote_qpn);
  copy_in(p + 12, m.private_data);
}

Dreq decode_dreq(const uint8_t* p) {
  Dreq m;
  m.local_comm_id = load_be32(p + 0);
  m.remote_comm_id = load_be32(p + 4);
  m.remote_qpn = load_be24(p + 8);
  copy_out(m.private_data, p + 12);
  return m;
}

void encode(const SidrReq& m, uint8_t* p) {
  store_be32(p + 0, m.request_id);
  store_be16(p + 4, m.pkey);
  store_be64(p + 8, m.service_id);
  copy_in(p + 16, m.private_data);
}

SidrReq decode_sidr_req(const uint8_t* p) {
  SidrReq m;
  m.request_id = load_be32(p + 0);
  m.pkey = load_be16(p + 4);
  m.service_id = load_be64(p + 8);
  copy_out(m.private_data, p + 16);
  return m;
}

void encode(const SidrRep& m, uint8_t* p) {
  store_be32(p + 0, m.request_id);
  p[4] = m.status;
  p[5] = m.info_length;
  store_be16(p + 6, static_cast<uint16_t>(m.vendor_id >> 8));
  store_be24(p + 8, m.qpn);
  p[11] = static_cast<uint8_t>(m.vendor_id);
  store_be64(p + 12, m.service_id);
  store_be32(p + 20, m.qkey);
  copy_in(p + 24, m.info);
  copy_in(p + 96, m.private_data);
}

SidrRep decode_sidr_rep(const uint8_t* p) {
  SidrRep m;
  m.request_id = load_be32(p + 0);
  m.status = p[4];
  m.info_length = p[5];
  m.vendor_id = uint32_t{load_be16(p + 6)} << 8 | p[11];
  m.qpn = load_be24(p + 8);
  m.service_id = load_be64(p + 12);
  m.qkey = load_be32(p + 20);
  copy_out(m.info, p + 24);
  copy_out(m.private_data, p + 96);
  return m;
}

}  // namespace

AttrId attr_id_of(const CmMessage& m) {
  static constexpr AttrId kIds[] = {AttrId::kReq,  AttrId::kMra,     AttrId::kRej,
                                    AttrId::kRep,  AttrId::kRtu,     AttrId::kDreq,
                                    AttrId::kDrep, AttrId::kSidrReq, AttrId::kSidrRep};
  static_assert(std::size(kIds) == std::variant_size_v<CmMessage>);
  return kIds[m.index()];
}

const char* mad_error_name(MadError e) {
  switch (e) {
    case MadError::kOk:
      return "ok";
    case MadError::kWrongSize:
      return "wrong_size";
    case MadError::kBadBaseVersion:
      return "bad_base_version";
    case MadError::kNotCm:
      return "not_cm_class";
    case MadError::kBadClassVersion:
      return "bad_class_version";
    case MadError::kNotSend:
      return "not_send_method";
    case MadError::kUnknownAttribute:
      return "unknown_attribute";
  }
  return "unknown";
}

void encode_cm_mad(const MadHeader& header, const CmMessage& message,
                   std::span<uint8_t, kMadSize> out) {
  std::fill(out.begin(), out.end(), uint8_t{0});
  MadHeader h = header;
  h.attr_id = static_cast<uint16_t>(attr_id_of(message));
  encode_mad_header(h, out.first<kMadHeaderSize>());
  uint8_t* data = out.data() + kMadHeaderSize;
  std::visit([data](const auto& m) { encode(m, data); }, message);
}

MadError decode_cm_mad(std::span<const uint8_t> mad, CmMad& out) {
  if (mad.size() != kMadSize) return MadError::kWrongSize;
  const MadHeader h = decode_mad_header(mad.first<kMadHeaderSize>());
  if (h.base_version != kMadBaseVersion) return MadError::kBadBaseVersion;
  if (h.mgmt_class != kCmMgmtClass) return MadError::kNotCm;
  if (h.class_version != kCmClassVersion) return MadError::kBadClassVersion;
  if (h.method != kMethodSend) return MadError::kNotSend;
  const uint8_t* p = mad.data() + kMadHeaderSize;
  switch (static_cast<AttrId>(h.attr_id)) {
    case AttrId::kReq:
      out.message = decode_req(p);
      break;
    case AttrId::kMra:
      out.message = decode_mra(p);
      break;
    case AttrId::kRej:
      out.message = decode_rej(p);
      break;
    case AttrId::kRep:
      out.message = decode_rep(p);
      break;
    case AttrId::kRtu:
      out.message = decode_ids_and_data<Rtu>(p);
      break;
    case AttrId::kDreq:
      out.message = decode_dreq(p);
      break;
    case AttrId::kDrep:
      out.message = decode_ids_and_data<Drep>(p);
      break;
    case AttrId::kSidrReq:
      out.message = decode_sidr_req(p);
      break;
    case AttrId::kSidrRep:
      out.message = decode_sidr_rep(p);
      break;
    default:
      return MadError::kUnknownAttribute;
  }
  out.header = h;
  return MadError::kOk;
}

}  // namespace uroce::cm
