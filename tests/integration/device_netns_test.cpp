// Two devices in two network namespaces joined by a veth pair (root only; skipped
// otherwise): this test process enters namespace A, the peer runs in B through
// `ip netns exec`. Traffic crosses a real L2 link with ARP and a 1500-byte MTU (active MTU
// 1024). The namespaces have unique names and are deleted in TearDown, also on failure.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "device_integration_util.hpp"

namespace uroce::itest {
namespace {

constexpr size_t kMiB = 1 << 20;
const std::string kPeer = std::string(UROCE_BINARY_DIR) + "/bin/uroce_device_peer";

int run(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str());
}

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    if (run("ip -V") != 0) GTEST_SKIP() << "iproute2 (ip) not installed";
    const int id = getpid() % 100000;
    ns_a_ = "uroce-a-" + std::to_string(id);
    ns_b_ = "uroce-b-" + std::to_string(id);
    const std::string va = "urva" + std::to_string(id);
    const std::string vb = "urvb" + std::to_string(id);
    const std::string net = "10.77." + std::to_string(id % 250) + ".";
    addr_a_ = net + "1";
    addr_b_ = net + "2";
    veth_a_ = va;
    veth_b_ = vb;
    original_ns_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(original_ns_, 0);
    created_ = true;
    for (const std::string& cmd :
         {"ip netns add " + ns_a_, "ip netns add " + ns_b_,
          "ip link add " + va + " type veth peer name " + vb,
          "ip link set " + va + " netns " + ns_a_, "ip link set " + vb + " netns " + ns_b_,
          "ip -n " + ns_a_ + " addr add " + addr_a_ + "/24 dev " + va,
          "ip -n " + ns_b_ + " addr add " + addr_b_ + "/24 dev " + vb,
          "ip -n " + ns_a_ + " link set " + va + " up",
          "ip -n " + ns_b_ + " link set " + vb + " up", "ip -n " + ns_a_ + " link set lo up",
          "ip -n " + ns_b_ + " link set lo up"}) {
      ASSERT_EQ(run(cmd), 0) << cmd;
    }
    const int fd = open(("/var/run/netns/" + ns_a_).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(setns(fd, CLONE_NEWNET), 0) << std::strerror(errno);
    close(fd);
    entered_ = true;
  }

  void TearDown() override {
    qps_.clear();
    peer_.reset();
    local_.reset();
    if (entered_) (void)setns(original_ns_, CLONE_NEWNET);
    if (original_ns_ >= 0) close(original_ns_);
    if (created_) {
      run("ip netns del " + ns_a_);
      run("ip netns del " + ns_b_);
    }
  }

  std::string ns_a_, ns_b_, veth_a_, veth_b_, addr_a_, addr_b_;
  int original_ns_ = -1;
  bool created_ = false;
  bool entered_ = false;
  TempDir registry_;
  std::unique_ptr<Side> local_;
  std::unique_ptr<Child> peer_;
  std::vector<QueuePair> qps_;
};

