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
#include <memory>
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
// RC: every operation, requests in both directions at once, both directions impaired.

// Layout of both buffers (8 MiB), the same on each side. The side's own requests read their
// sources from [0, 1M) and land READ/atomic results in [1M, 2M); the peer's requests target
// [2M, 3M) (WRITE/READ) and the atomic words [3M, 3M+4K), and its SENDs land in receive
// buffers in [4M, 8M). The two directions never share bytes, so each is modelled alone.
constexpr size_t kRcSrc = 0;
constexpr size_t kRcDst = 1 * kMiB;
constexpr size_t kRcRw = 2 * kMiB;
constexpr size_t kRcAtomic = 3 * kMiB;
constexpr size_t kAtomicLen = 4096;
constexpr size_t kRcRecv = 4 * kMiB;
constexpr size_t kRcBuf = 8 * kMiB;
constexpr uint32_t kMaxMsg = 256 * 1024;

// UC and UD use a 4 MiB buffer: WRITE targets from 0, receive buffers from 2M.
constexpr size_t kRwArea = 0;
constexpr size_t kRecvArea = 2 * kMiB;
constexpr size_t kBufSize = 4 * kMiB;

class RcRun {
 public:
  RcRun(uint64_t seed, int ops, int qp_pairs = 1)
      : seed_(seed),
        ops_(ops),
        qp_pairs_(qp_pairs),
        r_(seed),
        h_(harness_options(seed)),
        w_(h_.engine(0), h_.engine(1), seed) {}

