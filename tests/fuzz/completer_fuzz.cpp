// Fuzzes the requester/completer side of the engine with invariants. The input is a program:
// WRs posted on an RC QP in RTS (SEND, WRITE, WRITE with immediate, READ, both atomics; every
// one signaled), responses from the peer (ACK, NAK, RNR NAK, READ response First/Middle/Last/
// Only, atomic ACK, with PSNs around the requests the engine really sent, sometimes damaged
// or any opcode), and time steps (timeouts, retries, RNR waits). Invariants:
//   - every completion names a posted, not yet completed WR and a valid status;
//   - the source MR never changes; the destination MR changes only inside the local range
//     of a READ or atomic WR that was outstanding at that step; guard bytes never change;
//   - everything the engine transmits parses and carries a correct ICRC;
//   - at the end (time run out so retries exhaust, then the QP moved to ERROR) every posted
//     WR has completed exactly once.
// Any violation aborts with the input.
#include <map>
#include <utility>
#include <vector>

#include "engine_fuzz_util.hpp"

namespace {

using namespace uroce;
using namespace uroce::fuzz;
using transport::WrOpcode;
using wire::Op;

constexpr const char* kTarget = "completer_fuzz";
enum Region : size_t { kSrc, kDst };
constexpr size_t kSize = 8192;
constexpr uint64_t kRemoteVa = 0x7000'0000;
constexpr uint32_t kRemoteRkey = 0xABCD;

struct Outstanding {
  WrOpcode op = WrOpcode::kSend;
  size_t dst_off = 0;  // READ / atomic: the local range data may land in
  size_t dst_len = 0;
};

class Fixture {
 public:
  Fixture() : arena_({kSize, kSize}), engine_(fuzz_engine_config()) {
    using namespace transport;
    pd_ = engine_.alloc_pd().value();
    cq_ = engine_.create_cq(4096).value();
    for (size_t i = 0; i < kSize; ++i) arena_.region(kSrc)[i] = static_cast<uint8_t>(i * 7);
    src_ = engine_.reg_mr(pd_, arena_.region(kSrc), kSize, kAccessLocalWrite).value();
    dst_ = engine_.reg_mr(pd_, arena_.region(kDst), kSize, kAccessLocalWrite).value();
    QpInitAttr init;
    init.qp_type = QpType::kRc;
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.cap = {32, 4, 4, 4, 64};
    qpn_ = engine_.create_qp(pd_, init).value().qpn;
    if (!bring_up(engine_, qpn_, QpType::kRc, 0x1000, 0x2000)) fail(kTarget, "bring-up");
  }

  void run(FuzzedDataProvider& fdp) {
    before_ = arena_.bytes();
    while (fdp.remaining_bytes() > 0) {
      allowed_ = outstanding_;
      const uint8_t action = fdp.ConsumeIntegral<uint8_t>();
      if (action < 70) {
        post(fdp);
      } else if (action < 210) {
        response(fdp);
      } else {
        now_ += Nanos(fdp.ConsumeIntegralInRange<int64_t>(0, 5'000'000));
        if (engine_.next_deadline() <= now_) engine_.on_timer(now_);
      }
      step();
    }
    // Let every timer run out (retries and RNR retries are finite), then flush the rest.
    for (int i = 0; i < 1000 && engine_.next_deadline() != kNever; ++i) {
      allowed_ = outstanding_;
      now_ = std::max(now_, engine_.next_deadline());
      engine_.on_timer(now_);
      step();
    }
    allowed_ = outstanding_;
    transport::QpAttr a;
    a.qp_state = transport::QpState::kErr;
    if (!engine_.modify_qp(qpn_, a, transport::kQpState).is_ok()) fail(kTarget, "to ERROR");
    step();
    if (!outstanding_.empty()) fail(kTarget, "a posted WR never completed");
  }

 private:
  void step() {
    check_memory();
    drain_tx(engine_, now_, kTarget, &sent_);
    if (sent_.size() > 256) sent_.erase(sent_.begin(), sent_.begin() + 128);
    poll();
    check_memory();
  }

  void post(FuzzedDataProvider& fdp) {
    static constexpr std::array<WrOpcode, 6> kOpsPosted = {
        WrOpcode::kSend,     WrOpcode::kRdmaWrite,       WrOpcode::kRdmaWriteWithImm,
        WrOpcode::kRdmaRead, WrOpcode::kAtomicCmpAndSwp, WrOpcode::kAtomicFetchAndAdd};
    transport::SendWr wr;
    wr.wr_id = next_wr_id_++;
    wr.opcode = kOpsPosted[fdp.ConsumeIntegralInRange<size_t>(0, kOpsPosted.size() - 1)];
    wr.send_flags = transport::kSendSignaled;
    const bool atomic =
        wr.opcode == WrOpcode::kAtomicCmpAndSwp || wr.opcode == WrOpcode::kAtomicFetchAndAdd;
    auto off = fdp.ConsumeIntegralInRange<uint32_t>(0, kSize);
    auto len = atomic ? 8u : fdp.ConsumeIntegralInRange<uint32_t>(0, 3000);
    if (atomic) off &= ~7u;
    off = std::min<uint32_t>(off, kSize - std::min<uint32_t>(len, kSize));
    len = std::min<uint32_t>(len, kSize - off);
    const bool to_dst = wr.opcode == WrOpcode::kRdmaRead || atomic;
    const transport::MrInfo& mr = to_dst ? dst_ : src_;
    const transport::Sge sge{mr.addr + off, len, mr.lkey};
    wr.sg_list = std::span<const transport::Sge>(&sge, 1);
    wr.imm_data = 0x1234;
    wr.rdma.remote_addr = kRemoteVa;
    wr.rdma.rkey = kRemoteRkey;
    wr.atomic.remote_addr = kRemoteVa;
    wr.atomic.compare_add = 1;
    wr.atomic.swap = 2;
    wr.atomic.rkey = kRemoteRkey;
    if (engine_.post_send(now_, qpn_, wr).is_ok()) {
      outstanding_[wr.wr_id] = Outstanding{wr.opcode, to_dst ? off : 0, to_dst ? len : 0};
      allowed_ = outstanding_;
    }
  }

