// Two transport engines joined by a virtual wire, in virtual time: the fixture every engine
// test uses (and randomized / packet-script tests reuse).
//
//   EngineHarness h({.latency = 2us, .seed = 7});
//   QpPair p = h.connect({.type = QpType::kRc, .mtu = Mtu::k1024});
//   ... post on h.engine(0) / h.engine(1) ...
//   auto wcs = h.wait_wcs(0, p.a.send_cq, 1, 10ms);   // polls until 1 completion or 10 ms
//
// Every packet an engine transmits is recorded in log() (direction, time, bytes, parsed
// headers available through wire::parse_packet) and then passes the direction's faults:
// a seeded drop / duplicate / reorder probability, plus an optional hook that sees the
// packet and decides (pass, drop, duplicate, delay, or rewrite the bytes or the metadata:
// setting meta.tos's ECN bits to 3 is a switch's CE mark). Delivery is in
// (time, sequence) order; timers fire at their deadlines; nothing depends on the real
// clock, so a failing seed replays bit for bit.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "transport/engine.hpp"
#include "uroce/vocab/time.hpp"
#include "wire/packet.hpp"

namespace uroce::test {

using namespace std::chrono_literals;
using transport::Engine;
using transport::EngineConfig;

// RoCE v2 GIDs of the two engines: IPv4-mapped 10.0.0.1 and 10.0.0.2.
inline std::array<uint8_t, 16> ipv4_gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, a, b, c, d};
}

struct CapturedPacket {
  int from = 0;  // engine index that sent it
  TimePoint sent_at{};
  std::vector<uint8_t> bytes;  // BTH .. ICRC
  transport::PacketMeta meta;

  [[nodiscard]] wire::ParsedPacket parse() const {
    wire::ParsedPacket p;
    (void)wire::parse_packet(bytes, p);
    return p;
  }
  [[nodiscard]] uint8_t opcode() const { return bytes.empty() ? 0 : bytes[0]; }
  [[nodiscard]] uint32_t psn() const { return parse().hdr.bth.psn.value(); }
};

// What a hook decides for one packet.
struct HookVerdict {
  enum class Action : uint8_t { kPass, kDrop, kDuplicate };
  Action action = Action::kPass;
  Nanos extra_delay{0};  // added to the latency (reordering)
};

struct LinkFaults {
  double drop = 0.0;       // probability of dropping a packet
  double duplicate = 0.0;  // probability of delivering it twice
  double reorder = 0.0;    // probability of delaying it by reorder_delay
  Nanos reorder_delay = Nanos(5000);
  // Sees every packet after the probabilistic faults passed it; may rewrite the bytes.
  std::function<HookVerdict(CapturedPacket&)> hook;
};

struct PairOptions {
  transport::QpType type = transport::QpType::kRc;
  transport::Mtu mtu = transport::Mtu::k1024;
  std::optional<transport::Mtu> mtu1;  // engine 1's path MTU when it differs (mismatch tests)
  uint32_t psn0 = 0x100;               // first PSN engine 0 sends
  uint32_t psn1 = 0x200;               // first PSN engine 1 sends
  uint8_t timeout = 14;                // 4.096us * 2^14 = 67 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;  // 10 us
  uint8_t max_rd_atomic = 16;
  uint8_t max_dest_rd_atomic = 16;
  uint32_t access = transport::kAccessLocalWrite | transport::kAccessRemoteWrite |
                    transport::kAccessRemoteRead | transport::kAccessRemoteAtomic;
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 256;
  uint32_t max_sge = 4;
  uint32_t max_inline = 128;
  uint32_t qkey = 0x11111111;
  bool sq_sig_all = false;
  bool use_srq = false;
  transport::CcAlgorithm cc = transport::CcAlgorithm::kDefault;  // QpInitAttr::cc of both QPs
  uint8_t traffic_class = 0;  // both AVs' traffic class (DSCP << 2 | ECN)
  // RC: QpAttr::recovery both QPs get at INIT -> RTR (the agreement uroce perf makes);
  // nullopt: the attribute is not given (RoCE v2 go-back-N).
  std::optional<transport::Recovery> recovery;
  size_t buffer_size = 1 << 20;
  uint32_t cqe = 4096;
};

