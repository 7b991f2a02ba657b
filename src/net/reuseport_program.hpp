// QPN slots and the classic-BPF program that steers datagrams between the processes sharing
// one address's UDP port 4791 (SO_REUSEPORT + SO_ATTACH_REUSEPORT_CBPF).
//
// The 24-bit QPN space is cut into kSlotCount slots by its top kSlotBits bits; each member
// socket of a reuseport group owns one slot, and hands out QPNs only from it. The kernel runs
// the group's program on every datagram with offset 0 = the UDP payload (BTH byte 0); the
// program reads the BTH's destination QP high byte (offset 5), shifts out the slot and returns
// the *position* of the owning socket in the group (net/core/sock_reuseport.c). Positions are
// not stable: when a member closes, the kernel moves the last member into its place
// (reuseport_detach_sock), and an index >= the group size makes the kernel fall back to its
// hash. reuseport_registry.hpp tracks positions; docs/networking.md tells the whole story.
//
// Position probes: a datagram starting with kProbeMagic is steered to the position in its
// byte 4, so a member can find out where the kernel really keeps its socket (after members
// died without cleanup). Opcode 0xFF is manufacturer-specific; no peer sends it to 4791.
#pragma once

#include <linux/filter.h>

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace uroce::net {

inline constexpr uint32_t kSlotBits = 6;
inline constexpr uint32_t kSlotCount = 1u << kSlotBits;  // 64 processes per address
inline constexpr uint32_t kQpnBits = 24;
inline constexpr uint32_t kQpnsPerSlot = 1u << (kQpnBits - kSlotBits);  // 262144
// QPN 0 and 1 are special (SMI/GSI), and rxe starts at 17; the multicast QPN 0xFFFFFF is
// never handed out.
inline constexpr uint32_t kFirstUserQpn = 0x11;
inline constexpr uint32_t kMulticastQpn = 0xFFFFFF;

struct QpnRange {
  uint32_t base = 0;   // first QPN the engine may hand out
  uint32_t count = 0;  // number of QPNs from base
  [[nodiscard]] bool contains(uint32_t qpn) const { return qpn >= base && qpn - base < count; }
  friend bool operator==(const QpnRange&, const QpnRange&) = default;
};

[[nodiscard]] constexpr uint32_t slot_of_qpn(uint32_t qpn) {
  return (qpn & 0xFFFFFF) >> (kQpnBits - kSlotBits);
}
// The QPNs of `slot`, without 0..0x10 (slot 0) and 0xFFFFFF (the last slot).
[[nodiscard]] QpnRange qpn_range_of_slot(uint32_t slot);
// The whole usable QPN space, for a port that does not share its address.
[[nodiscard]] QpnRange whole_qpn_range();

// Destination QPN of a RoCE datagram (BTH bytes 5..7); nullopt when shorter than a BTH.
[[nodiscard]] std::optional<uint32_t> dest_qpn_of(std::span<const uint8_t> udp_payload);

struct SteeringEntry {
  uint32_t slot = 0;
  uint32_t position = 0;
};

// Steering program: probes go to byte 4's position; otherwise slot -> position from
// `entries`; an unknown slot returns 0xFFFFFFFF (the kernel then picks a member by hash,
// and that member counts the datagram as misdelivered).
[[nodiscard]] std::vector<sock_filter> build_steering_program(
    std::span<const SteeringEntry> entries);

// Runs a program of the shape build_steering_program() makes over `payload`, like the kernel
// would (out-of-bounds loads end the program with 0). For tests and `uroce doctor`.
[[nodiscard]] uint32_t run_steering_program(std::span<const sock_filter> prog,
                                            std::span<const uint8_t> payload);

// Probe datagrams: "\xFFuRP", position, 8-byte token of the probing member.
inline constexpr std::array<uint8_t, 4> kProbeMagic = {0xFF, 'u', 'R', 'P'};
inline constexpr size_t kProbeSize = 13;
[[nodiscard]] std::array<uint8_t, kProbeSize> make_probe(uint8_t position, uint64_t token);
struct Probe {
  uint8_t position = 0;
  uint64_t token = 0;
};
[[nodiscard]] std::optional<Probe> parse_probe(std::span<const uint8_t> payload);

}  // namespace uroce::net
