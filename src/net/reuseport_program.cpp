#include "net/reuseport_program.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace uroce::net {
namespace {

constexpr uint32_t kMagicWord = (uint32_t{kProbeMagic[0]} << 24) |
                                (uint32_t{kProbeMagic[1]} << 16) | (uint32_t{kProbeMagic[2]} << 8) |
                                kProbeMagic[3];
constexpr uint32_t kNoPosition = 0xFFFFFFFF;

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

Qp1Target qp1_route_of(std::span<const uint8_t> p) {
  Qp1Target t;
  auto dqpn = dest_qpn_of(p);
  if (!dqpn || *dqpn != kGsiQpn) return t;
  t.route = Qp1Route::kDefault;
  if (p.size() < kCmSteerMinLength || p[kCmClassOffset] != kCmClass) return t;
  auto be = [&](uint32_t off, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | p[off + static_cast<uint32_t>(i)];
    return v;
  };
  const auto attr = static_cast<uint16_t>(be(kCmAttrOffset, 2));
  if (attr == 0x0010 || attr == 0x0017) {  // REQ, SIDR_REQ
    t.route = Qp1Route::kService;
    t.service_id = be(kCmServiceIdOffset, 8);
  } else if (attr == 0x0018) {  // SIDR_REP: Request ID
    t.route = Qp1Route::kSlot;
    t.slot = p[kCmRequestIdOffset] >> (8 - kSlotBits);
  } else if (attr >= 0x0011 && attr <= 0x0016) {  // MRA, REJ, REP, RTU, DREQ, DREP
    t.route = Qp1Route::kSlot;
    t.slot = p[kCmRemoteCommIdOffset] >> (8 - kSlotBits);
  }
  return t;
}

uint32_t cm_default_position(std::span<const SteeringEntry> entries) {
  const SteeringEntry* best = nullptr;
  const SteeringEntry* slot0 = nullptr;
  for (const SteeringEntry& e : entries) {
    if (e.cm_capable && (best == nullptr || e.slot < best->slot)) best = &e;
    if (e.slot == 0 && slot0 == nullptr) slot0 = &e;
  }
  if (best != nullptr) return best->position;
  if (slot0 != nullptr) return slot0->position;
  return kNoPosition;
}

namespace {

// A classic-BPF assembler with forward labels. Conditional offsets are 8 bits: the program's
// layout keeps every one short (see build_steering_program), and resolve() checks it.
class Assembler {
 public:
  using Label = size_t;
  Label label() {
    at_.push_back(kUnset);
    return at_.size() - 1;
  }
  void bind(Label l) { at_[l] = prog_.size(); }
  void stmt(uint16_t code, uint32_t k) { prog_.push_back(sock_filter{code, 0, 0, k}); }
  // Conditional jump; nullopt: fall through (offset 0).
  void jump(uint16_t code, uint32_t k, std::optional<Label> jt, std::optional<Label> jf) {
    if (jt) fixups_.push_back({prog_.size(), *jt, Field::kJt});
    if (jf) fixups_.push_back({prog_.size(), *jf, Field::kJf});
    prog_.push_back(sock_filter{code, 0, 0, k});
  }
  // Conditional jump by literal (short) offsets.
  void skip(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) {
    prog_.push_back(sock_filter{code, jt, jf, k});
  }
  void always(Label l) {
    fixups_.push_back({prog_.size(), l, Field::kK});
    prog_.push_back(sock_filter{BPF_JMP | BPF_JA, 0, 0, 0});
  }
  std::vector<sock_filter> resolve() {
    for (const Fixup& f : fixups_) {
      const size_t target = at_[f.label];
      // Forward only, and short: a layout bug, never input-dependent (the builder caps its
      // input), so fail loudly rather than attach a program that jumps elsewhere.
      if (target == kUnset || target <= f.insn) std::abort();
      const size_t off = target - f.insn - 1;
      if (f.field == Field::kK) {
        prog_[f.insn].k = static_cast<uint32_t>(off);
      } else {
        if (off > 255) std::abort();
        (f.field == Field::kJt ? prog_[f.insn].jt : prog_[f.insn].jf) = static_cast<uint8_t>(off);
      }
    }
    return std::move(prog_);
  }

