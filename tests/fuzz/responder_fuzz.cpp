// Fuzzes the responder side of the engine with invariants. The input is a program: packets
// from the peer (built from fuzzer choices with a valid ICRC, sometimes damaged or raw) at an
// RC, a UC and a UD QP in RTS, receive posts, time steps and QP resets. The QPs' PD holds a
// read-write MR, a write-only MR, a read-only MR and a receive MR; another PD holds an
// all-rights MR; one region is never registered; guard bytes surround every region. After
// every step:
//   - guard bytes, the read-only MR, the other PD's MR and the unregistered region are
//     unchanged (no peer may write there, whatever it sends);
//   - a SEND changes only receive buffers, a WRITE only the MRs with REMOTE_WRITE, an atomic
//     only the MR with REMOTE_ATOMIC, any other packet nothing;
//   - every receive completion names a posted, not yet completed WR and a valid status;
//     there is no send completion (nothing was posted to send);
//   - everything the engine transmits parses and carries a correct ICRC.
// Any violation aborts with the input.
#include <set>
#include <vector>

#include "engine_fuzz_util.hpp"

namespace {

using namespace uroce;
using namespace uroce::fuzz;
using transport::QpType;
using wire::Op;

constexpr const char* kTarget = "responder_fuzz";

enum Region : size_t { kRw, kWo, kRo, kRecv, kOtherPd, kUnregistered, kRegions };

enum class Kind : uint8_t { kOther, kSend, kWrite, kAtomic, kAtomicWrite };

Kind kind_of(uint8_t opcode) {
  const uint8_t op = opcode & 0x1F;
  if ((opcode & 0xE0) > 0x60) return Kind::kOther;  // not RC/UC/RD/UD: CNP and reserved
  if (op <= 0x05 || op == 0x16 || op == 0x17) return Kind::kSend;
  if (op >= 0x06 && op <= 0x0B) return Kind::kWrite;
  if (op == 0x13 || op == 0x14) return Kind::kAtomic;
  if (op == 0x1D) return Kind::kAtomicWrite;
  return Kind::kOther;
}

// May a packet of this kind change the region?
bool may_change(Kind k, size_t region) {
  switch (k) {
    case Kind::kSend:
      return region == kRecv;
    case Kind::kWrite:
      return region == kRw || region == kWo;
    case Kind::kAtomic:
      return region == kRw;
    case Kind::kAtomicWrite:  // IBA 1.5 ATOMIC WRITE: rxe asks for write (and atomic) rights
      return region == kRw || region == kWo;
    case Kind::kOther:
      return false;
  }
  return false;
}

constexpr std::array<Op, 25> kOps = {
    Op::kSendFirst,        Op::kSendMiddle,        Op::kSendLast,           Op::kSendLastImm,
    Op::kSendOnly,         Op::kSendOnlyImm,       Op::kWriteFirst,         Op::kWriteMiddle,
    Op::kWriteLast,        Op::kWriteLastImm,      Op::kWriteOnly,          Op::kWriteOnlyImm,
    Op::kReadRequest,      Op::kReadResponseFirst, Op::kReadResponseMiddle, Op::kReadResponseLast,
    Op::kReadResponseOnly, Op::kAcknowledge,       Op::kAtomicAcknowledge,  Op::kCompareSwap,
    Op::kFetchAdd,         Op::kSendLastInv,       Op::kSendOnlyInv,        Op::kFlush,
    Op::kAtomicWrite};

struct Qp {
  uint32_t qpn = 0;
  QpType type = QpType::kRc;
  uint32_t next_psn = 0x2000;
  std::set<uint64_t> posted;  // receive WRs not yet completed
};

class Fixture {
 public:
  Fixture() : arena_({8192, 4096, 4096, 8192, 4096, 4096}), engine_(fuzz_engine_config()) {
    using namespace transport;
    pd_ = engine_.alloc_pd().value();
    other_pd_ = engine_.alloc_pd().value();
    cq_ = engine_.create_cq(4096).value();
    const uint32_t all =
        kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    mr_[kRw] = reg(pd_, kRw, all);
    mr_[kWo] = reg(pd_, kWo, kAccessLocalWrite | kAccessRemoteWrite);
    mr_[kRo] = reg(pd_, kRo, kAccessRemoteRead);
    mr_[kRecv] = reg(pd_, kRecv, kAccessLocalWrite);
    mr_[kOtherPd] = reg(other_pd_, kOtherPd, all);
    mr_[kUnregistered] = MrInfo{0x1234, 0x5678, arena_.va(kUnregistered), 4096, 0};
    const std::array<QpType, 3> types = {QpType::kRc, QpType::kUc, QpType::kUd};
    for (size_t i = 0; i < types.size(); ++i) {
      QpInitAttr init;
      init.qp_type = types[i];
      init.send_cq = cq_;
      init.recv_cq = cq_;
      init.cap = {16, 64, 4, 4, 64};
      qps_[i].qpn = engine_.create_qp(pd_, init).value().qpn;
      qps_[i].type = types[i];
      if (!bring_up(engine_, qps_[i].qpn, types[i], 0x1000, 0x2000)) fail(kTarget, "bring-up");
    }
  }