  void response(FuzzedDataProvider& fdp) {
    static constexpr std::array<Op, 6> kResponses = {
        Op::kAcknowledge,      Op::kReadResponseFirst, Op::kReadResponseMiddle,
        Op::kReadResponseLast, Op::kReadResponseOnly,  Op::kAtomicAcknowledge};
    wire::Headers h{};
    const uint8_t op_sel = fdp.ConsumeIntegral<uint8_t>();
    h.bth.opcode = op_sel < 0xF0 ? static_cast<uint8_t>(kResponses[op_sel % kResponses.size()])
                                 : fdp.ConsumeIntegral<uint8_t>();
    h.bth.dqpn = qpn_;
    // A PSN near one the engine really sent (the last packets of a message are likely).
    const uint8_t psn_sel = fdp.ConsumeIntegral<uint8_t>();
    if (!sent_.empty() && psn_sel < 0xF0) {
      const size_t back =
          fdp.ConsumeIntegralInRange<size_t>(0, std::min<size_t>(sent_.size() - 1, 15));
      const int delta = static_cast<int>(psn_sel % 8) - 2;
      h.bth.psn =
          Psn(sent_[sent_.size() - 1 - back].bth.psn.value() + static_cast<uint32_t>(delta));
    } else {
      h.bth.psn = Psn(fdp.ConsumeIntegralInRange<uint32_t>(0, 0xFFFFFF));
    }
    static constexpr std::array<uint8_t, 10> kSyndromes = {
        wire::Aeth::ack(),
        wire::Aeth::ack(0),
        wire::Aeth::nak(wire::NakCode::kPsnSequenceError),
        wire::Aeth::nak(wire::NakCode::kInvalidRequest),
        wire::Aeth::nak(wire::NakCode::kRemoteAccessError),
        wire::Aeth::nak(wire::NakCode::kRemoteOperationalError),
        wire::Aeth::nak(wire::NakCode::kInvalidRdRequest),
        wire::Aeth::rnr_nak(0),
        wire::Aeth::rnr_nak(1),
        0x40};  // reserved type
    const uint8_t syn_sel = fdp.ConsumeIntegral<uint8_t>();
    h.aeth.syndrome =
        syn_sel < 0xF0 ? kSyndromes[syn_sel % kSyndromes.size()] : fdp.ConsumeIntegral<uint8_t>();
    h.aeth.msn = fdp.ConsumeIntegralInRange<uint32_t>(0, 0xFFFFFF);
    h.atomic_ack_eth.orig = fdp.ConsumeIntegral<uint64_t>();
    const size_t len = fdp.ConsumeIntegralInRange<size_t>(0, 1100);
    std::vector<uint8_t> payload(len, fdp.ConsumeIntegral<uint8_t>());
    std::vector<uint8_t> bytes;
    build_wire(fdp, h, payload, bytes);
    engine_.on_packet(now_, peer_meta(), bytes);
  }

  void poll() {
    std::array<transport::Wc, 64> wcs;
    int n = 0;
    while ((n = engine_.poll_cq(cq_, wcs)) > 0) {
      for (int i = 0; i < n; ++i) {
        const transport::Wc& wc = wcs[static_cast<size_t>(i)];
        if (!valid_status(wc.status)) fail(kTarget, "invalid completion status");
        if (wc.qp_num != qpn_) fail(kTarget, "completion for another QP");
        auto it = outstanding_.find(wc.wr_id);
        if (it == outstanding_.end()) {
          fail(kTarget, "completion of a WR never posted, or a second completion");
        }
        if (wc.status == transport::WcStatus::kSuccess && it->second.op == WrOpcode::kRdmaRead &&
            wc.byte_len != it->second.dst_len) {
          fail(kTarget, "successful READ with a byte_len other than its length");
        }
        outstanding_.erase(it);
      }
    }
    if (n < 0) fail(kTarget, "poll_cq failed");
  }

  void check_memory() {
    const std::vector<uint8_t>& now = arena_.bytes();
    if (std::memcmp(now.data(), before_.data(), now.size()) == 0) return;
    for (size_t pos = 0; pos < now.size(); ++pos) {
      if (now[pos] == before_[pos]) continue;
      const int r = arena_.region_of(pos);
      if (r < 0) fail(kTarget, "a guard byte changed");
      if (r == kSrc) fail(kTarget, "the source MR changed");
      const size_t off = pos - arena_.offset(kDst);
      bool inside = false;
      for (const auto& [id, o] : allowed_) {
        if (off >= o.dst_off && off < o.dst_off + o.dst_len) inside = true;
      }
      if (!inside) fail(kTarget, "data landed outside every outstanding READ/atomic range");
    }
    before_ = now;
  }

  Arena arena_;
  transport::Engine engine_;
  transport::PdId pd_{};
  transport::CqId cq_{};
  transport::MrInfo src_{};
  transport::MrInfo dst_{};
  uint32_t qpn_ = 0;
  std::map<uint64_t, Outstanding> outstanding_;
  std::map<uint64_t, Outstanding> allowed_;  // outstanding at the start of the step
  std::vector<wire::Headers> sent_;
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
