// Packet-script fixture: ONE engine with ONE QP, and the test playing its peer by hand.
// The test builds every request or response the peer would send (wire::build_packet +
// wire::write_icrc), feeds it with receive(), and decodes what the engine transmits with
// transmit() (wire::parse_packet, ICRC checked exactly). Time is virtual: the test moves it
// with advance_to(), which fires due timers. Scripts read like
//
//   s.receive(s.request(Op::kSendOnly, 10), payload);        // receive SEND psn=10
//   expect_ack(one(s.transmit()), 10, 1);                     // expect ACK psn=10 msn=1
//
// Counters: expect_qp_counters() checks EVERY counter of the QP: the listed ones equal the
// given values, sent/received packets and bytes equal what the fixture saw cross the wire
// (unless listed), and all others are zero.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "transport/engine.hpp"
#include "uroce/vocab/time.hpp"
#include "wire/icrc.hpp"
#include "wire/packet.hpp"

namespace uroce::script {

using transport::Counter;
using transport::Counters;
using transport::Engine;
using transport::Mtu;
using transport::QpState;
using transport::QpType;
using transport::WcStatus;
using wire::Op;

inline std::array<uint8_t, 16> v4_gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, a, b, c, d};
}

// Transport headers as a peer of the QP would put them on the wire.
inline uint8_t rc(Op op) {
  return wire::make_opcode(wire::Transport::kRc, op);
}
inline uint8_t uc(Op op) {
  return wire::make_opcode(wire::Transport::kUc, op);
}

// One packet the engine transmitted, decoded.
struct TxPacket {
  TimePoint at{};
  wire::Headers hdr;
  std::vector<uint8_t> payload;
  size_t size = 0;  // BTH .. ICRC

  [[nodiscard]] uint8_t opcode() const { return hdr.bth.opcode; }
  [[nodiscard]] uint32_t psn() const { return hdr.bth.psn.value(); }
};

// Counter values a script expects; every counter not named must be 0.
using CounterList = std::initializer_list<std::pair<Counter, uint64_t>>;

inline void expect_counters_exact(const Counters& c,
                                  const std::vector<std::pair<Counter, uint64_t>>& want) {
  for (size_t i = 0; i < transport::kCounterCount; ++i) {
    const auto id = static_cast<Counter>(i);
    uint64_t expected = 0;
    for (const auto& [k, v] : want) {
      if (k == id) expected = v;
    }
    EXPECT_EQ(c[id], expected) << "counter " << transport::counter_name(id);
  }
}

struct ScriptOptions {
  QpType type = QpType::kRc;
  Mtu mtu = Mtu::k1024;
  uint32_t sq_psn = 0x1000;  // the engine's first request PSN
  uint32_t rq_psn = 0x2000;  // the PSN the engine expects from the peer
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 12;
  uint8_t max_rd_atomic = 16;
  uint8_t max_dest_rd_atomic = 16;
  uint32_t qp_access =
      transport::kAccessRemoteWrite | transport::kAccessRemoteRead | transport::kAccessRemoteAtomic;
  uint32_t mr_access = transport::kAccessLocalWrite | transport::kAccessRemoteWrite |
                       transport::kAccessRemoteRead | transport::kAccessRemoteAtomic;
  uint32_t qkey = 0x11111111;
  size_t mem_size = 64 * 1024;
  uint32_t max_send_wr = 64;
  uint32_t max_recv_wr = 64;
  bool sq_sig_all = true;
  // EngineConfig::recovery.adaptive; false: rxe-style timer (the configured timeout only).
  bool adaptive_retrans = true;
  // EngineConfig::recovery.offer (UROCE_RECOVERY): never applied to a QP by the engine.
  transport::Recovery recovery_offer = transport::Recovery::kGoBackN;
};

class ScriptQp {
 public:
  static constexpr uint32_t kPeerQpn = 0x4D2;