  void run(FuzzedDataProvider& fdp) {
    while (fdp.remaining_bytes() > 0) {
      const uint8_t action = fdp.ConsumeIntegral<uint8_t>();
      Kind kind = Kind::kOther;
      before_ = arena_.bytes();
      if (action < 140) {
        kind = packet(fdp);
      } else if (action < 160) {
        kind = raw_packet(fdp);
      } else if (action < 220) {
        post_recv(fdp);
      } else if (action < 245) {
        now_ += Nanos(fdp.ConsumeIntegralInRange<int64_t>(0, 20'000'000));
        if (engine_.next_deadline() <= now_) engine_.on_timer(now_);
      } else {
        reset(qps_[fdp.ConsumeIntegralInRange<size_t>(0, qps_.size() - 1)]);
      }
      check_memory(kind);
      drain_tx(engine_, now_, kTarget);
      check_memory(kind);  // building responses (READ data) must not write either
      poll();
    }
  }

 private:
  transport::MrInfo reg(transport::PdId pd, size_t region, uint32_t access) {
    auto r = engine_.reg_mr(pd, arena_.region(region), arena_.size(region), access);
    if (!r.is_ok()) fail(kTarget, "reg_mr");
    return r.value();
  }

  uint32_t pick_rkey(FuzzedDataProvider& fdp) {
    const size_t i = fdp.ConsumeIntegralInRange<size_t>(0, kRegions + 1);
    if (i < kRegions) return fdp.ConsumeBool() ? mr_[i].rkey : mr_[i].lkey;
    return fdp.ConsumeIntegral<uint32_t>();
  }
  uint64_t pick_va(FuzzedDataProvider& fdp) {
    const size_t i = fdp.ConsumeIntegralInRange<size_t>(0, kRegions);
    if (i == kRegions) return fdp.ConsumeIntegral<uint64_t>();
    // Around the region: a little before, inside, at and past its end.
    const auto delta = fdp.ConsumeIntegralInRange<int64_t>(-80, 8192 + 80);
    return arena_.va(i) + static_cast<uint64_t>(delta);
  }

  Kind packet(FuzzedDataProvider& fdp) {
    const uint8_t sel = fdp.ConsumeIntegral<uint8_t>();
    Qp* qp = &qps_[sel % qps_.size()];
    wire::Headers h{};
    const uint8_t transport_bits = qp->type == QpType::kRc   ? 0x00
                                   : qp->type == QpType::kUc ? 0x20
                                                             : 0x60;
    const uint8_t op_sel = fdp.ConsumeIntegral<uint8_t>();
    if (op_sel < 0xF0) {
      h.bth.opcode =
          static_cast<uint8_t>(transport_bits | static_cast<uint8_t>(kOps[op_sel % kOps.size()]));
    } else {
      h.bth.opcode = fdp.ConsumeIntegral<uint8_t>();  // any opcode, of any transport
    }
    h.bth.dqpn = sel >= 0xF8 ? fdp.ConsumeIntegralInRange<uint32_t>(0, 0xFFFFFF) : qp->qpn;
    const uint8_t flags = fdp.ConsumeIntegral<uint8_t>();
    h.bth.se = (flags & 1) != 0;
    h.bth.ackreq = (flags & 2) != 0;
    h.bth.migreq = (flags & 4) != 0;
    if ((flags & 0xF0) == 0xF0) h.bth.pkey = fdp.ConsumeIntegral<uint16_t>();
    if ((flags & 0xF8) == 0x08) h.bth.tver = fdp.ConsumeIntegralInRange<uint8_t>(0, 15);
    const auto psn_sel = fdp.ConsumeIntegral<uint8_t>();
    if (psn_sel < 0xE0) {
      const int delta = static_cast<int>(psn_sel % 16) - 8;  // -8 .. +7 around the next PSN
      h.bth.psn = Psn(qp->next_psn + static_cast<uint32_t>(delta));
      if (delta == 0) qp->next_psn = (qp->next_psn + 1) & 0xFFFFFF;
    } else {
      h.bth.psn = Psn(fdp.ConsumeIntegralInRange<uint32_t>(0, 0xFFFFFF));
    }
    h.reth = {pick_va(fdp), pick_rkey(fdp),
              fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange<uint32_t>(0, 4200)
                                : fdp.ConsumeIntegral<uint32_t>()};
    h.atomic_eth = {pick_va(fdp), pick_rkey(fdp), fdp.ConsumeIntegral<uint64_t>(),
                    fdp.ConsumeIntegral<uint64_t>()};
    h.deth = {fdp.ConsumeBool() ? kQkey : fdp.ConsumeIntegral<uint32_t>(), kPeerQpn};
    h.aeth = {fdp.ConsumeIntegral<uint8_t>(), fdp.ConsumeIntegralInRange<uint32_t>(0, 0xFFFFFF)};
    h.immdt = fdp.ConsumeIntegral<uint32_t>();
    h.ieth_rkey = pick_rkey(fdp);  // invalidation attempts name real keys too
    h.feth.bits = fdp.ConsumeIntegral<uint32_t>();
    const size_t len = fdp.ConsumeIntegralInRange<size_t>(0, 1100);
    std::vector<uint8_t> payload(len);
    if (len > 0) payload[0] = fdp.ConsumeIntegral<uint8_t>();
    for (size_t i = 1; i < len; ++i) payload[i] = static_cast<uint8_t>(payload[0] + i);
    std::vector<uint8_t> bytes;
    build_wire(fdp, h, payload, bytes);
    transport::PacketMeta meta = peer_meta();
    if (fdp.ConsumeIntegral<uint8_t>() >= 0xF8) meta.ip.src = v4_gid(9);  // a stranger
    engine_.on_packet(now_, meta, bytes);
    return bytes.empty() ? Kind::kOther : kind_of(bytes[0]);
  }

