// Device over an in-memory wire: attributes, the GID index rules, and every operation of RC,
// UC and UD completing with the target application calling nothing (its progress thread
// does the work).
#include <sys/resource.h>

#include <array>
#include <cstring>

#include "device_fixture.hpp"

namespace uroce::test {
namespace {

TEST_F(DevicePairTest, AttributesComeFromTheConfig) {
  DeviceAttr attr = a_.dev.query_device();
  EXPECT_EQ(attr.node_guid, 0x000000FFFE000001ull);  // 02:00:00:00:00:01, U/L bit flipped
  EXPECT_EQ(attr.vendor_id, 0xFFFFFFu);
  EXPECT_EQ(attr.atomic_cap, AtomicCap::kHca);
  EXPECT_EQ(attr.max_qp_rd_atom, 128);
  EXPECT_EQ(attr.phys_port_cnt, 1);
  EXPECT_EQ(attr.max_inline_data, 256);

  PortAttr port;
  ASSERT_TRUE(a_.dev.query_port(1, port));
  EXPECT_EQ(port.state, PortState::kActive);
  EXPECT_EQ(port.active_mtu, Mtu::k4096);
  EXPECT_EQ(port.max_mtu, Mtu::k4096);
  EXPECT_EQ(port.gid_tbl_len, 3);
  EXPECT_EQ(port.link_layer, device::kLinkLayerEthernet);
  EXPECT_EQ(a_.dev.query_port(2, port).code(), EINVAL);

  Gid gid{};
  ASSERT_TRUE(a_.dev.query_gid(1, 1, gid));
  EXPECT_EQ(gid, fake_gid(1));
  EXPECT_EQ(a_.dev.query_gid(1, 2, gid).code(), ENODATA);
  EXPECT_EQ(a_.dev.query_gid(1, 3, gid).code(), EINVAL);
}

TEST_F(DevicePairTest, GidIndexDecidesTheSourceAddress) {
  QueuePair qp = a_.make_qp(QpType::kRc);
  ConnectOptions opt;
  opt.sgid_index = 2;  // empty entry
  EXPECT_EQ(connect_qp(qp, 1, QpEndpoint{0x2000, 1, fake_gid(2)}, opt).code(), ENODATA);
  QueuePair qp2 = a_.make_qp(QpType::kRc);
  opt.sgid_index = 7;  // beyond the table
  EXPECT_EQ(connect_qp(qp2, 1, QpEndpoint{0x2000, 1, fake_gid(2)}, opt).code(), EINVAL);
  QueuePair qp3 = a_.make_qp(QpType::kRc);
  opt.sgid_index = 0;  // fe80::1: in the table, but the wire cannot send from it
  EXPECT_EQ(connect_qp(qp3, 1, QpEndpoint{0x2000, 1, fake_gid(2)}, opt).code(), EADDRNOTAVAIL);

  EXPECT_EQ(a_.pd.create_ah(make_ah_attr(fake_gid(2), {.sgid_index = 2})).status().code(), ENODATA);
  auto ah = a_.pd.create_ah(make_ah_attr(fake_gid(2)));
  ASSERT_TRUE(ah.is_ok());
  EXPECT_EQ(ah->attr().sgid, fake_gid(1));
}

TEST_F(DevicePairTest, RcSendRecvDeliversExactBytesAndCounts) {
  QueuePair qa = a_.make_qp(QpType::kRc);
  QueuePair qb = b_.make_qp(QpType::kRc);
  connect(qa, qb);
  const Sge rsge = b_.mr.sge(0, 4096);
  ASSERT_TRUE(qb.post_recv(RecvWr{7, std::span<const Sge>(&rsge, 1)}));

  std::memcpy(a_.buf.data(), "hello", 5);
  const Sge sge = a_.mr.sge(0, 5);
  SendWr wr;
  wr.wr_id = 42;
  wr.opcode = WrOpcode::kSendWithImm;
  wr.imm_data = 0x01020304;
  wr.send_flags = kSendSignaled;
  wr.sg_list = std::span<const Sge>(&sge, 1);
  ASSERT_TRUE(qa.post_send(wr));

  Wc s = wait_wc(a_.cq);
  EXPECT_EQ(s.status, WcStatus::kSuccess);
  EXPECT_EQ(s.wr_id, 42u);
  EXPECT_EQ(s.opcode, WcOpcode::kSend);
  Wc r = wait_wc(b_.cq);
  EXPECT_EQ(r.status, WcStatus::kSuccess);
  EXPECT_EQ(r.wr_id, 7u);
  EXPECT_EQ(r.opcode, WcOpcode::kRecv);
  EXPECT_EQ(r.byte_len, 5u);
  EXPECT_EQ(r.imm_data, 0x01020304u);
  EXPECT_EQ(r.wc_flags & kWcWithImm, kWcWithImm);
  EXPECT_EQ(r.qp_num, qb.qp_num());
  EXPECT_EQ(r.src_qp, 0u);  // like rxe: src_qp is a UD field
  EXPECT_EQ(std::memcmp(b_.buf.data(), "hello", 5), 0);

  // One request packet and one ACK.
  EXPECT_EQ(a_.dev.counters()[Counter::kSentPkts], 1u);
  EXPECT_EQ(b_.dev.counters()[Counter::kRcvdPkts], 1u);
  EXPECT_EQ(b_.dev.counters()[Counter::kSentPkts], 1u);
  EXPECT_EQ(a_.dev.counters()[Counter::kRcvdPkts], 1u);
  EXPECT_EQ(qa.counters()->get(Counter::kRdmaSends), 1u);
}

TEST_F(DevicePairTest, OneSidedOpsCompleteWhileTheTargetDoesNothing) {
  QueuePair qa = a_.make_qp(QpType::kRc);
  QueuePair qb = b_.make_qp(QpType::kRc);
  connect(qa, qb);

  // WRITE 100000 bytes (98 packets at MTU 1024) into B at offset 4096.
  for (size_t i = 0; i < 100000; ++i) a_.buf[i] = static_cast<uint8_t>(i * 7 + 1);
  const Sge wsge = a_.mr.sge(0, 100000);
  SendWr w;
  w.wr_id = 1;
  w.opcode = WrOpcode::kRdmaWrite;
  w.send_flags = kSendSignaled;
  w.sg_list = std::span<const Sge>(&wsge, 1);
  w.rdma = {b_.mr.info().addr + 4096, b_.mr.rkey()};
  ASSERT_TRUE(qa.post_send(w));
  Wc wc = wait_wc(a_.cq);
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(std::memcmp(b_.buf.data() + 4096, a_.buf.data(), 100000), 0);

  // READ it back into A at offset 200000.
  const Sge rsge = a_.mr.sge(200000, 100000);
  SendWr r;
  r.wr_id = 2;
  r.opcode = WrOpcode::kRdmaRead;
  r.send_flags = kSendSignaled;
  r.sg_list = std::span<const Sge>(&rsge, 1);
  r.rdma = {b_.mr.info().addr + 4096, b_.mr.rkey()};
  ASSERT_TRUE(qa.post_send(r));
  wc = wait_wc(a_.cq);
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(wc.byte_len, 100000u);
  EXPECT_EQ(std::memcmp(a_.buf.data() + 200000, a_.buf.data(), 100000), 0);

  // Atomics on B's 8 bytes at offset 512 KiB.
  const uint64_t target_addr = b_.mr.info().addr + (512 << 10);
  uint64_t initial = 40;
  std::memcpy(b_.buf.data() + (512 << 10), &initial, 8);
  const Sge asge = a_.mr.sge(300000, 8);
  SendWr fa;
  fa.wr_id = 3;
  fa.opcode = WrOpcode::kAtomicFetchAndAdd;
  fa.send_flags = kSendSignaled;
  fa.sg_list = std::span<const Sge>(&asge, 1);
  fa.atomic = {target_addr, 2, 0, b_.mr.rkey()};
  ASSERT_TRUE(qa.post_send(fa));
  wc = wait_wc(a_.cq);
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.opcode, WcOpcode::kFetchAdd);
  uint64_t old = 0;
  std::memcpy(&old, a_.buf.data() + 300000, 8);
  EXPECT_EQ(old, 40u);