 private:
  static constexpr size_t kUnset = ~size_t{0};
  enum class Field : uint8_t { kJt, kJf, kK };
  struct Fixup {
    size_t insn;
    Label label;
    Field field;
  };
  std::vector<sock_filter> prog_;
  std::vector<size_t> at_;
  std::vector<Fixup> fixups_;
};

constexpr uint16_t kLdW = BPF_LD | BPF_W | BPF_ABS;
constexpr uint16_t kLdH = BPF_LD | BPF_H | BPF_ABS;
constexpr uint16_t kLdB = BPF_LD | BPF_B | BPF_ABS;
constexpr uint16_t kLdLen = BPF_LD | BPF_W | BPF_LEN;
constexpr uint16_t kJeq = BPF_JMP | BPF_JEQ | BPF_K;
constexpr uint16_t kJgt = BPF_JMP | BPF_JGT | BPF_K;
constexpr uint16_t kJge = BPF_JMP | BPF_JGE | BPF_K;
constexpr uint16_t kRsh = BPF_ALU | BPF_RSH | BPF_K;
constexpr uint16_t kRetK = BPF_RET | BPF_K;
// Listeners compared after one load of a high word: the skip over them is 1 + 2 * run.
constexpr size_t kListenersPerRun = 120;

}  // namespace

std::vector<sock_filter> build_steering_program(std::span<const SteeringEntry> all_entries,
                                                std::span<const CmListenerEntry> all_listeners) {
  // One entry per slot (the first), so the slot tables are at most kSlotCount pairs long.
  std::vector<SteeringEntry> entries;
  std::array<bool, kSlotCount> seen{};
  for (const SteeringEntry& e : all_entries) {
    if (e.slot >= kSlotCount || seen[e.slot]) continue;
    seen[e.slot] = true;
    entries.push_back(e);
  }
  std::vector<CmListenerEntry> listeners;
  for (const CmListenerEntry& l : all_listeners) {
    if (listeners.size() >= kMaxCmListeners) break;
    bool dup = false;
    for (const CmListenerEntry& o : listeners) dup |= o.service_id == l.service_id;
    if (!dup) listeners.push_back(l);
  }
  const uint32_t cm_default = cm_default_position(entries);

  Assembler a;
  const auto data = a.label();
  const auto qp1 = a.label();
  const auto sidr_rep = a.label();
  const auto by_slot = a.label();
  const auto to_default = a.label();
  const auto by_service = a.label();
  // 0: A = payload[0..3] (network order); a probe goes to byte 4's position.
  a.stmt(kLdW, 0);
  a.jump(kJeq, kMagicWord, std::nullopt, data);
  a.stmt(kLdB, 4);
  a.stmt(BPF_RET | BPF_A, 0);
  // 4: destination QPN 1 (bytes 5..7 = 00 00 01) takes the QP1 rule.
  a.bind(data);
  a.stmt(kLdB, 5);
  const auto slot_rule = a.label();
  a.jump(kJeq, 0, std::nullopt, slot_rule);
  a.stmt(kLdH, 6);
  a.jump(kJeq, kGsiQpn, qp1, std::nullopt);
  // Data: A = slot of the destination QP -> position.
  a.bind(slot_rule);
  a.stmt(kLdB, 5);
  a.stmt(kRsh, 8 - kSlotBits);
  for (const SteeringEntry& e : entries) {
    a.skip(kJeq, e.slot, 0, 1);
    a.stmt(kRetK, e.position);
  }
  a.stmt(kRetK, kNoPosition);
  // QP1: a CM MAD long enough for every field read here, else the CM default.
  a.bind(qp1);
  a.stmt(kLdLen, 0);
  a.jump(kJge, kCmSteerMinLength, std::nullopt, to_default);
  a.stmt(kLdB, kCmClassOffset);
  a.jump(kJeq, kCmClass, std::nullopt, to_default);
  a.stmt(kLdH, kCmAttrOffset);
  a.jump(kJeq, 0x0010, by_service, std::nullopt);  // REQ
  a.jump(kJeq, 0x0017, by_service, std::nullopt);  // SIDR_REQ
  a.jump(kJeq, 0x0018, sidr_rep, std::nullopt);    // SIDR_REP
  a.jump(kJgt, 0x0016, to_default, std::nullopt);  // LAP, APR, ...
  a.jump(kJge, 0x0011, std::nullopt, to_default);  // ClassPortInfo, ...
  a.stmt(kLdB, kCmRemoteCommIdOffset);             // MRA, REJ, REP, RTU, DREQ, DREP
  a.always(by_slot);
  a.bind(sidr_rep);
  a.stmt(kLdB, kCmRequestIdOffset);
  a.bind(by_slot);
  a.stmt(kRsh, 8 - kSlotBits);
  for (const SteeringEntry& e : entries) {
    a.skip(kJeq, e.slot, 0, 1);
    a.stmt(kRetK, e.position);
  }
  a.bind(to_default);  // also an ID of a slot nobody owns
  a.stmt(kRetK, cm_default);
  // REQ / SIDR_REQ: a 64-bit compare per listener, the high word once per run of listeners
  // that share it (the RDMA IP CM Service's are all 0): per listener only `jeq lo; ret`, which
  // the kernel's eBPF translation keeps at 3 instructions (the attached program must fit
  // net.core.optmem_max: by default 20 KiB on older kernels, 128 KiB on newer ones), and
  // every jump stays within its run.
  a.bind(by_service);
  std::stable_sort(listeners.begin(), listeners.end(), [](const auto& x, const auto& y) {
    return (x.service_id >> 32) < (y.service_id >> 32);
  });
  for (size_t i = 0; i < listeners.size();) {
    const uint32_t high = static_cast<uint32_t>(listeners[i].service_id >> 32);
    size_t run = 0;
    while (i + run < listeners.size() && run < kListenersPerRun &&
           static_cast<uint32_t>(listeners[i + run].service_id >> 32) == high) {
      ++run;
    }
    a.stmt(kLdW, kCmServiceIdOffset);
    a.skip(kJeq, high, 0, static_cast<uint8_t>(1 + 2 * run));
    a.stmt(kLdW, kCmServiceIdOffset + 4);
    for (size_t k = 0; k < run; ++k) {
      a.skip(kJeq, static_cast<uint32_t>(listeners[i + k].service_id), 0, 1);
      a.stmt(kRetK, listeners[i + k].position);
    }
    i += run;
  }
  a.stmt(kRetK, cm_default);
  return a.resolve();
}

uint32_t run_steering_program(std::span<const sock_filter> prog, std::span<const uint8_t> p) {
  uint32_t a = 0;
  uint32_t x = 0;
  size_t pc = 0;
  // Absolute and indirect loads are big-endian; beyond the payload the kernel ends with 0.
  auto load = [&](uint64_t off, uint32_t bytes, uint32_t& out) {
    if (off + bytes > p.size()) return false;
    out = 0;
    for (uint32_t i = 0; i < bytes; ++i) out = (out << 8) | p[off + i];
    return true;
  };
  while (pc < prog.size()) {
    const sock_filter& f = prog[pc];
    const uint32_t src = BPF_SRC(f.code) == BPF_X ? x : f.k;
    switch (BPF_CLASS(f.code)) {
      case BPF_LD: {
        const uint32_t size = BPF_SIZE(f.code) == BPF_W ? 4 : BPF_SIZE(f.code) == BPF_H ? 2 : 1;
        switch (BPF_MODE(f.code)) {
          case BPF_ABS:
            if (!load(f.k, size, a)) return 0;
            break;
          case BPF_IND:
            if (!load(uint64_t{x} + f.k, size, a)) return 0;
            break;
          case BPF_LEN:
            a = static_cast<uint32_t>(p.size());
            break;
          case BPF_IMM:
            a = f.k;
            break;
          default:
            return 0;
        }
        break;
      }
      case BPF_LDX:
        if (BPF_MODE(f.code) == BPF_IMM) {
          x = f.k;
        } else if (BPF_MODE(f.code) == BPF_LEN) {
          x = static_cast<uint32_t>(p.size());
        } else {
          return 0;
        }
        break;
      case BPF_ALU:
        switch (BPF_OP(f.code)) {
          case BPF_ADD:
            a += src;
            break;
          case BPF_SUB:
            a -= src;
            break;
          case BPF_AND:
            a &= src;
            break;
          case BPF_OR:
            a |= src;
            break;
          case BPF_LSH:
            a = src >= 32 ? 0 : a << src;
            break;
          case BPF_RSH:
            a = src >= 32 ? 0 : a >> src;
            break;
          default:
            return 0;
        }
        break;
      case BPF_JMP: {
        bool taken = false;
        switch (BPF_OP(f.code)) {
          case BPF_JA:
            pc += size_t{f.k} + 1;
            continue;
          case BPF_JEQ:
            taken = a == src;
            break;
          case BPF_JGT:
            taken = a > src;
            break;
          case BPF_JGE:
            taken = a >= src;
            break;
          case BPF_JSET:
            taken = (a & src) != 0;
            break;
          default:
            return 0;
        }
        pc += taken ? f.jt : f.jf;
        break;
      }
      case BPF_RET:
        return BPF_RVAL(f.code) == BPF_A ? a : f.k;
      case BPF_MISC:
        if (BPF_MISCOP(f.code) == BPF_TAX) {
          x = a;
        } else {
          a = x;
        }
        break;
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
