// UD (and QP1/GSI) receive: Q_Key check, receive WQE, the 40-byte GRH area rebuilt from the
// packet's IP metadata (IBA 11.4.1.2 / rxe: IPv4 -> 20 zero bytes then the IPv4 header;
// IPv6 -> the IPv6 header), payload after it, completion with src_qp and IBV_WC_GRH.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "transport/engine.hpp"
#include "wire/packet.hpp"

namespace uroce::transport {

class EngineImpl;
struct Qp;

inline constexpr size_t kGrhLen = 40;

// The network header as the receive buffer shows it, for a RoCE packet of `roce_len` bytes
// (BTH .. ICRC) received with `meta`. IPv4: the ID/DF are the received ones when the driver
// knew them, else ID 0 with DF (what uroce itself sends).
[[nodiscard]] std::array<uint8_t, kGrhLen> build_grh(const PacketMeta& meta, size_t roce_len);

void ud_receive(EngineImpl& e, Qp& qp, const wire::ParsedPacket& pkt);

}  // namespace uroce::transport
