// An adversarial peer over real UDP: a plain UDP socket on 127.0.0.2 forges RoCE v2 packets
// (built with the codec, valid ICRC unless a case corrupts it) at live RC and UD QPs of a
// uroce device on 127.0.0.1 and a private port. For every case it checks
//   - the IBTA answer on the wire: the exact NAK (code, PSN, MSN) or silence,
//   - the exact counters: every device counter's change (traffic counters aside) equals the
//     case's list, all others unchanged,
//   - the QP state afterwards,
//   - registered memory and the guard pages around it, byte for byte.
// The cases and the answer each gets are listed in docs/engine.md ("Adversarial peer").
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "device_integration_util.hpp"
#include "wire/icrc.hpp"
#include "wire/packet.hpp"

namespace uroce::itest {
namespace {

using namespace std::chrono_literals;
using wire::NakCode;
using wire::Op;

constexpr uint32_t kPeerQpn = 0x4D2;
constexpr uint32_t kRqPsn = 0x100;  // what the QP expects from the peer first
constexpr size_t kPage = 4096;
constexpr uint32_t kQkey = 0x11111111;

Gid v4(uint8_t d) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, d};
}

uint8_t rc(Op op) {
  return wire::make_opcode(wire::Transport::kRc, op);
}

// Counters whose change a case does not pin: they follow the number of packets.
bool traffic_counter(Counter c) {
  return c == Counter::kSentPkts || c == Counter::kRcvdPkts || c == Counter::kBytesSent ||
         c == Counter::kBytesRcvd || c == Counter::kIcrcOkModuloIpId;
}

struct Answer {
  enum class Kind { kSilence, kAck, kNak, kReadResponse, kAtomicAck };
  Kind kind = Kind::kSilence;
  NakCode nak{};
  uint32_t psn = 0;
  uint32_t msn = 0;
};

Answer silence() {
  return {};
}
Answer ack(uint32_t psn, uint32_t msn) {
  return {Answer::Kind::kAck, {}, psn, msn};
}
Answer nak(NakCode c, uint32_t psn, uint32_t msn) {
  return {Answer::Kind::kNak, c, psn, msn};
}

