// QP1 (CM MAD) steering between the members of a shared address (docs/cm.md "QP1 shared by
// several processes"): the program's QP1 rule over real CM MADs, its size and jumps at the
// limits, and real sockets where REQs reach their listener and replies their comm ID's slot.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include "cm/cm_agent.hpp"
#include "cm/cm_messages.hpp"
#include "net/impaired_packet_io.hpp"
#include "net/reuseport_program.hpp"
#include "net/udp_device.hpp"
#include "net/udp_port.hpp"
#include "net_test_util.hpp"

namespace uroce::net {
namespace {

using namespace std::chrono_literals;
using testing::ip;
using testing::receive;
using testing::send_one;
using testing::shared;
using testing::unshared;

constexpr uint32_t kNoPosition = 0xFFFFFFFF;
constexpr uint64_t kRping = 0x0000000001061C06ULL;      // RDMA_PS_TCP, port 7174
constexpr uint64_t kPerftest = 0x0000000001064853ULL;   // RDMA_PS_TCP, port 18515
constexpr uint64_t kUdService = 0x0000000001111234ULL;  // RDMA_PS_UDP, port 0x1234

uint32_t comm_id_of_slot(uint32_t slot, uint32_t low = 0x1234) {
  return (slot << cm::kCmIdSlotShift) | low;
}

// A RoCE v2 UD SEND Only to QP1 carrying `message`: BTH + DETH + 256-byte MAD + ICRC room.
std::vector<uint8_t> cm_datagram(const cm::CmMessage& message, uint8_t mgmt_class = 0x07) {
  std::vector<uint8_t> p = testing::bth_packet(kGsiQpn, 8 + cm::kMadSize + 4);
  p[0] = 0x64;  // UD SEND Only
  const uint32_t qkey = 0x80010000;
  for (int i = 0; i < 4; ++i) p[12 + i] = static_cast<uint8_t>(qkey >> (24 - 8 * i));
  p[19] = 1;  // source QP 1
  cm::MadHeader h;
  h.tid = 0x0102030405060708ULL;
  cm::encode_cm_mad(h, message, std::span<uint8_t, cm::kMadSize>(p.data() + 20, cm::kMadSize));
  p[20 + 1] = mgmt_class;
  return p;
}

cm::Req req_for(uint64_t service) {
  cm::Req r;
  r.local_comm_id = 0xCAFE0001;  // the active side's: never used for steering
  r.service_id = service;
  return r;
}

// What the program must return, from qp1_route_of and the tables.
uint32_t expected_position(std::span<const SteeringEntry> entries,
                           std::span<const CmListenerEntry> listeners,
                           std::span<const uint8_t> payload) {
  auto slot_position = [&](uint32_t slot) -> std::optional<uint32_t> {
    for (const auto& e : entries) {
      if (e.slot == slot) return e.position;
    }
    return std::nullopt;
  };
  const Qp1Target t = qp1_route_of(payload);
  switch (t.route) {
    case Qp1Route::kNotQp1: {
      auto dqpn = dest_qpn_of(payload);
      if (!dqpn) return 0;  // (test payloads are never runts)
      return slot_position(slot_of_qpn(*dqpn)).value_or(kNoPosition);
    }
    case Qp1Route::kService:
      for (const auto& l : listeners) {
        if (l.service_id == t.service_id) return l.position;
      }
      return cm_default_position(entries);
    case Qp1Route::kSlot:
      return slot_position(t.slot).value_or(cm_default_position(entries));
    case Qp1Route::kDefault:
      return cm_default_position(entries);
  }
  return 0;
}

// Every conditional jump lands inside the program, forward; every path ends in a return.
void expect_well_formed(const std::vector<sock_filter>& prog) {
  ASSERT_LE(prog.size(), size_t{BPF_MAXINSNS});
  for (size_t i = 0; i < prog.size(); ++i) {
    const sock_filter& f = prog[i];
    if (BPF_CLASS(f.code) != BPF_JMP) continue;
    if (BPF_OP(f.code) == BPF_JA) {
      EXPECT_LT(i + 1 + f.k, prog.size()) << "insn " << i;
    } else {
      EXPECT_LT(i + 1 + f.jt, prog.size()) << "insn " << i;
      EXPECT_LT(i + 1 + f.jf, prog.size()) << "insn " << i;
    }
  }
  EXPECT_EQ(BPF_CLASS(prog.back().code), static_cast<uint16_t>(BPF_RET));
}

// The kernel's own verdict: a reuseport socket accepts the program (bpf_check_classic).
void expect_kernel_accepts(std::vector<sock_filter> prog) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  const int one = 1;
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one), 0);
  sock_fprog fprog{static_cast<unsigned short>(prog.size()), prog.data()};
  EXPECT_EQ(setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fprog, sizeof fprog), 0)
      << std::strerror(errno);
  close(fd);
}