// A work request of `op` on `sges`, signaled unless `flags` say otherwise.
inline transport::SendWr make_wr(transport::WrOpcode op, std::span<const transport::Sge> sges,
                                 uint64_t wr_id, uint32_t flags = transport::kSendSignaled) {
  transport::SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = sges;
  wr.send_flags = flags;
  return wr;
}

// One side of a connected pair: its resources and a registered buffer.
struct Endpoint {
  Engine* engine = nullptr;
  transport::PdId pd{};
  transport::CqId send_cq{};
  transport::CqId recv_cq{};
  std::optional<transport::SrqId> srq;
  uint32_t qpn = 0;
  std::vector<uint8_t> buf;
  transport::MrInfo mr;
  std::array<uint8_t, 16> gid{};

  [[nodiscard]] uint64_t addr(size_t offset = 0) const { return mr.addr + offset; }
  [[nodiscard]] transport::Sge sge(size_t offset, uint32_t length) const {
    return {mr.addr + offset, length, mr.lkey};
  }
};

struct QpPair {
  Endpoint a;  // on engine 0
  Endpoint b;  // on engine 1
};

// A receive WQE of `sges` on `ep`'s QP.
inline transport::Status post_recv(Endpoint& ep, uint64_t wr_id,
                                   std::span<const transport::Sge> sges) {
  transport::RecvWr r;
  r.wr_id = wr_id;
  r.sg_list = sges;
  return ep.engine->post_recv(ep.qpn, r);
}

struct HarnessOptions {
  Nanos latency = Nanos(2000);  // one-way wire latency
  uint64_t seed = 1;            // seeds the fault dice and the engines' key generators
  transport::Mtu active_mtu = transport::Mtu::k4096;
  size_t tx_burst = 16;                // TX slots offered per poll_tx call
  bool ipv6 = false;                   // GIDs 2001:db8::1 / ::2 instead of ::ffff:10.0.0.1 / .2
  transport::CcConfig cc;              // both engines' congestion control (default: none)
  transport::RecoveryConfig recovery;  // both engines' adaptive timer and recovery offer
};

class EngineHarness {
 public:
  using Options = HarnessOptions;