  SendWr cs = fa;
  cs.wr_id = 4;
  cs.opcode = WrOpcode::kAtomicCmpAndSwp;
  cs.atomic = {target_addr, 42, 1000, b_.mr.rkey()};
  ASSERT_TRUE(qa.post_send(cs));
  wc = wait_wc(a_.cq);
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.opcode, WcOpcode::kCompSwap);
  std::memcpy(&old, a_.buf.data() + 300000, 8);
  EXPECT_EQ(old, 42u);
  uint64_t now_value = 0;
  std::memcpy(&now_value, b_.buf.data() + (512 << 10), 8);
  EXPECT_EQ(now_value, 1000u);

  // B's application never polled: its CQ is still empty (one-sided ops make no completion).
  Wc none;
  EXPECT_EQ(b_.cq.poll(std::span<Wc>(&none, 1)), 0);
  // Requests are counted per message; 98 WRITE packets plus 1 READ, 2 atomics. A's adaptive
  // retransmission timer (200 us floor) may resend when a loaded machine stalls a thread
  // longer than that; B counts every such copy as duplicate_request and applies none twice
  // (a READ or atomic copy is answered again, the atomic from its replay cache), so the
  // packets that were not duplicates are exactly the 101.
  EXPECT_EQ(b_.dev.counters()[Counter::kRxWriteRequests], 1u);
  EXPECT_EQ(b_.dev.counters()[Counter::kRcvdPkts] - b_.dev.counters()[Counter::kDuplicateRequest],
            98u + 1u + 2u);
  EXPECT_EQ(b_.dev.counters()[Counter::kRxReadRequests], 1u);
  EXPECT_EQ(b_.dev.counters()[Counter::kRxAtomicRequests], 2u);
}

