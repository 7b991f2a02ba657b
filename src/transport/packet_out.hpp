// Finishing an outgoing packet: addresses from the address vector, the UDP source port, the
// IP TOS/TTL, and the ICRC computed for IPv4 ID 0 with DF (what the UDP driver's
// unconnected IP_PMTUDISC_DO socket makes Linux write) or for IPv6.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>

#include "transport/engine.hpp"
#include "wire/icrc.hpp"
#include "wire/ip_layout.hpp"
#include "wire/packet.hpp"

namespace uroce::transport {

// Writes headers for `hdr` and reserves room for `payload_len` bytes of payload; returns
// the payload area (empty span and *size 0 when the slot is too small).
inline std::span<uint8_t> begin_packet(TxSlot& slot, const wire::Headers& hdr, size_t payload_len,
                                       size_t* size) {
  *size = wire::packet_size(hdr.bth.opcode, payload_len);
  if (*size == 0 || slot.buf.size() < *size) {
    *size = 0;
    return {};
  }
  slot.payload = {};
  const size_t header_len = wire::build_headers(hdr, payload_len, slot.buf);
  // Zero pad and ICRC placeholder; the caller copies the payload in between.
  std::memset(slot.buf.data() + header_len + payload_len, 0, *size - header_len - payload_len);
  return slot.buf.subspan(header_len, payload_len);
}

// Leaves the payload of the packet begin_packet laid out where it lies, in an MR
// (Engine::set_payload_by_reference): `area` (begin_packet's result) stays a hole in the slot,
// `source` holds its bytes, and finish_packet seals the ICRC over both.
inline void refer_payload(TxSlot& slot, std::span<uint8_t> area, const uint8_t* source) {
  slot.payload = std::span<const uint8_t>(source, area.size());
  slot.payload_at = static_cast<size_t>(area.data() - slot.buf.data());
}

// Fills slot.meta from the address vector and source port, then writes the ICRC.
inline void finish_packet(TxSlot& slot, size_t size, const AhAttr& ah, uint16_t sport) {
  slot.len = size;
  // Every field is set below: no `m = PacketMeta{}` first, which the compiler built as a
  // zeroed temporary and copied with loads that overlapped its own narrower stores (a
  // store-forwarding stall per packet, 30 % of Requester::emit at a 1024-byte MTU).
  PacketMeta& m = slot.meta;
  m.ip.ipv6 = !wire::is_ipv4_mapped(ah.dgid);
  m.ip.src = ah.sgid;
  m.ip.dst = ah.dgid;
  m.ip.sport = sport;
  m.ip.dport = wire::kRoceV2Port;
  m.ip.ipv4_id = 0;
  m.ip.ipv4_df = true;
  m.tos = ah.traffic_class;
  m.ttl = ah.hop_limit;
  m.ip_id_known = true;
  write_slot_icrc(m.ip, slot);
}

}  // namespace uroce::transport
