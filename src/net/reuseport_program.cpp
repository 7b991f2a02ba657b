#include "net/reuseport_program.hpp"

#include <cstring>

namespace uroce::net {
namespace {

constexpr uint32_t kMagicWord = (uint32_t{kProbeMagic[0]} << 24) |
                                (uint32_t{kProbeMagic[1]} << 16) | (uint32_t{kProbeMagic[2]} << 8) |
                                kProbeMagic[3];
constexpr uint32_t kNoPosition = 0xFFFFFFFF;

sock_filter stmt(uint16_t code, uint32_t k) {
  return sock_filter{code, 0, 0, k};
}
sock_filter jump(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) {
  return sock_filter{code, jt, jf, k};
}

}  // namespace

QpnRange qpn_range_of_slot(uint32_t slot) {
  uint32_t base = slot * kQpnsPerSlot;
  uint32_t end = base + kQpnsPerSlot;  // exclusive
  if (base < kFirstUserQpn) base = kFirstUserQpn;
  if (end > kMulticastQpn) end = kMulticastQpn;
  return QpnRange{base, end - base};
}

QpnRange whole_qpn_range() {
  return QpnRange{kFirstUserQpn, kMulticastQpn - kFirstUserQpn};
}

std::optional<uint32_t> dest_qpn_of(std::span<const uint8_t> p) {
  if (p.size() < 12) return std::nullopt;  // a BTH is 12 bytes
  return (uint32_t{p[5]} << 16) | (uint32_t{p[6]} << 8) | p[7];
}

std::vector<sock_filter> build_steering_program(std::span<const SteeringEntry> entries) {
  std::vector<sock_filter> prog;
  // 0: A = payload[0..3] (network order); a probe jumps to 2, anything else to 4.
  prog.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, 0));
  prog.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, kMagicWord, 0, 2));
  prog.push_back(stmt(BPF_LD | BPF_B | BPF_ABS, 4));
  prog.push_back(stmt(BPF_RET | BPF_A, 0));
  // 4: A = slot of the destination QP.
  prog.push_back(stmt(BPF_LD | BPF_B | BPF_ABS, 5));
  prog.push_back(stmt(BPF_ALU | BPF_RSH | BPF_K, 8 - kSlotBits));
  for (const SteeringEntry& e : entries) {
    prog.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, e.slot, 0, 1));
    prog.push_back(stmt(BPF_RET | BPF_K, e.position));
  }
  prog.push_back(stmt(BPF_RET | BPF_K, kNoPosition));
  return prog;
}

uint32_t run_steering_program(std::span<const sock_filter> prog, std::span<const uint8_t> p) {
  uint32_t a = 0;
  size_t pc = 0;
  while (pc < prog.size()) {
    const sock_filter& f = prog[pc];
    switch (f.code) {
      case BPF_LD | BPF_W | BPF_ABS:
        if (f.k + 4 > p.size()) return 0;
        a = (uint32_t{p[f.k]} << 24) | (uint32_t{p[f.k + 1]} << 16) | (uint32_t{p[f.k + 2]} << 8) |
            p[f.k + 3];
        break;
      case BPF_LD | BPF_B | BPF_ABS:
        if (f.k + 1 > p.size()) return 0;
        a = p[f.k];
        break;
      case BPF_ALU | BPF_RSH | BPF_K:
        a >>= f.k;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K:
        pc += a == f.k ? f.jt : f.jf;
        break;
      case BPF_RET | BPF_A:
        return a;
      case BPF_RET | BPF_K:
        return f.k;
      default:
        return 0;
    }
    ++pc;
  }
  return 0;
}

std::array<uint8_t, kProbeSize> make_probe(uint8_t position, uint64_t token) {
  std::array<uint8_t, kProbeSize> p{};
  std::memcpy(p.data(), kProbeMagic.data(), 4);
  p[4] = position;
  for (int i = 0; i < 8; ++i) p[5 + i] = static_cast<uint8_t>(token >> (56 - 8 * i));
  return p;
}

std::optional<Probe> parse_probe(std::span<const uint8_t> payload) {
  if (payload.size() != kProbeSize || std::memcmp(payload.data(), kProbeMagic.data(), 4) != 0)
    return std::nullopt;
  Probe pr;
  pr.position = payload[4];
  for (int i = 0; i < 8; ++i) pr.token = (pr.token << 8) | payload[5 + i];
  return pr;
}

}  // namespace uroce::net
