// The CM state machine between two agents in virtual time, with MADs carried (or dropped,
// or duplicated) by the test: connect/accept/establish/disconnect end to end with the comm
// IDs, TIDs and QPNs each message must carry; REJ for an unknown service and for a consumer's
// reject; resends of a lost REQ, REP and DREQ and what runs out of retries; duplicates (REQ,
// REP after the RTU was lost, DREQ in time-wait); a DREQ naming another QPN ignored, one for
// an unknown connection answered; malformed MADs counted; an MRA holding the REQ timer; SIDR
// resolving a UD service, unsupported for an unknown one, retried and timing out.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <vector>

#include "cm/cm_agent.hpp"
#include "cm/ip_cm_service.hpp"

namespace uroce::cm {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kService = ip_service_id(kPsTcp, 7174);

Gid gid_of(uint8_t last) {
  Gid g{};
  g[10] = g[11] = 0xFF;
  g[12] = 10;
  g[15] = last;
  return g;
}

struct Wire {
  CmAgent a{{.ca_guid = 0xA0A0, .slot = 1, .id_seed = 100}};
  CmAgent b{{.ca_guid = 0xB0B0, .slot = 2, .id_seed = 200}};
  Gid ga = gid_of(1);
  Gid gb = gid_of(2);
  TimePoint now{0};
  // Decides each MAD's fate: 0 drop, 1 deliver, 2 deliver twice.
  std::function<int(const OutMad&, AttrId)> fate = [](const OutMad&, AttrId) { return 1; };
  std::vector<AttrId> a_sent, b_sent;
  std::vector<CmMad> to_a, to_b;  // decoded copies of what was delivered

