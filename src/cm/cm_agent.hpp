// The CM's connection state machine (IBA 12.9; the states and replies of Linux's cm.c), sans
// IO: the owner feeds it received MADs, timer ticks and the application's requests, and
// drains the MADs to send and the events to report. No sockets, clocks or threads: time comes
// in as arguments, so it runs the same in tests (virtual time) and in a device.
//
//   active:  connect -> REQ_SENT (-MRA-> MRA_REQ_RCVD) -REP-> REP_RCVD -establish()-> ESTABLISHED
//   passive: REQ -> REQ_RCVD -accept()-> REP_SENT -RTU or notify_established()-> ESTABLISHED
//   either:  ESTABLISHED -disconnect()-> DREQ_SENT -DREP-> TIMEWAIT -> gone
//            ESTABLISHED -DREQ-> DREQ_RCVD -disconnect()-> (DREP) TIMEWAIT -> gone
//
// REQ, REP and DREQ are resent every period until answered, up to their retry count; REQ/REP
// retries running out report kUnreachable, DREQ's kDisconnected with ETIMEDOUT. SIDR (UD
// service resolution): sidr_request -> SIDR_REQ_SENT -SIDR_REP-> done; a SIDR_REQ for a
// listener -> SIDR_REQ_RCVD -sidr_reply()-> done. docs/cm.md has the rules and their sources.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <unordered_map>
#include <variant>

#include "cm/cm_messages.hpp"
#include "uroce/vocab/time.hpp"
#include "uroce/vocab/verbs_types.hpp"

namespace uroce::cm {

using CmId = uint32_t;  // our Local Communication ID of the connection
using transport::Status;

// 4.096 us * 2^x, rounded as Linux does (cm_convert_to_ms: 1 << max(x - 8, 0) ms), so timers
// match a kernel peer's.
[[nodiscard]] Nanos cm_timeout(uint8_t x);
// The QP's ACK timeout from the CA's ACK delay and the packet life time (cm.c cm_ack_timeout).
[[nodiscard]] uint8_t cm_ack_timeout(uint8_t ca_ack_delay, uint8_t packet_life_time);

inline constexpr uint32_t kCmIdSlotShift = 26;  // the top 6 bits name the owning process

struct CmAgentConfig {
  uint64_t ca_guid = 0;             // the device's node GUID: stable, unique
  uint32_t slot = 0;                // 0..63: the top 6 bits of every Local Comm ID
  uint32_t id_seed = 0;             // low bits' start, so a restart does not reuse IDs
  uint8_t packet_life_time = 16;    // CMA_IBOE_PACKET_LIFETIME
  uint8_t local_ca_ack_delay = 15;  // rxe's
};

enum class CmState : uint8_t {
  kIdle,
  kReqSent,
  kMraReqRcvd,
  kRepRcvd,
  kReqRcvd,
  kRepSent,
  kEstablished,
  kDreqSent,
  kDreqRcvd,
  kTimewait,
  kSidrReqSent,  // SIDR: waiting for the SIDR_REP
  kSidrReqRcvd,  // SIDR: the application has the request
};
[[nodiscard]] const char* cm_state_name(CmState s);

enum class CmEventType : uint8_t {
  kReqReceived,      // passive: a new request for a listener (message: the Req)
  kRepReceived,      // active: the Rep; move the QP to RTR/RTS, then establish()
  kEstablished,      // passive: RTU received (or notify_established)
  kRejected,         // REJ received (reason, message: the Rej); the connection is gone
  kUnreachable,      // REQ or REP never answered (status ETIMEDOUT); the connection is gone
  kDisconnected,     // DREQ received, or our DREQ answered (status 0) or never (ETIMEDOUT)
  kTimewaitExit,     // time-wait over: the connection is gone
  kSidrReqReceived,  // passive: a SIDR_REQ for a listener (message: the SidrReq); sidr_reply()
  kSidrRepReceived,  // active: the SIDR_REP (message: the SidrRep); the request is gone
};

using CmEventMessage = std::variant<std::monostate, Req, Rep, Rej, SidrReq, SidrRep>;

struct CmEvent {
  CmEventType type = CmEventType::kReqReceived;
  CmId id = 0;
  uint64_t listener = 0;  // kReqReceived: the token given to listen()
  Gid peer{};
  uint16_t reason = 0;  // kRejected
  int status = 0;       // 0 or ETIMEDOUT
  CmEventMessage message;
};

struct OutMad {
  Gid to{};
  std::array<uint8_t, kMadSize> bytes{};
};

struct CmCounters {
  uint64_t rx = 0;                    // MADs taken
  uint64_t tx = 0;                    // MADs queued for sending, resends included
  uint64_t resent = 0;                // REQ/REP/DREQ resends after a timeout
  uint64_t rej_sent = 0;              // REJs we sent (no listener, stale, consumer)
  uint64_t unmatched = 0;             // replies for no connection of ours (dropped or answered)
  std::array<uint64_t, 7> dropped{};  // by MadError
};

class CmAgent {
 public:
  explicit CmAgent(const CmAgentConfig& config);

  // REQs for `service_id` become kReqReceived events carrying `token`. EADDRINUSE when taken.
  Status listen(uint64_t service_id, uint64_t token);
  void unlisten(uint64_t service_id);