TEST_F(NetnsTest, RcAndUdAcrossAVethPair) {
  const uint16_t port = pick_udp_port();
  OpenOptions o;
  o.netdevs = {veth_a_};
  o.bind = {addr_a_};
  o.udp_port = port;
  o.registry_dir = registry_.path();
  auto opened = Device::open(o);
  ASSERT_TRUE(opened.is_ok()) << opened.error().message;
  local_ = std::make_unique<Side>(std::move(opened.value()), 4 * kMiB);
  PortAttr pa;
  ASSERT_TRUE(local_->dev.query_port(1, pa));
  EXPECT_EQ(pa.active_mtu, Mtu::k1024);  // veth MTU 1500 - 80 -> 1024
  Gid g = local_->gid();
  EXPECT_EQ(g[15], 1);

  for (const char* type : {"rc", "ud"}) {
    SCOPED_TRACE(type);
    const bool ud = std::string(type) == "ud";
    peer_ = std::make_unique<Child>(std::vector<std::string>{
        "ip", "netns", "exec", ns_b_, kPeer, "--port", std::to_string(port), "--registry",
        registry_.path(), "--bind", addr_b_, "--netdev", veth_b_, "--type", type, "--qps", "1",
        "--buf", std::to_string(4 * kMiB)});
    auto ready = peer_->read_line();
    ASSERT_TRUE(ready.has_value());
    auto w = words(*ready);
    ASSERT_EQ(w.size(), 5u) << *ready;
    const Gid peer_gid = gid_from_hex(w[1]);
    const uint64_t peer_addr = std::stoull(w[2]);
    const uint32_t peer_rkey = static_cast<uint32_t>(std::stoul(w[3]));
    const uint32_t peer_qpn = split_u32(w[4]).at(0);
    qps_.clear();
    qps_.push_back(local_->make_qp(ud ? QpType::kUd : QpType::kRc));
    QueuePair& qp = qps_[0];
    ASSERT_EQ(peer_->request("CONNECT " + gid_hex(g) + " 100 " + std::to_string(qp.qp_num())),
              "OK");
    ASSERT_TRUE(connect_qp(qp, 100, QpEndpoint{peer_qpn, 1000, peer_gid}));

    if (!ud) {
      fill_pattern(local_->buf.data(), kMiB, 21);
      const Sge s = local_->mr.sge(0, kMiB);
      SendWr wr = make_wr(1, WrOpcode::kRdmaWrite, &s, 1);
      wr.rdma = {peer_addr, peer_rkey};
      ASSERT_TRUE(qp.post_send(wr));
      const Sge r = local_->mr.sge(kMiB, kMiB);
      SendWr rd = make_wr(2, WrOpcode::kRdmaRead, &r, 1);
      rd.rdma = {peer_addr, peer_rkey};
      ASSERT_TRUE(qp.post_send(rd));
      auto wcs = wait_wcs(local_->cq, 2, std::chrono::seconds(20));
      ASSERT_EQ(wcs.size(), 2u);
      EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
      EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
      EXPECT_EQ(std::memcmp(local_->buf.data() + kMiB, local_->buf.data(), kMiB), 0);
      ASSERT_EQ(peer_->request("POST_RECV 0 1 0 " + std::to_string(kMiB)), "OK");
      ASSERT_TRUE(qp.post_send(make_wr(3, WrOpcode::kSend, &s, 1)));
      ASSERT_EQ(wait_wcs(local_->cq, 1).at(0).status, WcStatus::kSuccess);
      EXPECT_EQ(peer_->request("WAIT_RECV 1 10000"), "RECVD 1 1 " + std::to_string(kMiB));
    } else {
      auto ah = local_->pd.create_ah(make_ah_attr(peer_gid));
      ASSERT_TRUE(ah.is_ok());
      ASSERT_EQ(peer_->request("POST_RECV 0 1 0 2000"), "OK");
      const Sge s = local_->mr.sge(0, 1024);
      SendWr wr = make_wr(1, WrOpcode::kSend, &s, 1);
      wr.ud.ah = ah->attr();
      wr.ud.remote_qpn = peer_qpn;
      wr.ud.remote_qkey = ConnectOptions{}.qkey;
      // UD is unreliable and the first datagram may wait on ARP: resend until received.
      std::string got;
      for (int attempt = 0; attempt < 20 && got != "RECVD 1 1 1064"; ++attempt) {
        ASSERT_TRUE(qp.post_send(wr));
        ASSERT_EQ(wait_wcs(local_->cq, 1).at(0).status, WcStatus::kSuccess);
        got = peer_->request("WAIT_RECV 1 200").value_or("");
      }
      EXPECT_EQ(got, "RECVD 1 1 1064");
    }
    EXPECT_EQ(peer_->request("QUIT"), std::nullopt);
    EXPECT_EQ(peer_->wait_exit(), 0);
    peer_.reset();
  }
}

}  // namespace
}  // namespace uroce::itest