  // Moves every queued MAD to its peer until both are quiet.
  void pump() {
    for (bool moved = true; moved;) {
      moved = false;
      OutMad m;
      while (a.poll_out(m)) {
        moved = true;
        deliver(m, true);
      }
      while (b.poll_out(m)) {
        moved = true;
        deliver(m, false);
      }
    }
  }
  void deliver(const OutMad& m, bool from_a) {
    CmMad d;
    EXPECT_EQ(decode_cm_mad(m.bytes, d), MadError::kOk);
    const auto attr = static_cast<AttrId>(d.header.attr_id);
    (from_a ? a_sent : b_sent).push_back(attr);
    EXPECT_EQ(m.to, from_a ? gb : ga);
    for (int n = fate(m, attr); n > 0; --n) {
      (from_a ? to_b : to_a).push_back(d);
      (from_a ? b : a).on_mad(now, from_a ? ga : gb, m.bytes);
    }
  }
  // Advances virtual time to the next deadline (at most `limit` ahead) and fires timers.
  void tick(Nanos limit) {
    const TimePoint next = std::min(a.next_deadline(), b.next_deadline());
    now = std::min(next, now + limit);
    a.on_timer(now);
    b.on_timer(now);
    pump();
  }
  std::vector<CmEvent> events(CmAgent& x) {
    std::vector<CmEvent> out;
    for (CmEvent e; x.poll_event(e);) out.push_back(e);
    return out;
  }
};

Req request(uint32_t qpn = 0x111) {
  Req r;
  r.service_id = kService;
  r.local_qpn = qpn;
  r.starting_psn = 0x1234;
  r.responder_resources = 4;
  r.initiator_depth = 4;
  r.remote_cm_response_timeout = 20;  // 4096 ms
  r.local_cm_response_timeout = 20;
  r.max_cm_retries = 3;
  r.path_mtu = 3;
  r.private_data[0] = 0xAB;
  return r;
}

Rep reply(uint32_t qpn = 0x222) {
  Rep r;
  r.local_qpn = qpn;
  r.starting_psn = 0x5678;
  r.private_data[0] = 0xCD;
  return r;
}

// Brings a connection up (A active, B passive listening on kService) and clears the events.
std::pair<CmId, CmId> establish_pair(Wire& w, uint32_t a_qpn, uint32_t b_qpn) {
  EXPECT_TRUE(w.b.listen(kService, 1).is_ok());
  const CmId a_id = w.a.connect(w.now, w.gb, request(a_qpn));
  w.pump();
  const CmId b_id = w.events(w.b).at(0).id;
  EXPECT_TRUE(w.b.accept(w.now, b_id, reply(b_qpn)).is_ok());
  w.pump();
  EXPECT_TRUE(w.a.establish(w.now, a_id).is_ok());
  w.pump();
  (void)w.events(w.a);
  (void)w.events(w.b);
  return {a_id, b_id};
}

TEST(CmAgent, ConnectAcceptEstablishAndDisconnect) {
  Wire w;
  ASSERT_TRUE(w.b.listen(kService, 77).is_ok());
  EXPECT_EQ(w.b.listen(kService, 78).code(), EADDRINUSE);
  const CmId a_id = w.a.connect(w.now, w.gb, request());
  EXPECT_EQ(a_id >> kCmIdSlotShift, 1u) << "the comm ID names its process's slot";
  EXPECT_EQ(w.a.state(a_id), CmState::kReqSent);
  w.pump();
  auto eb = w.events(w.b);
  ASSERT_EQ(eb.size(), 1u);
  EXPECT_EQ(eb[0].type, CmEventType::kReqReceived);
  EXPECT_EQ(eb[0].listener, 77u);
  EXPECT_EQ(eb[0].peer, w.ga);
  const Req& got = std::get<Req>(eb[0].message);
  EXPECT_EQ(got.local_comm_id, a_id);
  EXPECT_EQ(got.local_ca_guid, 0xA0A0u);
  EXPECT_EQ(got.local_qpn, 0x111u);
  EXPECT_EQ(got.private_data[0], 0xAB);
  const CmId b_id = eb[0].id;
  EXPECT_EQ(b_id >> kCmIdSlotShift, 2u);
  EXPECT_EQ(w.b.state(b_id), CmState::kReqRcvd);

  ASSERT_TRUE(w.b.accept(w.now, b_id, reply()).is_ok());
  w.pump();
  auto ea = w.events(w.a);
  ASSERT_EQ(ea.size(), 1u);
  EXPECT_EQ(ea[0].type, CmEventType::kRepReceived);
  const Rep& rep = std::get<Rep>(ea[0].message);
  EXPECT_EQ(rep.local_comm_id, b_id);
  EXPECT_EQ(rep.remote_comm_id, a_id);
  EXPECT_EQ(rep.local_qpn, 0x222u);
  EXPECT_EQ(rep.local_ca_guid, 0xB0B0u);
  // The REP echoes the REQ's transaction ID.
  ASSERT_EQ(w.to_b.size(), 1u);
  ASSERT_EQ(w.to_a.size(), 1u);
  EXPECT_EQ(w.to_a[0].header.tid, w.to_b[0].header.tid);

  ASSERT_TRUE(w.a.establish(w.now, a_id).is_ok());
  w.pump();
  EXPECT_EQ(w.a.state(a_id), CmState::kEstablished);
  EXPECT_EQ(w.b.state(b_id), CmState::kEstablished);
  eb = w.events(w.b);
  ASSERT_EQ(eb.size(), 1u);
  EXPECT_EQ(eb[0].type, CmEventType::kEstablished);

  // A disconnects: B hears of it, answers with its own disconnect (the DREP); both wait.
  ASSERT_TRUE(w.a.disconnect(w.now, a_id).is_ok());
  w.pump();
  const Dreq& dreq = std::get<Dreq>(w.to_b.back().message);
  EXPECT_EQ(dreq.remote_qpn, 0x222u);
  EXPECT_EQ(w.b.state(b_id), CmState::kDreqRcvd);
  eb = w.events(w.b);
  ASSERT_EQ(eb.size(), 1u);
  EXPECT_EQ(eb[0].type, CmEventType::kDisconnected);
  ASSERT_TRUE(w.b.disconnect(w.now, b_id).is_ok());
  w.pump();
  EXPECT_EQ(w.to_a.back().header.tid, w.to_b.back().header.tid) << "DREP echoes the DREQ's TID";
  EXPECT_EQ(w.a.state(a_id), CmState::kTimewait);
  EXPECT_EQ(w.b.state(b_id), CmState::kTimewait);
  ea = w.events(w.a);
  ASSERT_EQ(ea.size(), 1u);
  EXPECT_EQ(ea[0].type, CmEventType::kDisconnected);
  EXPECT_EQ(ea[0].status, 0);
  // Time-wait: conv(cm_ack_timeout(15, 16) = 17) = 512 ms, then the IDs are gone.
  EXPECT_EQ(cm_ack_timeout(15, 16), 17);
  w.tick(511ms);
  EXPECT_EQ(w.a.state(a_id), CmState::kTimewait);
  w.tick(10ms);
  EXPECT_EQ(w.a.state(a_id), CmState::kIdle);
  EXPECT_EQ(w.b.state(b_id), CmState::kIdle);
  EXPECT_EQ(w.events(w.a).at(0).type, CmEventType::kTimewaitExit);
  EXPECT_EQ(w.a_sent, (std::vector<AttrId>{AttrId::kReq, AttrId::kRtu, AttrId::kDreq}));
  EXPECT_EQ(w.b_sent, (std::vector<AttrId>{AttrId::kRep, AttrId::kDrep}));
  EXPECT_EQ(w.a.counters().resent, 0u);
}

TEST(CmAgent, UnknownServiceAndConsumerRejectAnswerWithRej) {
  Wire w;
  const CmId first = w.a.connect(w.now, w.gb, request());
  w.pump();  // nobody listens on B
  auto ea = w.events(w.a);
  ASSERT_EQ(ea.size(), 1u);
  EXPECT_EQ(ea[0].type, CmEventType::kRejected);
  EXPECT_EQ(ea[0].reason, static_cast<uint16_t>(RejReason::kInvalidServiceId));
  EXPECT_EQ(w.a.state(first), CmState::kIdle);
  const Rej& rej = std::get<Rej>(ea[0].message);
  EXPECT_EQ(rej.remote_comm_id, first);
  EXPECT_EQ(rej.message_rejected, CmMsgResponse::kReq);

  ASSERT_TRUE(w.b.listen(kService, 1).is_ok());
  const CmId second = w.a.connect(w.now, w.gb, request());
  w.pump();
  const CmId b_id = w.events(w.b).at(0).id;
  const uint8_t why[] = {'b', 'u', 's', 'y'};
  ASSERT_TRUE(w.b.reject(w.now, b_id, why).is_ok());
  w.pump();
  ea = w.events(w.a);
  ASSERT_EQ(ea.size(), 1u);
  EXPECT_EQ(ea[0].id, second);
  EXPECT_EQ(ea[0].reason, static_cast<uint16_t>(RejReason::kConsumerDefined));
  EXPECT_EQ(std::get<Rej>(ea[0].message).private_data[3], 'y');
  EXPECT_EQ(w.b.state(b_id), CmState::kIdle);
  EXPECT_EQ(w.b.counters().rej_sent, 2u);
}

TEST(CmAgent, LostAndDuplicatedRequestsAreResentAndSeenOnce) {
  Wire w;
  ASSERT_TRUE(w.b.listen(kService, 1).is_ok());
  int reqs = 0;
  w.fate = [&](const OutMad&, AttrId attr) {
    if (attr != AttrId::kReq) return 1;
    return ++reqs == 1 ? 0 : 2;  // the first is lost, the resend arrives twice
  };
  const CmId a_id = w.a.connect(w.now, w.gb, request());
  w.pump();
  EXPECT_TRUE(w.events(w.b).empty());
  // Resend after conv(20) + 2 conv(16) = 4096 + 2 * 256 ms.
  w.tick(4607ms);
  EXPECT_EQ(w.a.counters().resent, 0u);
  w.tick(10s);
  EXPECT_EQ(w.a.counters().resent, 1u);
  auto eb = w.events(w.b);
  ASSERT_EQ(eb.size(), 1u) << "the duplicate REQ is not a second request";
  EXPECT_EQ(eb[0].type, CmEventType::kReqReceived);
  ASSERT_TRUE(w.b.accept(w.now, eb[0].id, reply()).is_ok());
  w.pump();
  EXPECT_EQ(w.events(w.a).at(0).type, CmEventType::kRepReceived);
  EXPECT_EQ(w.a.state(a_id), CmState::kRepRcvd);
}

TEST(CmAgent, AForgottenRequestSendsNothingAndItsResendIsANewRequest) {
  Wire w;
  ASSERT_TRUE(w.b.listen(kService, 1).is_ok());
  const CmId a_id = w.a.connect(w.now, w.gb, request());
  w.pump();
  auto eb = w.events(w.b);
  ASSERT_EQ(eb.size(), 1u);
  w.b.forget_request(eb[0].id);  // rdma_cm's backlog is full
  w.pump();
  EXPECT_EQ(w.b_sent.size(), 0u) << "nothing goes back: no REJ, no MRA";
  EXPECT_EQ(w.b.state(eb[0].id), CmState::kIdle);
  // The active side resends after 4608 ms, and this time the request is taken again.
  w.tick(10s);
  EXPECT_EQ(w.a.counters().resent, 1u);
  eb = w.events(w.b);
  ASSERT_EQ(eb.size(), 1u);
  EXPECT_EQ(eb[0].type, CmEventType::kReqReceived);
  ASSERT_TRUE(w.b.accept(w.now, eb[0].id, reply()).is_ok());
  w.pump();
  EXPECT_EQ(w.a.state(a_id), CmState::kRepRcvd);
  // forget_request leaves a connection past the request alone.
  w.b.forget_request(eb[0].id);
  EXPECT_EQ(w.b.state(eb[0].id), CmState::kRepSent);
}

TEST(CmAgent, RetriesRunOutAsUnreachable) {
  Wire w;
  w.fate = [](const OutMad&, AttrId) { return 0; };  // a peer that never answers
  const CmId a_id = w.a.connect(w.now, w.gb, request());
  for (int i = 0; i < 10 && w.a.state(a_id) != CmState::kIdle; ++i) w.tick(1h);
  auto ea = w.events(w.a);
  ASSERT_EQ(ea.size(), 1u);
  EXPECT_EQ(ea[0].type, CmEventType::kUnreachable);
  EXPECT_EQ(ea[0].status, ETIMEDOUT);
  EXPECT_EQ(w.a.state(a_id), CmState::kIdle);
  EXPECT_EQ(w.a_sent.size(), 4u) << "the REQ and max_cm_retries (3) resends";
  EXPECT_EQ(w.now, TimePoint(4 * 4608ms));
}

TEST(CmAgent, LostRtuIsAnsweredByTheRepResendOrByData) {
  Wire w;
  bool drop_rtu = true;
  w.fate = [&](const OutMad&, AttrId attr) { return attr == AttrId::kRtu && drop_rtu ? 0 : 1; };
  const auto [a_id, b_id] = establish_pair(w, 0x111, 0x222);
  EXPECT_EQ(w.a.state(a_id), CmState::kEstablished);
  EXPECT_EQ(w.b.state(b_id), CmState::kRepSent);
  drop_rtu = false;
  // B's REP comes again after conv(20); A, established, answers it with the RTU.
  w.tick(1h);
  EXPECT_EQ(w.b.state(b_id), CmState::kEstablished);
  EXPECT_EQ(w.b_sent, (std::vector<AttrId>{AttrId::kRep, AttrId::kRep}));
  EXPECT_EQ(w.a_sent, (std::vector<AttrId>{AttrId::kReq, AttrId::kRtu, AttrId::kRtu}));

  // The other way out: data before the RTU (COMM_EST).
  Wire v;
  v.fate = [](const OutMad&, AttrId attr) { return attr == AttrId::kRtu ? 0 : 1; };
  const CmId vb = establish_pair(v, 0x111, 0x222).second;
  ASSERT_TRUE(v.b.notify_established(vb).is_ok());
  EXPECT_EQ(v.b.state(vb), CmState::kEstablished);
  EXPECT_EQ(v.b.next_deadline(), kNever) << "no REP resend once established";
  EXPECT_EQ(v.events(v.b).at(0).type, CmEventType::kEstablished);
}

TEST(CmAgent, DreqRulesWrongQpnIgnoredUnknownAnsweredLostDrepResent) {
  Wire w;
  const auto [a_id, b_id] = establish_pair(w, 0x111, 0x222);

  // A DREQ naming another QPN than B's: ignored, no DREP.
  MadHeader h;
  h.tid = 42;
  std::array<uint8_t, kMadSize> mad{};
  encode_cm_mad(h, Dreq{a_id, b_id, 0x999, {}}, mad);
  w.b.on_mad(w.now, w.ga, mad);
  OutMad out;
  EXPECT_FALSE(w.b.poll_out(out));
  EXPECT_EQ(w.b.state(b_id), CmState::kEstablished);
  // A DREQ for a connection B never had: answered with a DREP echoing its TID.
  encode_cm_mad(h, Dreq{a_id, 0x0800'1234, 0x222, {}}, mad);
  w.b.on_mad(w.now, w.ga, mad);
  ASSERT_TRUE(w.b.poll_out(out));
  CmMad d;
  ASSERT_EQ(decode_cm_mad(out.bytes, d), MadError::kOk);
  ASSERT_TRUE(std::holds_alternative<Drep>(d.message));
  EXPECT_EQ(d.header.tid, 42u);
  EXPECT_EQ(std::get<Drep>(d.message).remote_comm_id, a_id);

  // B's DREP is lost once: A resends the DREQ, B (in time-wait) sends the DREP again.
  int dreps = 0;
  w.fate = [&](const OutMad&, AttrId attr) {
    return attr == AttrId::kDrep && dreps++ == 0 ? 0 : 1;
  };
  ASSERT_TRUE(w.a.disconnect(w.now, a_id).is_ok());
  w.pump();
  ASSERT_TRUE(w.b.disconnect(w.now, b_id).is_ok());
  w.pump();
  EXPECT_EQ(w.a.state(a_id), CmState::kDreqSent);
  w.tick(5s);  // B's time-wait (512 ms) ends: B forgets the connection
  EXPECT_EQ(w.b.state(b_id), CmState::kIdle);
  w.tick(5s);  // A resends the DREQ (4608 ms); B answers it as unknown, with a DREP
  EXPECT_EQ(w.a.state(a_id), CmState::kTimewait);
  EXPECT_EQ(w.a.counters().resent, 1u);
  EXPECT_EQ(dreps, 2);
}

TEST(CmAgent, MalformedMadsAreCountedAndMraHoldsTheRequest) {
  Wire w;
  std::array<uint8_t, kMadSize> mad{};
  encode_cm_mad({}, Rtu{}, mad);
  mad[2] = 1;  // class version 1
  w.b.on_mad(w.now, w.ga, mad);
  w.b.on_mad(w.now, w.ga, std::span(mad).first(100));
  EXPECT_EQ(w.b.counters().dropped[static_cast<size_t>(MadError::kBadClassVersion)], 1u);
  EXPECT_EQ(w.b.counters().dropped[static_cast<size_t>(MadError::kWrongSize)], 1u);
  EXPECT_EQ(w.b.counters().rx, 0u);

  // An MRA (service timeout 24: 65 s) moves the REQ's resend out.
  const CmId a_id = w.a.connect(w.now, w.gb, request());
  OutMad out;
  ASSERT_TRUE(w.a.poll_out(out));
  Mra mra;
  mra.remote_comm_id = a_id;
  mra.service_timeout = 24;
  encode_cm_mad({}, mra, mad);
  w.a.on_mad(w.now, w.gb, mad);
  EXPECT_EQ(w.a.state(a_id), CmState::kMraReqRcvd);
  EXPECT_EQ(w.a.next_deadline(), TimePoint(65536ms + 512ms));
}

TEST(CmAgent, SidrResolvesAUdServiceAndAnswersUnknownOnesUnsupported) {
  Wire w;
  const uint64_t ud_service = ip_service_id(kPsUdp, 4791);
  ASSERT_TRUE(w.b.listen(ud_service, 9).is_ok());
  int sidr_reqs = 0;
  w.fate = [&](const OutMad&, AttrId attr) {
    if (attr != AttrId::kSidrReq) return 1;
    return ++sidr_reqs == 1 ? 0 : 2;  // the first is lost, the resend arrives twice
  };
  SidrReq q;
  q.service_id = ud_service;
  q.private_data[0] = 0x5A;
  const CmId a_id = w.a.sidr_request(w.now, w.gb, q, 4096ms, 3);
  EXPECT_EQ(w.a.state(a_id), CmState::kSidrReqSent);
  w.pump();
  w.tick(1h);  // the resend, 4096 ms later
  auto eb = w.events(w.b);
  ASSERT_EQ(eb.size(), 1u) << "the duplicate SIDR_REQ is not a second request";
  EXPECT_EQ(eb[0].type, CmEventType::kSidrReqReceived);
  EXPECT_EQ(eb[0].listener, 9u);
  EXPECT_EQ(std::get<SidrReq>(eb[0].message).request_id, a_id);
  EXPECT_EQ(std::get<SidrReq>(eb[0].message).private_data[0], 0x5A);
  SidrRep rep;
  rep.qpn = 0x333;
  rep.qkey = 0x11111111;
  rep.service_id = ud_service;
  ASSERT_TRUE(w.b.sidr_reply(eb[0].id, rep).is_ok());
  EXPECT_EQ(w.b.state(eb[0].id), CmState::kIdle);
  w.pump();
  auto ea = w.events(w.a);
  ASSERT_EQ(ea.size(), 1u);
  EXPECT_EQ(ea[0].type, CmEventType::kSidrRepReceived);
  const SidrRep& got = std::get<SidrRep>(ea[0].message);
  EXPECT_EQ(got.status, static_cast<uint8_t>(SidrStatus::kSuccess));
  EXPECT_EQ(got.qpn, 0x333u);
  EXPECT_EQ(got.qkey, 0x11111111u);
  EXPECT_EQ(w.to_a.back().header.tid, w.to_b.back().header.tid) << "SIDR_REP echoes the TID";
  EXPECT_EQ(w.a.state(a_id), CmState::kIdle);

  // No listener: SIDR_REP "unsupported" at once.
  q.service_id = ip_service_id(kPsUdp, 1);
  const CmId other = w.a.sidr_request(w.now, w.gb, q, 4096ms, 3);
  w.pump();
  ea = w.events(w.a);
  ASSERT_EQ(ea.size(), 1u);
  EXPECT_EQ(ea[0].id, other);
  EXPECT_EQ(std::get<SidrRep>(ea[0].message).status,
            static_cast<uint8_t>(SidrStatus::kUnsupported));

  // Nobody answers: the request runs out of retries.
  w.fate = [](const OutMad&, AttrId) { return 0; };
  const CmId lost = w.a.sidr_request(w.now, w.gb, q, 4096ms, 2);
  for (int i = 0; i < 10 && w.a.state(lost) != CmState::kIdle; ++i) w.tick(1h);
  ea = w.events(w.a);
  ASSERT_EQ(ea.size(), 1u);
  EXPECT_EQ(ea[0].type, CmEventType::kUnreachable);
  EXPECT_EQ(ea[0].status, ETIMEDOUT);
}

}  // namespace
}  // namespace uroce::cm
