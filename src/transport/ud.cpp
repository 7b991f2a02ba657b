// UD receive path (see ud.hpp).
#include "transport/ud.hpp"

#include <cstring>

#include "transport/engine_impl.hpp"
#include "transport/packet_out.hpp"
#include "wire/byte_order.hpp"
#include "wire/ip_layout.hpp"

namespace uroce::transport {
namespace {

uint16_t ipv4_checksum(const uint8_t* h) {
  uint32_t sum = 0;
  for (size_t i = 0; i < wire::kIpv4MinHeaderLen; i += 2) sum += wire::load_be16(h + i);
  while ((sum >> 16) != 0) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

}  // namespace

std::array<uint8_t, kGrhLen> build_grh(const PacketMeta& meta, size_t roce_len) {
  std::array<uint8_t, kGrhLen> g{};
  if (meta.ip.ipv6) {
    uint8_t* h = g.data();
    h[0] = static_cast<uint8_t>(0x60 | (meta.tos >> 4));
    h[1] = static_cast<uint8_t>((meta.tos & 0x0F) << 4);  // flow label: not seen by a socket
    wire::store_be16(h + 4, static_cast<uint16_t>(wire::kUdpHeaderLen + roce_len));
    h[6] = wire::kIpProtoUdp;
    h[7] = meta.ttl;
    std::memcpy(h + 8, meta.ip.src.data(), 16);
    std::memcpy(h + 24, meta.ip.dst.data(), 16);
    return g;
  }
  uint8_t* h = g.data() + 20;  // rxe: bytes 0..19 zero, the IPv4 header in 20..39
  h[0] = 0x45;
  h[1] = meta.tos;
  wire::store_be16(h + 2,
                   static_cast<uint16_t>(wire::kIpv4MinHeaderLen + wire::kUdpHeaderLen + roce_len));
  wire::store_be16(h + 4, meta.ip.ipv4_id);
  wire::store_be16(h + 6, meta.ip.ipv4_df ? 0x4000 : 0);
  h[8] = meta.ttl;
  h[9] = wire::kIpProtoUdp;
  std::memcpy(h + 12, meta.ip.src.data() + 12, 4);
  std::memcpy(h + 16, meta.ip.dst.data() + 12, 4);
  wire::store_be16(h + 10, ipv4_checksum(h));
  return g;
}

void ud_receive(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt) {
  const uint32_t expected_qkey = qp.type == QpType::kGsi ? wire::kGsiQkey : qp.attr.qkey;
  if (pkt.hdr.deth.qkey != expected_qkey) {
    e.count(qp, Counter::kDropBadQkey);  // rxe check_keys: qkey_viol_cntr
    return;
  }
  // IBA 9.8 (UD): a message is exactly one packet whose payload is at most the PMTU, for UD
  // the port's active MTU (qp.mtu). A longer one did not come from a conforming sender (and a
  // NIC never even receives a frame beyond its link MTU): it is dropped before it consumes
  // a receive WQE, however large the buffer.
  if (pkt.payload.size() > qp.mtu) {
    e.count(qp, Counter::kDropUdTooLong);
    return;
  }
  RecvWqe& wqe = e.ud_wqe(qp);
  if (!e.take_recv_wqe(qp, wqe)) {
    e.count(qp, Counter::kDropNoRecvWqe);
    e.count(qp, Counter::kOutOfBuffer);
    return;
  }
  Wc wc;
  wc.wr_id = wqe.wr_id;
  wc.opcode = WcOpcode::kRecv;
  wc.qp_num = qp.qpn;
  wc.src_qp = pkt.hdr.deth.src_qp;
  const uint64_t total = kGrhLen + pkt.payload.size();
  if (total > wqe.length) {
    e.count(qp, Counter::kRespLocalLengthError);
    wc.status = WcStatus::kLocLenErr;
    e.complete_recv(qp, wc, false);
    return;
  }
  const std::array<uint8_t, kGrhLen> grh = build_grh(*e.rx_meta, e.rx_len);
  if (e.memory().scatter(qp.pd, wqe.sge_list(), 0, grh) != AccessError::kOk ||
      e.memory().scatter(qp.pd, wqe.sge_list(), kGrhLen, pkt.payload) != AccessError::kOk) {
    wc.status = WcStatus::kLocProtErr;
    e.complete_recv(qp, wc, false);
    return;
  }
  wc.byte_len = static_cast<uint32_t>(total);
  wc.wc_flags = kWcGrh;
  wc.network = e.rx_meta->ip.ipv6 ? WcNetwork::kIpv6 : WcNetwork::kIpv4;
  if ((pkt.info->flags & wire::kImm) != 0) {
    wc.wc_flags |= kWcWithImm;
    wc.imm_data = pkt.hdr.immdt;
  }
  e.count(qp, Counter::kRdmaRecvs);
  e.complete_recv(qp, wc, pkt.hdr.bth.se);
}

}  // namespace uroce::transport
