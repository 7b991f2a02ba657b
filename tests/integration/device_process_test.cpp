// Two real processes over UDP on 127.0.0.1: this test and uroce_device_peer (fork+exec),
// both bound to the same address and a private port (reuseport steering by QPN slot). The
// peer only answers side-channel commands; every one-sided operation is served by its
// device's progress thread. Every operation on RC, UC and UD, 1 MiB and 0-byte messages,
// 64 QPs at once, and a peer SIGKILLed mid-transfer: IBV_WC_RETRY_EXC_ERR within the
// timeout * retry bound, then a fresh peer and a new connection work.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "device_integration_util.hpp"

namespace uroce::itest {
namespace {

constexpr size_t kMiB = 1 << 20;
const std::string kPeer = std::string(UROCE_BINARY_DIR) + "/bin/uroce_device_peer";

struct PeerInfo {
  Gid gid{};
  uint64_t addr = 0;
  uint32_t rkey = 0;
  std::vector<uint32_t> qpns;
};

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = pick_udp_port();
    auto opened = Device::open(loopback_options(port_, registry_.path()));
    ASSERT_TRUE(opened.is_ok()) << opened.error().message;
    local_ = std::make_unique<Side>(std::move(opened.value()), 4 * kMiB);
  }

  // Starts a peer with `qps` QPs of `type` and connects as many local QPs to them.
  void start_peer(const std::string& type, size_t qps, QpType qp_type,
                  const ConnectOptions& opt = {}) {
    peer_ = std::make_unique<Child>(std::vector<std::string>{
        kPeer, "--port", std::to_string(port_), "--registry", registry_.path(), "--bind",
        "127.0.0.1", "--netdev", "lo", "--type", type, "--qps", std::to_string(qps), "--buf",
        std::to_string(4 * kMiB)});
    auto ready = peer_->read_line();
    ASSERT_TRUE(ready.has_value()) << "peer did not start";
    auto w = words(*ready);
    ASSERT_EQ(w.size(), 5u) << *ready;
    ASSERT_EQ(w[0], "READY") << *ready;
    info_ = PeerInfo{gid_from_hex(w[1]), std::stoull(w[2]), static_cast<uint32_t>(std::stoul(w[3])),
                     split_u32(w[4])};
    qps_.clear();
    std::vector<uint32_t> mine;
    for (size_t i = 0; i < qps; ++i) {
      qps_.push_back(local_->make_qp(qp_type));
      mine.push_back(qps_.back().qp_num());
    }
    EXPECT_EQ(peer_->request("CONNECT " + gid_hex(local_->gid()) + " 100 " + join(mine)), "OK");
    for (size_t i = 0; i < qps; ++i) {
      ASSERT_TRUE(connect_qp(qps_[i], 100, QpEndpoint{info_.qpns[i], 1000, info_.gid}, opt));
    }
  }

  uint64_t peer_hash(uint64_t off, uint64_t len) {
    auto r = peer_->request("HASH " + std::to_string(off) + " " + std::to_string(len));
    if (!r || r->rfind("HASH ", 0) != 0) return 0;
    return std::stoull(r->substr(5));
  }

  TempDir registry_;
  uint16_t port_ = 0;
  std::unique_ptr<Side> local_;
  std::unique_ptr<Child> peer_;
  PeerInfo info_;
  std::vector<QueuePair> qps_;
};

