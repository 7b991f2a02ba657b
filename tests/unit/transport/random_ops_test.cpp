// Randomized operations between two engines under loss, reordering and duplication, checked
// against a shadow model of both memories, every atomic's original value and every
// completion, in order.
//
// Every run is seeded; a failure prints the seed and the batch, and
//   UROCE_RANDOM_SEED=<seed> ./random_ops_test --gtest_filter=<test>
// replays exactly that run (the engines and the virtual wire are deterministic).
// UROCE_RANDOM_OPS scales the RC operation count (default 10000 across the seeds); the UC
// and UD variants run a fifth of it each.
//
// How the model stays exact: operations go out in batches; each batch ends with a signaled
// WR and runs until every expected completion arrived. RC executes requests in PSN order,
// so the shadow applies operations in posting order, with one exception the IBTA allows
// (IBA 9.5, 10.8.3.3): a READ's data may be read after later requests executed, so a WRITE
// or atomic that touches bytes an earlier READ of the same batch reads carries the Fence
// flag. Local source bytes never change while a batch runs; local destinations are disjoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "engine_harness.hpp"
#include "script_harness.hpp"

namespace uroce::test {
namespace {

using namespace transport;

constexpr size_t kMiB = 1 << 20;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v == nullptr ? fallback : std::atoi(v);
}

int total_ops() {
  return std::max(1, env_int("UROCE_RANDOM_OPS", 10000));
}

// Seeds to run: UROCE_RANDOM_SEED alone when set, else `defaults`.
std::vector<uint64_t> seeds(std::initializer_list<uint64_t> defaults) {
  const char* v = std::getenv("UROCE_RANDOM_SEED");
  if (v != nullptr) return {std::strtoull(v, nullptr, 0)};
  return defaults;
}

// Fills `buf` with pseudo-random bytes (SplitMix64, 8 bytes per step: the buffers are MiBs).
void fill_random(std::vector<uint8_t>& buf, uint64_t seed) {
  uint64_t x = seed;
  for (size_t i = 0; i < buf.size(); i += 8) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(buf.data() + i, &z, std::min<size_t>(8, buf.size() - i));
  }
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  uint64_t u64() { return g_(); }
  uint32_t below(uint64_t n) { return n == 0 ? 0 : static_cast<uint32_t>(g_() % n); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0.0, 1.0)(g_) < p; }

 private:
  std::mt19937_64 g_;
};

const Mtu kMtus[] = {Mtu::k256, Mtu::k512, Mtu::k1024, Mtu::k2048, Mtu::k4096};

// Message sizes: biased to tiny messages and to MTU boundaries, with a tail up to `max`.
uint32_t pick_size(Rng& r, uint32_t mtu, uint32_t max) {
  const uint32_t x = r.below(100);
  uint64_t n = 0;
  if (x < 40) {
    n = r.below(65);
  } else if (x < 70) {
    const uint64_t k = 1 + r.below(4);
    n = k * mtu + r.below(3) - 1;  // k*MTU - 1, k*MTU, k*MTU + 1
  } else if (x < 93) {
    n = r.below(16 * 1024 + 1);
  } else {
    n = r.below(uint64_t{max} + 1);
  }
  return static_cast<uint32_t>(std::min<uint64_t>(n, max));
}

// Splits [off, off+len) of `ep`'s buffer into 1..max_sge SGEs (some may be empty).
std::vector<Sge> split_sges(const Endpoint& ep, size_t off, uint32_t len, Rng& r,
                            uint32_t max_sge) {
  const uint32_t n = 1 + r.below(max_sge);
  std::vector<uint32_t> cuts;
  for (uint32_t i = 0; i + 1 < n; ++i) cuts.push_back(r.below(uint64_t{len} + 1));
  std::sort(cuts.begin(), cuts.end());
  std::vector<Sge> out;
  uint32_t prev = 0;
  for (uint32_t c : cuts) {
    out.push_back(ep.sge(off + prev, c - prev));
    prev = c;
  }
  out.push_back(ep.sge(off + prev, len - prev));
  return out;
}

// Copies `data` into the SGE list (byte offsets relative to `base`) of a shadow buffer.
void scatter_shadow(std::vector<uint8_t>& shadow, uint64_t base, const std::vector<Sge>& sges,
                    std::span<const uint8_t> data) {
  size_t done = 0;
  for (const Sge& s : sges) {
    const size_t n = std::min<size_t>(s.length, data.size() - done);
    if (n != 0) std::memcpy(shadow.data() + (s.addr - base), data.data() + done, n);
    done += n;
    if (done == data.size()) break;
  }
}

std::vector<uint8_t> gather_shadow(const std::vector<uint8_t>& shadow, uint64_t base,
                                   const std::vector<Sge>& sges) {
  std::vector<uint8_t> out;
  for (const Sge& s : sges) {
    out.insert(out.end(), shadow.begin() + static_cast<ptrdiff_t>(s.addr - base),
               shadow.begin() + static_cast<ptrdiff_t>(s.addr - base + s.length));
  }
  return out;
}

struct ExpectedWc {
  uint64_t wr_id = 0;
  WcOpcode opcode = WcOpcode::kSend;
  uint32_t byte_len = 0;
  uint32_t wc_flags = 0;
  uint32_t imm = 0;
  uint32_t inv_rkey = 0;
};