  // A packet as captured (the seeds hold the interop captures' packets): its destination
  // QPN is pointed at one of ours and the ICRC recomputed, everything else kept.
  Kind raw_packet(FuzzedDataProvider& fdp) {
    Qp& qp = qps_[fdp.ConsumeIntegralInRange<size_t>(0, qps_.size() - 1)];
    const auto len = fdp.ConsumeIntegralInRange<uint16_t>(0, 4200);
    std::vector<uint8_t> bytes = fdp.ConsumeBytes<uint8_t>(len);
    if (bytes.size() >= wire::kBthLen) {
      bytes[5] = static_cast<uint8_t>(qp.qpn >> 16);
      bytes[6] = static_cast<uint8_t>(qp.qpn >> 8);
      bytes[7] = static_cast<uint8_t>(qp.qpn);
    }
    if (bytes.size() >= wire::kBthLen + wire::kIcrcLen) wire::write_icrc(peer_meta().ip, bytes);
    engine_.on_packet(now_, peer_meta(), bytes);
    return bytes.empty() ? Kind::kOther : kind_of(bytes[0]);
  }

  void post_recv(FuzzedDataProvider& fdp) {
    Qp& qp = qps_[fdp.ConsumeIntegralInRange<size_t>(0, qps_.size() - 1)];
    const auto off = fdp.ConsumeIntegralInRange<uint32_t>(0, 8192);
    const auto len = fdp.ConsumeIntegralInRange<uint32_t>(0, 8192 - off);
    const transport::Sge sge{mr_[kRecv].addr + off, len, mr_[kRecv].lkey};
    transport::RecvWr wr;
    wr.wr_id = next_wr_id_++;
    wr.sg_list = std::span<const transport::Sge>(&sge, 1);
    if (engine_.post_recv(qp.qpn, wr).is_ok()) qp.posted.insert(wr.wr_id);
  }

  void reset(Qp& qp) {
    poll();  // completions of a QP in ERR come before its reset discards the rest
    transport::QpAttr a;
    a.qp_state = transport::QpState::kReset;
    if (!engine_.modify_qp(qp.qpn, a, transport::kQpState).is_ok()) fail(kTarget, "to RESET");
    qp.posted.clear();  // RESET drops the queues without completions
    if (!bring_up(engine_, qp.qpn, qp.type, 0x1000, 0x2000)) fail(kTarget, "bring-up again");
    qp.next_psn = 0x2000;
  }

  void poll() {
    std::array<transport::Wc, 64> wcs;
    int n = 0;
    while ((n = engine_.poll_cq(cq_, wcs)) > 0) {
      for (int i = 0; i < n; ++i) {
        const transport::Wc& wc = wcs[static_cast<size_t>(i)];
        if (!valid_status(wc.status)) fail(kTarget, "invalid completion status");
        Qp* owner = nullptr;
        for (Qp& q : qps_) {
          if (q.qpn == wc.qp_num) owner = &q;
        }
        if (owner == nullptr) fail(kTarget, "completion for an unknown QP");
        if (owner->posted.erase(wc.wr_id) != 1) {
          fail(kTarget, "completion of a WR never posted, or a second completion");
        }
      }
    }
    if (n < 0) fail(kTarget, "poll_cq failed");
  }

  void check_memory(Kind kind) {
    const std::vector<uint8_t>& now = arena_.bytes();
    if (std::memcmp(now.data(), before_.data(), now.size()) == 0) return;
    for (size_t pos = 0; pos < now.size(); ++pos) {
      if (now[pos] == before_[pos]) continue;
      const int r = arena_.region_of(pos);
      if (r < 0) fail(kTarget, "a guard byte changed");
      if (!may_change(kind, static_cast<size_t>(r))) {
        std::fprintf(stderr, "region %d changed by a packet of kind %d\n", r,
                     static_cast<int>(kind));
        fail(kTarget, "memory changed without the right");
      }
    }
    before_ = now;
  }

  Arena arena_;
  transport::Engine engine_;
  transport::PdId pd_{};
  transport::PdId other_pd_{};
  transport::CqId cq_{};
  std::array<transport::MrInfo, kRegions> mr_{};
  std::array<Qp, 3> qps_{};
  std::vector<uint8_t> before_;
  TimePoint now_{0};
  uint64_t next_wr_id_ = 1;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  Fixture f;
  f.run(fdp);
  return 0;
}