  explicit ScriptQp(const ScriptOptions& o = {})
      : opt_(o), engine_(config()), mem_((o.mem_size + 7) / 8, 0) {
    using namespace transport;
    pd_ = engine_.alloc_pd().value();
    send_cq_ = engine_.create_cq(1024).value();
    recv_cq_ = engine_.create_cq(1024).value();
    mr_ = engine_.reg_mr(pd_, mem_.data(), o.mem_size, o.mr_access).value();
    QpInitAttr init;
    init.qp_type = o.type;
    init.send_cq = send_cq_;
    init.recv_cq = recv_cq_;
    init.cap = {o.max_send_wr, o.max_recv_wr, 4, 4, 64};
    init.sq_sig_all = o.sq_sig_all;
    qpn_ = engine_.create_qp(pd_, init).value().qpn;
    bring_up();
  }

  Engine& engine() { return engine_; }
  [[nodiscard]] uint32_t qpn() const { return qpn_; }
  [[nodiscard]] transport::PdId pd() const { return pd_; }
  [[nodiscard]] const transport::MrInfo& mr() const { return mr_; }
  [[nodiscard]] transport::CqId send_cq() const { return send_cq_; }
  [[nodiscard]] transport::CqId recv_cq() const { return recv_cq_; }
  [[nodiscard]] TimePoint now() const { return now_; }
  [[nodiscard]] uint32_t mtu() const { return transport::mtu_bytes(opt_.mtu); }

  // The registered local memory (8-byte aligned at offset 0).
  uint8_t* mem(size_t off = 0) { return reinterpret_cast<uint8_t*>(mem_.data()) + off; }
  [[nodiscard]] uint64_t va(size_t off = 0) const { return mr_.addr + off; }
  [[nodiscard]] transport::Sge sge(size_t off, uint32_t len) const {
    return {mr_.addr + off, len, mr_.lkey};
  }
  uint64_t load64(size_t off) {
    uint64_t v = 0;
    std::memcpy(&v, mem(off), 8);
    return v;
  }
  void store64(size_t off, uint64_t v) { std::memcpy(mem(off), &v, 8); }

  // ---- the peer's packets
  [[nodiscard]] wire::Headers request(Op op, uint32_t psn, bool ackreq = true) const {
    wire::Headers h{};
    h.bth.opcode = opt_.type == QpType::kUc ? uc(op) : rc(op);
    h.bth.dqpn = qpn_;
    h.bth.psn = Psn(psn);
    h.bth.ackreq = ackreq && opt_.type == QpType::kRc;
    return h;
  }
  [[nodiscard]] wire::Headers response(Op op, uint32_t psn, uint8_t syndrome, uint32_t msn) const {
    wire::Headers h{};
    h.bth.opcode = rc(op);
    h.bth.dqpn = qpn_;
    h.bth.psn = Psn(psn);
    h.aeth = {syndrome, msn};
    return h;
  }
  [[nodiscard]] wire::Headers ack(uint32_t psn, uint32_t msn) const {
    return response(Op::kAcknowledge, psn, wire::Aeth::ack(), msn);
  }
  [[nodiscard]] wire::Headers nak(wire::NakCode code, uint32_t psn, uint32_t msn) const {
    return response(Op::kAcknowledge, psn, wire::Aeth::nak(code), msn);
  }
  [[nodiscard]] wire::Headers rnr_nak(uint8_t timer, uint32_t psn, uint32_t msn) const {
    return response(Op::kAcknowledge, psn, wire::Aeth::rnr_nak(timer), msn);
  }
  // RETH-carrying request (WRITE First/Only, READ).
  [[nodiscard]] wire::Headers rdma(Op op, uint32_t psn, uint64_t va, uint32_t rkey, uint32_t len,
                                   bool ackreq = true) const {
    wire::Headers h = request(op, psn, ackreq);
    h.reth = {va, rkey, len};
    return h;
  }
  [[nodiscard]] wire::Headers atomic(Op op, uint32_t psn, uint64_t va, uint32_t rkey,
                                     uint64_t swap_add, uint64_t compare) const {
    wire::Headers h = request(op, psn, true);
    h.atomic_eth = {va, rkey, swap_add, compare};
    return h;
  }