class AdversarialPeer : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = pick_udp_port();
    auto d = Device::open(loopback_options(port_, registry_.path()));
    ASSERT_TRUE(d.is_ok()) << d.error().message;
    dev_ = std::make_unique<Device>(std::move(d.value()));
    pd_ = std::make_unique<ProtectionDomain>(std::move(dev_->alloc_pd().value()));
    pd2_ = std::make_unique<ProtectionDomain>(std::move(dev_->alloc_pd().value()));
    cq_ = std::make_unique<CompletionQueue>(std::move(dev_->create_cq(4096).value()));
    // Five pages: guard | MR (all rights) | guard | read-only MR and other-PD MR | guard.
    mem_.assign(5 * kPage + 64, 0);
    base_ = mem_.data() + (64 - reinterpret_cast<uintptr_t>(mem_.data()) % 64);
    for (size_t i = 0; i < 5 * kPage; ++i) base_[i] = static_cast<uint8_t>(i * 37 + 11);
    mr_ = std::make_unique<MemoryRegion>(
        std::move(pd_->reg_mr(base_ + kPage, kPage, kAllAccess | kAccessFlushGlobal).value()));
    ro_ = std::make_unique<MemoryRegion>(
        std::move(pd_->reg_mr(base_ + 3 * kPage, kPage / 2, kAccessRemoteRead).value()));
    other_ = std::make_unique<MemoryRegion>(
        std::move(pd2_->reg_mr(base_ + 3 * kPage + kPage / 2, kPage / 2, kAllAccess).value()));
    expect_ = std::vector<uint8_t>(base_, base_ + 5 * kPage);

    sock_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(sock_, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(0x7F000002);  // 127.0.0.2: any 127/8 address is local on lo
    ASSERT_EQ(bind(sock_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
    sockaddr_in b{};
    socklen_t bl = sizeof b;
    ASSERT_EQ(getsockname(sock_, reinterpret_cast<sockaddr*>(&b), &bl), 0);
    peer_sport_ = ntohs(b.sin_port);
  }

  void TearDown() override {
    if (sock_ >= 0) close(sock_);
  }

  QueuePair make_qp(QpType type, uint32_t access = kAllAccess | kAccessFlushGlobal,
                    uint8_t max_dest_rd_atomic = 16, bool connect = true) {
    QpInitAttr init;
    init.qp_type = type;
    init.send_cq = cq_->id();
    init.recv_cq = cq_->id();
    init.cap = QpCap{16, 16, 2, 2, 0};
    QueuePair qp = std::move(pd_->create_qp(init).value());
    if (connect) {
      ConnectOptions o;
      o.access = access;
      o.max_dest_rd_atomic = max_dest_rd_atomic;
      EXPECT_TRUE(connect_qp(qp, 0x500, QpEndpoint{kPeerQpn, kRqPsn, v4(2)}, o));
    }
    return qp;
  }

  void post_recv(QueuePair& qp, uint64_t wr_id, size_t off, uint32_t len) {
    const Sge s = mr_->sge(off, len);
    ASSERT_TRUE(qp.post_recv(RecvWr{wr_id, std::span<const Sge>(&s, 1)}));
  }

  // The bytes of one forged packet (valid ICRC for 127.0.0.2 -> 127.0.0.1 with IPv4 ID 0).
  std::vector<uint8_t> forge(const wire::Headers& h, std::span<const uint8_t> payload = {}) {
    std::vector<uint8_t> bytes(wire::packet_size(h.bth.opcode, payload.size()));
    EXPECT_NE(bytes.size(), 0u);
    EXPECT_EQ(wire::build_packet(h, payload, bytes), bytes.size());
    wire::IpContext ip;
    ip.src = v4(2);
    ip.dst = v4(1);
    ip.sport = peer_sport_;
    wire::write_icrc(ip, bytes);
    return bytes;
  }
  wire::Headers request(const QueuePair& qp, Op op, uint32_t psn) const {
    wire::Headers h{};
    h.bth.opcode = rc(op);
    h.bth.dqpn = qp.qp_num();
    h.bth.psn = Psn(psn);
    h.bth.ackreq = true;
    return h;
  }
  wire::Headers rdma(const QueuePair& qp, Op op, uint32_t psn, uint64_t va, uint32_t rkey,
                     uint32_t len) const {
    wire::Headers h = request(qp, op, psn);
    h.reth = {va, rkey, len};
    return h;
  }

  void send_raw(std::span<const uint8_t> bytes, uint8_t from = 2) {
    int s = sock_;
    int tmp = -1;
    if (from != 2) {  // another source address: a second socket on 127.0.0.<from>
      tmp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(0x7F000000u | from);
      a.sin_port = htons(port_);  // the source port is covered by the ICRC
      ASSERT_EQ(bind(tmp, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
      s = tmp;
    }
    sockaddr_in d{};
    d.sin_family = AF_INET;
    d.sin_port = htons(port_);
    d.sin_addr.s_addr = htonl(0x7F000001);
    ASSERT_EQ(sendto(s, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&d), sizeof d),
              static_cast<ssize_t>(bytes.size()));
    if (tmp >= 0) close(tmp);
  }

  // The next datagram the device sends to the peer, decoded, or nullopt after `timeout`.
  std::optional<wire::Headers> receive(std::chrono::milliseconds timeout) {
    pollfd p{sock_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
    std::array<uint8_t, 9000> buf{};
    sockaddr_in from{};
    socklen_t fl = sizeof from;
    const ssize_t n =
        recvfrom(sock_, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &fl);
    if (n <= 0) return std::nullopt;
    const std::span<const uint8_t> bytes(buf.data(), static_cast<size_t>(n));
    wire::ParsedPacket pk;
    EXPECT_EQ(wire::parse_packet(bytes, pk), wire::ParseError::kOk);
    wire::IpContext ip;
    ip.src = v4(1);
    ip.dst = v4(2);
    ip.sport = ntohs(from.sin_port);
    EXPECT_NE(wire::verify_icrc_udp(ip, bytes), wire::IcrcResult::kBad) << "uroce sent a bad ICRC";
    if (pk.info == nullptr) return std::nullopt;
    rx_payload_.assign(pk.payload.begin(), pk.payload.end());
    return pk.hdr;
  }

  // Sends the datagrams, then checks the answer, every counter's change, the QP state and
  // all memory. `changed` lists the memory the case may write, as (offset in base_, bytes).
  void fire(const QueuePair* qp, const std::vector<std::vector<uint8_t>>& datagrams,
            const Answer& want, std::vector<std::pair<Counter, uint64_t>> counters,
            std::optional<QpState> state, uint8_t from = 2) {
    const Counters before = dev_->counters();
    for (const auto& d : datagrams) send_raw(d, from);
    const auto settled = [&] {
      const Counters now = dev_->counters();
      for (size_t i = 0; i < transport::kCounterCount; ++i) {
        const auto c = static_cast<Counter>(i);
        if (traffic_counter(c)) continue;
        uint64_t delta = 0;
        for (const auto& [k, v] : counters) {
          if (k == c) delta = v;
        }
        if (now[c] - before[c] != delta) return false;
      }
      return true;
    };
    std::optional<wire::Headers> got;
    if (want.kind != Answer::Kind::kSilence) got = receive(2000ms);
    const auto end = std::chrono::steady_clock::now() + 2s;
    while (!settled() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(30ms);  // anything more would show up now
    // The answer.
    if (want.kind == Answer::Kind::kSilence) {
      EXPECT_FALSE(receive(20ms).has_value()) << "expected silence";
    } else {
      ASSERT_TRUE(got.has_value()) << "no answer";
      switch (want.kind) {
        case Answer::Kind::kAck:
          EXPECT_EQ(got->bth.opcode, rc(Op::kAcknowledge));
          EXPECT_EQ(got->aeth.syndrome, wire::Aeth::ack());
          break;
        case Answer::Kind::kNak:
          EXPECT_EQ(got->bth.opcode, rc(Op::kAcknowledge));
          EXPECT_EQ(got->aeth.syndrome, wire::Aeth::nak(want.nak))
              << "syndrome 0x" << std::hex << int{got->aeth.syndrome};
          break;
        case Answer::Kind::kReadResponse:
          EXPECT_EQ(got->bth.opcode, rc(Op::kReadResponseOnly));
          EXPECT_EQ(got->aeth.syndrome, wire::Aeth::ack());
          break;
        case Answer::Kind::kAtomicAck:
          EXPECT_EQ(got->bth.opcode, rc(Op::kAtomicAcknowledge));
          break;
        case Answer::Kind::kSilence:
          break;
      }
      EXPECT_EQ(got->bth.psn.value(), want.psn);
      EXPECT_EQ(got->aeth.msn, want.msn);
      EXPECT_EQ(got->bth.dqpn, kPeerQpn);
      EXPECT_FALSE(receive(20ms).has_value()) << "one answer only";
    }
    // Every counter.
    const Counters after = dev_->counters();
    for (size_t i = 0; i < transport::kCounterCount; ++i) {
      const auto c = static_cast<Counter>(i);
      if (traffic_counter(c)) continue;
      uint64_t delta = 0;
      for (const auto& [k, v] : counters) {
        if (k == c) delta = v;
      }
      EXPECT_EQ(after[c] - before[c], delta) << "counter " << transport::counter_name(c);
    }
    if (state && qp != nullptr) {
      EXPECT_EQ(qp->state(), *state);
    }
    expect_memory();
  }

  void expect_memory() {
    for (size_t i = 0; i < expect_.size(); ++i) {
      if (base_[i] != expect_[i]) {
        ADD_FAILURE() << "byte " << i << " (page " << i / kPage << ") is 0x" << std::hex
                      << int{base_[i]} << ", expected 0x" << int{expect_[i]};
        return;
      }
    }
  }
  // The MR's address of byte `off` inside it, and the index of that byte in base_.
  [[nodiscard]] uint64_t va(size_t off = 0) const { return mr_->info().addr + off; }
  static size_t at(size_t off) { return kPage + off; }

  TempDir registry_;
  uint16_t port_ = 0;
  uint16_t peer_sport_ = 0;
  int sock_ = -1;
  std::unique_ptr<Device> dev_;
  std::unique_ptr<ProtectionDomain> pd_;
  std::unique_ptr<ProtectionDomain> pd2_;
  std::unique_ptr<CompletionQueue> cq_;
  std::vector<uint8_t> mem_;
  uint8_t* base_ = nullptr;
  std::unique_ptr<MemoryRegion> mr_;     // page 1, all rights, FLUSH_GLOBAL
  std::unique_ptr<MemoryRegion> ro_;     // page 3 first half, REMOTE_READ only
  std::unique_ptr<MemoryRegion> other_;  // page 3 second half, the other PD
  std::vector<uint8_t> expect_;
  std::vector<uint8_t> rx_payload_;
};

const std::vector<uint8_t> k8 = {1, 2, 3, 4, 5, 6, 7, 8};

// ---- R_Keys, PDs, rights, ranges

TEST_F(AdversarialPeer, ValidWriteLandsAndIsAcked) {
  QueuePair qp = make_qp(QpType::kRc);
  std::copy(k8.begin(), k8.end(), expect_.begin() + static_cast<long>(at(8)));
  fire(&qp, {forge(rdma(qp, Op::kWriteOnly, kRqPsn, va(8), mr_->rkey(), 8), k8)}, ack(kRqPsn, 1),
       {{Counter::kRxWriteRequests, 1}}, QpState::kRts);
}

struct BadWrite {
  const char* name;
  std::function<std::pair<uint64_t, uint32_t>(AdversarialPeer&)> target;  // va, rkey
  uint32_t len;
};

class AdversarialWrite : public AdversarialPeer {
 public:
  // A WRITE Only the responder must refuse: NAK remote access error, QP to ERR (IBA
  // 9.7.5.1.x C9-88, rxe check_rkey class C).
  void refused(uint64_t target_va, uint32_t rkey, uint32_t len = 8) {
    QueuePair qp = make_qp(QpType::kRc);
    std::vector<uint8_t> payload(len, 0xEE);
    fire(&qp, {forge(rdma(qp, Op::kWriteOnly, kRqPsn, target_va, rkey, len), payload)},
         nak(NakCode::kRemoteAccessError, kRqPsn, 0),
         {{Counter::kRxWriteRequests, 1}, {Counter::kRespRemoteAccessErrors, 1}}, QpState::kErr);
  }
};

TEST_F(AdversarialWrite, GuessedRkeyIsRefused) {
  refused(va(0), mr_->rkey() ^ 0x5A5A5000);
}
TEST_F(AdversarialWrite, RkeyWithTheRightIndexButWrongRandomBitsIsRefused) {
  refused(va(0), mr_->rkey() + (1u << 20));
}
TEST_F(AdversarialWrite, StaleRkeyOfADeregisteredMrIsRefused) {
  std::vector<uint8_t> gone(64, 0x33);
  MemoryRegion m = std::move(pd_->reg_mr(gone.data(), gone.size(), kAllAccess).value());
  const uint64_t gva = m.info().addr;
  const uint32_t rkey = m.rkey();
  ASSERT_TRUE(m.destroy());
  refused(gva, rkey);
  EXPECT_TRUE(std::all_of(gone.begin(), gone.end(), [](uint8_t b) { return b == 0x33; }));
}
TEST_F(AdversarialWrite, OtherPdsMrIsRefused) {
  refused(other_->info().addr, other_->rkey());
}
TEST_F(AdversarialWrite, ReadOnlyMrIsRefused) {
  refused(ro_->info().addr, ro_->rkey());
}
TEST_F(AdversarialWrite, RangePastTheEndIsRefused) {
  refused(va(kPage - 4), mr_->rkey());
}
TEST_F(AdversarialWrite, RangeBeforeTheStartIsRefused) {
  refused(va(0) - 4, mr_->rkey());
}
TEST_F(AdversarialWrite, RangeWrappingAroundTwoToThe64IsRefused) {
  refused(~uint64_t{0} - 3, mr_->rkey());
}
TEST_F(AdversarialWrite, HugeDmaLengthIsRefused) {
  QueuePair qp = make_qp(QpType::kRc);
  // First of a 2 GiB WRITE starting inside the MR: the RETH range is checked whole.
  wire::Headers h = rdma(qp, Op::kWriteFirst, kRqPsn, va(0), mr_->rkey(), 0x8000'0000u);
  fire(&qp, {forge(h, std::vector<uint8_t>(1024, 0xEE))},
       nak(NakCode::kRemoteAccessError, kRqPsn, 0),
       {{Counter::kRxWriteRequests, 1}, {Counter::kRespRemoteAccessErrors, 1}}, QpState::kErr);
}

TEST_F(AdversarialPeer, ReadOfAWriteOnlyRightIsRefused) {
  QueuePair qp = make_qp(QpType::kRc);
  std::vector<uint8_t> wo(64, 0x44);
  MemoryRegion m =
      std::move(pd_->reg_mr(wo.data(), wo.size(), kAccessLocalWrite | kAccessRemoteWrite).value());
  fire(&qp, {forge(rdma(qp, Op::kReadRequest, kRqPsn, m.info().addr, m.rkey(), 16))},
       nak(NakCode::kRemoteAccessError, kRqPsn, 0),
       {{Counter::kRxReadRequests, 1}, {Counter::kRespRemoteAccessErrors, 1}}, QpState::kErr);
}

// ---- atomics

TEST_F(AdversarialPeer, UnalignedAtomicIsAnInvalidRequest) {
  QueuePair qp = make_qp(QpType::kRc);
  wire::Headers h = request(qp, Op::kFetchAdd, kRqPsn);
  h.atomic_eth = {va(4), mr_->rkey(), 1, 0};
  fire(&qp, {forge(h)}, nak(NakCode::kInvalidRequest, kRqPsn, 0),
       {{Counter::kRxAtomicRequests, 1}, {Counter::kRespRemoteInvalidRequest, 1}}, QpState::kErr);
}

TEST_F(AdversarialPeer, AtomicOnAnMrWithoutTheRightIsRefused) {
  QueuePair qp = make_qp(QpType::kRc);
  wire::Headers h = request(qp, Op::kCompareSwap, kRqPsn);
  h.atomic_eth = {ro_->info().addr, ro_->rkey(), 1, 0};
  fire(&qp, {forge(h)}, nak(NakCode::kRemoteAccessError, kRqPsn, 0),
       {{Counter::kRxAtomicRequests, 1}, {Counter::kRespRemoteAccessErrors, 1}}, QpState::kErr);
}

// ---- PSNs

TEST_F(AdversarialPeer, PsnFarAheadDrawsOneSequenceNakThenSilence) {
  QueuePair qp = make_qp(QpType::kRc);
  post_recv(qp, 1, 0, 64);
  const auto ahead = forge(request(qp, Op::kSendOnly, kRqPsn + 0x7FFFFF), k8);
  fire(&qp, {ahead}, nak(NakCode::kPsnSequenceError, kRqPsn, 0), {{Counter::kOutOfSeqRequest, 1}},
       QpState::kRts);
  fire(&qp, {ahead}, silence(), {{Counter::kOutOfSeqRequest, 1}, {Counter::kDropOutOfSequence, 1}},
       QpState::kRts);
}

TEST_F(AdversarialPeer, PsnBehindIsADuplicateReAckedWithoutEffect) {
  QueuePair qp = make_qp(QpType::kRc);
  post_recv(qp, 1, 0, 64);
  // 0x800000 behind is still "behind" (half the PSN space)
  fire(&qp, {forge(request(qp, Op::kSendOnly, kRqPsn - 0x800000), k8)}, ack(kRqPsn - 1, 0),
       {{Counter::kDuplicateRequest, 1}}, QpState::kRts);
  EXPECT_TRUE(wait_wcs(*cq_, 1, 50ms).empty()) << "a duplicate must not consume a receive";
}

// ---- opcodes invalid for the QP type, the state or the sequence

TEST_F(AdversarialPeer, UcOpcodeAtAnRcQpIsDropped) {
  QueuePair qp = make_qp(QpType::kRc);
  wire::Headers h = request(qp, Op::kSendOnly, kRqPsn);
  h.bth.opcode = wire::make_opcode(wire::Transport::kUc, Op::kSendOnly);
  h.bth.ackreq = false;
  fire(&qp, {forge(h, k8)}, silence(), {{Counter::kDropBadQpType, 1}}, QpState::kRts);
}

TEST_F(AdversarialPeer, ResponseWithNothingOutstandingIsDropped) {
  QueuePair qp = make_qp(QpType::kRc);
  wire::Headers h = request(qp, Op::kAcknowledge, 0x500);
  h.bth.ackreq = false;
  h.aeth = {wire::Aeth::ack(), 1};
  fire(&qp, {forge(h)}, silence(), {{Counter::kDropUnexpectedResponse, 1}}, QpState::kRts);
}

TEST_F(AdversarialPeer, MiddleWithoutFirstIsAnInvalidRequest) {
  QueuePair qp = make_qp(QpType::kRc);
  fire(&qp, {forge(request(qp, Op::kWriteMiddle, kRqPsn), std::vector<uint8_t>(1024, 0xEE))},
       nak(NakCode::kInvalidRequest, kRqPsn, 0), {{Counter::kRespRemoteInvalidRequest, 1}},
       QpState::kErr);
}

TEST_F(AdversarialPeer, QpInInitDropsRequests) {
  QueuePair qp = make_qp(QpType::kRc, kAllAccess, 16, false);
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.qp_access_flags = kAllAccess;
  ASSERT_TRUE(qp.modify(a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags));
  fire(&qp, {forge(rdma(qp, Op::kWriteOnly, kRqPsn, va(0), mr_->rkey(), 8), k8)}, silence(),
       {{Counter::kDropBadQpState, 1}}, QpState::kInit);
}

TEST_F(AdversarialPeer, PacketsToADestroyedQpAreDropped) {
  QueuePair qp = make_qp(QpType::kRc);
  const auto bytes = forge(rdma(qp, Op::kWriteOnly, kRqPsn, va(0), mr_->rkey(), 8), k8);
  ASSERT_TRUE(qp.destroy());
  fire(nullptr, {bytes}, silence(), {{Counter::kDropBadQpn, 1}}, std::nullopt);
}

TEST_F(AdversarialPeer, MulticastQpnIsDropped) {
  QueuePair qp = make_qp(QpType::kRc);
  wire::Headers h = request(qp, Op::kSendOnly, kRqPsn);
  h.bth.dqpn = 0xFFFFFF;
  fire(&qp, {forge(h, k8)}, silence(), {{Counter::kDropMulticastQpn, 1}}, QpState::kRts);
}

// ---- lengths, PadCnt, truncation, ICRC, addresses, P_Key

TEST_F(AdversarialPeer, PayloadShorterThanTheDmaLengthIsAnInvalidRequest) {
  QueuePair qp = make_qp(QpType::kRc);
  fire(&qp,
       {forge(rdma(qp, Op::kWriteOnly, kRqPsn, va(0), mr_->rkey(), 100),
              std::vector<uint8_t>(52, 0xEE))},
       nak(NakCode::kInvalidRequest, kRqPsn, 0),
       {{Counter::kRxWriteRequests, 1}, {Counter::kRespRemoteInvalidRequest, 1}}, QpState::kErr);
}

TEST_F(AdversarialPeer, SendLongerThanThePmtuIsAnInvalidRequest) {
  QueuePair qp = make_qp(QpType::kRc);  // path MTU 1024
  post_recv(qp, 1, 0, 4096);
  fire(&qp, {forge(request(qp, Op::kSendOnly, kRqPsn), std::vector<uint8_t>(2048, 0xEE))},
       nak(NakCode::kInvalidRequest, kRqPsn, 0),
       {{Counter::kRespRemoteInvalidRequest, 1}, {Counter::kRespCqeError, 1}}, QpState::kErr);
}

TEST_F(AdversarialPeer, BadPadCntIsDropped) {
  QueuePair qp = make_qp(QpType::kRc);
  std::vector<uint8_t> b = forge(request(qp, Op::kSendOnly, kRqPsn));  // no payload
  b[1] = static_cast<uint8_t>((b[1] & ~0x30) | (2 << 4));              // PadCnt 2 of nothing
  fire(&qp, {b}, silence(), {{Counter::kDropBadPadcnt, 1}}, QpState::kRts);
}

TEST_F(AdversarialPeer, TruncatedHeadersAreDropped) {
  QueuePair qp = make_qp(QpType::kRc);
  const auto full = forge(rdma(qp, Op::kWriteOnly, kRqPsn, va(0), mr_->rkey(), 8), k8);
  // 8 bytes (half a BTH), a BTH alone, a BTH and half a RETH.
  fire(&qp,
       {std::vector<uint8_t>(full.begin(), full.begin() + 8),
        std::vector<uint8_t>(full.begin(), full.begin() + 12),
        std::vector<uint8_t>(full.begin(), full.begin() + 20)},
       silence(), {{Counter::kDropTruncated, 3}}, QpState::kRts);
}

TEST_F(AdversarialPeer, BadIcrcIsDropped) {
  QueuePair qp = make_qp(QpType::kRc);
  auto b = forge(rdma(qp, Op::kWriteOnly, kRqPsn, va(0), mr_->rkey(), 8), k8);
  b[b.size() - 6] ^= 0x80;  // a payload bit
  fire(&qp, {b}, silence(), {{Counter::kIcrcErrors, 1}}, QpState::kRts);
}

TEST_F(AdversarialPeer, AnotherSourceAddressIsDropped) {
  QueuePair qp = make_qp(QpType::kRc);
  wire::Headers h = rdma(qp, Op::kWriteOnly, kRqPsn, va(0), mr_->rkey(), 8);
  std::vector<uint8_t> b(wire::packet_size(h.bth.opcode, 8));
  ASSERT_EQ(wire::build_packet(h, k8, b), b.size());
  wire::IpContext ip;
  ip.src = v4(3);
  ip.dst = v4(1);
  ip.sport = port_;
  wire::write_icrc(ip, b);  // a valid ICRC for 127.0.0.3:port_
  fire(&qp, {b}, silence(), {{Counter::kDropBadAddress, 1}}, QpState::kRts, 3);
}

TEST_F(AdversarialPeer, WrongPkeyIsDropped) {
  QueuePair qp = make_qp(QpType::kRc);
  wire::Headers h = rdma(qp, Op::kWriteOnly, kRqPsn, va(0), mr_->rkey(), 8);
  h.bth.pkey = 0x8001;
  fire(&qp, {forge(h, k8)}, silence(), {{Counter::kDropBadPkey, 1}}, QpState::kRts);
}

// ---- invalidation, FLUSH, ATOMIC WRITE

TEST_F(AdversarialPeer, InvalidationOfARegisteredMrIsRefusedAndTheKeySurvives) {
  QueuePair qp = make_qp(QpType::kRc);
  post_recv(qp, 1, 64, 64);
  wire::Headers h = request(qp, Op::kSendOnlyInv, kRqPsn);
  h.ieth_rkey = mr_->rkey();
  std::copy(k8.begin(), k8.end(), expect_.begin() + static_cast<long>(at(64)));  // the SEND data
  fire(&qp, {forge(h, k8)}, nak(NakCode::kInvalidRequest, kRqPsn, 0),
       {{Counter::kRespRemoteInvalidRequest, 1}, {Counter::kRespCqeError, 1}}, QpState::kErr);
  const auto wcs = wait_wcs(*cq_, 1, 1s);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemInvReqErr);
  // The R_Key still works on a fresh QP.
  QueuePair qp2 = make_qp(QpType::kRc);
  std::copy(k8.begin(), k8.end(), expect_.begin() + static_cast<long>(at(256)));
  fire(&qp2, {forge(rdma(qp2, Op::kWriteOnly, kRqPsn, va(256), mr_->rkey(), 8), k8)},
       ack(kRqPsn, 1), {{Counter::kRxWriteRequests, 1}}, QpState::kRts);
}

TEST_F(AdversarialPeer, FlushWithoutTheQpRightIsAnInvalidRequest) {
  QueuePair qp = make_qp(QpType::kRc, kAllAccess);  // no FLUSH_GLOBAL on the QP
  wire::Headers h = rdma(qp, Op::kFlush, kRqPsn, va(0), mr_->rkey(), 64);
  h.feth = wire::Feth::make(transport::kFlushGlobal, transport::kFlushRange);
  fire(&qp, {forge(h)}, nak(NakCode::kInvalidRequest, kRqPsn, 0),
       {{Counter::kRespRemoteInvalidRequest, 1}}, QpState::kErr);
}

TEST_F(AdversarialPeer, FlushOfAnMrWithoutTheRightIsRefusedAndAValidOneAnswered) {
  QueuePair qp = make_qp(QpType::kRc);
  wire::Headers h = rdma(qp, Op::kFlush, kRqPsn, va(0), mr_->rkey(), 64);
  h.feth = wire::Feth::make(transport::kFlushGlobal, transport::kFlushRange);
  fire(&qp, {forge(h)}, Answer{Answer::Kind::kReadResponse, {}, kRqPsn, 1}, {}, QpState::kRts);
  h = rdma(qp, Op::kFlush, kRqPsn + 1, ro_->info().addr, ro_->rkey(), 0);
  h.feth = wire::Feth::make(transport::kFlushGlobal, transport::kFlushMr);
  fire(&qp, {forge(h)}, nak(NakCode::kRemoteAccessError, kRqPsn + 1, 1),
       {{Counter::kRespRemoteAccessErrors, 1}}, QpState::kErr);
}

TEST_F(AdversarialPeer, AtomicWriteWithoutRightsOrAlignmentIsRefused) {
  QueuePair qp = make_qp(QpType::kRc);
  fire(&qp, {forge(rdma(qp, Op::kAtomicWrite, kRqPsn, ro_->info().addr, ro_->rkey(), 8), k8)},
       nak(NakCode::kRemoteAccessError, kRqPsn, 0),
       {{Counter::kRxWriteRequests, 1}, {Counter::kRespRemoteAccessErrors, 1}}, QpState::kErr);
  QueuePair qp2 = make_qp(QpType::kRc);
  fire(&qp2, {forge(rdma(qp2, Op::kAtomicWrite, kRqPsn, va(12), mr_->rkey(), 8), k8)},
       nak(NakCode::kInvalidRequest, kRqPsn, 0),
       {{Counter::kRxWriteRequests, 1}, {Counter::kRespRemoteInvalidRequest, 1}}, QpState::kErr);
  QueuePair qp3 = make_qp(QpType::kRc);
  std::copy(k8.begin(), k8.end(), expect_.begin() + static_cast<long>(at(16)));
  fire(&qp3, {forge(rdma(qp3, Op::kAtomicWrite, kRqPsn, va(16), mr_->rkey(), 8), k8)},
       Answer{Answer::Kind::kReadResponse, {}, kRqPsn, 1}, {{Counter::kRxWriteRequests, 1}},
       QpState::kRts);
}

// ---- UD

class AdversarialUd : public AdversarialPeer {
 public:
  wire::Headers ud(const QueuePair& qp, uint32_t qkey) const {
    wire::Headers h{};
    h.bth.opcode = wire::make_opcode(wire::Transport::kUd, Op::kSendOnly);
    h.bth.dqpn = qp.qp_num();
    h.deth = {qkey, 0x77};
    return h;
  }
};

TEST_F(AdversarialUd, WrongQkeyTooLongAndRcOpcodesAreDroppedAndTheQpCarriesOn) {
  QueuePair qp = make_qp(QpType::kUd);
  post_recv(qp, 1, 0, 8192 - 4096);  // 4 KiB: room for a GRH and 4056 bytes
  fire(&qp, {forge(ud(qp, 0x22222222), k8)}, silence(), {{Counter::kDropBadQkey, 1}},
       QpState::kRts);
  // lo's active MTU is 4096: 4097 bytes cannot be one UD packet
  fire(&qp, {forge(ud(qp, kQkey), std::vector<uint8_t>(4097, 0xEE))}, silence(),
       {{Counter::kDropUdTooLong, 1}}, QpState::kRts);
  wire::Headers r = request(qp, Op::kSendOnly, 0);
  fire(&qp, {forge(r, k8)}, silence(), {{Counter::kDropBadQpType, 1}}, QpState::kRts);
  // A valid datagram still lands in the untouched receive WQE, after the 40-byte GRH.
  std::copy(k8.begin(), k8.end(), expect_.begin() + static_cast<long>(at(40)));
  for (size_t i = 0; i < 40; ++i) expect_[at(i)] = 0;  // GRH: IPv4 header in bytes 20..39
  const Counters before = dev_->counters();
  send_raw(forge(ud(qp, kQkey), k8));
  const auto wcs = wait_wcs(*cq_, 1, 2s);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].byte_len, 48u);
  EXPECT_EQ(dev_->counters()[Counter::kRdmaRecvs] - before[Counter::kRdmaRecvs], 1u);
  std::copy(base_ + at(0), base_ + at(40), expect_.begin() + static_cast<long>(at(0)));
  expect_memory();
  EXPECT_EQ(base_[at(20)], 0x45) << "IPv4 header in the GRH";
}

}  // namespace
}  // namespace uroce::itest
