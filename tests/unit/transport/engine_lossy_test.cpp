// Mixed RC traffic (SEND, WRITE, READ, FETCH_ADD, both directions) over a lossy, duplicating,
// reordering wire, for a sweep of seeds: every WR completes successfully and in order, the
// data is byte-exact and every atomic was executed exactly once.
#include <gtest/gtest.h>

#include "engine_harness.hpp"

namespace uroce::test {
namespace {

using namespace transport;

struct Case {
  uint64_t seed;
  Mtu mtu;
  double drop;
};

class LossyMix : public ::testing::TestWithParam<Case> {};

TEST_P(LossyMix, EverythingCompletesExactlyOnce) {
  const Case c = GetParam();
  EngineHarness h({.latency = Nanos(3000), .seed = c.seed});
  QpPair p = h.connect({.mtu = c.mtu,
                        .timeout = 6,
                        .min_rnr_timer = 1,
                        .max_rd_atomic = 4,
                        .max_dest_rd_atomic = 4,
                        .buffer_size = 1 << 21});
  for (int i = 0; i < 2; ++i) {
    h.faults(i).drop = c.drop;
    h.faults(i).duplicate = c.drop / 2;
    h.faults(i).reorder = c.drop / 2;
    h.faults(i).reorder_delay = Nanos(7000);
  }
  std::mt19937_64 rng(c.seed);
  for (size_t i = 0; i < 1 << 20; ++i) {
    p.a.buf[i] = static_cast<uint8_t>(rng());
    p.b.buf[i] = static_cast<uint8_t>(rng());
  }
  constexpr size_t kCounterOff = (1 << 21) - 64;  // B's 8-byte atomic counter
  constexpr int kOps = 60;
  std::vector<Sge> sges(kOps);
  std::vector<Sge> rsges(kOps);
  int sends = 0;
  int faas = 0;
  std::vector<std::pair<size_t, size_t>> writes;  // (A offset -> B offset) checks, length 3000
  std::vector<std::pair<size_t, size_t>> reads;   // (B offset -> A offset), length 2500
  for (int k = 0; k < kOps; ++k) {
    const int kind = static_cast<int>(rng() % 4);
    SendWr wr;
    wr.wr_id = static_cast<uint64_t>(k);
    wr.send_flags = kSendSignaled;
    const size_t slot = static_cast<size_t>(k) * 8192;
    switch (kind) {
      case 0: {  // SEND of 1..6000 bytes into B's receive area (B offset 1 MiB + slot)
        const uint32_t len = 1 + static_cast<uint32_t>(rng() % 6000);
        sges[k] = p.a.sge(slot, len);
        rsges[k] = p.b.sge((1 << 20) + slot, 8192);
        RecvWr r;
        r.wr_id = static_cast<uint64_t>(k);
        r.sg_list = {&rsges[k], 1};
        ASSERT_TRUE(p.b.engine->post_recv(p.b.qpn, r).is_ok());
        wr.opcode = WrOpcode::kSend;
        ++sends;
        writes.emplace_back(slot, (1 << 20) + slot);
        break;
      }
      case 1:
        sges[k] = p.a.sge(slot, 3000);
        wr.opcode = WrOpcode::kRdmaWrite;
        wr.rdma = {p.b.addr((1 << 20) + slot), p.b.mr.rkey};
        writes.emplace_back(slot, (1 << 20) + slot);
        break;
      case 2:
        sges[k] = p.a.sge((1 << 20) + slot, 2500);
        wr.opcode = WrOpcode::kRdmaRead;
        wr.rdma = {p.b.addr(slot), p.b.mr.rkey};
        reads.emplace_back(slot, (1 << 20) + slot);
        break;
      default:
        sges[k] = p.a.sge((1 << 20) + slot, 8);
        wr.opcode = WrOpcode::kAtomicFetchAndAdd;
        wr.atomic = {p.b.addr(kCounterOff), 1, 0, p.b.mr.rkey};
        ++faas;
        break;
    }
    wr.sg_list = {&sges[k], 1};
    ASSERT_TRUE(p.a.engine->post_send(h.now(), p.a.qpn, wr).is_ok());
  }
  std::memset(p.b.buf.data() + kCounterOff, 0, 8);
  // Snapshot what the checks compare against before traffic changes B's buffer.
  const std::vector<uint8_t> a0 = p.a.buf;
  const std::vector<uint8_t> b0 = p.b.buf;

  auto swc = h.wait_wcs(0, p.a.send_cq, kOps, 60s);
  auto rwc = h.wait_wcs(1, p.b.recv_cq, static_cast<size_t>(sends), 60s);
  ASSERT_EQ(swc.size(), size_t{kOps}) << "seed " << c.seed;
  ASSERT_EQ(rwc.size(), static_cast<size_t>(sends));
  for (int k = 0; k < kOps; ++k) {
    EXPECT_EQ(swc[k].wr_id, uint64_t(k));
    EXPECT_EQ(swc[k].status, WcStatus::kSuccess) << "wr " << k << " seed " << c.seed;
  }
  for (const Wc& w : rwc) EXPECT_EQ(w.status, WcStatus::kSuccess);
  for (auto [from, to] : writes) {
    // SEND lengths vary; compare the bytes each op carried (its SGE length).
    const size_t k = from / 8192;
    const size_t len = sges[k].length;
    EXPECT_TRUE(std::equal(a0.begin() + from, a0.begin() + from + len, p.b.buf.begin() + to))
        << "op " << k;
  }
  for (auto [from, to] : reads) {
    EXPECT_TRUE(std::equal(b0.begin() + from, b0.begin() + from + 2500, p.a.buf.begin() + to))
        << "read to " << to;
  }
  uint64_t counter = 0;
  std::memcpy(&counter, p.b.buf.data() + kCounterOff, 8);
  EXPECT_EQ(counter, static_cast<uint64_t>(faas));  // each FETCH_ADD executed exactly once
  EXPECT_TRUE(h.run_until_idle(10s));
}

INSTANTIATE_TEST_SUITE_P(Seeds, LossyMix,
                         ::testing::Values(Case{1, Mtu::k1024, 0.05}, Case{2, Mtu::k256, 0.05},
                                           Case{3, Mtu::k4096, 0.05}, Case{4, Mtu::k512, 0.10},
                                           Case{5, Mtu::k2048, 0.10}, Case{6, Mtu::k1024, 0.15},
                                           Case{7, Mtu::k256, 0.02}, Case{8, Mtu::k4096, 0.20},
                                           Case{9, Mtu::k1024, 0.10}, Case{10, Mtu::k512, 0.25}));

}  // namespace
}  // namespace uroce::test
