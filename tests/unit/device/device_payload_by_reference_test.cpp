// A Device whose PacketIo takes payloads by reference (PacketIo::takes_payload_by_reference):
// RC packets leave with their payload in the source MR, and what the I/O does not take at
// once (a full socket buffer) is copied into its slot before the engine's lock is released
// (Device::send_referenced_locked). Either way the bytes that land are the source's.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "device_fixture.hpp"

namespace uroce::test {
namespace {

struct ByReferencePair {
  explicit ByReferencePair(size_t take_per_burst) {
    wire.by_reference = true;
    wire.take_per_burst = take_per_burst;
    a.emplace(make_fake_device(wire, 1, 0x100));
    b.emplace(make_fake_device(wire, 2, 0x2000));
  }
  FakeWire wire;
  std::optional<Side> a;  // destroyed before the wire
  std::optional<Side> b;
};

// WRITE 100000 bytes (98 packets at MTU 1024), then SEND 5000 of them (5 packets) back.
void write_and_send(ByReferencePair& p) {
  QueuePair qa = p.a->make_qp(QpType::kRc);
  QueuePair qb = p.b->make_qp(QpType::kRc);
  ConnectOptions opt;
  opt.path_mtu = Mtu::k1024;
  ASSERT_TRUE(connect_qp(qa, 100, QpEndpoint{qb.qp_num(), 200, fake_gid(2)}, opt));
  ASSERT_TRUE(connect_qp(qb, 200, QpEndpoint{qa.qp_num(), 100, fake_gid(1)}, opt));

  for (size_t i = 0; i < 100000; ++i) p.a->buf[i] = static_cast<uint8_t>(i * 7 + 1);
  const Sge wsge = p.a->mr.sge(0, 100000);
  SendWr w;
  w.wr_id = 1;
  w.opcode = WrOpcode::kRdmaWrite;
  w.send_flags = kSendSignaled;
  w.sg_list = std::span<const Sge>(&wsge, 1);
  w.rdma = {p.b->mr.info().addr + 4096, p.b->mr.rkey()};
  ASSERT_TRUE(qa.post_send(w));
  Wc wc = wait_wc(p.a->cq);
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(p.b->buf.data() + 4096, p.a->buf.data(), 100000), 0);

  const Sge rsge = p.a->mr.sge(500000, 8192);
  ASSERT_TRUE(qa.post_recv(RecvWr{7, std::span<const Sge>(&rsge, 1)}));
  post_send(qb, *p.b, 4096 + 300, 2, 5000);
  wc = wait_wc(p.a->cq);
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.byte_len, 5000u);
  EXPECT_EQ(std::memcmp(p.a->buf.data() + 500000, p.a->buf.data() + 300, 5000), 0);
  EXPECT_EQ(wait_wc(p.b->cq).status, WcStatus::kSuccess);
}

TEST(DevicePayloadByReference, PacketsLeaveFromTheSourceAndLandByteExact) {
  ByReferencePair p(0);
  write_and_send(p);
  // All but each message's last packet (672 and 904 bytes: under kPayloadByReferenceMin).
  EXPECT_GE(p.wire.delivered_by_reference.load(), 97u + 4u);
}

// One packet per tx_burst: the first of each build leaves by reference, the others are
// copied into their slots and leave later, the same bytes.
TEST(DevicePayloadByReference, WhatTheIoDidNotTakeIsCopiedBeforeTheLockIsReleased) {
  ByReferencePair p(1);
  write_and_send(p);
  const uint64_t by_reference = p.wire.delivered_by_reference.load();
  EXPECT_GE(by_reference, 1u);
  EXPECT_LT(by_reference, 97u + 4u);
}

}  // namespace
}  // namespace uroce::test
