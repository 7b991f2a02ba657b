// The out-of-band address message of rdma-core's ibv_{rc,uc,ud,srq}_pingpong, so `uroce
// pingpong` can talk to them over TCP (libibverbs/examples/*_pingpong.c):
//
//   sprintf(msg, "%04x:%06x:%06x:%s", lid, qpn, psn, wire_gid)   in a 52-byte buffer
//
// sent with its terminating NUL (the programs write sizeof msg bytes). wire_gid is the 16 GID
// bytes as 32 lowercase hex digits, in memory order (gid_to_wire_gid prints four
// htobe32() words with %08x, which on any host spells the bytes in order).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace uroce::cli {

using GidBytes = std::array<uint8_t, 16>;

struct PingpongDest {
  uint32_t lid = 0;
  uint32_t qpn = 0;
  uint32_t psn = 0;
  GidBytes gid{};

  friend bool operator==(const PingpongDest&, const PingpongDest&) = default;
};

// sizeof "0000:000000:000000:00000000000000000000000000000000" in rdma-core: 51 chars + NUL.
inline constexpr size_t kPingpongMsgSize = 52;
using PingpongMsg = std::array<char, kPingpongMsgSize>;

// The 32-hex-digit wire form of a GID and back (nullopt unless exactly 32 hex digits).
[[nodiscard]] std::string gid_to_wire(const GidBytes& gid);
[[nodiscard]] std::optional<GidBytes> wire_to_gid(std::string_view text);

// The message as rdma-core writes it, NUL-padded to kPingpongMsgSize.
[[nodiscard]] PingpongMsg format_pingpong_dest(const PingpongDest& dest);
// Parses what the peer sent like rdma-core's sscanf("%x:%x:%x:%s"), but strictly: three hex
// fields (LID <= 0xffff, QPN and PSN <= 0xffffff) and a 32-digit GID; nullopt otherwise.
[[nodiscard]] std::optional<PingpongDest> parse_pingpong_dest(std::span<const char> msg);

// The GID as inet_ntop(AF_INET6) prints it ("::ffff:127.0.0.1", "fe80::1", "::").
[[nodiscard]] std::string gid_to_text(const GidBytes& gid);

// "  local address:  LID 0x0000, QPN 0x000011, PSN 0x5c1a2b, GID ::ffff:127.0.0.1" — the
// line the pingpong programs print for each side (`who` is "local" or "remote").
[[nodiscard]] std::string format_address_line(std::string_view who, const PingpongDest& dest);

}  // namespace uroce::cli