  // Delivers one packet from the peer at now().
  void receive(const wire::Headers& h, std::span<const uint8_t> payload = {}) {
    std::vector<uint8_t> bytes(wire::packet_size(h.bth.opcode, payload.size()));
    ASSERT_NE(bytes.size(), 0u) << "the script built an impossible packet";
    ASSERT_EQ(wire::build_packet(h, payload, bytes), bytes.size());
    transport::PacketMeta meta;
    meta.ip.src = peer_gid_;
    meta.ip.dst = local_gid_;
    meta.ip.sport = 0xC123;
    meta.ip_id_known = true;
    wire::write_icrc(meta.ip, bytes);
    rx_pkts_ += 1;
    rx_bytes_ += bytes.size();
    engine_.on_packet(now_, meta, bytes);
  }
  void receive(const wire::Headers& h, std::initializer_list<uint8_t> payload) {
    const std::vector<uint8_t> p(payload);
    receive(h, std::span<const uint8_t>(p));
  }

  // Everything the engine has to send now, decoded. Each packet must parse, carry a valid
  // ICRC and be addressed to the peer.
  std::vector<TxPacket> transmit() {
    std::vector<TxPacket> out;
    for (int guard = 0; engine_.has_tx() && guard < 100000; ++guard) {
      std::array<uint8_t, 4096 + 128> buf{};
      transport::TxSlot slot;
      slot.buf = buf;
      if (engine_.poll_tx(now_, std::span<transport::TxSlot>(&slot, 1)) == 0) break;
      const std::span<const uint8_t> bytes(buf.data(), slot.len);
      wire::ParsedPacket p;
      EXPECT_EQ(wire::parse_packet(bytes, p), wire::ParseError::kOk);
      EXPECT_EQ(wire::icrc_of(slot.meta.ip, bytes.first(bytes.size() - wire::kIcrcLen)), p.icrc);
      EXPECT_EQ(slot.meta.ip.dst, peer_gid_);
      EXPECT_EQ(slot.meta.ip.dport, wire::kRoceV2Port);
      TxPacket t;
      t.at = now_;
      t.hdr = p.hdr;
      t.payload.assign(p.payload.begin(), p.payload.end());
      t.size = slot.len;
      tx_pkts_ += 1;
      tx_bytes_ += slot.len;
      out.push_back(std::move(t));
    }
    return out;
  }

  // Moves virtual time forward to `t` and fires the timers that are due.
  void advance_to(TimePoint t) {
    now_ = std::max(now_, t);
    if (engine_.next_deadline() <= now_) engine_.on_timer(now_);
  }

  // ---- verbs
  void post_recv(uint64_t wr_id, size_t off, uint32_t len) {
    const transport::Sge s = sge(off, len);
    transport::RecvWr wr;
    wr.wr_id = wr_id;
    wr.sg_list = std::span<const transport::Sge>(&s, 1);
    ASSERT_TRUE(engine_.post_recv(qpn_, wr).is_ok());
  }
  transport::Status post_send(transport::SendWr wr) { return engine_.post_send(now_, qpn_, wr); }
  transport::Status post_send_one(uint64_t wr_id, transport::WrOpcode op, size_t off, uint32_t len,
                                  uint64_t remote_va = 0x7000'0000, uint32_t rkey = 0xABCD) {
    const transport::Sge s = sge(off, len);
    transport::SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.send_flags = transport::kSendSignaled;
    wr.sg_list = std::span<const transport::Sge>(&s, 1);
    wr.rdma.remote_addr = remote_va;
    wr.rdma.rkey = rkey;
    return engine_.post_send(now_, qpn_, wr);
  }
  std::vector<transport::Wc> poll(transport::CqId cq) {
    std::vector<transport::Wc> out(256);
    const int n = engine_.poll_cq(cq, out);
    out.resize(n < 0 ? 0 : static_cast<size_t>(n));
    return out;
  }
  std::vector<transport::Wc> send_wcs() { return poll(send_cq_); }
  std::vector<transport::Wc> recv_wcs() { return poll(recv_cq_); }