TEST_F(ProcessTest, RcEveryOperation) {
  start_peer("rc", 1, QpType::kRc);
  QueuePair& qp = qps_[0];
  ASSERT_EQ(peer_->request("FILL 0 " + std::to_string(kMiB) + " 9"), "OK");

  // READ 1 MiB from the peer, READ 0 bytes.
  const Sge rd = local_->mr.sge(0, kMiB);
  SendWr r = make_wr(1, WrOpcode::kRdmaRead, &rd, 1);
  r.rdma = {info_.addr, info_.rkey};
  SendWr r0 = make_wr(2, WrOpcode::kRdmaRead, nullptr, 0);
  r0.rdma = {info_.addr, info_.rkey};
  ASSERT_TRUE(qp.post_send(r));
  ASSERT_TRUE(qp.post_send(r0));
  auto wcs = wait_wcs(local_->cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].byte_len, kMiB);
  EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
  std::vector<uint8_t> expect(kMiB);
  fill_pattern(expect.data(), kMiB, 9);
  EXPECT_EQ(std::memcmp(local_->buf.data(), expect.data(), kMiB), 0);

  // WRITE 1 MiB to the peer at 1 MiB, WRITE 0 bytes.
  fill_pattern(local_->buf.data() + kMiB, kMiB, 10);
  const Sge ws = local_->mr.sge(kMiB, kMiB);
  SendWr w = make_wr(3, WrOpcode::kRdmaWrite, &ws, 1);
  w.rdma = {info_.addr + kMiB, info_.rkey};
  SendWr w0 = make_wr(4, WrOpcode::kRdmaWrite, nullptr, 0);
  w0.rdma = {info_.addr, info_.rkey};
  ASSERT_TRUE(qp.post_send(w));
  ASSERT_TRUE(qp.post_send(w0));
  wcs = wait_wcs(local_->cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
  EXPECT_EQ(peer_hash(kMiB, kMiB), fnv1a(local_->buf.data() + kMiB, kMiB));

  // Atomics on the peer's 8 bytes at 3 MiB.
  ASSERT_EQ(peer_->request("FILL " + std::to_string(3 * kMiB) + " 8 0"), "OK");
  uint64_t initial = 0;
  fill_pattern(reinterpret_cast<uint8_t*>(&initial), 8, 0);
  const Sge at = local_->mr.sge(3 * kMiB, 8);
  SendWr fa = make_wr(5, WrOpcode::kAtomicFetchAndAdd, &at, 1);
  fa.atomic = {info_.addr + 3 * kMiB, 1000, 0, info_.rkey};
  ASSERT_TRUE(qp.post_send(fa));
  ASSERT_EQ(wait_wcs(local_->cq, 1).at(0).status, WcStatus::kSuccess);
  uint64_t got = 0;
  std::memcpy(&got, local_->buf.data() + 3 * kMiB, 8);
  EXPECT_EQ(got, initial);
  SendWr cs = make_wr(6, WrOpcode::kAtomicCmpAndSwp, &at, 1);
  cs.atomic = {info_.addr + 3 * kMiB, initial + 1000, 77, info_.rkey};
  ASSERT_TRUE(qp.post_send(cs));
  ASSERT_EQ(wait_wcs(local_->cq, 1).at(0).status, WcStatus::kSuccess);
  EXPECT_EQ(peer_->request("READ64 " + std::to_string(3 * kMiB)), "VALUE 77");

  // SEND 1 MiB and 0 bytes into the peer's receive queue.
  ASSERT_EQ(
      peer_->request("POST_RECV 0 2 " + std::to_string(2 * kMiB) + " " + std::to_string(kMiB)),
      "OK");
  ASSERT_TRUE(qp.post_send(make_wr(7, WrOpcode::kSend, &ws, 1)));
  ASSERT_TRUE(qp.post_send(make_wr(8, WrOpcode::kSend, nullptr, 0)));
  wcs = wait_wcs(local_->cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
  EXPECT_EQ(peer_->request("WAIT_RECV 2 10000"), "RECVD 2 2 " + std::to_string(kMiB));
  EXPECT_EQ(peer_hash(2 * kMiB, kMiB), fnv1a(local_->buf.data() + kMiB, kMiB));
  EXPECT_EQ(peer_->request("QUIT"), std::nullopt);
  EXPECT_EQ(peer_->wait_exit(), 0);
}

TEST_F(ProcessTest, UcWriteAndSend) {
  start_peer("uc", 1, QpType::kUc);
  fill_pattern(local_->buf.data(), kMiB, 11);
  const Sge s = local_->mr.sge(0, kMiB);
  SendWr w = make_wr(1, WrOpcode::kRdmaWrite, &s, 1);
  w.rdma = {info_.addr + kMiB, info_.rkey};
  ASSERT_EQ(peer_->request("POST_RECV 0 2 0 " + std::to_string(kMiB)), "OK");
  ASSERT_TRUE(qps_[0].post_send(w));
  ASSERT_TRUE(qps_[0].post_send(make_wr(2, WrOpcode::kSend, &s, 1)));
  ASSERT_TRUE(qps_[0].post_send(make_wr(3, WrOpcode::kSend, nullptr, 0)));
  auto wcs = wait_wcs(local_->cq, 3);
  ASSERT_EQ(wcs.size(), 3u);
  for (const Wc& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(peer_->request("WAIT_RECV 2 10000"), "RECVD 2 2 " + std::to_string(kMiB));
  EXPECT_EQ(peer_hash(kMiB, kMiB), fnv1a(local_->buf.data(), kMiB));
  EXPECT_EQ(peer_hash(0, kMiB), fnv1a(local_->buf.data(), kMiB));
}

TEST_F(ProcessTest, UdSend) {
  start_peer("ud", 1, QpType::kUd);
  auto ah = local_->pd.create_ah(make_ah_attr(info_.gid));
  ASSERT_TRUE(ah.is_ok()) << ah.status().message();
  ASSERT_EQ(peer_->request("POST_RECV 0 2 0 4136"), "OK");
  fill_pattern(local_->buf.data(), 4096, 12);
  const Sge s = local_->mr.sge(0, 4096);
  for (uint32_t len : {4096u, 0u}) {
    SendWr wr = make_wr(len, WrOpcode::kSend, &s, len ? 1 : 0);
    wr.ud.ah = ah->attr();
    wr.ud.remote_qpn = info_.qpns[0];
    wr.ud.remote_qkey = ConnectOptions{}.qkey;
    ASSERT_TRUE(qps_[0].post_send(wr));
    ASSERT_EQ(wait_wcs(local_->cq, 1).at(0).status, WcStatus::kSuccess);
  }
  EXPECT_EQ(peer_->request("WAIT_RECV 2 10000"), "RECVD 2 2 " + std::to_string(4096 + 80));
}

TEST_F(ProcessTest, SixtyFourQpsAtOnce) {
  constexpr size_t kQps = 64;
  constexpr size_t kChunk = 48 << 10;
  start_peer("rc", kQps, QpType::kRc);
  fill_pattern(local_->buf.data(), kQps * kChunk, 13);
  std::vector<Sge> sges(kQps);
  for (size_t i = 0; i < kQps; ++i) {
    sges[i] = local_->mr.sge(i * kChunk, kChunk);
    SendWr w = make_wr(i, WrOpcode::kRdmaWrite, &sges[i], 1);
    w.rdma = {info_.addr + i * kChunk, info_.rkey};
    ASSERT_TRUE(qps_[i].post_send(w));
  }
  auto wcs = wait_wcs(local_->cq, kQps, std::chrono::seconds(30));
  ASSERT_EQ(wcs.size(), kQps);
  for (const Wc& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess) << wc.wr_id;
  EXPECT_EQ(peer_hash(0, kQps * kChunk), fnv1a(local_->buf.data(), kQps * kChunk));
}

TEST_F(ProcessTest, PeerKilledMidTransferGivesRetryExceededThenReconnects) {
  ConnectOptions opt;
  // 4.096 us * 2^14 = 67 ms: short enough to see the bound, long enough that a peer
  // descheduled on a loaded 2-core machine (or slowed by ASan) is not taken for dead.
  opt.timeout = 14;
  opt.retry_cnt = 3;
  start_peer("rc", 1, QpType::kRc, opt);
  constexpr size_t kWrs = 32;
  const Sge s = local_->mr.sge(0, kMiB);
  for (size_t i = 0; i < kWrs; ++i) {
    SendWr w = make_wr(i, WrOpcode::kRdmaWrite, &s, 1);
    w.rdma = {info_.addr + (i % 3) * kMiB, info_.rkey};
    ASSERT_TRUE(qps_[0].post_send(w));
  }
  // Let the transfer get going, then kill the peer.
  auto first = wait_wcs(local_->cq, 1);
  ASSERT_EQ(first.size(), 1u);
  const Counters before = local_->dev.counters();
  EXPECT_EQ(first[0].status, WcStatus::kSuccess)
      << "before the kill: rcvd_seq_err " << before[Counter::kRcvdSeqErr]
      << ", local_ack_timeout_err " << before[Counter::kLocalAckTimeoutErr]
      << ", retransmitted_pkts " << before[Counter::kRetransmittedPkts] << ", sent_pkts "
      << before[Counter::kSentPkts] << ", rcvd_pkts " << before[Counter::kRcvdPkts];
  peer_->kill_now();
  const auto killed = std::chrono::steady_clock::now();

  std::vector<Wc> rest = wait_wcs(local_->cq, kWrs - 1, std::chrono::seconds(10));
  const auto took = std::chrono::steady_clock::now() - killed;
  ASSERT_EQ(rest.size(), kWrs - 1) << "completions must all arrive: no hang";
  size_t ok = 0;
  size_t retry_exc = 0;
  size_t flushed = 0;
  for (const Wc& wc : rest) {
    ok += wc.status == WcStatus::kSuccess;
    retry_exc += wc.status == WcStatus::kRetryExcErr;
    flushed += wc.status == WcStatus::kWrFlushErr;
  }
  EXPECT_EQ(retry_exc, 1u);
  EXPECT_EQ(ok + retry_exc + flushed, kWrs - 1);
  // (retry_cnt + 1) timeouts of 67 ms = 268 ms; one more timeout of slack for the one that
  // was already running at the kill, plus 500 ms for load.
  const auto bound = std::chrono::milliseconds(67 * 5 + 500);
  EXPECT_LT(took, bound) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                         << " ms";
  std::cerr << "[ info ] RETRY_EXC_ERR " << ok << " ok, " << flushed << " flushed, after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
  EXPECT_EQ(qps_[0].state(), QpState::kErr);
  EXPECT_EQ(local_->dev.counters()[Counter::kRetryExceededErr], 1u);

  // A new peer process and a new connection work on the same port.
  start_peer("rc", 1, QpType::kRc);
  fill_pattern(local_->buf.data(), 4096, 14);
  const Sge s2 = local_->mr.sge(0, 4096);
  SendWr w = make_wr(100, WrOpcode::kRdmaWrite, &s2, 1);
  w.rdma = {info_.addr, info_.rkey};
  ASSERT_TRUE(qps_[0].post_send(w));
  auto wc = wait_wcs(local_->cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(peer_hash(0, 4096), fnv1a(local_->buf.data(), 4096));
}

}  // namespace
}  // namespace uroce::itest