namespace uroce::itest {
namespace {

TEST_F(NetnsTest, NetdevMtuTooSmallForRoceIsRefusedWithTheFix) {
  // We are inside namespace A: `ip` acts on its links.
  ASSERT_EQ(run("ip link set " + veth_a_ + " mtu 300"), 0);
  OpenOptions o;
  o.netdevs = {veth_a_};
  o.bind = {addr_a_};
  o.udp_port = pick_udp_port();
  o.registry_dir = registry_.path();
  auto opened = Device::open(o);
  ASSERT_FALSE(opened.is_ok());
  EXPECT_EQ(opened.error().code, EINVAL);
  const std::string& m = opened.error().message;
  EXPECT_NE(m.find("MTU 300"), std::string::npos) << m;
  EXPECT_NE(m.find("ip link set " + veth_a_ + " mtu"), std::string::npos) << m;

  ASSERT_EQ(run("ip link set " + veth_a_ + " mtu 9000"), 0);
  auto ok = Device::open(o);
  ASSERT_TRUE(ok.is_ok()) << ok.error().message;
  PortAttr pa;
  ASSERT_TRUE(ok.value().query_port(1, pa));
  EXPECT_EQ(pa.active_mtu, Mtu::k4096);  // 9000 - 80 -> 4096
  EXPECT_EQ(pa.netdev_mtu, 9000u);
}

}  // namespace
}  // namespace uroce::itest

namespace uroce::itest {
namespace {

// The link cut mid-transfer: an nftables rule in B's namespace drops every datagram to the
// RoCE port. The requester retries retry_cnt times, then the head WR completes with
// RETRY_EXC_ERR within timeout * (retry_cnt + 1) plus one timeout and a margin, every other
// WR is flushed, nothing hangs. With the rule gone and the peer restarted, the QP is reset
// and connected again and a WRITE gets through with exact data.
TEST_F(NetnsTest, LinkCutMidTransferGivesRetryExceededAndFlushThenRecovers) {
  if (run("nft --version") != 0) GTEST_SKIP() << "nftables (nft) not installed";
  const uint16_t port = pick_udp_port();
  OpenOptions o;
  o.netdevs = {veth_a_};
  o.bind = {addr_a_};
  o.udp_port = port;
  o.registry_dir = registry_.path();
  auto opened = Device::open(o);
  ASSERT_TRUE(opened.is_ok()) << opened.error().message;
  local_ = std::make_unique<Side>(std::move(opened.value()), 4 * kMiB);
  peer_ = std::make_unique<Child>(std::vector<std::string>{
      "ip", "netns", "exec", ns_b_, kPeer, "--port", std::to_string(port), "--registry",
      registry_.path(), "--bind", addr_b_, "--netdev", veth_b_, "--type", "rc", "--qps", "1",
      "--buf", std::to_string(4 * kMiB)});
  auto ready = peer_->read_line();
  ASSERT_TRUE(ready.has_value());
  auto w = words(*ready);
  ASSERT_EQ(w.size(), 5u) << *ready;
  const Gid peer_gid = gid_from_hex(w[1]);
  const uint64_t peer_addr = std::stoull(w[2]);
  const uint32_t peer_rkey = static_cast<uint32_t>(std::stoul(w[3]));
  const uint32_t peer_qpn = split_u32(w[4]).at(0);
  qps_.push_back(local_->make_qp(QpType::kRc));
  QueuePair& qp = qps_[0];
  ASSERT_EQ(
      peer_->request("CONNECT " + gid_hex(local_->gid()) + " 100 " + std::to_string(qp.qp_num())),
      "OK");
  ConnectOptions co;
  co.timeout = 14;  // 67 ms
  co.retry_cnt = 3;
  ASSERT_TRUE(connect_qp(qp, 100, QpEndpoint{peer_qpn, 1000, peer_gid}, co));

  // 50 Mbit/s out of A: the 32 MiB take about 5 s, so the cut (three nft processes after the
  // first WR completes) lands mid-transfer however slowly they start. Unshaped, the veth moved
  // all 32 MiB before the rule was in on a loaded machine (31 ok, no RETRY_EXC_ERR).
  ASSERT_EQ(run("ip netns exec " + ns_a_ + " tc qdisc add dev " + veth_a_ +
                " root tbf rate 50mbit burst 64kb latency 100ms"),
            0);
  constexpr size_t kWrs = 32;
  fill_pattern(local_->buf.data(), kMiB, 61);
  const Sge s = local_->mr.sge(0, kMiB);
  for (size_t i = 0; i < kWrs; ++i) {
    SendWr wr = make_wr(i, WrOpcode::kRdmaWrite, &s, 1);
    wr.rdma = {peer_addr + (i % 3) * kMiB, peer_rkey};
    ASSERT_TRUE(qp.post_send(wr));
  }
  auto first = wait_wcs(local_->cq, 1, std::chrono::seconds(20));
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].status, WcStatus::kSuccess);
  const std::string table = "uroce_cut_" + std::to_string(getpid());
  const std::string nft = "ip netns exec " + ns_b_ + " nft ";
  ASSERT_EQ(run(nft + "add table inet " + table), 0);
  ASSERT_EQ(run(nft + "'add chain inet " + table +
                " in { type filter hook input priority 0 ; policy accept ; }'"),
            0);
  ASSERT_EQ(run(nft + "add rule inet " + table + " in udp dport " + std::to_string(port) + " drop"),
            0);
  const auto cut = std::chrono::steady_clock::now();
  auto rest = wait_wcs(local_->cq, kWrs - 1, std::chrono::seconds(10));
  const auto took = std::chrono::steady_clock::now() - cut;
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
  // (retry_cnt + 1) timeouts of 67 ms = 268 ms, one more for the timer already running at
  // the cut, plus 500 ms for a loaded machine.
  EXPECT_LT(took, std::chrono::milliseconds(67 * 5 + 500))
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  std::cerr << "[ info ] link cut: RETRY_EXC_ERR after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms, " << ok
            << " ok, " << flushed << " flushed\n";
  EXPECT_EQ(qp.state(), QpState::kErr);

