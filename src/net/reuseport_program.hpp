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
//
// QP1 (GSI: CM MADs, a UD SEND of BTH 12 + DETH 8 + a 256-byte MAD) has its own rule, read
// from fixed offsets of the UDP payload (docs/cm.md "QP1 shared by several processes"):
// REQ and SIDR_REQ go to the member listening on their Service ID; REP, RTU, REJ, MRA, DREQ,
// DREP (Remote Comm ID) and SIDR_REP (Request ID) to the slot in the top 6 bits of the
// receiver's own ID, which uroce's CM puts there; everything else on QP1 (another class, a
// runt, a REQ nobody listens for, an ID of a slot nobody owns) to the "CM default": the
// lowest-slot member that declared itself CM-capable, else slot 0's owner (as data to QPN 1).
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
// Inline: the port asks it of every datagram it receives and of each it sends in a GSO run.
[[nodiscard]] inline std::optional<uint32_t> dest_qpn_of(std::span<const uint8_t> udp_payload) {
  if (udp_payload.size() < 12) return std::nullopt;  // a BTH is 12 bytes
  return (uint32_t{udp_payload[5]} << 16) | (uint32_t{udp_payload[6]} << 8) | udp_payload[7];
}

// QP1 datagrams: where a CM MAD's fields sit in the UDP payload (BTH 12 + DETH 8 + MAD).
inline constexpr uint32_t kGsiQpn = 1;
inline constexpr uint32_t kCmClassOffset = 21;         // MAD MgmtClass
inline constexpr uint32_t kCmAttrOffset = 36;          // MAD AttributeID (16 bits)
inline constexpr uint32_t kCmRequestIdOffset = 44;     // SIDR_REP: Request ID (the receiver's)
inline constexpr uint32_t kCmRemoteCommIdOffset = 48;  // REP..DREP: Remote Comm ID (receiver's)
inline constexpr uint32_t kCmServiceIdOffset = 52;     // REQ, SIDR_REQ: Service ID (64 bits)
// Shorter QP1 datagrams go to the CM default: this is the end of the furthest field read.
inline constexpr uint32_t kCmSteerMinLength = kCmServiceIdOffset + 8;
inline constexpr uint8_t kCmClass = 0x07;
// The top 6 bits of a uroce Local Comm ID / SIDR Request ID name the owner's slot (the CM's
// cm::kCmIdSlotShift).
inline constexpr uint32_t kCommIdSlotShift = 32 - kSlotBits;
// Listeners one address's program has room for: at most 5 instructions each (2 when they
// share their high word, as the RDMA IP CM Service's do), within BPF_MAXINSNS 4096. The
// kernel may refuse a smaller program still: the attached program must fit
// net.core.optmem_max (ENOMEM), by default 20 KiB on older kernels (some 600 listeners of one
// high word) and 128 KiB on newer ones.
inline constexpr size_t kMaxCmListeners = 512;

struct SteeringEntry {
  uint32_t slot = 0;
  uint32_t position = 0;
  bool cm_capable = false;  // runs a CM agent: may be the CM default
};

struct CmListenerEntry {
  uint64_t service_id = 0;
  uint32_t position = 0;
};

// How the steering program routes a datagram to QP1 (qp1_route_of mirrors it in C++).
enum class Qp1Route : uint8_t {
  kNotQp1,   // destination QPN is not 1 (or no full BTH): the slot rule applies
  kService,  // REQ / SIDR_REQ: the listener of `service_id`
  kSlot,     // a reply naming the receiver's ID: the member owning `slot`
  kDefault,  // the CM default
};
struct Qp1Target {
  Qp1Route route = Qp1Route::kNotQp1;
  uint64_t service_id = 0;
  uint32_t slot = 0;
};
[[nodiscard]] Qp1Target qp1_route_of(std::span<const uint8_t> udp_payload);

// The position a QP1 datagram goes to by default: the lowest-slot CM-capable entry's, else
// slot 0's, else 0xFFFFFFFF (the kernel hashes).
[[nodiscard]] uint32_t cm_default_position(std::span<const SteeringEntry> entries);

// Steering program: probes go to byte 4's position; a datagram to QPN 1 by the QP1 rule
// above (`listeners`: service ID -> position; a service listed twice goes to its first entry,
// entries beyond kMaxCmListeners are left out); otherwise slot -> position from `entries`; an
// unknown slot returns 0xFFFFFFFF (the kernel then picks a member by hash, and that member
// counts the datagram as misdelivered). At most one entry per slot is used (the first).
// Every conditional jump is short (<= 255) by construction; at most
// 27 + 4 * kSlotCount + 5 * kMaxCmListeners instructions (< BPF_MAXINSNS); with listeners
// sharing a high word, 27 + 4 * kSlotCount + 2 * listeners + 3 per 120 of them.
[[nodiscard]] std::vector<sock_filter> build_steering_program(
    std::span<const SteeringEntry> entries, std::span<const CmListenerEntry> listeners = {});

// Runs a classic-BPF program over `payload` like the kernel runs a reuseport program (offset
// 0 = the UDP payload, len = its length; an out-of-bounds load ends the program with 0, as
// does an instruction this interpreter does not know). Covers every instruction
// build_steering_program() emits. For tests and `uroce doctor`.
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