int optmem_max() {
  std::ifstream in("/proc/sys/net/core/optmem_max");
  int v = 0;
  in >> v;
  return v;
}

const std::vector<SteeringEntry> kEntries = {{0, 2}, {3, 0, true}, {7, 1, true}, {9, 3}};
const std::vector<CmListenerEntry> kListeners = {{kRping, 1}, {kPerftest, 3}, {kUdService, 2}};

TEST(CmSteeringProgram, ReqGoesToTheListenerOfItsServiceId) {
  const auto prog = build_steering_program(kEntries, kListeners);
  EXPECT_EQ(run_steering_program(prog, cm_datagram(req_for(kRping))), 1u);
  EXPECT_EQ(run_steering_program(prog, cm_datagram(req_for(kPerftest))), 3u);
  // Nobody listens: the CM default, the lowest-slot CM-capable member (slot 3 at position 0).
  EXPECT_EQ(run_steering_program(prog, cm_datagram(req_for(0x0000000001060001ULL))), 0u);
  // Same low word, other high word: a 64-bit compare.
  EXPECT_EQ(run_steering_program(prog, cm_datagram(req_for(kRping | (1ULL << 40)))), 0u);
  EXPECT_EQ(qp1_route_of(cm_datagram(req_for(kRping))).route, Qp1Route::kService);
  EXPECT_EQ(qp1_route_of(cm_datagram(req_for(kRping))).service_id, kRping);
}

TEST(CmSteeringProgram, RepliesGoToTheSlotOfTheReceiversCommId) {
  const auto prog = build_steering_program(kEntries, kListeners);
  for (uint32_t slot : {0u, 3u, 7u, 9u}) {
    const uint32_t mine = comm_id_of_slot(slot);
    const uint32_t theirs = comm_id_of_slot(5, 0x77);  // the sender's: never used
    const uint32_t want = slot == 0 ? 2 : slot == 3 ? 0 : slot == 7 ? 1 : 3;
    cm::Rep rep;
    rep.local_comm_id = theirs;
    rep.remote_comm_id = mine;
    cm::Rtu rtu;
    rtu.local_comm_id = theirs;
    rtu.remote_comm_id = mine;
    cm::Rej rej;
    rej.local_comm_id = 0;  // a REJ 8 for our REQ carries no comm ID of its sender
    rej.remote_comm_id = mine;
    rej.reason = 8;
    cm::Mra mra;
    mra.local_comm_id = theirs;
    mra.remote_comm_id = mine;
    cm::Dreq dreq;
    dreq.local_comm_id = theirs;
    dreq.remote_comm_id = mine;
    cm::Drep drep;
    drep.local_comm_id = theirs;
    drep.remote_comm_id = mine;
    for (const cm::CmMessage& m : std::vector<cm::CmMessage>{rep, rtu, rej, mra, dreq, drep}) {
      const auto p = cm_datagram(m);
      EXPECT_EQ(run_steering_program(prog, p), want)
          << "slot " << slot << " attr " << static_cast<int>(cm::attr_id_of(m));
      EXPECT_EQ(qp1_route_of(p).route, Qp1Route::kSlot);
      EXPECT_EQ(qp1_route_of(p).slot, slot);
    }
  }
  // A slot nobody owns: the CM default (which answers as for an unknown connection).
  cm::Rep stray;
  stray.remote_comm_id = comm_id_of_slot(40);
  EXPECT_EQ(run_steering_program(prog, cm_datagram(stray)), 0u);
  cm::Dreq top;
  top.remote_comm_id = comm_id_of_slot(63, 0x3FFFFFF);
  EXPECT_EQ(run_steering_program(prog, cm_datagram(top)), 0u);
}

