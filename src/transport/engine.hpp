// The sans-IO RoCE v2 transport engine of ONE device (one "NIC"): it owns the PDs, MRs, CQs,
// SRQs and QPs of that device and runs requester, completer and responder for every QP.
//
// It never opens a socket, reads a clock, sleeps or starts a thread. A driver (UDP sockets,
// the simulator, a test harness) moves bytes and time in and out:
//
//   setup   alloc_pd, reg_mr, create_cq, create_qp, modify_qp (RESET->INIT->RTR->RTS), ...
//   post    post_send(now, ...), post_recv, post_srq_recv
//   input   on_packet(now, meta, bytes)   one received RoCE v2 UDP payload (BTH .. ICRC)
//   timers  on_timer(now)                 when now >= next_deadline()
//   output  while (has_tx()) poll_tx(now, slots) and send what it wrote
//   results poll_cq, poll_events
//
// Single-threaded: the device layer serialises every call, except those that may run on any
// thread at any moment, as long as their object is not destroyed under them (as ibverbs
// requires of its callers too): poll_cq (transport/cq.hpp), submit_send
// (transport/send_queue.hpp), submit_recv and post_srq_recv (transport/recv_queue.hpp), the
// queues an application shares with a NIC. Nothing on the data
// path allocates: queues are sized at creation, packets are built straight into the driver's TxSlot
// buffers and payload is copied straight from/into registered memory (or, with
// set_payload_by_reference, left in the source MR for the driver's iovecs).
//
// Memory ownership: registered memory belongs to the application and must stay valid until
// dereg_mr; the engine reads and writes it only through its memory checker, and only for
// the ranges a valid lkey/rkey with the right access covers. SendWr/RecvWr spans are read
// during the post call only (the engine copies the SGE list and any inline data).
//
// ICRC and the IPv4 ID: on send the engine computes the ICRC for an IPv4 ID of 0 with DF
// set (what Linux writes for an unconnected UDP socket with IP_PMTUDISC_DO), so a driver
// must send that way. On receive, a driver that saw the real IP header sets
// PacketMeta::ip_id_known and the ICRC is checked exactly; otherwise it is checked modulo
// the unknown ID/DF bits (wire::verify_icrc_udp). See docs/engine.md.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "transport/congestion.hpp"
#include "uroce/vocab/counters.hpp"
#include "uroce/vocab/time.hpp"
#include "uroce/vocab/verbs_types.hpp"
#include "wire/icrc.hpp"