TEST_F(DevicePairTest, RemoteAccessErrorIsReported) {
  QueuePair qa = a_.make_qp(QpType::kRc);
  QueuePair qb = b_.make_qp(QpType::kRc);
  connect(qa, qb);
  const Sge sge = a_.mr.sge(0, 16);
  SendWr w;
  w.wr_id = 9;
  w.opcode = WrOpcode::kRdmaWrite;
  w.send_flags = kSendSignaled;
  w.sg_list = std::span<const Sge>(&sge, 1);
  w.rdma = {b_.mr.info().addr, b_.mr.rkey() ^ 0x5A5A00};
  ASSERT_TRUE(qa.post_send(w));
  Wc wc = wait_wc(a_.cq);
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(wc.status, WcStatus::kRemAccessErr);
  EXPECT_EQ(qa.state(), QpState::kErr);
}

TEST_F(DevicePairTest, UcWriteAndSend) {
  QueuePair qa = a_.make_qp(QpType::kUc);
  QueuePair qb = b_.make_qp(QpType::kUc);
  connect(qa, qb);
  for (size_t i = 0; i < 5000; ++i) a_.buf[i] = static_cast<uint8_t>(i ^ 0x33);
  const Sge sge = a_.mr.sge(0, 5000);
  SendWr w;
  w.wr_id = 1;
  w.opcode = WrOpcode::kRdmaWrite;
  w.send_flags = kSendSignaled;
  w.sg_list = std::span<const Sge>(&sge, 1);
  w.rdma = {b_.mr.info().addr + 8192, b_.mr.rkey()};
  ASSERT_TRUE(qa.post_send(w));
  EXPECT_EQ(wait_wc(a_.cq).status, WcStatus::kSuccess);

  const Sge rsge = b_.mr.sge(0, 8192);
  ASSERT_TRUE(qb.post_recv(RecvWr{5, std::span<const Sge>(&rsge, 1)}));
  SendWr s = w;
  s.wr_id = 2;
  s.opcode = WrOpcode::kSend;
  ASSERT_TRUE(qa.post_send(s));
  EXPECT_EQ(wait_wc(a_.cq).status, WcStatus::kSuccess);
  Wc r = wait_wc(b_.cq);
  EXPECT_EQ(r.status, WcStatus::kSuccess);
  EXPECT_EQ(r.byte_len, 5000u);
  EXPECT_EQ(std::memcmp(b_.buf.data(), a_.buf.data(), 5000), 0);
  EXPECT_EQ(std::memcmp(b_.buf.data() + 8192, a_.buf.data(), 5000), 0);
}