TEST(CmSteeringProgram, SidrRequestByServiceAndReplyByRequestId) {
  const auto prog = build_steering_program(kEntries, kListeners);
  cm::SidrReq sreq;
  sreq.request_id = comm_id_of_slot(9);  // the requester's: never used
  sreq.service_id = kUdService;
  EXPECT_EQ(run_steering_program(prog, cm_datagram(sreq)), 2u);
  sreq.service_id = kUdService + 1;
  EXPECT_EQ(run_steering_program(prog, cm_datagram(sreq)), 0u);  // no listener: default
  cm::SidrRep srep;
  srep.request_id = comm_id_of_slot(7);
  srep.service_id = kUdService;  // not used: the Request ID names the receiver
  EXPECT_EQ(run_steering_program(prog, cm_datagram(srep)), 1u);
  srep.request_id = comm_id_of_slot(9);
  EXPECT_EQ(run_steering_program(prog, cm_datagram(srep)), 3u);
}

TEST(CmSteeringProgram, OtherQp1DatagramsGoToTheCmDefault) {
  const auto prog = build_steering_program(kEntries, kListeners);
  // Another management class (a PerfMgt MAD, say) with a REQ's bytes.
  EXPECT_EQ(run_steering_program(prog, cm_datagram(req_for(kRping), 0x04)), 0u);
  // Attributes the rule does not know: ClassPortInfo (0x0001), LAP (0x0019), APR (0x001A).
  for (uint16_t attr : {0x0001, 0x0019, 0x001A, 0x0000, 0xFFFF}) {
    auto p = cm_datagram(req_for(kRping));
    p[36] = static_cast<uint8_t>(attr >> 8);
    p[37] = static_cast<uint8_t>(attr);
    EXPECT_EQ(run_steering_program(prog, p), 0u) << attr;
    EXPECT_EQ(qp1_route_of(p).route, Qp1Route::kDefault);
  }
  // Too short for the fields read (a bare BTH to QP1, or a cut MAD): default, not position 0
  // by an out-of-bounds load.
  const std::vector<SteeringEntry> entries = {{0, 0}, {1, 1, true}};
  const auto prog2 = build_steering_program(entries, kListeners);
  EXPECT_EQ(run_steering_program(prog2, testing::bth_packet(kGsiQpn)), 1u);
  auto cut = cm_datagram(req_for(kRping));
  cut.resize(kCmSteerMinLength - 1);
  EXPECT_EQ(run_steering_program(prog2, cut), 1u);
  EXPECT_EQ(qp1_route_of(cut).route, Qp1Route::kDefault);
  cut = cm_datagram(req_for(kRping));
  cut.resize(kCmSteerMinLength);
  EXPECT_EQ(run_steering_program(prog2, cut), 1u);  // position of kRping's listener: 1
}

TEST(CmSteeringProgram, CmDefaultIsTheLowestCmCapableSlotElseSlotZero) {
  const std::vector<CmListenerEntry> none;
  const auto nobody = cm_datagram(req_for(kRping));
  // Lowest CM-capable slot, wherever it sits.
  std::vector<SteeringEntry> e = {{9, 0, true}, {0, 1}, {4, 2, true}};
  EXPECT_EQ(cm_default_position(e), 2u);
  EXPECT_EQ(run_steering_program(build_steering_program(e, none), nobody), 2u);
  // Nobody CM-capable: slot 0's owner, as before QP1 steering (QPN 1 is in slot 0).
  e = {{9, 0}, {0, 1}, {4, 2}};
  EXPECT_EQ(run_steering_program(build_steering_program(e, none), nobody), 1u);
  // ...and nobody on slot 0: the kernel's hash.
  e = {{9, 0}, {4, 1}};
  EXPECT_EQ(run_steering_program(build_steering_program(e, none), nobody), kNoPosition);
  EXPECT_EQ(run_steering_program(build_steering_program({}, none), nobody), kNoPosition);
}