  void run() {
    use_srq_ = r_.chance(0.4);
    for (int i = 0; i < qp_pairs_; ++i) {
      PairOptions o;
      o.type = QpType::kRc;
      o.mtu = kMtus[r_.below(5)];
      o.psn0 = 0xFFFFF0 + r_.below(16);  // both directions cross the 24-bit wrap early
      o.psn1 = 0xFFFFF0 + r_.below(16);
      o.timeout = 8;  // 1 ms: many retransmissions per second of virtual time
      o.retry_cnt = 7;
      o.rnr_retry = 7;
      o.min_rnr_timer = 1;  // 10 us
      o.max_rd_atomic = 16;
      o.max_dest_rd_atomic = 16;
      o.buffer_size = kRcBuf;
      o.max_sge = 4;
      o.max_inline = 128;
      o.use_srq = use_srq_;
      auto c = std::make_unique<Conn>();
      c->p = h_.connect(o);
      c->mtu = mtu_bytes(o.mtu);
      c->sides[0].ep = &c->p.a;
      c->sides[1].ep = &c->p.b;
      for (Side& s : c->sides) {
        fill_random(s.ep->buf, r_.u64());
        s.shadow = s.ep->buf;
      }
      mtus_ += (i == 0 ? "" : "/") + std::to_string(c->mtu);
      conns_.push_back(std::move(c));
    }
    for (int from = 0; from < 2; ++from) {
      w_.faults(from).drop = 0.05;
      w_.faults(from).duplicate = 0.05;
      w_.faults(from).reorder = 0.05;
    }

    int done = 0;
    for (int batch = 0; done < ops_; ++batch) {
      SCOPED_TRACE("RC seed " + std::to_string(seed_) + " (MTU " + mtus_ +
                   (use_srq_ ? ", SRQ" : "") + ") batch " + std::to_string(batch) +
                   "; replay with UROCE_RANDOM_SEED=" + std::to_string(seed_));
      done +=
          run_batch(std::min(ops_ - done, 1 + static_cast<int>(r_.below(r_.chance(0.2) ? 24 : 8))));
      if (::testing::Test::HasFailure()) return;
      if (batch % 16 == 15) compare_all();
    }
    w_.run_until_idle(Nanos(10'000'000'000));
    uint64_t sums[2][6] = {};
    for (const auto& c : conns_) {
      for (int s = 0; s < 2; ++s) {
        const Counters& k = *h_.engine(s).qp_counters(c->sides[s].ep->qpn);
        const Counter which[6] = {Counter::kSentPkts,           Counter::kRetransmittedPkts,
                                  Counter::kRcvdSeqErr,         Counter::kRcvdRnrErr,
                                  Counter::kLocalAckTimeoutErr, Counter::kDuplicateRequest};
        for (int i = 0; i < 6; ++i) sums[s][i] += k[which[i]];
        EXPECT_EQ(k[Counter::kReqCqeError] + k[Counter::kRespCqeError], 0u);
        EXPECT_TRUE(h_.poll(s, c->sides[s].ep->send_cq).empty())
            << "seed " << seed_ << ": extra send completion";
        EXPECT_TRUE(h_.poll(s, c->sides[s].ep->recv_cq).empty())
            << "seed " << seed_ << ": extra receive completion";
      }
    }
    for (int s = 0; s < 2; ++s) {
      std::printf(
          "[ seed %llu ] RC %d QP pair(s), MTU %s%s, side %d: %llu packets sent, %llu "
          "retransmitted, %llu "
          "sequence NAKs and %llu RNR NAKs received, %llu ACK timeouts, %llu duplicate requests\n",
          static_cast<unsigned long long>(seed_), qp_pairs_, mtus_.c_str(), use_srq_ ? " SRQ" : "",
          s, static_cast<unsigned long long>(sums[s][0]),
          static_cast<unsigned long long>(sums[s][1]), static_cast<unsigned long long>(sums[s][2]),
          static_cast<unsigned long long>(sums[s][3]), static_cast<unsigned long long>(sums[s][4]),
          static_cast<unsigned long long>(sums[s][5]));
    }
    std::printf(
        "[ seed %llu ] RC: %d operations, %llu packets on the wire, %.3f s of virtual time\n",
        static_cast<unsigned long long>(seed_), ops_,
        static_cast<unsigned long long>(w_.packets_sent()),
        std::chrono::duration<double>(w_.now()).count());
    // No malformed or misaddressed traffic here: every device counter is the sum of the
    // per-QP ones (nothing counted twice or only on one of the two levels).
    for (int s = 0; s < 2; ++s) {
      const Counters& dev = h_.engine(s).counters();
      for (size_t i = 0; i < transport::kCounterCount; ++i) {
        const auto id = static_cast<Counter>(i);
        uint64_t sum = 0;
        for (const auto& c : conns_) sum += (*h_.engine(s).qp_counters(c->sides[s].ep->qpn))[id];
        EXPECT_EQ(dev[id], sum) << "engine " << s << " counter " << transport::counter_name(id);
      }
    }
    compare_all();
  }

 private:
  // One side's state within the run and the batch. Its requests go to the other side.
  struct Side {
    Endpoint* ep = nullptr;
    std::vector<uint8_t> shadow;
    std::vector<ExpectedWc> exp_send;  // its own send CQ
    std::vector<ExpectedWc> exp_recv;  // its receive CQ (from the peer's requests)
    std::vector<Dirty> dirty;
    std::vector<std::pair<size_t, size_t>> pending_reads;  // of the peer's memory
    std::vector<std::vector<Sge>> deferred_sges;           // receive WQEs posted late
    std::vector<uint64_t> deferred_ids;
    size_t dst_cursor = kRcDst;
    size_t recv_cursor = kRcRecv;
    int posted = 0;
    bool last_signaled = false;
  };

  // One connected QP pair and the model of its two sides.
  struct Conn {
    QpPair p;
    std::array<Side, 2> sides;
    uint32_t mtu = 1024;
  };

  static EngineHarness::Options harness_options(uint64_t seed) {
    EngineHarness::Options ho;
    ho.seed = seed;
    ho.latency = Nanos(2000);
    return ho;
  }

  // Posts up to `n` operations spread over both sides, runs until all their completions
  // arrived, checks completions and memory.
  int run_batch(int n) {
    for (auto& c : conns_) {
      for (Side& s : c->sides) {
        s.exp_send.clear();
        s.exp_recv.clear();
        s.dirty.clear();
        s.pending_reads.clear();
        s.dst_cursor = kRcDst;
        s.recv_cursor = kRcRecv;
        s.posted = 0;
        s.last_signaled = false;
      }
    }
    // Now and then the receiver posts its receive WQEs only after the SENDs arrived: RNR.
    defer_recvs_ = r_.chance(0.1);
    // Mostly A -> B, sometimes both ways at once.
    const double b_share = r_.chance(0.5) ? 0.0 : 0.4;
    int posted = 0;
    for (int i = 0; i < n; ++i) {
      Conn& c = *conns_[r_.below(conns_.size())];
      const int from = r_.chance(b_share) ? 1 : 0;
      if (!post_one(c, from)) break;
      ++posted;
      if (::testing::Test::HasFailure()) return posted;
    }
    for (auto& c : conns_) {
      for (int s = 0; s < 2; ++s) {
        if ((posted == 0 && s == 0 && c == conns_.front()) ||
            (c->sides[s].posted > 0 && !c->sides[s].last_signaled)) {
          post_closer(*c, s);
          ++posted;
        }
      }
    }
    if (defer_recvs_) {
      w_.run_until([] { return false; }, Nanos(30'000));
      for (auto& c : conns_) {
        for (Side& s : c->sides) {
          for (size_t i = 0; i < s.deferred_ids.size(); ++i)
            post_recv_now(s, s.deferred_ids[i], s.deferred_sges[i]);
          s.deferred_ids.clear();
          s.deferred_sges.clear();
        }
      }
    }
    std::vector<std::array<std::vector<Wc>, 2>> got_s(conns_.size()), got_r(conns_.size());
    const bool ok = w_.run_until(
        [&] {
          std::array<Wc, 64> buf;
          bool all = true;
          for (size_t ci = 0; ci < conns_.size(); ++ci) {
            const Conn& c = *conns_[ci];
            for (int s = 0; s < 2; ++s) {
              int k = 0;
              while ((k = h_.engine(s).poll_cq(c.sides[s].ep->send_cq, buf)) > 0) {
                got_s[ci][s].insert(got_s[ci][s].end(), buf.begin(), buf.begin() + k);
              }
              while ((k = h_.engine(s).poll_cq(c.sides[s].ep->recv_cq, buf)) > 0) {
                got_r[ci][s].insert(got_r[ci][s].end(), buf.begin(), buf.begin() + k);
              }
              all = all && got_s[ci][s].size() >= c.sides[s].exp_send.size() &&
                    got_r[ci][s].size() >= c.sides[s].exp_recv.size();
            }
          }
          return all;
        },
        Nanos(20'000'000'000));
    EXPECT_TRUE(ok) << "batch did not complete within 20 s of virtual time";
    for (size_t ci = 0; ci < conns_.size(); ++ci) {
      for (int s = 0; s < 2; ++s) {
        const Side& sd = conns_[ci]->sides[s];
        const std::string who = "QP pair " + std::to_string(ci) + (s == 0 ? " A " : " B ");
        EXPECT_EQ(got_s[ci][s].size(), sd.exp_send.size()) << who << "send completions";
        EXPECT_EQ(got_r[ci][s].size(), sd.exp_recv.size()) << who << "receive completions";
        for (size_t i = 0; i < std::min(got_s[ci][s].size(), sd.exp_send.size()); ++i) {
          check_wc(got_s[ci][s][i], sd.exp_send[i], sd.ep->qpn, (who + "send").c_str(), i);
        }
        for (size_t i = 0; i < std::min(got_r[ci][s].size(), sd.exp_recv.size()); ++i) {
          check_wc(got_r[ci][s][i], sd.exp_recv[i], sd.ep->qpn, (who + "receive").c_str(), i);
        }
        for (const Dirty& d : sd.dirty) {
          const std::vector<uint8_t>& real = sd.ep->buf;
          if (std::memcmp(real.data() + d.off, sd.shadow.data() + d.off, d.len) != 0) {
            size_t i = 0;
            while (real[d.off + i] == sd.shadow[d.off + i]) ++i;
            ADD_FAILURE() << who << "memory differs at offset " << d.off + i << " (range " << d.off
                          << "+" << d.len << "): got " << int(real[d.off + i]) << " want "
                          << int(sd.shadow[d.off + i]);
          }
        }
      }
    }
    return posted;
  }

  void compare_all() {
    for (size_t ci = 0; ci < conns_.size(); ++ci) {
      for (int s = 0; s < 2; ++s) {
        const Side& sd = conns_[ci]->sides[s];
        if (sd.ep->buf != sd.shadow) {
          size_t i = 0;
          while (sd.ep->buf[i] == sd.shadow[i]) ++i;
          ADD_FAILURE() << "seed " << seed_ << ": QP pair " << ci << " side " << s
                        << " memory differs at offset " << i
                        << " outside the ranges operations touched";
        }
      }
    }
  }

  // Reserves `len` bytes of the side's READ/atomic destinations for this batch.
  static bool take_dst(Side& s, uint32_t len, size_t* off) {
    const size_t aligned = (s.dst_cursor + 7) & ~size_t{7};
    if (aligned + len > kRcDst + 1 * kMiB) return false;
    *off = aligned;
    s.dst_cursor = aligned + len;
    return true;
  }

  static bool read_hazard(const Side& s, size_t off, size_t len) {
    return std::any_of(s.pending_reads.begin(), s.pending_reads.end(),
                       [&](const std::pair<size_t, size_t>& pr) {
                         return overlaps(off, len, pr.first, pr.second);
                       });
  }

  void post_recv_now(Side& t, uint64_t wr_id, const std::vector<Sge>& sges) {
    RecvWr wr;
    wr.wr_id = wr_id;
    wr.sg_list = sges;
    const Status st = t.ep->srq ? t.ep->engine->post_srq_recv(*t.ep->srq, wr)
                                : t.ep->engine->post_recv(t.ep->qpn, wr);
    EXPECT_TRUE(st.is_ok()) << st.message();
  }

  // A receive WQE on side `t` able to hold `len` bytes (now, or once the batch's SENDs are
  // out when receives are deferred).
  bool post_recv(Side& t, uint32_t len, std::vector<Sge>* sges, uint64_t* wr_id) {
    const uint32_t room = len + r_.below(64);
    if (t.recv_cursor + room > kRcBuf) return false;
    *sges = split_sges(*t.ep, t.recv_cursor, room, r_, 4);
    t.recv_cursor += room;
    *wr_id = 0x5000'0000ull + next_recv_id_++;
    if (defer_recvs_) {
      t.deferred_sges.push_back(*sges);
      t.deferred_ids.push_back(*wr_id);
    } else {
      post_recv_now(t, *wr_id, *sges);
    }
    return true;
  }

  void post_closer(Conn& c, int from) {
    Side& s = c.sides[from];
    const Side& t = c.sides[1 - from];
    SendWr wr;
    wr.wr_id = next_wr_id_++;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.send_flags = kSendSignaled;
    wr.rdma = {t.ep->mr.addr + kRcRw, t.ep->mr.rkey};
    s.exp_send.push_back({wr.wr_id, WcOpcode::kRdmaWrite, 0, 0, 0});
    s.last_signaled = true;
    ++s.posted;
    const Status st = h_.engine(from).post_send(w_.now(), s.ep->qpn, wr);
    EXPECT_TRUE(st.is_ok()) << st.message();
  }

  // Generates, models and posts one operation of side `from` against the other side.
  // False when the batch's areas are full.
  bool post_one(Conn& c, int from) {
    static constexpr WrOpcode kOps[] = {WrOpcode::kSend,
                                        WrOpcode::kSendWithImm,
                                        WrOpcode::kRdmaWrite,
                                        WrOpcode::kRdmaWriteWithImm,
                                        WrOpcode::kRdmaRead,
                                        WrOpcode::kAtomicCmpAndSwp,
                                        WrOpcode::kAtomicFetchAndAdd};
    Side& s = c.sides[from];
    Side& t = c.sides[1 - from];
    const uint32_t mtu = c.mtu;
    // Up to 256 KiB, but at most 256 packets, so that small-MTU seeds stay within the
    // test's time budget (go-back-N resends whole windows under 5% loss).
    const uint32_t max_msg = std::min<uint32_t>(kMaxMsg, 256 * mtu);
    const WrOpcode op = kOps[r_.below(std::size(kOps))];
    const uint64_t wr_id = next_wr_id_++;
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    const bool signaled = r_.chance(0.5);
    wr.send_flags = signaled ? uint32_t{kSendSignaled} : 0u;
    if (r_.chance(0.05)) wr.send_flags |= kSendSolicited;
    std::vector<Sge> sges;
    ExpectedWc send_wc{wr_id, WcOpcode::kSend, 0, 0, 0};
    const uint64_t base_s = s.ep->mr.addr;
    const uint64_t base_t = t.ep->mr.addr;

    if (op == WrOpcode::kAtomicCmpAndSwp || op == WrOpcode::kAtomicFetchAndAdd) {
      size_t dst = 0;
      if (!take_dst(s, 8, &dst)) return false;
      const size_t slot = kRcAtomic + 8 * r_.below(kAtomicLen / 8);
      if (read_hazard(s, slot, 8)) wr.send_flags |= kSendFence;
      uint64_t orig = 0;
      std::memcpy(&orig, t.shadow.data() + slot, 8);
      const bool cas = op == WrOpcode::kAtomicCmpAndSwp;
      const uint64_t compare = r_.chance(0.5) ? orig : r_.u64();
      const uint64_t swap_add = r_.below(4) == 0 ? r_.u64() : r_.below(1000);
      wr.atomic = {base_t + slot, cas ? compare : swap_add, cas ? swap_add : 0, t.ep->mr.rkey};
      sges = {s.ep->sge(dst, 8)};
      const uint64_t now_val = cas ? (orig == compare ? swap_add : orig) : orig + swap_add;
      std::memcpy(t.shadow.data() + slot, &now_val, 8);
      std::memcpy(s.shadow.data() + dst, &orig, 8);
      t.dirty.push_back({1 - from, slot, 8});
      s.dirty.push_back({from, dst, 8});
      send_wc.opcode = cas ? WcOpcode::kCompSwap : WcOpcode::kFetchAdd;
      send_wc.byte_len = 8;
    } else if (op == WrOpcode::kRdmaRead) {
      const bool from_atomics = r_.chance(0.1);
      const uint32_t len = from_atomics ? r_.below(kAtomicLen + 1) : pick_size(r_, mtu, max_msg);
      size_t dst = 0;
      if (!take_dst(s, len, &dst)) return false;
      const size_t src = from_atomics ? kRcAtomic + r_.below(kAtomicLen - len + 1)
                                      : kRcRw + r_.below(1 * kMiB - len + 1);
      sges = split_sges(*s.ep, dst, len, r_, 4);
      wr.rdma = {base_t + src, t.ep->mr.rkey};
      scatter_shadow(s.shadow, base_s, sges, std::span<const uint8_t>(t.shadow.data() + src, len));
      s.pending_reads.emplace_back(src, len);
      s.dirty.push_back({from, dst, len});
      send_wc.opcode = WcOpcode::kRdmaRead;
      send_wc.byte_len = len;
    } else {
      const bool write = op == WrOpcode::kRdmaWrite || op == WrOpcode::kRdmaWriteWithImm;
      const uint32_t len = pick_size(r_, mtu, max_msg);
      const size_t src = kRcSrc + r_.below(1 * kMiB - len + 1);
      if (len <= 128 && r_.chance(0.5)) wr.send_flags |= kSendInline;
      sges = split_sges(*s.ep, src, len, r_, 4);
      const std::vector<uint8_t> data = gather_shadow(s.shadow, base_s, sges);
      const bool consumes_recv = !write || op == WrOpcode::kRdmaWriteWithImm;
      std::vector<Sge> rsges;
      uint64_t recv_id = 0;
      if (consumes_recv && !post_recv(t, write ? 0 : len, &rsges, &recv_id)) return false;
      ExpectedWc rwc{recv_id, WcOpcode::kRecv, len, kWcGrh, 0};
      if (write) {
        const size_t dst = kRcRw + r_.below(1 * kMiB - len + 1);
        if (read_hazard(s, dst, len)) wr.send_flags |= kSendFence;
        wr.rdma = {base_t + dst, t.ep->mr.rkey};
        if (len != 0) std::memcpy(t.shadow.data() + dst, data.data(), len);
        t.dirty.push_back({1 - from, dst, len});
        send_wc.opcode = WcOpcode::kRdmaWrite;
        rwc.opcode = WcOpcode::kRecvRdmaWithImm;
      } else {
        scatter_shadow(t.shadow, base_t, rsges, data);
        for (const Sge& g : rsges) t.dirty.push_back({1 - from, g.addr - base_t, g.length});
      }
      if (op == WrOpcode::kSendWithImm || op == WrOpcode::kRdmaWriteWithImm) {
        wr.imm_data = static_cast<uint32_t>(r_.u64());
        rwc.wc_flags |= kWcWithImm;
        rwc.imm = wr.imm_data;
      }
      if (consumes_recv) t.exp_recv.push_back(rwc);
      send_wc.byte_len = len;
    }
    wr.sg_list = sges;
    if (signaled) s.exp_send.push_back(send_wc);
    s.last_signaled = signaled;
    ++s.posted;
    const Status st = h_.engine(from).post_send(w_.now(), s.ep->qpn, wr);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return true;
  }

  uint64_t seed_;
  int ops_;
  int qp_pairs_;
  Rng r_;
  EngineHarness h_;  // setup (connect) only; the FastWire moves the packets
  script::FastWire w_;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::string mtus_;
  bool use_srq_ = false;
  bool defer_recvs_ = false;
  uint64_t next_wr_id_ = 1;
  uint64_t next_recv_id_ = 1;
};

// Several QP pairs between the same two engines at once: dispatch by QPN, per-QP timers and
// the round-robin TX list under the same faults.
TEST(RandomOps, RcManyQpPairsAtOnce) {
  const std::vector<uint64_t> s = seeds({66, 77});
  const int per_seed = std::max(1, total_ops() / 10 / static_cast<int>(s.size()));
  for (uint64_t seed : s) {
    RcRun run(seed, per_seed, 4);
    run.run();
    if (HasFailure()) {
      ADD_FAILURE() << "failing seed " << seed << ": replay with UROCE_RANDOM_SEED=" << seed;
      return;
    }
  }
}

TEST(RandomOps, RcMixedOperationsBothWaysUnderLossReorderAndDuplication) {
  // Seeds chosen so the path MTUs are 256, 512, 1024, 2048 and 4096, with and without SRQ.
  const std::vector<uint64_t> s = seeds({2, 28, 1, 4, 18});
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