TEST_F(DevicePairTest, UdSendThroughAnAddressHandle) {
  QueuePair qa = a_.make_qp(QpType::kUd);
  QueuePair qb = b_.make_qp(QpType::kUd);
  connect(qa, qb);
  // UD receives start with the 40-byte GRH area.
  const Sge rsge = b_.mr.sge(0, 40 + 1024);
  ASSERT_TRUE(qb.post_recv(RecvWr{11, std::span<const Sge>(&rsge, 1)}));
  auto ah = a_.pd.create_ah(make_ah_attr(fake_gid(2)));
  ASSERT_TRUE(ah.is_ok());
  std::memcpy(a_.buf.data(), "datagram", 8);
  const Sge sge = a_.mr.sge(0, 8);
  ASSERT_TRUE(qa.post_send(ud_send_wr(ah->attr(), qb.qp_num(), sge, 12)));
  EXPECT_EQ(wait_wc(a_.cq).status, WcStatus::kSuccess);
  Wc r = wait_wc(b_.cq);
  EXPECT_EQ(r.status, WcStatus::kSuccess);
  EXPECT_EQ(r.byte_len, 48u);
  EXPECT_EQ(r.src_qp, qa.qp_num());
  EXPECT_EQ(r.wc_flags & kWcGrh, kWcGrh);
  EXPECT_EQ(std::memcmp(b_.buf.data() + 40, "datagram", 8), 0);
}

// ibv_resize_cq counts the UD sends already posted: they complete without a peer, and rxe
// runs a post at once, so rdma-core's test_resize_cq posts some and expects a shrink below
// them to fail. Here nothing else builds them (no progress thread, and posts do not move
// packets), so only the resize itself can: it must, before it counts.
TEST(DeviceResizeCq, PostedUdSendsCountAgainstTheNewSize) {
  FakeWire wire;
  Side a(make_fake_device(wire, 1, 0x100, /*progress_thread=*/false, Nanos(-1),
                          /*app_calls_drive=*/false));
  Side b(make_fake_device(wire, 2, 0x2000));
  QueuePair qa = a.make_qp(QpType::kUd);
  QueuePair qb = b.make_qp(QpType::kUd);
  ConnectOptions opt;
  ASSERT_TRUE(connect_qp(qa, 100, QpEndpoint{qb.qp_num(), 200, fake_gid(2)}, opt));
  auto ah = a.pd.create_ah(make_ah_attr(fake_gid(2)));
  ASSERT_TRUE(ah.is_ok());
  const Sge sge = a.mr.sge(0, 8);
  SendWr s = ud_send_wr(ah->attr(), qb.qp_num(), sge, 0);
  for (uint64_t id = 1; id <= 3; ++id) {
    s.wr_id = id;
    ASSERT_TRUE(qa.post_send(s));
  }
  const Status smaller = a.dev.raw().resize_cq(a.cq.id(), 2);
  EXPECT_FALSE(smaller);
  EXPECT_EQ(smaller.code(), EINVAL);
  EXPECT_TRUE(a.dev.raw().resize_cq(a.cq.id(), 3));
  EXPECT_EQ(a.dev.raw().cq_capacity(a.cq.id()), 3u);
  std::array<Wc, 4> wc{};
  ASSERT_EQ(a.cq.poll(std::span<Wc>(wc)), 3);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(wc[i].wr_id, i + 1);
    EXPECT_EQ(wc[i].status, WcStatus::kSuccess);
  }
}