TEST(CmSteeringProgram, DataAndProbesAreSteeredAsBefore) {
  const auto prog = build_steering_program(kEntries, kListeners);
  EXPECT_EQ(run_steering_program(prog, testing::bth_packet(0x000011)), 2u);
  EXPECT_EQ(run_steering_program(prog, testing::bth_packet(0x000100)), 2u);  // slot 0, not QP1
  EXPECT_EQ(run_steering_program(prog, testing::bth_packet(0x010001)), 2u);
  EXPECT_EQ(run_steering_program(prog, testing::bth_packet(0x000000)), 2u);  // QP0: slot 0
  EXPECT_EQ(run_steering_program(prog, testing::bth_packet((3u << 18) | 1)), 0u);
  EXPECT_EQ(run_steering_program(prog, testing::bth_packet((7u << 18) | 5)), 1u);
  EXPECT_EQ(run_steering_program(prog, testing::bth_packet((9u << 18) | 1)), 3u);
  EXPECT_EQ(run_steering_program(prog, testing::bth_packet(20u << 18)), kNoPosition);
  EXPECT_EQ(run_steering_program(prog, testing::bth_packet(kMulticastQpn)), kNoPosition);
  // Data to a QP whose bytes look like a REQ is still data.
  auto look_alike = cm_datagram(req_for(kRping));
  look_alike[5] = 7u << 2;
  EXPECT_EQ(run_steering_program(prog, look_alike), 1u);
  for (uint8_t pos : {0, 3, 200}) {
    auto probe = make_probe(pos, 0x42);
    EXPECT_EQ(run_steering_program(prog, probe), pos);
  }
  std::vector<uint8_t> runt = {0x04, 0, 0xff, 0xff, 0};
  EXPECT_EQ(run_steering_program(prog, runt), 0u);
}