void check_wc(const Wc& got, const ExpectedWc& want, uint32_t qpn, const char* side, size_t i) {
  SCOPED_TRACE(std::string(side) + " completion #" + std::to_string(i));
  EXPECT_EQ(got.wr_id, want.wr_id);
  EXPECT_EQ(got.status, WcStatus::kSuccess);
  EXPECT_EQ(got.opcode, want.opcode);
  EXPECT_EQ(got.byte_len, want.byte_len);
  EXPECT_EQ(got.wc_flags, want.wc_flags);
  EXPECT_EQ(got.qp_num, qpn);
  if ((want.wc_flags & kWcWithImm) != 0) {
    EXPECT_EQ(got.imm_data, want.imm);
  }
  if ((want.wc_flags & kWcWithInv) != 0) {
    EXPECT_EQ(got.invalidated_rkey, want.inv_rkey);
  }
}

// A range of one side's buffer the batch may have changed.
struct Dirty {
  int side;
  size_t off;
  size_t len;
};

bool overlaps(size_t a, size_t alen, size_t b, size_t blen) {
  return a < b + blen && b < a + alen;
}

// ---------------------------------------------------------------------------------------
// RC: every operation, both directions impaired.

// Layout of both buffers (4 MiB). Requester A (engine 0): sources [0, 1M), READ/atomic
// destinations [1M, 2M). Responder B (engine 1): WRITE/READ area [0, 1M), atomic words
// [1M, 1M+4K), receive buffers [2M, 4M).
constexpr size_t kSrcArea = 0;
constexpr size_t kDstArea = 1 * kMiB;
constexpr size_t kRwArea = 0;
constexpr size_t kAtomicArea = 1 * kMiB;
constexpr size_t kAtomicLen = 4096;
constexpr size_t kRecvArea = 2 * kMiB;
constexpr size_t kBufSize = 4 * kMiB;
constexpr uint32_t kMaxMsg = 256 * 1024;

class RcRun {
 public:
  RcRun(uint64_t seed, int ops)
      : seed_(seed),
        ops_(ops),
        r_(seed),
        h_(harness_options(seed)),
        w_(h_.engine(0), h_.engine(1), seed) {}