  QpState state() {
    transport::QpAttr a;
    transport::QpInitAttr i;
    EXPECT_TRUE(engine_.query_qp(qpn_, a, i).is_ok());
    return a.qp_state;
  }

  // Back through RESET to RTS (a QP that went to ERR is usable again), expecting `rq_psn`
  // from the peer next. Counters keep counting.
  void reconnect(uint32_t rq_psn) {
    transport::QpAttr a;
    a.qp_state = QpState::kReset;
    ASSERT_TRUE(engine_.modify_qp(qpn_, a, transport::kQpState).is_ok());
    opt_.rq_psn = rq_psn;
    bring_up();
  }

  [[nodiscard]] const Counters& qp_counters() const { return *engine_.qp_counters(qpn_); }

  // Checks every per-QP counter (see the file comment).
  void expect_qp_counters(CounterList list) {
    std::vector<std::pair<Counter, uint64_t>> want(list);
    auto add_default = [&](Counter c, uint64_t v) {
      for (const auto& kv : want) {
        if (kv.first == c) return;
      }
      want.emplace_back(c, v);
    };
    add_default(Counter::kSentPkts, tx_pkts_);
    add_default(Counter::kBytesSent, tx_bytes_);
    add_default(Counter::kRcvdPkts, rx_pkts_);
    add_default(Counter::kBytesRcvd, rx_bytes_);
    expect_counters_exact(qp_counters(), want);
  }

 private:
  transport::EngineConfig config() const {
    transport::EngineConfig c;
    c.seed = 42;
    c.limits.max_qp = 8;
    c.active_mtu = Mtu::k4096;
    c.recovery.adaptive = opt_.adaptive_retrans;
    c.recovery.offer = opt_.recovery_offer;
    return c;
  }

  void bring_up() {
    using namespace transport;
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = opt_.qp_access;
    a.qkey = opt_.qkey;
    const bool ud = opt_.type == QpType::kUd;
    ASSERT_TRUE(
        engine_
            .modify_qp(qpn_, a, kQpState | kQpPkeyIndex | kQpPort | (ud ? kQpQkey : kQpAccessFlags))
            .is_ok());
    a.qp_state = QpState::kRtr;
    uint32_t mask = kQpState;
    if (!ud) {
      a.path_mtu = opt_.mtu;
      a.dest_qp_num = kPeerQpn;
      a.rq_psn = opt_.rq_psn;
      a.ah_attr.dgid = peer_gid_;
      a.ah_attr.sgid = local_gid_;
      mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
      if (opt_.type == QpType::kRc) {
        a.max_dest_rd_atomic = opt_.max_dest_rd_atomic;
        a.min_rnr_timer = opt_.min_rnr_timer;
        mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
      }
    }
    ASSERT_TRUE(engine_.modify_qp(qpn_, a, mask).is_ok());
    a.qp_state = QpState::kRts;
    a.sq_psn = opt_.sq_psn;
    mask = kQpState | kQpSqPsn;
    if (opt_.type == QpType::kRc) {
      a.timeout = opt_.timeout;
      a.retry_cnt = opt_.retry_cnt;
      a.rnr_retry = opt_.rnr_retry;
      a.max_rd_atomic = opt_.max_rd_atomic;
      mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
    }
    ASSERT_TRUE(engine_.modify_qp(qpn_, a, mask).is_ok());
  }