TEST_F(DevicePairTest, DeadPeerGivesRetryExceededWithinTheBound) {
  QueuePair qa = a_.make_qp(QpType::kRc);
  QueuePair qb = b_.make_qp(QpType::kRc);
  ConnectOptions opt;
  opt.timeout = 8;  // 4.096 us * 2^8 = 1.05 ms
  opt.retry_cnt = 3;
  connect(qa, qb, opt);
  wire_.drop_all = true;
  const Sge sge = a_.mr.sge(0, 64);
  SendWr w;
  w.wr_id = 77;
  w.opcode = WrOpcode::kRdmaWrite;
  w.send_flags = kSendSignaled;
  w.sg_list = std::span<const Sge>(&sge, 1);
  w.rdma = {b_.mr.info().addr, b_.mr.rkey()};
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(qa.post_send(w));
  Wc wc = wait_wc(a_.cq, std::chrono::milliseconds(2000));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(wc.wr_id, 77u);
  EXPECT_EQ(wc.status, WcStatus::kRetryExcErr);
  // (retry_cnt + 1) timeouts of ~1 ms; generous slack for a loaded machine.
  EXPECT_LT(took, std::chrono::milliseconds(500));
  EXPECT_EQ(a_.dev.counters()[Counter::kRetryExceededErr], 1u);
  EXPECT_EQ(qa.state(), QpState::kErr);
}

TEST_F(DevicePairTest, SharedReceiveQueueFeedsTwoQps) {
  SrqInitAttr sattr{64, 2, 0};
  auto srq = b_.pd.create_srq(sattr);
  ASSERT_TRUE(srq.is_ok());
  QpInitAttr init;
  init.qp_type = QpType::kRc;
  init.send_cq = b_.cq.id();
  init.recv_cq = b_.cq.id();
  init.srq = srq->id();
  init.cap = QpCap{16, 0, 2, 0, 0};
  auto qb1 = b_.pd.create_qp(init);
  auto qb2 = b_.pd.create_qp(init);
  ASSERT_TRUE(qb1.is_ok() && qb2.is_ok());
  QueuePair qa1 = a_.make_qp(QpType::kRc);
  QueuePair qa2 = a_.make_qp(QpType::kRc);
  connect(qa1, qb1.value());
  connect(qa2, qb2.value());
  for (uint64_t i = 0; i < 2; ++i) {
    const Sge rsge = b_.mr.sge(i * 4096, 4096);
    ASSERT_TRUE(srq.value().post_recv(RecvWr{100 + i, std::span<const Sge>(&rsge, 1)}));
  }
  const Sge sge = a_.mr.sge(0, 100);
  SendWr s;
  s.opcode = WrOpcode::kSend;
  s.send_flags = kSendSignaled;
  s.sg_list = std::span<const Sge>(&sge, 1);
  ASSERT_TRUE(qa1.post_send(s));
  EXPECT_EQ(wait_wc(a_.cq).status, WcStatus::kSuccess);
  ASSERT_TRUE(qa2.post_send(s));
  EXPECT_EQ(wait_wc(a_.cq).status, WcStatus::kSuccess);
  Wc r1 = wait_wc(b_.cq);
  Wc r2 = wait_wc(b_.cq);
  EXPECT_EQ(r1.wr_id, 100u);
  EXPECT_EQ(r1.qp_num, qb1->qp_num());
  EXPECT_EQ(r2.wr_id, 101u);
  EXPECT_EQ(r2.qp_num, qb2->qp_num());
}

TEST_F(DevicePairTest, PinnedRegistrationChecksTheMemlockLimit) {
  std::vector<uint8_t> big(64 << 10);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &old), 0);
  rlimit low = old;
  low.rlim_cur = 16 << 10;
  ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &low), 0);
  auto r = a_.pd.reg_mr(big.data(), big.size(), kAccessLocalWrite, /*pin=*/true);
  ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &old), 0);
  EXPECT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ENOMEM);
  EXPECT_NE(std::string(r.status().message()).find("RLIMIT_MEMLOCK"), std::string::npos);
  auto unpinned = a_.pd.reg_mr(big.data(), big.size(), kAccessLocalWrite);
  EXPECT_TRUE(unpinned.is_ok());
}

}  // namespace
}  // namespace uroce::test