  explicit EngineHarness(Options opt = Options{}) : opt_(opt), rng_(opt.seed) {
    for (int i = 0; i < 2; ++i) {
      EngineConfig cfg;
      cfg.seed = opt.seed * 2 + static_cast<uint64_t>(i) + 1;
      cfg.active_mtu = opt.active_mtu;
      cfg.limits.max_qp = 64;
      cfg.cc = opt.cc;
      cfg.recovery = opt.recovery;
      engines_[i] = std::make_unique<Engine>(cfg);
      gids_[i] = ipv4_gid(10, 0, 0, static_cast<uint8_t>(i + 1));
      if (opt.ipv6) {
        gids_[i] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
                    0,    0,    0,    0,    0, 0, 0, static_cast<uint8_t>(i + 1)};
      }
    }
    slot_bufs_.assign(opt.tx_burst, std::vector<uint8_t>(4096 + 128));
  }

  Engine& engine(int i) { return *engines_[i]; }
  [[nodiscard]] TimePoint now() const { return now_; }
  LinkFaults& faults(int from) { return faults_[from]; }
  [[nodiscard]] const std::array<uint8_t, 16>& gid(int i) const { return gids_[i]; }
  std::vector<CapturedPacket>& log() { return log_; }
  // Packets engine `i` built with their payload by reference.
  [[nodiscard]] uint64_t by_reference(int i) const { return by_reference_[i]; }
  [[nodiscard]] size_t in_flight() const { return wire_.size(); }
  // One counter of QP `qpn` on engine `side` (0 for a QP it does not have).
  [[nodiscard]] uint64_t qp_counter(int side, uint32_t qpn, transport::Counter c) {
    const transport::Counters* k = engine(side).qp_counters(qpn);
    return k == nullptr ? 0 : (*k)[c];
  }

  // Creates PD, CQs, a buffer MR and a QP on each engine and brings both QPs to RTS
  // (UD: RTS with Q_Key; RC/UC: connected to each other).
  QpPair connect(const PairOptions& o) {
    QpPair p;
    setup_endpoint(0, o, p.a);
    setup_endpoint(1, o, p.b);
    bring_up(0, o, p.a, p.b, o.psn1, o.psn0);
    bring_up(1, o, p.b, p.a, o.psn0, o.psn1);
    return p;
  }

  // Polls everything off a CQ.
  std::vector<transport::Wc> poll(int i, transport::CqId cq, size_t max = 256) {
    std::vector<transport::Wc> out(max);
    const int n = engine(i).poll_cq(cq, out);
    out.resize(n < 0 ? 0 : static_cast<size_t>(n));
    return out;
  }

  // Runs until `n` completions were polled from the CQ (or `limit` passed); returns them.
  std::vector<transport::Wc> wait_wcs(int i, transport::CqId cq, size_t n, Nanos limit) {
    std::vector<transport::Wc> got;
    run_until(
        [&] {
          std::array<transport::Wc, 64> buf;
          int k = 0;
          while ((k = engine(i).poll_cq(cq, buf)) > 0)
            got.insert(got.end(), buf.begin(), buf.begin() + k);
          return got.size() >= n;
        },
        limit);
    return got;
  }

  // Moves packets and time until `pred` holds (true) or `limit` of virtual time passed or
  // nothing is left to happen (false unless pred holds).
  bool run_until(const std::function<bool()>& pred, Nanos limit) {
    const TimePoint end = now_ + limit;
    for (;;) {
      pump_tx();
      if (pred()) return true;
      TimePoint next = kNever;
      if (!wire_.empty()) next = wire_.top().at;
      for (auto& e : engines_) next = std::min(next, e->next_deadline());
      if (next == kNever) return pred();
      if (next > end) {
        now_ = end;
        return pred();
      }
      now_ = std::max(now_, next);
      deliver_due();
      for (auto& e : engines_) {
        if (e->next_deadline() <= now_) e->on_timer(now_);
      }
    }
  }
  void run_for(Nanos d) {
    run_until([] { return false; }, d);
  }
  // Runs until nothing is in flight, no TX pending and no timer armed (or limit).
  bool run_until_idle(Nanos limit) {
    return run_until(
        [&] {
          return wire_.empty() && !engines_[0]->has_tx() && !engines_[1]->has_tx() &&
                 engines_[0]->next_deadline() == kNever && engines_[1]->next_deadline() == kNever;
        },
        limit);
  }

  // Injects raw bytes as if engine `from` had sent them (for packet scripts).
  void inject(int from, std::vector<uint8_t> bytes, const transport::PacketMeta& meta,
              Nanos delay = Nanos(0)) {
    wire_.push(InFlight{now_ + delay, seq_++, 1 - from, std::move(bytes), meta});
  }

 private:
  struct InFlight {
    TimePoint at;
    uint64_t seq;
    int to;
    std::vector<uint8_t> bytes;
    transport::PacketMeta meta;
    bool operator>(const InFlight& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  bool chance(double p) {
    if (p <= 0.0) return false;
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p;
  }

  void setup_endpoint(int i, const PairOptions& o, Endpoint& ep) {
    using namespace transport;
    Engine& e = engine(i);
    ep.engine = &e;
    ep.gid = gids_[i];
    ep.pd = e.alloc_pd().value();
    ep.send_cq = e.create_cq(o.cqe).value();
    ep.recv_cq = e.create_cq(o.cqe).value();
    ep.buf.assign(o.buffer_size, 0);
    ep.mr = e.reg_mr(ep.pd, ep.buf.data(), ep.buf.size(), o.access | kAccessLocalWrite).value();
    QpInitAttr init;
    init.qp_type = o.type;
    init.send_cq = ep.send_cq;
    init.recv_cq = ep.recv_cq;
    init.cap = {o.max_send_wr, o.max_recv_wr, o.max_sge, o.max_sge, o.max_inline};
    init.sq_sig_all = o.sq_sig_all;
    init.cc = o.cc;
    if (o.use_srq) {
      ep.srq = e.create_srq(ep.pd, {o.max_recv_wr, o.max_sge, 0}).value();
      init.srq = ep.srq;
    }
    ep.qpn = e.create_qp(ep.pd, init).value().qpn;
  }

  void bring_up(int i, const PairOptions& o, Endpoint& self, const Endpoint& peer, uint32_t rq_psn,
                uint32_t sq_psn) {
    using namespace transport;
    Engine& e = engine(i);
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qkey = o.qkey;
    a.qp_access_flags = o.access;
    const bool ud = o.type == QpType::kUd;
    uint32_t mask = kQpState | kQpPkeyIndex | kQpPort | (ud ? kQpQkey : kQpAccessFlags);
    expect_ok(e.modify_qp(self.qpn, a, mask));
    a.qp_state = QpState::kRtr;
    mask = kQpState;
    if (!ud) {
      a.path_mtu = (i == 1 && o.mtu1) ? *o.mtu1 : o.mtu;
      a.dest_qp_num = peer.qpn;
      a.rq_psn = rq_psn;
      a.ah_attr.dgid = peer.gid;
      a.ah_attr.sgid = self.gid;
      a.ah_attr.is_global = true;
      a.ah_attr.traffic_class = o.traffic_class;
      a.ah_attr.port_num = 1;
      mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
      if (o.type == QpType::kRc) {
        a.max_dest_rd_atomic = o.max_dest_rd_atomic;
        a.min_rnr_timer = o.min_rnr_timer;
        mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
        if (o.recovery) {
          a.recovery = *o.recovery;
          mask |= kQpUroceRecovery;
        }
      }
    }
    expect_ok(e.modify_qp(self.qpn, a, mask));
    a.qp_state = QpState::kRts;
    a.sq_psn = sq_psn;
    mask = kQpState | kQpSqPsn;
    if (o.type == QpType::kRc) {
      a.timeout = o.timeout;
      a.retry_cnt = o.retry_cnt;
      a.rnr_retry = o.rnr_retry;
      a.max_rd_atomic = o.max_rd_atomic;
      mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
    }
    expect_ok(e.modify_qp(self.qpn, a, mask));
  }

  static void expect_ok(const transport::Status& s) {
    if (!s.is_ok()) throw std::runtime_error(std::string("harness setup: ") + s.message());
  }

  void pump_tx() {
    bool any = true;
    while (any) {
      any = false;
      for (int i = 0; i < 2; ++i) {
        Engine& e = engine(i);
        while (e.has_tx()) {
          std::vector<transport::TxSlot> slots(slot_bufs_.size());
          for (size_t k = 0; k < slots.size(); ++k) slots[k].buf = slot_bufs_[k];
          const size_t n = e.poll_tx(now_, slots);
          if (n == 0) break;
          any = true;
          for (size_t k = 0; k < n; ++k) {
            // A payload by reference (Engine::set_payload_by_reference) joins its packet
            // here, as the driver's iovecs join it on a socket.
            if (!slots[k].payload.empty()) {
              ++by_reference_[i];
              transport::flatten(slots[k]);
            }
            transmit(i, slots[k]);
          }
        }
      }
    }
  }

  void transmit(int from, const transport::TxSlot& slot) {
    CapturedPacket pkt;
    pkt.from = from;
    pkt.sent_at = now_;
    pkt.bytes.assign(slot.buf.begin(), slot.buf.begin() + static_cast<ptrdiff_t>(slot.len));
    pkt.meta = slot.meta;
    log_.push_back(pkt);
    LinkFaults& f = faults_[from];
    if (chance(f.drop)) return;
    int copies = chance(f.duplicate) ? 2 : 1;
    Nanos delay = opt_.latency;
    if (chance(f.reorder)) delay += f.reorder_delay;
    if (f.hook) {
      const HookVerdict v = f.hook(pkt);
      if (v.action == HookVerdict::Action::kDrop) return;
      if (v.action == HookVerdict::Action::kDuplicate) copies = 2;
      delay += v.extra_delay;
    }
    for (int c = 0; c < copies; ++c) {
      wire_.push(InFlight{now_ + delay + Nanos(c), seq_++, 1 - from, pkt.bytes, pkt.meta});
    }
  }

  void deliver_due() {
    while (!wire_.empty() && wire_.top().at <= now_) {
      InFlight p = wire_.top();
      wire_.pop();
      engine(p.to).on_packet(now_, p.meta, p.bytes);
    }
  }

  Options opt_;
  std::mt19937_64 rng_;
  std::array<std::unique_ptr<Engine>, 2> engines_;
  std::array<std::array<uint8_t, 16>, 2> gids_{};
  std::array<LinkFaults, 2> faults_;
  std::priority_queue<InFlight, std::vector<InFlight>, std::greater<>> wire_;
  std::vector<CapturedPacket> log_;
  std::array<uint64_t, 2> by_reference_{};
  std::vector<std::vector<uint8_t>> slot_bufs_;
  TimePoint now_{0};
  uint64_t seq_ = 0;
};

}  // namespace uroce::test