  ScriptOptions opt_;
  Engine engine_;
  std::vector<uint64_t> mem_;
  transport::PdId pd_{};
  transport::CqId send_cq_{};
  transport::CqId recv_cq_{};
  transport::MrInfo mr_;
  uint32_t qpn_ = 0;
  std::array<uint8_t, 16> local_gid_ = v4_gid(10, 0, 0, 1);
  std::array<uint8_t, 16> peer_gid_ = v4_gid(10, 0, 0, 2);
  TimePoint now_{0};
  uint64_t rx_pkts_ = 0;
  uint64_t rx_bytes_ = 0;
  uint64_t tx_pkts_ = 0;
  uint64_t tx_bytes_ = 0;
};

// ---- a lean two-engine wire for long randomized runs

// Moves packets between two engines in virtual time like EngineHarness (same fault model:
// per direction a seeded drop / duplicate / reorder probability, fixed latency, delivery in
// (time, sequence) order, timers at their deadlines) but keeps no log and copies each
// packet once, so tens of thousands of operations fit in a test's time budget.
class FastWire {
 public:
  struct Faults {
    double drop = 0.0;
    double duplicate = 0.0;
    double reorder = 0.0;
    Nanos reorder_delay = Nanos(5000);
  };

  FastWire(Engine& a, Engine& b, uint64_t seed, Nanos latency = Nanos(2000))
      : engines_{&a, &b}, rng_(seed), latency_(latency) {
    for (auto& buf : slot_bufs_) buf.resize(4096 + 128);
  }

  Faults& faults(int from) { return faults_[from]; }
  // Sees every packet an engine transmits and what the wire did with it (for debugging a
  // failing seed): from, time, bytes, and 0 delivered / 1 dropped / 2 duplicated / 3 delayed.
  std::function<void(int, TimePoint, std::span<const uint8_t>, int)> trace;
  [[nodiscard]] TimePoint now() const { return now_; }
  [[nodiscard]] uint64_t packets_sent() const { return sent_; }

  // Moves packets and time until `pred` holds, `limit` of virtual time passed, or nothing
  // is left to happen. Returns pred().
  template <typename Pred>
  bool run_until(Pred pred, Nanos limit) {
    const TimePoint end = now_ + limit;
    for (;;) {
      pump_tx();
      if (pred()) return true;
      TimePoint next = kNever;
      if (!wire_.empty()) next = wire_.front().at;
      for (Engine* e : engines_) next = std::min(next, e->next_deadline());
      if (next == kNever) return pred();
      if (next > end) {
        now_ = end;
        return pred();
      }
      now_ = std::max(now_, next);
      while (!wire_.empty() && wire_.front().at <= now_) {
        std::pop_heap(wire_.begin(), wire_.end(), Later{});
        InFlight p = std::move(wire_.back());
        wire_.pop_back();
        engines_[p.to]->on_packet(now_, p.meta, p.bytes);
      }
      for (Engine* e : engines_) {
        if (e->next_deadline() <= now_) e->on_timer(now_);
      }
    }
  }
  bool run_until_idle(Nanos limit) {
    return run_until(
        [&] {
          return wire_.empty() && !engines_[0]->has_tx() && !engines_[1]->has_tx() &&
                 engines_[0]->next_deadline() == kNever && engines_[1]->next_deadline() == kNever;
        },
        limit);
  }

 private:
  struct InFlight {
    TimePoint at;
    uint64_t seq;
    int to;
    std::vector<uint8_t> bytes;
    transport::PacketMeta meta;
  };
  struct Later {
    bool operator()(const InFlight& x, const InFlight& y) const {
      return x.at != y.at ? x.at > y.at : x.seq > y.seq;
    }
  };

  bool chance(double p) {
    return p > 0.0 && std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p;
  }

  void pump_tx() {
    bool any = true;
    while (any) {
      any = false;
      for (int i = 0; i < 2; ++i) {
        while (engines_[i]->has_tx()) {
          std::array<transport::TxSlot, kBurst> slots;
          for (size_t k = 0; k < kBurst; ++k) slots[k].buf = slot_bufs_[k];
          const size_t n = engines_[i]->poll_tx(now_, slots);
          if (n == 0) break;
          any = true;
          for (size_t k = 0; k < n; ++k) transmit(i, slots[k]);
        }
      }
    }
  }