  void run() {
    PairOptions o;
    o.type = QpType::kRc;
    o.mtu = kMtus[r_.below(5)];
    mtu_ = mtu_bytes(o.mtu);
    o.psn0 = 0xFFFFF0 + r_.below(16);  // both directions cross the 24-bit wrap early
    o.psn1 = 0xFFFFF0 + r_.below(16);
    o.timeout = 8;  // 1 ms: many retransmissions per second of virtual time
    o.retry_cnt = 7;
    o.rnr_retry = 7;
    o.max_rd_atomic = 16;
    o.max_dest_rd_atomic = 16;
    o.buffer_size = kBufSize;
    o.max_sge = 4;
    o.max_inline = 128;
    p_ = h_.connect(o);
    for (int from = 0; from < 2; ++from) {
      w_.faults(from).drop = 0.05;
      w_.faults(from).duplicate = 0.05;
      w_.faults(from).reorder = 0.05;
    }
    fill_random(p_.a.buf, r_.u64());
    fill_random(p_.b.buf, r_.u64());
    shadow_a_ = p_.a.buf;
    shadow_b_ = p_.b.buf;

    int done = 0;
    for (int batch = 0; done < ops_; ++batch) {
      SCOPED_TRACE("RC seed " + std::to_string(seed_) + " (MTU " + std::to_string(mtu_) +
                   ") batch " + std::to_string(batch) +
                   "; replay with UROCE_RANDOM_SEED=" + std::to_string(seed_));
      done +=
          run_batch(std::min(ops_ - done, 1 + static_cast<int>(r_.below(r_.chance(0.2) ? 24 : 8))));
      if (::testing::Test::HasFailure()) return;
      if (batch % 16 == 15) compare_all();
    }
    w_.run_until_idle(Nanos(10'000'000'000));
    const Counters& ca = *h_.engine(0).qp_counters(p_.a.qpn);
    const Counters& cb = *h_.engine(1).qp_counters(p_.b.qpn);
    std::printf(
        "[ seed %llu ] RC MTU %u: %d ops, %llu packets on the wire, %llu retransmitted, "
        "%llu sequence NAKs, %llu ACK timeouts, %llu implied NAKs, %llu duplicate requests, "
        "%.3f s virtual\n",
        static_cast<unsigned long long>(seed_), mtu_, ops_,
        static_cast<unsigned long long>(w_.packets_sent()),
        static_cast<unsigned long long>(ca[Counter::kRetransmittedPkts]),
        static_cast<unsigned long long>(ca[Counter::kRcvdSeqErr]),
        static_cast<unsigned long long>(ca[Counter::kLocalAckTimeoutErr]),
        static_cast<unsigned long long>(ca[Counter::kImpliedNakSeqErr]),
        static_cast<unsigned long long>(cb[Counter::kDuplicateRequest]),
        std::chrono::duration<double>(w_.now()).count());
    EXPECT_TRUE(h_.poll(0, p_.a.send_cq).empty()) << "seed " << seed_ << ": extra send completion";
    EXPECT_TRUE(h_.poll(1, p_.b.recv_cq).empty())
        << "seed " << seed_ << ": extra receive completion";
    compare_all();
  }

 private:
  static EngineHarness::Options harness_options(uint64_t seed) {
    EngineHarness::Options ho;
    ho.seed = seed;
    ho.latency = Nanos(2000);
    return ho;
  }

  // Posts up to `n` operations, runs until all their completions arrived, checks them.
  int run_batch(int n) {
    exp_send_.clear();
    exp_recv_.clear();
    dirty_.clear();
    pending_reads_.clear();
    dst_cursor_ = kDstArea;
    recv_cursor_ = kRecvArea;
    int posted = 0;
    for (int i = 0; i < n; ++i) {
      if (!post_one(i + 1 == n)) break;
      ++posted;
      if (::testing::Test::HasFailure()) return posted;
    }
    if (posted == 0 || !last_signaled_) {
      // The batch's areas filled up early: close it with a signaled empty WRITE.
      post_closer();
      ++posted;
    }
    std::vector<Wc> got_s, got_r;
    const bool ok = w_.run_until(
        [&] {
          std::array<Wc, 64> buf;
          int k = 0;
          while ((k = h_.engine(0).poll_cq(p_.a.send_cq, buf)) > 0)
            got_s.insert(got_s.end(), buf.begin(), buf.begin() + k);
          while ((k = h_.engine(1).poll_cq(p_.b.recv_cq, buf)) > 0)
            got_r.insert(got_r.end(), buf.begin(), buf.begin() + k);
          return got_s.size() >= exp_send_.size() && got_r.size() >= exp_recv_.size();
        },
        Nanos(20'000'000'000));
    EXPECT_TRUE(ok) << "batch did not complete within 20 s of virtual time: " << got_s.size() << "/"
                    << exp_send_.size() << " send and " << got_r.size() << "/" << exp_recv_.size()
                    << " receive completions";
    EXPECT_EQ(got_s.size(), exp_send_.size());
    EXPECT_EQ(got_r.size(), exp_recv_.size());
    for (size_t i = 0; i < std::min(got_s.size(), exp_send_.size()); ++i) {
      check_wc(got_s[i], exp_send_[i], p_.a.qpn, "send", i);
    }
    for (size_t i = 0; i < std::min(got_r.size(), exp_recv_.size()); ++i) {
      check_wc(got_r[i], exp_recv_[i], p_.b.qpn, "receive", i);
    }
    for (const Dirty& d : dirty_) {
      const auto& real = d.side == 0 ? p_.a.buf : p_.b.buf;
      const auto& shadow = d.side == 0 ? shadow_a_ : shadow_b_;
      if (std::memcmp(real.data() + d.off, shadow.data() + d.off, d.len) != 0) {
        size_t i = 0;
        while (real[d.off + i] == shadow[d.off + i]) ++i;
        ADD_FAILURE() << (d.side == 0 ? "local" : "remote") << " memory differs at offset "
                      << d.off + i << " (range " << d.off << "+" << d.len << "): got "
                      << int(real[d.off + i]) << " want " << int(shadow[d.off + i]);
      }
    }
    for (uint32_t lkey : inv_mrs_) EXPECT_TRUE(h_.engine(1).dereg_mr(lkey).is_ok());
    inv_mrs_.clear();
    inv_bufs_.clear();
    return posted;
  }

  void compare_all() {
    for (int side = 0; side < 2; ++side) {
      const auto& real = side == 0 ? p_.a.buf : p_.b.buf;
      const auto& shadow = side == 0 ? shadow_a_ : shadow_b_;
      if (real != shadow) {
        size_t i = 0;
        while (real[i] == shadow[i]) ++i;
        ADD_FAILURE() << "seed " << seed_ << ": " << (side == 0 ? "local" : "remote")
                      << " memory differs at offset " << i
                      << " outside the ranges operations touched";
      }
    }
  }

  // Reserves `len` bytes of the batch's READ/atomic destinations; false when full.
  bool take_dst(uint32_t len, size_t* off) {
    const size_t aligned = (dst_cursor_ + 7) & ~size_t{7};
    if (aligned + len > kDstArea + 1 * kMiB) return false;
    *off = aligned;
    dst_cursor_ = aligned + len;
    return true;
  }
  bool take_recv(uint32_t len, size_t* off) {
    if (recv_cursor_ + len > kBufSize) return false;
    *off = recv_cursor_;
    recv_cursor_ += len;
    return true;
  }

  bool read_hazard(size_t off, size_t len) const {
    return std::any_of(pending_reads_.begin(), pending_reads_.end(),
                       [&](const std::pair<size_t, size_t>& pr) {
                         return overlaps(off, len, pr.first, pr.second);
                       });
  }

  // Posts a receive WQE on B able to hold `len` bytes; returns its SGEs (empty on failure).
  bool post_recv(uint32_t len, std::vector<Sge>* sges, uint64_t* wr_id) {
    const uint32_t room = len + r_.below(64);
    size_t off = 0;
    if (!take_recv(room, &off)) return false;
    *sges = split_sges(p_.b, off, room, r_, 4);
    *wr_id = 0x5000'0000ull + next_recv_id_++;
    RecvWr wr;
    wr.wr_id = *wr_id;
    wr.sg_list = *sges;
    EXPECT_TRUE(p_.b.engine->post_recv(p_.b.qpn, wr).is_ok());
    return true;
  }

  void post_closer() {
    SendWr wr;
    wr.wr_id = next_wr_id_++;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.send_flags = kSendSignaled;
    wr.rdma = {p_.b.mr.addr, p_.b.mr.rkey};
    exp_send_.push_back({wr.wr_id, WcOpcode::kRdmaWrite, 0, 0, 0, 0});
    last_signaled_ = true;
    const Status st = h_.engine(0).post_send(w_.now(), p_.a.qpn, wr);
    EXPECT_TRUE(st.is_ok()) << st.message();
  }

  // Generates, models and posts one operation. False when the batch's areas are full.
  bool post_one(bool last) {
    static constexpr WrOpcode kOps[] = {WrOpcode::kSend,
                                        WrOpcode::kSendWithImm,
                                        WrOpcode::kSendWithInv,
                                        WrOpcode::kRdmaWrite,
                                        WrOpcode::kRdmaWriteWithImm,
                                        WrOpcode::kRdmaRead,
                                        WrOpcode::kAtomicCmpAndSwp,
                                        WrOpcode::kAtomicFetchAndAdd};
    const WrOpcode op = kOps[r_.below(8)];
    const uint64_t wr_id = next_wr_id_++;
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    const bool signaled = last || r_.chance(0.5);
    wr.send_flags = signaled ? uint32_t{kSendSignaled} : 0u;
    if (r_.chance(0.05)) wr.send_flags |= kSendSolicited;
    std::vector<Sge> sges;
    ExpectedWc send_wc{wr_id, WcOpcode::kSend, 0, 0, 0, 0};
    const uint64_t base_a = p_.a.mr.addr;
    const uint64_t base_b = p_.b.mr.addr;

    if (op == WrOpcode::kAtomicCmpAndSwp || op == WrOpcode::kAtomicFetchAndAdd) {
      size_t dst = 0;
      if (!take_dst(8, &dst)) return false;
      const size_t slot = kAtomicArea + 8 * r_.below(kAtomicLen / 8);
      if (read_hazard(slot, 8)) wr.send_flags |= kSendFence;
      uint64_t orig = 0;
      std::memcpy(&orig, shadow_b_.data() + slot, 8);
      const bool cas = op == WrOpcode::kAtomicCmpAndSwp;
      const uint64_t compare = r_.chance(0.5) ? orig : r_.u64();
      const uint64_t swap_add = r_.below(4) == 0 ? r_.u64() : r_.below(1000);
      wr.atomic = {base_b + slot, cas ? compare : swap_add, cas ? swap_add : 0, p_.b.mr.rkey};
      sges = {p_.a.sge(dst, 8)};
      const uint64_t now_val = cas ? (orig == compare ? swap_add : orig) : orig + swap_add;
      std::memcpy(shadow_b_.data() + slot, &now_val, 8);
      std::memcpy(shadow_a_.data() + dst, &orig, 8);
      dirty_.push_back({1, slot, 8});
      dirty_.push_back({0, dst, 8});
      send_wc.opcode = cas ? WcOpcode::kCompSwap : WcOpcode::kFetchAdd;
      send_wc.byte_len = 8;
    } else if (op == WrOpcode::kRdmaRead) {
      const bool from_atomics = r_.chance(0.1);
      const uint32_t len = from_atomics ? r_.below(kAtomicLen + 1) : pick_size(r_, mtu_, kMaxMsg);
      size_t dst = 0;
      if (!take_dst(len, &dst)) return false;
      const size_t src = from_atomics ? kAtomicArea + r_.below(kAtomicLen - len + 1)
                                      : kRwArea + r_.below(1 * kMiB - len + 1);
      sges = split_sges(p_.a, dst, len, r_, 4);
      wr.rdma = {base_b + src, p_.b.mr.rkey};
      scatter_shadow(shadow_a_, base_a, sges,
                     std::span<const uint8_t>(shadow_b_.data() + src, len));
      pending_reads_.emplace_back(src, len);
      dirty_.push_back({0, dst, len});
      send_wc.opcode = WcOpcode::kRdmaRead;
      send_wc.byte_len = len;
    } else {
      const bool write = op == WrOpcode::kRdmaWrite || op == WrOpcode::kRdmaWriteWithImm;
      const uint32_t len = pick_size(r_, mtu_, kMaxMsg);
      const size_t src = kSrcArea + r_.below(1 * kMiB - len + 1);
      const bool inline_data = len <= 128 && r_.chance(0.5);
      if (inline_data) wr.send_flags |= kSendInline;
      sges = split_sges(p_.a, src, len, r_, 4);
      const std::vector<uint8_t> data = gather_shadow(shadow_a_, base_a, sges);
      const bool consumes_recv = !write || op == WrOpcode::kRdmaWriteWithImm;
      std::vector<Sge> rsges;
      uint64_t recv_id = 0;
      if (consumes_recv && !post_recv(write ? 0 : len, &rsges, &recv_id)) return false;
      ExpectedWc rwc{recv_id, WcOpcode::kRecv, len, kWcGrh, 0, 0};
      if (write) {
        const size_t dst = kRwArea + r_.below(1 * kMiB - len + 1);
        if (read_hazard(dst, len)) wr.send_flags |= kSendFence;
        wr.rdma = {base_b + dst, p_.b.mr.rkey};
        if (len != 0) std::memcpy(shadow_b_.data() + dst, data.data(), len);
        dirty_.push_back({1, dst, len});
        send_wc.opcode = WcOpcode::kRdmaWrite;
        rwc.opcode = WcOpcode::kRecvRdmaWithImm;
      } else {
        scatter_shadow(shadow_b_, base_b, rsges, data);
        for (const Sge& s : rsges) dirty_.push_back({1, s.addr - base_b, s.length});
      }
      if (op == WrOpcode::kSendWithImm || op == WrOpcode::kRdmaWriteWithImm) {
        wr.imm_data = static_cast<uint32_t>(r_.u64());
        rwc.wc_flags |= kWcWithImm;
        rwc.imm = wr.imm_data;
      }
      if (op == WrOpcode::kSendWithInv) {
        // A fresh MR on B whose R_Key the SEND invalidates (IBA 10.6.7.2).
        inv_bufs_.emplace_back(64, 0);
        const MrInfo mr =
            h_.engine(1)
                .reg_mr(p_.b.pd, inv_bufs_.back().data(), 64, kAccessLocalWrite | kAccessRemoteRead)
                .value();
        inv_mrs_.push_back(mr.lkey);
        wr.invalidate_rkey = mr.rkey;
        rwc.wc_flags |= kWcWithInv;
        rwc.inv_rkey = mr.rkey;
      }
      if (consumes_recv) exp_recv_.push_back(rwc);
      send_wc.byte_len = len;
    }
    wr.sg_list = sges;
    if (signaled) exp_send_.push_back(send_wc);
    last_signaled_ = signaled;
    const Status st = h_.engine(0).post_send(w_.now(), p_.a.qpn, wr);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return true;
  }

  uint64_t seed_;
  int ops_;
  Rng r_;
  EngineHarness h_;  // setup (connect) only; the FastWire moves the packets
  script::FastWire w_;
  QpPair p_;
  uint32_t mtu_ = 1024;
  std::vector<uint8_t> shadow_a_, shadow_b_;
  std::vector<ExpectedWc> exp_send_, exp_recv_;
  std::vector<Dirty> dirty_;
  std::vector<std::pair<size_t, size_t>> pending_reads_;
  std::vector<uint32_t> inv_mrs_;
  std::deque<std::vector<uint8_t>> inv_bufs_;
  size_t dst_cursor_ = kDstArea;
  size_t recv_cursor_ = kRecvArea;
  uint64_t next_wr_id_ = 1;
  uint64_t next_recv_id_ = 1;
  bool last_signaled_ = false;
};

TEST(RandomOps, RcMixedOperationsUnderLossReorderAndDuplication) {
  const std::vector<uint64_t> s = seeds({11, 22, 33, 44, 55});
  const int per_seed = std::max(1, total_ops() / static_cast<int>(s.size()));
  for (uint64_t seed : s) {
    RcRun run(seed, per_seed);
    run.run();
    if (HasFailure()) {
      ADD_FAILURE() << "failing seed " << seed << ": replay with UROCE_RANDOM_SEED=" << seed;
      return;
    }
  }
}

// ---------------------------------------------------------------------------------------
// UC: no acknowledgements, no retransmission. Loss drops whole messages; what arrives must be
// exactly right. Only loss is injected: UC has no duplicate detection (a First/Only packet
// starts a message at any PSN, IBA 9.8.3 and rxe check_psn), so a duplicated or reordered
// datagram may legitimately be delivered twice or out of order.

class UcRun {
 public:
  static constexpr size_t kSlot = 16 * 1024;  // every receive WQE holds the largest message
  static constexpr size_t kSlots = 64;
  static constexpr uint32_t kMaxUcMsg = 16 * 1024;

  UcRun(uint64_t seed, int ops)
      : seed_(seed), ops_(ops), r_(seed), h_(options(seed)), w_(h_.engine(0), h_.engine(1), seed) {}

  void run() {
    PairOptions o;
    o.type = QpType::kUc;
    o.mtu = kMtus[r_.below(5)];
    mtu_ = mtu_bytes(o.mtu);
    o.psn0 = 0xFFFFF0 + r_.below(16);
    o.psn1 = 0xFFFFF0 + r_.below(16);
    o.buffer_size = kBufSize;
    p_ = h_.connect(o);
    w_.faults(0).drop = 0.05;
    w_.faults(1).drop = 0.05;
    fill_random(p_.a.buf, r_.u64());
    fill_random(p_.b.buf, r_.u64());
    shadow_b_ = p_.b.buf;
    int done = 0;
    for (int batch = 0; done < ops_; ++batch) {
      SCOPED_TRACE("UC seed " + std::to_string(seed_) + " (MTU " + std::to_string(mtu_) +
                   ") batch " + std::to_string(batch) +
                   "; replay with UROCE_RANDOM_SEED=" + std::to_string(seed_));
      const int n = std::min(ops_ - done, 1 + static_cast<int>(r_.below(8)));
      run_batch(n);
      done += n;
      if (::testing::Test::HasFailure()) return;
    }
  }

 private:
  struct Msg {
    WrOpcode op;
    std::vector<uint8_t> data;
    uint32_t imm = 0;
    size_t dst = 0;  // WRITE target on B
    bool delivered = false;
  };
  struct Posted {
    uint64_t wr_id;
    std::vector<Sge> sges;
  };

  static EngineHarness::Options options(uint64_t seed) {
    EngineHarness::Options ho;
    ho.seed = seed;
    return ho;
  }

  void top_up_recvs() {
    while (recvs_.size() < 48) {
      const uint64_t id = next_recv_++;
      const size_t off = kRecvArea + (id % kSlots) * kSlot;
      Posted p{id, split_sges(p_.b, off, kSlot, r_, 4)};
      RecvWr wr;
      wr.wr_id = id;
      wr.sg_list = p.sges;
      ASSERT_TRUE(h_.engine(1).post_recv(p_.b.qpn, wr).is_ok());
      recvs_.push_back(std::move(p));
    }
  }

  void run_batch(int n) {
    top_up_recvs();
    std::vector<Msg> msgs;
    std::vector<uint64_t> signaled_ids;
    size_t write_cursor = kRwArea;
    for (int i = 0; i < n; ++i) {
      static constexpr WrOpcode kOps[] = {WrOpcode::kSend, WrOpcode::kSendWithImm,
                                          WrOpcode::kRdmaWrite, WrOpcode::kRdmaWriteWithImm};
      Msg m;
      m.op = kOps[r_.below(4)];
      const uint32_t len = pick_size(r_, mtu_, kMaxUcMsg);
      const size_t src = r_.below(1 * kMiB - len + 1);
      SendWr wr;
      wr.wr_id = next_wr_++;
      wr.opcode = m.op;
      const bool signaled = r_.chance(0.5);
      wr.send_flags = signaled ? uint32_t{kSendSignaled} : 0u;
      if (len <= 128 && r_.chance(0.5)) wr.send_flags |= kSendInline;
      const std::vector<Sge> sges = split_sges(p_.a, src, len, r_, 4);
      wr.sg_list = sges;
      m.data.assign(p_.a.buf.begin() + static_cast<ptrdiff_t>(src),
                    p_.a.buf.begin() + static_cast<ptrdiff_t>(src + len));
      if (m.op == WrOpcode::kSendWithImm || m.op == WrOpcode::kRdmaWriteWithImm) {
        m.imm = static_cast<uint32_t>(r_.u64());
        wr.imm_data = m.imm;
      }
      if (m.op == WrOpcode::kRdmaWrite || m.op == WrOpcode::kRdmaWriteWithImm) {
        // Disjoint targets within a batch: a lost WRITE leaves each byte old or new.
        if (write_cursor + len > kRwArea + 2 * kMiB) break;
        m.dst = write_cursor;
        write_cursor += len;
        wr.rdma = {p_.b.mr.addr + m.dst, p_.b.mr.rkey};
      }
      ASSERT_TRUE(h_.engine(0).post_send(w_.now(), p_.a.qpn, wr).is_ok());
      if (signaled) signaled_ids.push_back(wr.wr_id);
      msgs.push_back(std::move(m));
    }
    ASSERT_TRUE(w_.run_until_idle(Nanos(1'000'000'000)));
    // Sender: every signaled WQE completes successfully, in order (UC completes on send).
    const std::vector<Wc> sw = h_.poll(0, p_.a.send_cq, 1024);
    ASSERT_EQ(sw.size(), signaled_ids.size());
    for (size_t i = 0; i < sw.size(); ++i) {
      EXPECT_EQ(sw[i].wr_id, signaled_ids[i]);
      EXPECT_EQ(sw[i].status, WcStatus::kSuccess);
    }
    // Receiver: completions use the receive WQEs in order and match an in-order subsequence
    // of the messages exactly.
    const std::vector<Wc> rw = h_.poll(1, p_.b.recv_cq, 1024);
    size_t j = 0;
    for (size_t k = 0; k < rw.size(); ++k) {
      const Wc& wc = rw[k];
      SCOPED_TRACE("receive completion #" + std::to_string(k));
      ASSERT_FALSE(recvs_.empty());
      const Posted wqe = recvs_.front();
      recvs_.pop_front();
      EXPECT_EQ(wc.wr_id, wqe.wr_id);
      ASSERT_EQ(wc.status, WcStatus::kSuccess);
      const std::vector<uint8_t> got = gather_shadow(p_.b.buf, p_.b.mr.addr, wqe.sges);
      bool matched = false;
      for (; j < msgs.size() && !matched; ++j) {
        Msg& m = msgs[j];
        const bool is_send = m.op == WrOpcode::kSend || m.op == WrOpcode::kSendWithImm;
        if (m.op == WrOpcode::kRdmaWrite) continue;
        const bool imm = m.op != WrOpcode::kSend;
        const WcOpcode want_op = is_send ? WcOpcode::kRecv : WcOpcode::kRecvRdmaWithImm;
        if (wc.opcode != want_op || wc.byte_len != m.data.size() ||
            ((wc.wc_flags & kWcWithImm) != 0) != imm || (imm && wc.imm_data != m.imm)) {
          continue;
        }
        if (is_send && !std::equal(m.data.begin(), m.data.end(), got.begin())) continue;
        if (!is_send && !std::equal(m.data.begin(), m.data.end(),
                                    p_.b.buf.begin() + static_cast<ptrdiff_t>(m.dst))) {
          ADD_FAILURE() << "WRITE with immediate completed but its bytes are not all there";
        }
        m.delivered = true;
        matched = true;
      }
      EXPECT_TRUE(matched) << "a receive completion matches no message in order (opcode "
                           << int(wc.opcode) << ", byte_len " << wc.byte_len << ")";
    }
    // WRITE targets: a delivered WRITE-with-immediate is exact; any other WRITE leaves every
    // byte old or new. Nothing outside the targets and the receive buffers may change.
    for (const Msg& m : msgs) {
      if (m.op != WrOpcode::kRdmaWrite && m.op != WrOpcode::kRdmaWriteWithImm) continue;
      for (size_t i = 0; i < m.data.size(); ++i) {
        const uint8_t got = p_.b.buf[m.dst + i];
        if (got != m.data[i] && (m.delivered || got != shadow_b_[m.dst + i])) {
          ADD_FAILURE() << "WRITE target byte " << m.dst + i
                        << " is neither the old nor the new value";
          break;
        }
      }
      std::memcpy(shadow_b_.data() + m.dst, p_.b.buf.data() + m.dst, m.data.size());
    }
    EXPECT_TRUE(std::equal(p_.b.buf.begin(), p_.b.buf.begin() + kRecvArea, shadow_b_.begin()))
        << "bytes outside the WRITE targets changed";
  }

  uint64_t seed_;
  int ops_;
  Rng r_;
  EngineHarness h_;  // setup (connect) only; the FastWire moves the packets
  script::FastWire w_;
  QpPair p_;
  uint32_t mtu_ = 1024;
  std::vector<uint8_t> shadow_b_;
  std::deque<Posted> recvs_;
  uint64_t next_wr_ = 1;
  uint64_t next_recv_ = 1;
};

TEST(RandomOps, UcMessagesArriveWholeOrNotAtAllUnderLoss) {
  const std::vector<uint64_t> s = seeds({101, 202, 303});
  const int per_seed = std::max(1, total_ops() / 5 / static_cast<int>(s.size()));
  for (uint64_t seed : s) {
    UcRun run(seed, per_seed);
    run.run();
    if (HasFailure()) {
      ADD_FAILURE() << "failing seed " << seed << ": replay with UROCE_RANDOM_SEED=" << seed;
      return;
    }
  }
}

// ---------------------------------------------------------------------------------------
// UD: datagrams up to the active MTU under loss, reordering and duplication. Each receive
// completion must be exactly one of the datagrams sent (GRH area included); a datagram may
// arrive at most twice (the injected duplicate) and receive WQEs are used in order.

class UdRun {
 public:
  static constexpr size_t kSlot = 4096 + 64;
  static constexpr size_t kSlots = 512;

  UdRun(uint64_t seed, int ops)
      : seed_(seed),
        ops_(ops),
        r_(seed),
        h_(options(seed, r_)),
        w_(h_.engine(0), h_.engine(1), seed) {}

  void run() {
    PairOptions o;
    o.type = QpType::kUd;
    o.buffer_size = kBufSize;
    p_ = h_.connect(o);
    for (int from = 0; from < 2; ++from) {
      w_.faults(from).drop = 0.05;
      w_.faults(from).duplicate = 0.05;
      w_.faults(from).reorder = 0.05;
    }
    fill_random(p_.a.buf, r_.u64());
    int done = 0;
    for (int batch = 0; done < ops_; ++batch) {
      SCOPED_TRACE("UD seed " + std::to_string(seed_) + " (active MTU " + std::to_string(mtu_) +
                   ") batch " + std::to_string(batch) +
                   "; replay with UROCE_RANDOM_SEED=" + std::to_string(seed_));
      const int n = std::min(ops_ - done, 1 + static_cast<int>(r_.below(16)));
      run_batch(n);
      done += n;
      if (::testing::Test::HasFailure()) return;
    }
  }

 private:
  struct Posted {
    uint64_t wr_id;
    std::vector<Sge> sges;
  };
  struct Msg {
    std::vector<uint8_t> data;
    bool imm = false;
    uint32_t imm_data = 0;
    int delivered = 0;
  };

  EngineHarness::Options options(uint64_t seed, Rng& r) {
    EngineHarness::Options ho;
    ho.seed = seed;
    ho.active_mtu = kMtus[r.below(5)];
    mtu_ = mtu_bytes(ho.active_mtu);
    return ho;
  }

  void top_up_recvs() {
    while (recvs_.size() < 200) {
      const uint64_t id = next_recv_++;
      const size_t off = (id % kSlots) * kSlot;
      Posted p{id, split_sges(p_.b, off, kSlot, r_, 4)};
      RecvWr wr;
      wr.wr_id = id;
      wr.sg_list = p.sges;
      ASSERT_TRUE(h_.engine(1).post_recv(p_.b.qpn, wr).is_ok());
      recvs_.push_back(std::move(p));
    }
  }

  void run_batch(int n) {
    top_up_recvs();
    std::vector<Msg> msgs;
    std::vector<uint64_t> ids;
    for (int i = 0; i < n; ++i) {
      Msg m;
      const uint32_t len = pick_size(r_, mtu_, mtu_);
      const size_t src = r_.below(1 * kMiB - len + 1);
      SendWr wr;
      wr.wr_id = next_wr_++;
      wr.opcode = r_.chance(0.5) ? WrOpcode::kSendWithImm : WrOpcode::kSend;
      wr.send_flags = kSendSignaled;
      if (len <= 128 && r_.chance(0.5)) wr.send_flags |= kSendInline;
      const std::vector<Sge> sges = split_sges(p_.a, src, len, r_, 4);
      wr.sg_list = sges;
      wr.ud.ah.dgid = p_.b.gid;
      wr.ud.ah.sgid = p_.a.gid;
      wr.ud.remote_qpn = p_.b.qpn;
      wr.ud.remote_qkey = 0x11111111;
      m.data.assign(p_.a.buf.begin() + static_cast<ptrdiff_t>(src),
                    p_.a.buf.begin() + static_cast<ptrdiff_t>(src + len));
      if (wr.opcode == WrOpcode::kSendWithImm) {
        m.imm = true;
        m.imm_data = static_cast<uint32_t>(r_.u64());
        wr.imm_data = m.imm_data;
      }
      ASSERT_TRUE(h_.engine(0).post_send(w_.now(), p_.a.qpn, wr).is_ok());
      ids.push_back(wr.wr_id);
      msgs.push_back(std::move(m));
    }
    ASSERT_TRUE(w_.run_until_idle(Nanos(1'000'000'000)));
    const std::vector<Wc> sw = h_.poll(0, p_.a.send_cq, 1024);
    ASSERT_EQ(sw.size(), ids.size());
    for (size_t i = 0; i < sw.size(); ++i) {
      EXPECT_EQ(sw[i].wr_id, ids[i]);
      EXPECT_EQ(sw[i].status, WcStatus::kSuccess);
      EXPECT_EQ(sw[i].opcode, WcOpcode::kSend);
    }
    const std::vector<Wc> rw = h_.poll(1, p_.b.recv_cq, 1024);
    for (size_t k = 0; k < rw.size(); ++k) {
      const Wc& wc = rw[k];
      SCOPED_TRACE("receive completion #" + std::to_string(k));
      ASSERT_FALSE(recvs_.empty());
      const Posted wqe = recvs_.front();
      recvs_.pop_front();
      EXPECT_EQ(wc.wr_id, wqe.wr_id);
      ASSERT_EQ(wc.status, WcStatus::kSuccess);
      EXPECT_EQ(wc.src_qp, p_.a.qpn);
      EXPECT_EQ(wc.opcode, WcOpcode::kRecv);
      ASSERT_GE(wc.byte_len, 40u);
      const std::vector<uint8_t> got = gather_shadow(p_.b.buf, p_.b.mr.addr, wqe.sges);
      // GRH area for IPv4 (rxe): 20 zero bytes, then the IPv4 header with both addresses.
      EXPECT_TRUE(std::all_of(got.begin(), got.begin() + 20, [](uint8_t b) { return b == 0; }));
      EXPECT_EQ(got[20], 0x45);
      EXPECT_TRUE(std::equal(p_.a.gid.begin() + 12, p_.a.gid.end(), got.begin() + 32));
      EXPECT_TRUE(std::equal(p_.b.gid.begin() + 12, p_.b.gid.end(), got.begin() + 36));
      const bool imm = (wc.wc_flags & kWcWithImm) != 0;
      // Identical datagrams are interchangeable: prefer one not delivered yet.
      Msg* match = nullptr;
      for (Msg& m : msgs) {
        if (m.data.size() + 40 != wc.byte_len || m.imm != imm || (imm && m.imm_data != wc.imm_data))
          continue;
        if (!std::equal(m.data.begin(), m.data.end(), got.begin() + 40)) continue;
        if (match == nullptr || m.delivered < match->delivered) match = &m;
      }
      ASSERT_NE(match, nullptr) << "a receive completion matches no datagram sent";
      ++match->delivered;
      EXPECT_LE(match->delivered, 2)
          << "a datagram was delivered more often than the wire duplicated it";
    }
  }

  uint64_t seed_;
  int ops_;
  Rng r_;
  uint32_t mtu_ = 4096;
  EngineHarness h_;  // setup (connect) only; the FastWire moves the packets
  script::FastWire w_;
  QpPair p_;
  std::deque<Posted> recvs_;
  uint64_t next_wr_ = 1;
  uint64_t next_recv_ = 1;
};

TEST(RandomOps, UdDatagramsArriveExactlyUnderLossReorderAndDuplication) {
  const std::vector<uint64_t> s = seeds({7, 8, 9});
  const int per_seed = std::max(1, total_ops() / 5 / static_cast<int>(s.size()));
  for (uint64_t seed : s) {
    UdRun run(seed, per_seed);
    run.run();
    if (HasFailure()) {
      ADD_FAILURE() << "failing seed " << seed << ": replay with UROCE_RANDOM_SEED=" << seed;
      return;
    }
  }
}

}  // namespace
}  // namespace uroce::test
