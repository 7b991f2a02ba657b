// Loss soak: SEND, WRITE, WRITE with immediate, READ, FETCH_ADD and CMP_SWAP on one RC pair
// over a wire that drops 5 % of the packets in each direction, duplicates 2 % and reorders
// 5 %, in virtual time and deterministic (one seed), until the payload moved reaches the
// target: 1 GiB in an optimised build, 64 MiB under a sanitizer (ASan's LeakSanitizer then
// checks for leaks at exit); UROCE_SOAK_BYTES overrides. Every round, every byte of every
// destination is compared with its source, every WR and receive completes exactly once with
// SUCCESS, the atomics' returned values and the counter are exact. Memory stays bounded:
// nothing in flight after each round, and (optimised build) the RSS after the first rounds
// and at the end differ by less than 16 MiB.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include "engine_harness.hpp"

namespace uroce::test {
namespace {

using namespace transport;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr uint64_t kDefaultBytes = 64ull << 20;
constexpr bool kSanitized = true;
#else
constexpr uint64_t kDefaultBytes = 1ull << 30;
constexpr bool kSanitized = false;
#endif

constexpr size_t kRegion = 1 << 20;  // per round: A's source, B's sink, B's source, A's sink
constexpr size_t kBuf = 4 * kRegion + 4096;
constexpr size_t kCounter = 4 * kRegion;  // B's atomic counter (8 bytes)
constexpr size_t kAtomicOut = 4 * kRegion + 64;

uint64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0;
  uint64_t resident = 0;
  f >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

bool is_atomic(WrOpcode op) {
  return op == WrOpcode::kAtomicFetchAndAdd || op == WrOpcode::kAtomicCmpAndSwp;
}

void fill(std::vector<uint8_t>& buf, size_t off, size_t len, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < len; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    buf[off + i] = static_cast<uint8_t>(x);
  }
}

TEST(LossSoak, MixedOperationsUnderFivePercentLossEveryByteAndCompletionExact) {
  uint64_t target = kDefaultBytes;
  if (const char* env = std::getenv("UROCE_SOAK_BYTES")) target = std::strtoull(env, nullptr, 0);
  EngineHarness h({.latency = Nanos(3000), .seed = 20261201});
  QpPair p = h.connect({.mtu = Mtu::k4096,
                        .timeout = 8,  // 1 ms: virtual time, but fewer idle timer steps
                        .retry_cnt = 7,
                        .min_rnr_timer = 1,
                        .max_rd_atomic = 16,
                        .max_dest_rd_atomic = 16,
                        .max_send_wr = 64,
                        .max_recv_wr = 64,
                        .buffer_size = kBuf});
  for (int i = 0; i < 2; ++i) {
    h.faults(i).drop = 0.05;
    h.faults(i).duplicate = 0.02;
    h.faults(i).reorder = 0.05;
    h.faults(i).reorder_delay = Nanos(9000);
  }
  std::mt19937_64 rng(7);
  uint64_t moved = 0;
  uint64_t counter = 0;  // B's counter as it must be
  uint64_t rounds = 0;
  uint64_t wrs = 0;
  uint64_t rss_early = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::memcpy(p.b.buf.data() + kCounter, &counter, 8);

  while (moved < target) {
    ++rounds;
    // Plan: up to 24 operations, each with its own range in the round's regions.
    struct Op {
      WrOpcode op;
      size_t src = 0;  // offset of the source bytes (A for SEND/WRITE, B for READ)
      size_t dst = 0;  // offset of the destination bytes (B for SEND/WRITE, A for READ)
      uint32_t len = 0;
      uint64_t expect_orig = 0;  // atomics
    };
    std::vector<Op> ops;
    size_t cursor = 0;
    while (ops.size() < 24) {
      const auto len = static_cast<uint32_t>(1 + rng() % (96 * 1024));
      if (cursor + len > kRegion) break;
      static constexpr std::array<WrOpcode, 6> kinds = {
          WrOpcode::kSend,     WrOpcode::kRdmaWrite,         WrOpcode::kRdmaWriteWithImm,
          WrOpcode::kRdmaRead, WrOpcode::kAtomicFetchAndAdd, WrOpcode::kAtomicCmpAndSwp};
      Op o{kinds[rng() % kinds.size()]};
      if (is_atomic(o.op)) {
        o.len = 8;
        o.dst = kAtomicOut + 8 * ops.size();
      } else if (o.op == WrOpcode::kRdmaRead) {
        o.len = len;
        o.src = kRegion * 2 + cursor;
        o.dst = kRegion * 3 + cursor;
        fill(p.b.buf, o.src, len, rounds * 1000 + ops.size());
        cursor += len;
      } else {
        o.len = len;
        o.src = cursor;
        o.dst = kRegion + cursor;
        fill(p.a.buf, o.src, len, rounds * 1000 + ops.size());
        cursor += len;
      }
      ops.push_back(o);
    }
    // Post: receives on B for SEND and WRITE with immediate, then every WR on A.
    std::map<uint64_t, size_t> want_send;  // wr_id -> op index
    std::map<uint64_t, size_t> want_recv;
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& o = ops[i];
      if (o.op != WrOpcode::kSend && o.op != WrOpcode::kRdmaWriteWithImm) continue;
      const Sge r = o.op == WrOpcode::kSend ? p.b.sge(o.dst, o.len) : p.b.sge(0, 0);
      RecvWr wr;
      wr.wr_id = rounds << 8 | i;
      wr.sg_list = std::span<const Sge>(&r, 1);
      ASSERT_TRUE(h.engine(1).post_recv(p.b.qpn, wr).is_ok());
      want_recv[wr.wr_id] = i;
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      Op& o = ops[i];
      const bool to_a = o.op == WrOpcode::kRdmaRead || is_atomic(o.op);
      const Sge s = to_a ? p.a.sge(o.dst, o.len) : p.a.sge(o.src, o.len);
      SendWr wr;
      wr.wr_id = rounds << 8 | i;
      wr.opcode = o.op;
      wr.send_flags = kSendSignaled;
      wr.sg_list = std::span<const Sge>(&s, 1);
      wr.imm_data = static_cast<uint32_t>(wr.wr_id);
      wr.rdma.remote_addr = p.b.addr(o.op == WrOpcode::kRdmaRead ? o.src : o.dst);
      wr.rdma.rkey = p.b.mr.rkey;
      if (o.op == WrOpcode::kAtomicFetchAndAdd) {
        o.expect_orig = counter;
        wr.atomic = {p.b.addr(kCounter), 3, 0, p.b.mr.rkey};
        counter += 3;
      } else if (o.op == WrOpcode::kAtomicCmpAndSwp) {
        o.expect_orig = counter;
        wr.atomic = {p.b.addr(kCounter), counter, counter ^ 0x5555, p.b.mr.rkey};
        counter ^= 0x5555;
      }
      ASSERT_TRUE(h.engine(0).post_send(h.now(), p.a.qpn, wr).is_ok()) << "round " << rounds;
      want_send[wr.wr_id] = i;
      moved += o.len;
      ++wrs;
    }
    auto sw = h.wait_wcs(0, p.a.send_cq, want_send.size(), std::chrono::seconds(60));
    auto rw = h.wait_wcs(1, p.b.recv_cq, want_recv.size(), std::chrono::seconds(60));
    ASSERT_TRUE(h.run_until_idle(std::chrono::seconds(10))) << "round " << rounds;
    ASSERT_EQ(sw.size(), want_send.size()) << "round " << rounds;
    ASSERT_EQ(rw.size(), want_recv.size()) << "round " << rounds;
    ASSERT_TRUE(h.poll(0, p.a.send_cq).empty()) << "a second send completion";
    ASSERT_TRUE(h.poll(1, p.b.recv_cq).empty()) << "a second receive completion";
    for (const Wc& wc : sw) {
      ASSERT_EQ(wc.status, WcStatus::kSuccess) << "round " << rounds << " wr " << wc.wr_id;
      ASSERT_EQ(want_send.erase(wc.wr_id), 1u) << "send wr completed twice: " << wc.wr_id;
    }
    for (const Wc& wc : rw) {
      ASSERT_EQ(wc.status, WcStatus::kSuccess) << "round " << rounds;
      const auto it = want_recv.find(wc.wr_id);
      ASSERT_NE(it, want_recv.end()) << "receive completed twice: " << wc.wr_id;
      const Op& o = ops[it->second];
      ASSERT_EQ(wc.byte_len, o.len);  // SEND: bytes received; WRITE w/ imm: the RETH length
      if (o.op == WrOpcode::kRdmaWriteWithImm) {
        ASSERT_EQ(wc.imm_data, static_cast<uint32_t>(wc.wr_id));
      }
      want_recv.erase(it);
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& o = ops[i];
      if (is_atomic(o.op)) {
        uint64_t got = 0;
        std::memcpy(&got, p.a.buf.data() + o.dst, 8);
        ASSERT_EQ(got, o.expect_orig) << "atomic " << i << " of round " << rounds;
      } else if (o.op == WrOpcode::kRdmaRead) {
        ASSERT_EQ(std::memcmp(p.a.buf.data() + o.dst, p.b.buf.data() + o.src, o.len), 0)
            << "READ " << i << " of round " << rounds;
      } else {
        ASSERT_EQ(std::memcmp(p.b.buf.data() + o.dst, p.a.buf.data() + o.src, o.len), 0)
            << "op " << i << " of round " << rounds;
      }
    }
    uint64_t at_b = 0;
    std::memcpy(&at_b, p.b.buf.data() + kCounter, 8);
    ASSERT_EQ(at_b, counter) << "round " << rounds;
    ASSERT_EQ(h.in_flight(), 0u);
    h.log().clear();  // the harness records every packet; keep only a round's worth
    h.log().shrink_to_fit();
    if (rounds == 8) rss_early = rss_bytes();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t rss_end = rss_bytes();
  const Counters& ca = h.engine(0).counters();
  std::printf(
      "loss soak: %.1f MiB in %llu WRs, %llu rounds, %.1f s, virtual %.3f s, "
      "retransmitted %llu packets, RSS %.1f -> %.1f MiB\n",
      static_cast<double>(moved) / (1 << 20), static_cast<unsigned long long>(wrs),
      static_cast<unsigned long long>(rounds), secs, std::chrono::duration<double>(h.now()).count(),
      static_cast<unsigned long long>(ca[Counter::kRetransmittedPkts]),
      static_cast<double>(rss_early) / (1 << 20), static_cast<double>(rss_end) / (1 << 20));
  EXPECT_GE(moved, target);
  if (!kSanitized && rss_early != 0) {
    EXPECT_LT(rss_end, rss_early + (16u << 20)) << "memory grew during the soak";
  }
}

}  // namespace
}  // namespace uroce::test