  void transmit(int from, const transport::TxSlot& slot) {
    ++sent_;
    const Faults& f = faults_[from];
    const std::span<const uint8_t> bytes(slot.buf.data(), slot.len);
    if (chance(f.drop)) {
      if (trace) trace(from, now_, bytes, 1);
      return;
    }
    const int copies = chance(f.duplicate) ? 2 : 1;
    Nanos delay = latency_;
    const bool late = chance(f.reorder);
    if (late) delay += f.reorder_delay;
    if (trace) trace(from, now_, bytes, copies == 2 ? 2 : late ? 3 : 0);
    for (int c = 0; c < copies; ++c) {
      wire_.push_back(
          InFlight{now_ + delay + Nanos(c), seq_++, 1 - from,
                   std::vector<uint8_t>(slot.buf.begin(),
                                        slot.buf.begin() + static_cast<ptrdiff_t>(slot.len)),
                   slot.meta});
      std::push_heap(wire_.begin(), wire_.end(), Later{});
    }
  }

  static constexpr size_t kBurst = 16;
  std::array<Engine*, 2> engines_;
  std::mt19937_64 rng_;
  Nanos latency_;
  std::array<Faults, 2> faults_{};
  std::vector<InFlight> wire_;  // a min-heap by (at, seq)
  std::array<std::vector<uint8_t>, kBurst> slot_bufs_;
  TimePoint now_{0};
  uint64_t seq_ = 0;
  uint64_t sent_ = 0;
};

// ---- expectations on transmitted packets

// The single packet of a burst (fails when there is not exactly one).
inline TxPacket one(const std::vector<TxPacket>& burst) {
  EXPECT_EQ(burst.size(), 1u) << "expected exactly one transmitted packet";
  return burst.empty() ? TxPacket{} : burst.front();
}

inline void expect_ack(const TxPacket& p, uint32_t psn, uint32_t msn) {
  EXPECT_EQ(p.opcode(), rc(Op::kAcknowledge));
  EXPECT_EQ(p.hdr.aeth.syndrome, wire::Aeth::ack()) << "ACK with credit code 0x1F";
  EXPECT_EQ(p.psn(), psn);
  EXPECT_EQ(p.hdr.aeth.msn, msn);
  EXPECT_EQ(p.hdr.bth.dqpn, ScriptQp::kPeerQpn);
  EXPECT_FALSE(p.hdr.bth.ackreq);
}

inline void expect_nak(const TxPacket& p, wire::NakCode code, uint32_t psn, uint32_t msn) {
  EXPECT_EQ(p.opcode(), rc(Op::kAcknowledge));
  EXPECT_EQ(p.hdr.aeth.syndrome, wire::Aeth::nak(code));
  EXPECT_EQ(p.psn(), psn);
  EXPECT_EQ(p.hdr.aeth.msn, msn);
}

inline void expect_atomic_ack(const TxPacket& p, uint32_t psn, uint32_t msn, uint64_t orig) {
  EXPECT_EQ(p.opcode(), rc(Op::kAtomicAcknowledge));
  EXPECT_EQ(p.hdr.aeth.syndrome, wire::Aeth::ack());
  EXPECT_EQ(p.psn(), psn);
  EXPECT_EQ(p.hdr.aeth.msn, msn);
  EXPECT_EQ(p.hdr.atomic_ack_eth.orig, orig);
}

inline void expect_read_response(const TxPacket& p, Op op, uint32_t psn,
                                 std::span<const uint8_t> data) {
  EXPECT_EQ(p.opcode(), rc(op));
  EXPECT_EQ(p.psn(), psn);
  EXPECT_TRUE(std::equal(p.payload.begin(), p.payload.end(), data.begin(), data.end()))
      << "READ response payload differs at psn " << psn;
}

}  // namespace uroce::script