  // Link back and a restarted peer: our QP, reset, connects to it and a WRITE gets through.
  ASSERT_EQ(run(nft + "delete table inet " + table), 0);
  EXPECT_EQ(peer_->request("QUIT"), std::nullopt);
  EXPECT_EQ(peer_->wait_exit(), 0);
  peer_ = std::make_unique<Child>(std::vector<std::string>{
      "ip", "netns", "exec", ns_b_, kPeer, "--port", std::to_string(port), "--registry",
      registry_.path(), "--bind", addr_b_, "--netdev", veth_b_, "--type", "rc", "--qps", "1",
      "--buf", std::to_string(4 * kMiB)});
  ready = peer_->read_line();
  ASSERT_TRUE(ready.has_value());
  w = words(*ready);
  ASSERT_EQ(w.size(), 5u) << *ready;
  const uint64_t addr2 = std::stoull(w[2]);
  const uint32_t rkey2 = static_cast<uint32_t>(std::stoul(w[3]));
  const uint32_t qpn2 = split_u32(w[4]).at(0);
  QpAttr reset;
  reset.qp_state = QpState::kReset;
  ASSERT_TRUE(qp.modify(reset, kQpState));
  ASSERT_EQ(
      peer_->request("CONNECT " + gid_hex(local_->gid()) + " 300 " + std::to_string(qp.qp_num())),
      "OK");
  ASSERT_TRUE(connect_qp(qp, 300, QpEndpoint{qpn2, 1000, peer_gid}, co));
  fill_pattern(local_->buf.data(), 4096, 62);
  const Sge s2 = local_->mr.sge(0, 4096);
  SendWr wr = make_wr(100, WrOpcode::kRdmaWrite, &s2, 1);
  wr.rdma = {addr2, rkey2};
  ASSERT_TRUE(qp.post_send(wr));
  auto wc = wait_wcs(local_->cq, 1, std::chrono::seconds(20));
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  auto h = peer_->request("HASH 0 4096");
  EXPECT_EQ(h, "HASH " + std::to_string(fnv1a(local_->buf.data(), 4096)));
  EXPECT_EQ(peer_->request("QUIT"), std::nullopt);
  EXPECT_EQ(peer_->wait_exit(), 0);
}

}  // namespace
}  // namespace uroce::itest