namespace uroce::transport {

struct EngineConfig {
  uint32_t qpn_base = 0x11;  // first QPN this engine hands out (QP1 is reserved for GSI)
  uint32_t qpn_count = 0;    // QPNs [qpn_base, qpn_base + qpn_count); 0: limits.max_qp
  uint64_t seed = 0;         // seeds the lkey/rkey random bits (no global RNG)
  DeviceLimits limits;
  Mtu active_mtu = Mtu::k1024;  // the port's active MTU: the UD payload limit
  CcConfig cc;                  // congestion control of QPs created with CcAlgorithm::kDefault
  RecoveryConfig recovery;      // adaptive retransmission; the selective-repeat offer
};

// What a driver knows of one packet besides its bytes.
struct PacketMeta {
  wire::IpContext ip;        // src/dst address (IPv4 as ::ffff:a.b.c.d), UDP ports, IPv4 ID/DF
  uint8_t tos = 0;           // IPv4 TOS / IPv6 traffic class: DSCP << 2 | ECN
  uint8_t ttl = 64;          // TTL / hop limit
  bool ip_id_known = false;  // true when ip.ipv4_id/ipv4_df are the received values
};
// finish_packet (packet_out.hpp) and UdpPacketIo::fill_meta set every field one by one, on
// every packet, without zeroing the whole first (docs/performance.md): a field added here
// must be set there too.
static_assert(sizeof(PacketMeta) == 46,
              "a new PacketMeta field: set it in finish_packet and fill_meta");

// A buffer the driver lends to the engine for one outgoing packet.
struct TxSlot {
  std::span<uint8_t> buf;  // in: room for one packet (4096 + 64 bytes always suffice)
  size_t len = 0;          // out: bytes written (BTH .. ICRC)
  PacketMeta meta;         // out: src/dst address, sport, dport = 4791, tos, ttl
  // out: the payload sent by reference (Engine::set_payload_by_reference), or empty. When
  // set, the packet's bytes [payload_at, payload_at + payload.size()) are these, in the
  // source MR, and buf holds the rest in their places (headers before, pad and ICRC after)
  // around a hole of undefined bytes. Valid only until the engine's lock is next released
  // to anyone else: the application may then deregister or reuse the buffer.
  std::span<const uint8_t> payload;
  size_t payload_at = 0;
};

// Writes a slot's referenced payload into `packet` (its bytes, or a copy of its len bytes)
// at payload_at: the packet as it goes on the wire.
inline void join_payload(const TxSlot& slot, std::span<uint8_t> packet) {
  std::copy(slot.payload.begin(), slot.payload.end(),
            packet.begin() + static_cast<std::ptrdiff_t>(slot.payload_at));
}

// Copies a slot's referenced payload into its hole: the packet is then all in buf.
inline void flatten(TxSlot& slot) {
  if (slot.payload.empty()) return;
  join_payload(slot, slot.buf);
  slot.payload = {};
}

// Seals the slot's packet for `ip`: the ICRC over its bytes, its payload where it lies.
inline void write_slot_icrc(const wire::IpContext& ip, const TxSlot& slot) {
  if (slot.payload.empty()) {
    wire::write_icrc(ip, slot.buf.first(slot.len));
  } else {
    wire::write_icrc(ip, slot.buf.first(slot.len), slot.payload_at, slot.payload);
  }
}

class EngineImpl;

class Engine {
 public:
  explicit Engine(const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  [[nodiscard]] const EngineConfig& config() const;

  // RC packets leave with their payload by reference (TxSlot::payload) rather than copied
  // into the slot, where one SGE holds it (a request) or always (a READ response, from the
  // responder's MR), from kPayloadByReferenceMin bytes: for a driver that hands the pieces to the
  // kernel (sendmmsg iovecs) and a caller that sends the slots before releasing the engine's lock.
  // Off by default. RC only: a UC or UD WQE completes when its last packet is built, and the
  // application may then reuse the buffer before the slot is sent.
  void set_payload_by_reference(bool on);

  // ---- Resources (setup path). Errors: EINVAL bad argument or id, ENOMEM limit reached,
  // EBUSY still in use.
  Result<PdId> alloc_pd();
  Status dealloc_pd(PdId pd);  // EBUSY while an MR, SRQ or QP uses it

  // Registers [addr, addr+length) with ibv access flags. REMOTE_WRITE and REMOTE_ATOMIC
  // require LOCAL_WRITE (EINVAL otherwise, as ibv_reg_mr). lkey/rkey = MR index bits plus
  // random bits from the seeded generator.
  Result<MrInfo> reg_mr(PdId pd, void* addr, size_t length, uint32_t access);
  // Same keys, new range, PD and access (ibv_rereg_mr); MemoryTable::rereg_mr.
  Result<MrInfo> rereg_mr(uint32_t lkey, PdId pd, void* addr, size_t length, uint32_t access);
  Status dereg_mr(uint32_t lkey);  // EBUSY while memory windows are bound in it

  // Memory windows: the first R_Key of a new window of `type` in `pd`; dealloc takes any
  // R_Key the window has had. Binding and invalidation are work requests (BIND_MW,
  // LOCAL_INV, SEND_WITH_INV); MemoryTable has the rules.
  Result<uint32_t> alloc_mw(PdId pd, MwType type);
  // The time of the setup call about to be made (modify_qp may flush WRs into completions,
  // which carry the engine's time); data-path calls take their time as an argument.
  void set_time(TimePoint now);
  Status dealloc_mw(uint32_t rkey);

  Result<CqId> create_cq(uint32_t cqe);  // capacity >= cqe
  [[nodiscard]] uint32_t cq_capacity(CqId cq) const;
  // ibv_resize_cq: EINVAL when `cqe` is 0, above max_cqe, or fewer than the completions queued.
  Status resize_cq(CqId cq, uint32_t cqe);
  Status destroy_cq(CqId cq);  // EBUSY while a QP uses it

  Result<SrqId> create_srq(PdId pd, const SrqInitAttr& attr);
  // kSrqLimit arms the limit event (fires once when the WQE count drops below srq_limit,
  // then srq_limit reads 0 again); kSrqMaxWr grows the queue.
  Status modify_srq(SrqId srq, const SrqAttr& attr, uint32_t srq_attr_mask);
  Status query_srq(SrqId srq, SrqAttr& attr) const;
  Status destroy_srq(SrqId srq);  // EBUSY while a QP uses it

  // QP1 is handed out for QpType::kGsi; other types get QPNs from the configured range.
  Result<QpInfo> create_qp(PdId pd, const QpInitAttr& attr);
  // IBTA/rxe transition table (docs/rxe-facts.md §1): EINVAL for an invalid transition or
  // a mask bit neither required nor optional; EOPNOTSUPP for bits outside 0..20.
  Status modify_qp(uint32_t qpn, const QpAttr& attr, uint32_t attr_mask);
  // attr.cc reports the QP's congestion-control state (current rate, target, alpha).
  Status query_qp(uint32_t qpn, QpAttr& attr, QpInitAttr& init_attr) const;
  Status destroy_qp(uint32_t qpn);

  // ---- Data path.
  // One WR. EINVAL: QP below RTS (ERR accepted: completes with WR_FLUSH_ERR), opcode not
  // valid for the QP type, too many SGEs, inline data too long. ENOMEM: send queue full.
  // The engine takes the WQE before the call returns (a WR posted in ERR has its flush
  // completion queued, a ready QP is scheduled): the single-threaded driver's call.
  Status post_send(TimePoint now, uint32_t qpn, const SendWr& wr);
  // post_send from any thread, without serialising with the other calls: the WQE goes into
  // the QP's send queue under that queue's own lock, and the engine takes it at its next
  // poll_tx, or modify_qp / destroy_qp of any QP; has_tx() is true until then. The same
  // synchronous errors as post_send. was_idle (optional): every WR posted to the QP before
  // this one had completed; on UD and UC, whose WRs complete as they leave, also that a
  // poll_cq ran since the QP's previous post. The QP must not be destroyed during the call
  // (ibverbs asks the same of its callers).
  Status submit_send(uint32_t qpn, const SendWr& wr, bool* was_idle = nullptr);
  // EINVAL in RESET or on a QP attached to an SRQ; in ERR the WR completes with flush.
  Status post_recv(uint32_t qpn, const RecvWr& wr);
  // post_recv from any thread, without serialising with the other calls: the WQE goes into
  // the QP's receive queue under that queue's own lock. A QP in ERR queues nothing: the call
  // sets *to_engine and the WR must go to post_recv (serialised), which flushes it. The
  // same synchronous errors otherwise. The QP must not be destroyed during the call.
  Status submit_recv(uint32_t qpn, const RecvWr& wr, bool* to_engine);
  // From any thread too (the SRQ's own lock): an SRQ has no state that needs the engine. The
  // SRQ must not be destroyed during the call.
  Status post_srq_recv(SrqId srq, const RecvWr& wr);
  // Up to out.size() completions, oldest first. Returns the count, or -EINVAL. Needs no
  // serialisation with the other calls (the file comment says what it does need).
  int poll_cq(CqId cq, std::span<Wc> out);
  // Arms one kCqCompletion event for the next completion (solicited_only: the next
  // receive completion of a packet with the SE bit).
  Status req_notify_cq(CqId cq, bool solicited_only);

  // ---- I/O, driven by the driver.
  // One received RoCE v2 UDP payload (BTH .. ICRC). Verifies the ICRC, dispatches by
  // destination QPN, counts every drop.
  void on_packet(TimePoint now, const PacketMeta& meta, std::span<const uint8_t> roce);
  // Fires every timer whose deadline is <= now.
  void on_timer(TimePoint now);
  // The earliest armed deadline; kNever when nothing is armed. O(1).
  [[nodiscard]] TimePoint next_deadline() const;
  // Builds up to slots.size() packets into the slots; returns how many. Packets are produced
  // only when asked: this is the backpressure point. A slot too small for the next packet
  // stops the call (the packet stays pending).
  size_t poll_tx(TimePoint now, std::span<TxSlot> slots);
  // Something is ready to send now.
  [[nodiscard]] bool has_tx() const;

  // CQ notifications, CQ overflow, SRQ limit reached, last WQE reached (SRQ QP in ERR).
  size_t poll_events(std::span<AsyncEvent> out);
  // poll_events would return something.
  [[nodiscard]] bool has_events() const;

  [[nodiscard]] const Counters& counters() const;
  [[nodiscard]] const Counters* qp_counters(uint32_t qpn) const;  // nullptr: no such QP
  // The oldest PSN the RC requester has not had acknowledged (nullopt: no such QP). It moves
  // with every ACK or NAK that proves packets arrived, so it tells slow progress (a lossy
  // path, sparse completions) from none.
  [[nodiscard]] std::optional<Psn> qp_acked_psn(uint32_t qpn) const;

  // Replaces the QP's controller with an external one (non-owning); nullptr goes back to the
  // engine's own (EngineConfig::cc / QpInitAttr::cc). The controller must outlive the QP or
  // be detached first.
  Status set_congestion_control(uint32_t qpn, CongestionControl* cc);

 private:
  std::unique_ptr<EngineImpl> impl_;
};

}  // namespace uroce::transport
