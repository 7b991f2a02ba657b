// The CM state machine (cm_agent.hpp). Where IBA leaves a choice, Linux's cm.c decides: what
// a duplicate gets, which REJ a destroyed connection sends, how long time-wait lasts.
#include "cm/cm_agent.hpp"

#include <algorithm>
#include <cerrno>
#include <type_traits>
#include <vector>

namespace uroce::cm {
namespace {

constexpr uint32_t kIdLowMask = (1u << kCmIdSlotShift) - 1;

template <size_t N>
void copy_prefix(std::array<uint8_t, N>& dst, std::span<const uint8_t> src) {
  std::copy_n(src.begin(), std::min(N, src.size()), dst.begin());
}

}  // namespace

Nanos cm_timeout(uint8_t x) {
  const int shift = std::max(static_cast<int>(x & 31) - 8, 0);
  return std::chrono::milliseconds(int64_t{1} << shift);
}

uint8_t cm_ack_timeout(uint8_t ca_ack_delay, uint8_t packet_life_time) {
  // cm.c: the round trip is twice the packet life time; take whichever of it and the CA's
  // ACK delay is larger, plus one when the other is close to it.
  int t = packet_life_time + 1;
  if (t >= ca_ack_delay) {
    t += (ca_ack_delay >= t - 1) ? 1 : 0;
  } else {
    t = ca_ack_delay + ((t >= ca_ack_delay - 1) ? 1 : 0);
  }
  return static_cast<uint8_t>(std::min(t, 31));
}

const char* cm_state_name(CmState s) {
  switch (s) {
    case CmState::kIdle:
      return "IDLE";
    case CmState::kReqSent:
      return "REQ_SENT";
    case CmState::kMraReqRcvd:
      return "MRA_REQ_RCVD";
    case CmState::kRepRcvd:
      return "REP_RCVD";
    case CmState::kReqRcvd:
      return "REQ_RCVD";
    case CmState::kRepSent:
      return "REP_SENT";
    case CmState::kEstablished:
      return "ESTABLISHED";
    case CmState::kDreqSent:
      return "DREQ_SENT";
    case CmState::kDreqRcvd:
      return "DREQ_RCVD";
    case CmState::kTimewait:
      return "TIMEWAIT";
    case CmState::kSidrReqSent:
      return "SIDR_REQ_SENT";
    case CmState::kSidrReqRcvd:
      return "SIDR_REQ_RCVD";
  }
  return "?";
}

CmAgent::CmAgent(const CmAgentConfig& config)
    : config_(config), next_low_(config.id_seed & kIdLowMask) {}

Status CmAgent::listen(uint64_t service_id, uint64_t token) {
  if (!listeners_.emplace(service_id, token).second) {
    return Status(EADDRINUSE, "listen: the service ID already has a listener");
  }
  return Status::ok();
}

void CmAgent::unlisten(uint64_t service_id) {
  listeners_.erase(service_id);
}

CmId CmAgent::new_id() {
  for (;;) {
    const CmId id = (config_.slot & 63) << kCmIdSlotShift | (next_low_++ & kIdLowMask);
    if ((id & kIdLowMask) != 0 && !conns_.contains(id)) return id;
  }
}

uint64_t CmAgent::new_tid(CmId id) {
  // cm.c cm_form_tid: a 24-bit cycling high part over the comm ID.
  next_tid_hi_ = (next_tid_hi_ + 1) & 0xFFFFFF;
  return uint64_t{next_tid_hi_} << 32 | id;
}

CmAgent::Conn* CmAgent::find(uint32_t id) {
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : &it->second;
}

CmState CmAgent::state(CmId id) const {
  auto it = conns_.find(id);
  return it == conns_.end() ? CmState::kIdle : it->second.state;
}

void CmAgent::send(const Gid& to, const MadHeader& h, const CmMessage& m) {
  OutMad& o = out_.emplace_back();
  o.to = to;
  encode_cm_mad(h, m, o.bytes);
  ++counters_.tx;
}

void CmAgent::send_conn(Conn& c, const MadHeader& h, const CmMessage& m, Nanos period, int retries,
                        TimePoint now) {
  send(c.peer, h, m);
  c.last = out_.back().bytes;
  c.period = period;
  c.retries_left = retries;
  c.deadline = now + period;
}

template <typename M>
void CmAgent::send_ids(const Conn& c, CmId id) {
  M m;
  m.local_comm_id = id;
  m.remote_comm_id = c.remote_id;
  MadHeader h;
  h.tid = c.tid;
  send(c.peer, h, m);
}

Nanos CmAgent::request_period(const Req& req) const {
  // cm.c: the peer's response time plus a round trip.
  return cm_timeout(req.remote_cm_response_timeout) + 2 * cm_timeout(config_.packet_life_time);
}

void CmAgent::reply_rej(const Gid& to, uint64_t tid, uint32_t local_id, uint32_t remote_id,
                        CmMsgResponse what, RejReason reason, std::span<const uint8_t> ari,
                        std::span<const uint8_t> private_data) {
  Rej r;
  r.local_comm_id = local_id;
  r.remote_comm_id = remote_id;
  r.message_rejected = what;
  r.reason = static_cast<uint16_t>(reason);
  r.ari_length = static_cast<uint8_t>(std::min(ari.size(), r.ari.size()));
  copy_prefix(r.ari, ari);
  copy_prefix(r.private_data, private_data);
  MadHeader h;
  h.tid = tid;
  send(to, h, r);
  ++counters_.rej_sent;
}

void CmAgent::event(CmEventType type, CmId id, const Conn& c, int status) {
  CmEvent& e = events_.emplace_back();
  e.type = type;
  e.id = id;
  e.peer = c.peer;
  e.status = status;
}

void CmAgent::erase(CmId id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  by_remote_.erase({it->second.remote_id, it->second.remote_guid});
  conns_.erase(it);
}

void CmAgent::enter_timewait(Conn& c, TimePoint now) {
  // cm.c cm_enter_timewait: the QP's ACK timeout, so stray packets of the old connection
  // die before its QPN and comm ID can meet the peer again.
  c.state = CmState::kTimewait;
  c.retries_left = 0;
  c.deadline =
      now + cm_timeout(cm_ack_timeout(config_.local_ca_ack_delay, config_.packet_life_time));
}

// ---- Requests from the application.

CmId CmAgent::connect(TimePoint now, const Gid& peer, Req req) {
  const CmId id = new_id();
  Conn& c = conns_[id];
  c.active = true;
  c.peer = peer;
  c.state = CmState::kReqSent;
  req.local_comm_id = id;
  req.local_ca_guid = config_.ca_guid;
  c.req = req;
  c.local_qpn = req.local_qpn;
  c.tid = new_tid(id);
  MadHeader h;
  h.tid = c.tid;
  send_conn(c, h, req, request_period(req), req.max_cm_retries, now);
  return id;
}

Status CmAgent::accept(TimePoint now, CmId id, Rep rep) {
  Conn* c = find(id);
  if (c == nullptr || c->state != CmState::kReqRcvd) {
    return Status(EINVAL, "accept: no connection request waiting on this ID");
  }
  rep.local_comm_id = id;
  rep.remote_comm_id = c->remote_id;
  rep.local_ca_guid = config_.ca_guid;
  c->local_qpn = rep.local_qpn;
  c->state = CmState::kRepSent;
  MadHeader h;
  h.tid = c->tid;
  send_conn(*c, h, rep, cm_timeout(c->req.local_cm_response_timeout), c->req.max_cm_retries, now);
  return Status::ok();
}

Status CmAgent::reject(TimePoint /*now*/, CmId id, std::span<const uint8_t> private_data) {
  Conn* c = find(id);
  if (c == nullptr || (c->state != CmState::kReqRcvd && c->state != CmState::kRepSent)) {
    return Status(EINVAL, "reject: no connection request waiting on this ID");
  }
  reply_rej(c->peer, c->tid, id, c->remote_id,
            c->state == CmState::kReqRcvd ? CmMsgResponse::kReq : CmMsgResponse::kOther,
            RejReason::kConsumerDefined, {}, private_data);
  erase(id);
  return Status::ok();
}

Status CmAgent::establish(TimePoint /*now*/, CmId id) {
  Conn* c = find(id);
  if (c == nullptr || c->state != CmState::kRepRcvd) {
    return Status(EINVAL, "establish: no REP received on this ID");
  }
  send_ids<Rtu>(*c, id);
  c->state = CmState::kEstablished;
  return Status::ok();
}

Status CmAgent::notify_established(CmId id) {
  Conn* c = find(id);
  if (c == nullptr || c->state != CmState::kRepSent) {
    return Status(EINVAL, "notify_established: no REP waiting for its RTU on this ID");
  }
  c->state = CmState::kEstablished;
  c->deadline = kNever;
  event(CmEventType::kEstablished, id, *c);
  return Status::ok();
}

Status CmAgent::disconnect(TimePoint now, CmId id) {
  Conn* c = find(id);
  if (c == nullptr) return Status(EINVAL, "disconnect: no such connection");
  if (c->state == CmState::kEstablished) {
    Dreq d;
    d.local_comm_id = id;
    d.remote_comm_id = c->remote_id;
    d.remote_qpn = c->remote_qpn;
    c->tid = new_tid(id);
    MadHeader h;
    h.tid = c->tid;
    c->state = CmState::kDreqSent;
    send_conn(*c, h, d, request_period(c->req), c->req.max_cm_retries, now);
    return Status::ok();
  }
  if (c->state == CmState::kDreqRcvd) {
    send_ids<Drep>(*c, id);
    c->last = out_.back().bytes;  // a repeated DREQ in time-wait gets it again
    enter_timewait(*c, now);
    return Status::ok();
  }
  return Status(EINVAL, "disconnect: the connection is not established");
}

void CmAgent::forget_request(CmId id) {
  const Conn* c = find(id);
  if (c != nullptr && (c->state == CmState::kReqRcvd || c->state == CmState::kSidrReqRcvd)) {
    erase(id);
  }
}

void CmAgent::destroy(TimePoint now, CmId id) {
  Conn* c = find(id);
  if (c == nullptr) return;
  switch (c->state) {
    case CmState::kReqSent:
    case CmState::kMraReqRcvd: {
      // cm.c: REJ "timeout" with our CA GUID as ARI, so the peer drops its half.
      std::array<uint8_t, 8> guid{};
      for (int i = 0; i < 8; ++i) guid[i] = static_cast<uint8_t>(config_.ca_guid >> (56 - 8 * i));
      reply_rej(c->peer, c->tid, id, 0, CmMsgResponse::kOther, RejReason::kTimeout, guid);
      break;
    }
    case CmState::kReqRcvd:
    case CmState::kRepSent:
    case CmState::kRepRcvd:
      reply_rej(c->peer, c->tid, id, c->remote_id,
                c->state == CmState::kReqRcvd ? CmMsgResponse::kReq : CmMsgResponse::kOther,
                RejReason::kConsumerDefined);
      break;
    case CmState::kEstablished:
      (void)disconnect(now, id);  // one DREQ, not waited for
      break;
    case CmState::kDreqRcvd:
      (void)disconnect(now, id);  // the DREP
      break;
    case CmState::kSidrReqRcvd: {
      SidrRep rep;  // cm.c: a SIDR request dropped unanswered is rejected
      rep.status = static_cast<uint8_t>(SidrStatus::kReject);
      (void)sidr_reply(id, rep);
      break;
    }
    default:
      break;
  }
  erase(id);
}

// ---- Received MADs.

void CmAgent::on_mad(TimePoint now, const Gid& from, std::span<const uint8_t> mad) {
  CmMad m;
  const MadError e = decode_cm_mad(mad, m);
  if (e != MadError::kOk) {
    ++counters_.dropped[static_cast<size_t>(e)];
    return;
  }
  ++counters_.rx;
  std::visit(
      [&](const auto& msg) {
        using T = std::decay_t<decltype(msg)>;
        if constexpr (std::is_same_v<T, Req>) {
          on_req(now, from, m.header, msg);
        } else if constexpr (std::is_same_v<T, Rep>) {
          on_rep(now, from, m.header, msg);
        } else if constexpr (std::is_same_v<T, Rtu>) {
          on_rtu(msg);
        } else if constexpr (std::is_same_v<T, Rej>) {
          on_rej(msg);
        } else if constexpr (std::is_same_v<T, Mra>) {
          on_mra(now, msg);
        } else if constexpr (std::is_same_v<T, Dreq>) {
          on_dreq(now, from, m.header, msg);
        } else if constexpr (std::is_same_v<T, Drep>) {
          on_drep(now, msg);
        } else if constexpr (std::is_same_v<T, SidrReq>) {
          on_sidr_req(from, m.header, msg);
        } else {
          on_sidr_rep(msg);
        }
      },
      m.message);
}

CmAgent::Conn& CmAgent::add_request(CmState state, CmEventType type, const Gid& from, uint64_t tid,
                                    uint32_t remote_id, uint64_t remote_key, uint64_t token,
                                    const CmEventMessage& m) {
  const CmId id = new_id();
  Conn& c = conns_[id];
  c.state = state;
  c.peer = from;
  c.tid = tid;
  c.remote_id = remote_id;
  c.remote_guid = remote_key;
  by_remote_[{remote_id, remote_key}] = id;
  CmEvent& e = events_.emplace_back();
  e.type = type;
  e.id = id;
  e.listener = token;
  e.peer = from;
  e.message = m;
  return c;
}

void CmAgent::on_req(TimePoint /*now*/, const Gid& from, const MadHeader& h, const Req& m) {
  // A REQ we already hold (same remote comm ID and CA GUID) is a resend (cm_dup_req_handler).
  if (auto it = by_remote_.find({m.local_comm_id, m.local_ca_guid}); it != by_remote_.end()) {
    Conn* c = find(it->second);
    if (c != nullptr && c->state == CmState::kTimewait) {
      reply_rej(from, h.tid, it->second, m.local_comm_id, CmMsgResponse::kReq,
                RejReason::kStaleConnection);
    }
    return;  // REQ_RCVD: the application has it; REP_SENT: the REP timer answers
  }
  auto listener = listeners_.find(m.service_id);
  if (listener == listeners_.end()) {
    // cm.c cm_issue_rej: nobody listens on this service ID.
    reply_rej(from, h.tid, 0, m.local_comm_id, CmMsgResponse::kReq, RejReason::kInvalidServiceId);
    return;
  }
  Conn& c = add_request(CmState::kReqRcvd, CmEventType::kReqReceived, from, h.tid, m.local_comm_id,
                        m.local_ca_guid, listener->second, m);
  c.remote_qpn = m.local_qpn;
  c.req = m;
}

void CmAgent::on_rep(TimePoint /*now*/, const Gid& from, const MadHeader& h, const Rep& m) {
  Conn* c = find(m.remote_comm_id);
  if (c == nullptr || !c->active) {
    // cm.c cm_rep_handler: a REP for no request of ours.
    ++counters_.unmatched;
    reply_rej(from, h.tid, m.remote_comm_id, m.local_comm_id, CmMsgResponse::kRep,
              RejReason::kInvalidCommId);
    return;
  }
  if (c->state == CmState::kEstablished && m.local_comm_id == c->remote_id) {
    // Our RTU was lost: the peer resends its REP (cm_dup_rep_handler).
    send_ids<Rtu>(*c, m.remote_comm_id);
    return;
  }
  if (c->state != CmState::kReqSent && c->state != CmState::kMraReqRcvd) return;
  c->state = CmState::kRepRcvd;
  c->deadline = kNever;
  c->remote_id = m.local_comm_id;
  c->remote_guid = m.local_ca_guid;
  c->remote_qpn = m.local_qpn;
  CmEvent& e = events_.emplace_back();
  e.type = CmEventType::kRepReceived;
  e.id = m.remote_comm_id;
  e.peer = c->peer;
  e.message = m;
}

void CmAgent::on_rtu(const Rtu& m) {
  Conn* c = find(m.remote_comm_id);
  if (c == nullptr || c->active || c->remote_id != m.local_comm_id) {
    ++counters_.unmatched;
    return;
  }
  if (c->state != CmState::kRepSent) return;  // a duplicate, or data came first
  c->state = CmState::kEstablished;
  c->deadline = kNever;
  event(CmEventType::kEstablished, m.remote_comm_id, *c);
}

void CmAgent::on_rej(const Rej& m) {
  Conn* c = find(m.remote_comm_id);
  if (c == nullptr) {
    ++counters_.unmatched;
    return;
  }
  const bool waiting = c->state == CmState::kReqSent || c->state == CmState::kMraReqRcvd ||
                       c->state == CmState::kRepSent || c->state == CmState::kRepRcvd;
  if (!waiting) return;
  CmEvent& e = events_.emplace_back();
  e.type = CmEventType::kRejected;
  e.id = m.remote_comm_id;
  e.peer = c->peer;
  e.reason = m.reason;
  e.message = m;
  erase(m.remote_comm_id);
}

void CmAgent::on_mra(TimePoint now, const Mra& m) {
  Conn* c = find(m.remote_comm_id);
  if (c == nullptr) {
    ++counters_.unmatched;
    return;
  }
  // The peer needs longer: wait its service timeout (plus a round trip) before resending.
  if (c->state == CmState::kReqSent && m.message_mraed == CmMsgResponse::kReq) {
    c->state = CmState::kMraReqRcvd;
  } else if (c->state != CmState::kRepSent || m.message_mraed != CmMsgResponse::kRep) {
    return;
  }
  c->deadline = now + cm_timeout(m.service_timeout) + 2 * cm_timeout(config_.packet_life_time);
}

void CmAgent::on_dreq(TimePoint now, const Gid& from, const MadHeader& h, const Dreq& m) {
  Conn* c = find(m.remote_comm_id);
  if (c == nullptr) {
    // cm.c cm_issue_drep: a DREQ for a connection we do not have is answered anyway.
    ++counters_.unmatched;
    Drep d;
    d.local_comm_id = m.remote_comm_id;
    d.remote_comm_id = m.local_comm_id;
    MadHeader rh;
    rh.tid = h.tid;
    send(from, rh, d);
    return;
  }
  if (m.remote_qpn != c->local_qpn || m.local_comm_id != c->remote_id) return;  // silently
  c->tid = h.tid;
  switch (c->state) {
    case CmState::kEstablished:
    case CmState::kRepSent:  // the RTU was lost
      c->state = CmState::kDreqRcvd;
      c->deadline = kNever;
      event(CmEventType::kDisconnected, m.remote_comm_id, *c);
      break;
    case CmState::kDreqSent: {
      // Both sides disconnected at once: answer and wait.
      send_ids<Drep>(*c, m.remote_comm_id);
      c->last = out_.back().bytes;
      enter_timewait(*c, now);
      event(CmEventType::kDisconnected, m.remote_comm_id, *c);
      break;
    }
    case CmState::kTimewait:
      out_.push_back(OutMad{c->peer, c->last});  // our DREP was lost
      ++counters_.tx;
      break;
    default:
      break;
  }
}

void CmAgent::on_drep(TimePoint now, const Drep& m) {
  Conn* c = find(m.remote_comm_id);
  if (c == nullptr || c->remote_id != m.local_comm_id) {
    ++counters_.unmatched;
    return;
  }
  if (c->state != CmState::kDreqSent) return;
  enter_timewait(*c, now);
  event(CmEventType::kDisconnected, m.remote_comm_id, *c);
}

// ---- SIDR.

CmId CmAgent::sidr_request(TimePoint now, const Gid& peer, SidrReq req, Nanos period, int retries) {
  const CmId id = new_id();
  Conn& c = conns_[id];
  c.active = true;
  c.peer = peer;
  c.state = CmState::kSidrReqSent;
  req.request_id = id;
  c.tid = new_tid(id);
  MadHeader h;
  h.tid = c.tid;
  send_conn(c, h, req, period, retries, now);
  return id;
}

Status CmAgent::sidr_reply(CmId id, SidrRep rep) {
  Conn* c = find(id);
  if (c == nullptr || c->state != CmState::kSidrReqRcvd) {
    return Status(EINVAL, "sidr_reply: no SIDR request waiting on this ID");
  }
  rep.request_id = c->remote_id;
  MadHeader h;
  h.tid = c->tid;
  send(c->peer, h, rep);
  erase(id);
  return Status::ok();
}

void CmAgent::on_sidr_req(const Gid& from, const MadHeader& h, const SidrReq& m) {
  // A resend of a request the application still holds (cm.c keeps them by remote ID and
  // port address; the sender's GID stands in for the CA GUID a SIDR_REQ lacks).
  uint64_t from_key = 0;
  for (size_t i = 8; i < 16; ++i) from_key = from_key << 8 | from[i];
  if (by_remote_.contains({m.request_id, from_key})) return;
  auto listener = listeners_.find(m.service_id);
  if (listener == listeners_.end()) {
    SidrRep rep;
    rep.request_id = m.request_id;
    rep.status = static_cast<uint8_t>(SidrStatus::kUnsupported);
    rep.service_id = m.service_id;
    MadHeader rh;
    rh.tid = h.tid;
    send(from, rh, rep);
    return;
  }
  (void)add_request(CmState::kSidrReqRcvd, CmEventType::kSidrReqReceived, from, h.tid, m.request_id,
                    from_key, listener->second, m);
}

void CmAgent::on_sidr_rep(const SidrRep& m) {
  Conn* c = find(m.request_id);
  if (c == nullptr || c->state != CmState::kSidrReqSent) {
    ++counters_.unmatched;
    return;
  }
  CmEvent& e = events_.emplace_back();
  e.type = CmEventType::kSidrRepReceived;
  e.id = m.request_id;
  e.peer = c->peer;
  e.message = m;
  erase(m.request_id);
}

// ---- Timers.

TimePoint CmAgent::next_deadline() const {
  TimePoint t = kNever;
  for (const auto& [id, c] : conns_) t = std::min(t, c.deadline);
  return t;
}

void CmAgent::on_timer(TimePoint now) {
  std::vector<CmId> gone;
  for (auto& [id, c] : conns_) {
    if (c.deadline > now) continue;
    if (c.state == CmState::kTimewait) {
      event(CmEventType::kTimewaitExit, id, c);
      gone.push_back(id);
      continue;
    }
    if (c.retries_left > 0) {
      --c.retries_left;
      out_.push_back(OutMad{c.peer, c.last});
      ++counters_.tx;
      ++counters_.resent;
      c.deadline = now + c.period;
      continue;
    }
    switch (c.state) {
      case CmState::kReqSent:
      case CmState::kMraReqRcvd:
      case CmState::kRepSent:
      case CmState::kSidrReqSent:
        event(CmEventType::kUnreachable, id, c, ETIMEDOUT);
        gone.push_back(id);
        break;
      case CmState::kDreqSent:
        enter_timewait(c, now);
        event(CmEventType::kDisconnected, id, c, ETIMEDOUT);
        break;
      default:
        c.deadline = kNever;
        break;
    }
  }
  for (CmId id : gone) erase(id);
}

bool CmAgent::poll_out(OutMad& out) {
  if (out_.empty()) return false;
  out = out_.front();
  out_.pop_front();
  return true;
}

bool CmAgent::poll_event(CmEvent& out) {
  if (events_.empty()) return false;
  out = std::move(events_.front());
  events_.pop_front();
  return true;
}

}  // namespace uroce::cm