TEST(CmSteeringProgram, SixtyFourSlotsAndManyListenersStayCorrect) {
  for (size_t n_listeners : {size_t{100}, kMaxCmListeners}) {
    std::vector<SteeringEntry> entries;
    for (uint32_t s = 0; s < kSlotCount; ++s) {
      entries.push_back({s, (s * 37) % kSlotCount, s == 17 || s == 40});  // a permutation
    }
    std::vector<CmListenerEntry> listeners;
    for (size_t i = 0; i < n_listeners; ++i) {
      // Shared high words (the RDMA IP CM Service's 0x00000000) and a few others.
      const uint64_t hi = i % 7 == 0 ? 0xABCD0000ULL + i : 0;
      listeners.push_back({(hi << 32) | (0x01060000ULL + i), static_cast<uint32_t>(i % 64)});
    }
    const auto prog = build_steering_program(entries, listeners);
    expect_well_formed(prog);
    EXPECT_LE(prog.size(), 27 + 4 * kSlotCount + 5 * kMaxCmListeners);
    // 73 high words among 512 listeners need more than the 20 KiB of net.core.optmem_max
    // that older kernels allow by default (the kernel's limit, not the program's).
    if (n_listeners <= 100 || optmem_max() >= 131072) expect_kernel_accepts(prog);
    for (const auto& l : listeners) {
      ASSERT_EQ(run_steering_program(prog, cm_datagram(req_for(l.service_id))), l.position)
          << std::hex << l.service_id;
      cm::SidrReq sreq;
      sreq.service_id = l.service_id;
      ASSERT_EQ(run_steering_program(prog, cm_datagram(sreq)), l.position);
    }
    const uint32_t cm_default = (17 * 37) % kSlotCount;
    EXPECT_EQ(run_steering_program(prog, cm_datagram(req_for(0x0106FFFFULL))), cm_default);
    for (uint32_t s = 0; s < kSlotCount; ++s) {
      const uint32_t want = (s * 37) % kSlotCount;
      cm::Rtu rtu;
      rtu.remote_comm_id = comm_id_of_slot(s, 0x3FFFFFF);
      ASSERT_EQ(run_steering_program(prog, cm_datagram(rtu)), want) << "slot " << s;
      cm::SidrRep srep;
      srep.request_id = comm_id_of_slot(s);
      ASSERT_EQ(run_steering_program(prog, cm_datagram(srep)), want);
      const QpnRange r = qpn_range_of_slot(s);
      ASSERT_EQ(run_steering_program(prog, testing::bth_packet(r.base)), want);
      ASSERT_EQ(run_steering_program(prog, testing::bth_packet(r.base + r.count - 1)), want);
    }
  }
  // More listeners than there is room for: the first kMaxCmListeners are kept, and the
  // program still fits.
  std::vector<CmListenerEntry> too_many;
  for (uint32_t i = 0; i < kMaxCmListeners + 50; ++i) too_many.push_back({0x0106'0000ULL + i, 1});
  const auto prog = build_steering_program({}, too_many);
  expect_well_formed(prog);
  expect_kernel_accepts(prog);
  EXPECT_EQ(run_steering_program(prog, cm_datagram(req_for(0x0106'0000ULL))), 1u);
  EXPECT_EQ(run_steering_program(prog, cm_datagram(req_for(0x0106'0000ULL + kMaxCmListeners))),
            kNoPosition);
}

TEST(CmSteeringProgram, AgreesWithQp1RouteOfOnRandomDatagrams) {
  std::mt19937_64 rng(1234);
  for (int round = 0; round < 50; ++round) {
    std::vector<SteeringEntry> entries;
    for (uint32_t s = 0; s < kSlotCount; ++s) {
      if (rng() % 3 == 0) {
        entries.push_back({s, static_cast<uint32_t>(entries.size()), rng() % 4 == 0});
      }
    }
    std::vector<CmListenerEntry> listeners;
    const size_t n = rng() % 40;
    for (size_t i = 0; i < n; ++i) {
      listeners.push_back({0x0106'0000ULL + rng() % 64, static_cast<uint32_t>(rng() % 8)});
    }
    // The builder keeps a service's first entry; keep the oracle's table the same.
    std::vector<CmListenerEntry> unique;
    for (const auto& l : listeners) {
      bool dup = false;
      for (const auto& u : unique) dup |= u.service_id == l.service_id;
      if (!dup) unique.push_back(l);
    }
    const auto prog = build_steering_program(entries, listeners);
    for (int k = 0; k < 200; ++k) {
      auto p = cm_datagram(req_for(0x0106'0000ULL + rng() % 80));
      const uint16_t attrs[] = {0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 1};
      const uint16_t attr = attrs[rng() % std::size(attrs)];
      p[36] = static_cast<uint8_t>(attr >> 8);
      p[37] = static_cast<uint8_t>(attr);
      p[44] = static_cast<uint8_t>(rng());
      p[48] = static_cast<uint8_t>(rng());
      if (rng() % 10 == 0) p[21] = static_cast<uint8_t>(rng());
      if (rng() % 5 == 0) p[5] = static_cast<uint8_t>(rng());  // data, not QP1
      if (rng() % 10 == 0) p.resize(12 + rng() % 60);
      ASSERT_EQ(run_steering_program(prog, p), expected_position(entries, unique, p))
          << "round " << round << " datagram " << k;
    }
  }
}

// Real sockets: two members of 127.0.0.1:<port> on slots 3 and 7, each listening on its own
// service; the kernel must deliver each REQ to its listener and each reply to its slot.
TEST(CmSteering, ReqsReachTheirListenerAndRepliesTheirSlot) {
  testing::TempDir dir;
  constexpr uint16_t kPort = 24831;
  auto a = UdpPort::open(shared("127.0.0.1", kPort, dir.path(), 3));
  ASSERT_TRUE(a.ok()) << a.error().message;
  auto b = UdpPort::open(shared("127.0.0.1", kPort, dir.path(), 7));
  ASSERT_TRUE(b.ok()) << b.error().message;
  UdpPort& pa = *a.value();
  UdpPort& pb = *b.value();
  EXPECT_EQ(pa.listen_service(kRping), 0);
  EXPECT_EQ(pb.listen_service(kPerftest), 0);
  EXPECT_EQ(pb.listen_service(kPerftest), 0);  // idempotent
  EXPECT_EQ(pb.listen_service(kRping), EADDRINUSE);
  EXPECT_EQ(pb.set_cm_capable(true), 0);
  pa.maintain();  // picks up b's records, as after a membership change
  EXPECT_EQ(pa.listened_services(), std::vector<uint64_t>{kRping});
  EXPECT_EQ(pb.listened_services(), std::vector<uint64_t>{kPerftest});

  auto s = UdpPort::open(unshared("127.0.0.1"));
  ASSERT_TRUE(s.ok());
  UdpPort& sender = *s.value();
  auto expect_at = [&](UdpPort& want, UdpPort& other, const std::vector<uint8_t>& bytes,
                       const char* what) {
    ASSERT_EQ(send_one(sender, bytes, ip("127.0.0.1"), kPort), 1u) << what;
    auto got = receive(want, 1, 200ms);
    ASSERT_EQ(got.size(), 1u) << what;
    EXPECT_EQ(got[0].bytes, bytes) << what;
    EXPECT_TRUE(receive(other, 1, 20ms).empty()) << what;
  };
  for (int i = 0; i < 3; ++i) {
    expect_at(pa, pb, cm_datagram(req_for(kRping)), "REQ rping -> a");
    expect_at(pb, pa, cm_datagram(req_for(kPerftest)), "REQ perftest -> b");
  }
  expect_at(pb, pa, cm_datagram(req_for(0x0000000001060001ULL)), "REQ nobody -> CM default b");
  for (uint32_t low : {1u, 0x3FFFFFFu}) {
    cm::Rep rep;
    rep.local_comm_id = 0x11111111;
    rep.remote_comm_id = comm_id_of_slot(3, low);
    expect_at(pa, pb, cm_datagram(rep), "REP slot 3 -> a");
    rep.remote_comm_id = comm_id_of_slot(7, low);
    expect_at(pb, pa, cm_datagram(rep), "REP slot 7 -> b");
  }
  cm::SidrRep srep;
  srep.request_id = comm_id_of_slot(3);
  expect_at(pa, pb, cm_datagram(srep), "SIDR_REP slot 3 -> a");
  // Data still by QPN slot.
  expect_at(pa, pb, testing::bth_packet(pa.qpn_range().base), "data slot 3 -> a");
  expect_at(pb, pa, testing::bth_packet(pb.qpn_range().base), "data slot 7 -> b");

  // a stops listening: b may take the service over.
  pa.unlisten_service(kRping);
  EXPECT_EQ(pb.listen_service(kRping), 0);
  expect_at(pb, pa, cm_datagram(req_for(kRping)), "REQ rping -> b after a unlistened");
  // b leaves: its listeners go with it; a can listen on them and is the only member.
  b.value().reset();
  pa.maintain();
  EXPECT_EQ(pa.listen_service(kPerftest), 0);
  ASSERT_EQ(send_one(sender, cm_datagram(req_for(kPerftest)), ip("127.0.0.1"), kPort), 1u);
  EXPECT_EQ(receive(pa, 1, 200ms).size(), 1u);
  EXPECT_EQ(pa.counters().rx_drop_misdelivered, 0u);
}

// An address takes kMaxCmListeners listeners of the RDMA IP CM Service (one high word: 2
// instructions each), and refuses one more without changing anything.
TEST(CmSteering, AnAddressTakesTheMaximumOfListeners) {
  testing::TempDir dir;
  constexpr uint16_t kPort = 24833;
  auto a = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  auto b = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  ASSERT_TRUE(a.ok() && b.ok());
  for (uint64_t i = 0; i < kMaxCmListeners; ++i) {
    ASSERT_EQ((i % 2 == 0 ? a : b).value()->listen_service(0x0106'0000ULL + i), 0) << i;
  }
  EXPECT_EQ(a.value()->listen_service(0x0106'FFFFULL), ENOSPC);
  EXPECT_EQ(a.value()->listened_services().size(), kMaxCmListeners / 2);
  auto s = UdpPort::open(unshared("127.0.0.1"));
  ASSERT_TRUE(s.ok());
  const uint64_t last = 0x0106'0000ULL + kMaxCmListeners - 1;  // b's
  ASSERT_EQ(send_one(*s.value(), cm_datagram(req_for(last)), ip("127.0.0.1"), kPort), 1u);
  EXPECT_EQ(receive(*b.value(), 1, 200ms).size(), 1u);
  b.value()->unlisten_service(last);
  EXPECT_EQ(a.value()->listen_service(0x0106'FFFFULL), 0);
}

// The device's PacketIo (here under ImpairedPacketIo, which forwards) applies CM listens to
// every address: all of them or none.
TEST(CmSteering, PacketIoListensOnEveryAddressOrNone) {
  testing::TempDir dir;
  constexpr uint16_t kPort = 24834;
  auto other = UdpPort::open(shared("::1", kPort, dir.path()));
  if (!other.ok() && other.error().code == EADDRNOTAVAIL) GTEST_SKIP() << "no ::1 on this host";
  ASSERT_TRUE(other.ok()) << other.error().message;
  ASSERT_EQ(other.value()->listen_service(kPerftest), 0);
  std::vector<std::unique_ptr<UdpPort>> ports;
  for (const char* addr : {"127.0.0.1", "::1"}) {
    auto p = UdpPort::open(shared(addr, kPort, dir.path(), 5));
    ASSERT_TRUE(p.ok()) << p.error().message;
    ports.push_back(std::move(p.value()));
  }
  std::vector<UdpPort*> raw = {ports[0].get(), ports[1].get()};
  auto udp = std::make_unique<UdpPacketIo>(std::move(ports), kPort);
  ImpairedPacketIo io(std::move(udp), fault::ImpairSpec{}, 1);
  device::PacketIo& pio = io;

  EXPECT_EQ(pio.cm_listen(kPerftest, true), EADDRINUSE);  // taken on ::1
  EXPECT_TRUE(raw[0]->listened_services().empty());       // so not kept on 127.0.0.1
  EXPECT_TRUE(raw[1]->listened_services().empty());
  EXPECT_EQ(pio.cm_listen(kRping, true), 0);
  EXPECT_EQ(pio.cm_listen(kRping, true), 0);
  for (UdpPort* p : raw) EXPECT_EQ(p->listened_services(), std::vector<uint64_t>{kRping});
  EXPECT_EQ(pio.cm_capable(true), 0);
  for (UdpPort* p : raw) EXPECT_TRUE(p->cm_capable());
  EXPECT_EQ(pio.cm_listen(kRping, false), 0);
  EXPECT_EQ(pio.cm_capable(false), 0);
  for (UdpPort* p : raw) {
    EXPECT_TRUE(p->listened_services().empty());
    EXPECT_FALSE(p->cm_capable());
  }
  // The other member on ::1 saw the device's listen come and go in the registry.
  other.value()->maintain();
  EXPECT_EQ(pio.cm_listen(kUdService, true), 0);
  EXPECT_EQ(other.value()->listen_service(kUdService), EADDRINUSE);
}

// A member that died with listeners holds nothing: the next member may listen on them.
TEST(CmSteering, ADeadMembersListenersArePruned) {
  testing::TempDir dir;
  constexpr uint16_t kPort = 24832;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  const uint64_t start = process_start_time(child);
  int status = 0;
  waitpid(child, &status, 0);
  {
    auto reg = RegistryFile::open(dir.path(), kPort);
    ASSERT_TRUE(reg.ok());
    auto lock = reg.value().lock();
    RegistryState st = reg.value().load();
    RegistryMember dead;
    dead.pid = child;
    dead.start_time = start;
    dead.token = 0x5EAD;
    dead.slot = 0;
    dead.addr = ip("127.0.0.1");
    dead.cm_capable = true;
    dead.listens = {kRping};
    st.members.push_back(dead);
    reg.value().store(st);
  }
  auto a = UdpPort::open(shared("127.0.0.1", kPort, dir.path()));
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a.value()->position(), 0u);
  EXPECT_EQ(a.value()->listen_service(kRping), 0);
  auto s = UdpPort::open(unshared("127.0.0.1"));
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(send_one(*s.value(), cm_datagram(req_for(kRping)), ip("127.0.0.1"), kPort), 1u);
  EXPECT_EQ(receive(*a.value(), 1, 200ms).size(), 1u);
  auto reg = RegistryFile::open(dir.path(), kPort);
  ASSERT_TRUE(reg.ok());
  auto lock = reg.value().lock();
  const RegistryState st = reg.value().load();
  ASSERT_EQ(st.members.size(), 1u);
  EXPECT_EQ(st.members[0].listens, std::vector<uint64_t>{kRping});
  EXPECT_FALSE(st.members[0].cm_capable);
}

}  // namespace
}  // namespace uroce::net