  // Sends a REQ to `peer`; `req`'s Local Comm ID and CA GUID are filled in. req.local_qpn is
  // the QP a DREQ must name; max_cm_retries and the response timeouts drive the resends.
  CmId connect(TimePoint now, const Gid& peer, Req req);
  // Passive, in REQ_RCVD: sends `rep` (comm IDs and CA GUID filled in).
  Status accept(TimePoint now, CmId id, Rep rep);
  // Passive, in REQ_RCVD (or REP_SENT): REJ "consumer defined" (28) with `private_data`.
  Status reject(TimePoint now, CmId id, std::span<const uint8_t> private_data);
  // Active, in REP_RCVD: sends the RTU.
  Status establish(TimePoint now, CmId id);
  // Passive, in REP_SENT: data arrived before the RTU (the QP's COMM_EST).
  Status notify_established(CmId id);
  // ESTABLISHED: DREQ. DREQ_RCVD: DREP, then time-wait.
  Status disconnect(TimePoint now, CmId id);
  // SIDR (UD service resolution, IBA 12.11): a SIDR_REQ to `peer` (request ID filled in),
  // resent every `period` up to `retries` times (rdma_cm: 4096 ms, 15), then kUnreachable.
  CmId sidr_request(TimePoint now, const Gid& peer, SidrReq req, Nanos period, int retries);
  // Passive, after kSidrReqReceived: the SIDR_REP (request ID filled in); the request is done.
  Status sidr_reply(CmId id, SidrRep rep);
  // Drops the connection, telling the peer what Linux's cm_destroy_id does for the state.
  void destroy(TimePoint now, CmId id);
  // A request (REQ_RCVD or SIDR_REQ_RCVD) nobody will answer is forgotten without a word, so
  // the peer's resend is taken as new: what the kernel does when rdma_cm's backlog is full
  // (the consumer's -ENOMEM makes cm_destroy_id send nothing). Other states are left alone.
  void forget_request(CmId id);

  void on_mad(TimePoint now, const Gid& from, std::span<const uint8_t> mad);
  void on_timer(TimePoint now);
  [[nodiscard]] TimePoint next_deadline() const;

  bool poll_out(OutMad& out);
  bool poll_event(CmEvent& out);
  [[nodiscard]] CmState state(CmId id) const;  // kIdle when unknown
  [[nodiscard]] const CmCounters& counters() const { return counters_; }

 private:
  struct Conn {
    CmState state = CmState::kIdle;
    bool active = false;
    Gid peer{};
    uint64_t tid = 0;  // the REQ's; replies echo it
    uint32_t remote_id = 0;
    uint64_t remote_guid = 0;
    uint32_t local_qpn = 0;
    uint32_t remote_qpn = 0;
    Req req;  // sent (active) or received (passive)
    // Resends of the last REQ / REP / DREQ (or the time-wait's end): deadline, period, left.
    TimePoint deadline = kNever;
    Nanos period{0};
    int retries_left = 0;
    std::array<uint8_t, kMadSize> last{};  // what a resend sends again
  };

  CmId new_id();
  uint64_t new_tid(CmId id);
  void send(const Gid& to, const MadHeader& h, const CmMessage& m);
  void send_conn(Conn& c, const MadHeader& h, const CmMessage& m, Nanos period, int retries,
                 TimePoint now);
  // An RTU or DREP: the two comm IDs, the connection's TID.
  template <typename M>
  void send_ids(const Conn& c, CmId id);
  [[nodiscard]] Nanos request_period(const Req& req) const;
  void reply_rej(const Gid& to, uint64_t tid, uint32_t local_id, uint32_t remote_id,
                 CmMsgResponse what, RejReason reason, std::span<const uint8_t> ari = {},
                 std::span<const uint8_t> private_data = {});
  void enter_timewait(Conn& c, TimePoint now);
  // A request for listener `token` (REQ or SIDR_REQ) becomes a passive connection in `state`,
  // known by (remote ID, remote key), and an event of `type` carrying `m`.
  Conn& add_request(CmState state, CmEventType type, const Gid& from, uint64_t tid,
                    uint32_t remote_id, uint64_t remote_key, uint64_t token,
                    const CmEventMessage& m);
  void erase(CmId id);
  void event(CmEventType type, CmId id, const Conn& c, int status = 0);
  Conn* find(uint32_t id);

  void on_req(TimePoint now, const Gid& from, const MadHeader& h, const Req& m);
  void on_rep(TimePoint now, const Gid& from, const MadHeader& h, const Rep& m);
  void on_rtu(const Rtu& m);
  void on_rej(const Rej& m);
  void on_mra(TimePoint now, const Mra& m);
  void on_dreq(TimePoint now, const Gid& from, const MadHeader& h, const Dreq& m);
  void on_drep(TimePoint now, const Drep& m);
  void on_sidr_req(const Gid& from, const MadHeader& h, const SidrReq& m);
  void on_sidr_rep(const SidrRep& m);

  CmAgentConfig config_;
  uint32_t next_low_ = 0;
  uint32_t next_tid_hi_ = 0;
  std::unordered_map<CmId, Conn> conns_;
  // Passive connections by (remote comm ID, remote CA GUID), until they are gone: a REQ
  // seen again is a resend, or stale once in time-wait. SIDR requests by (request ID, low 8
  // bytes of the sender's GID).
  std::map<std::pair<uint32_t, uint64_t>, CmId> by_remote_;
  std::unordered_map<uint64_t, uint64_t> listeners_;  // service ID -> token
  std::deque<OutMad> out_;
  std::deque<CmEvent> events_;
  CmCounters counters_;
};

}  // namespace uroce::cm
