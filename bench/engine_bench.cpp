// The transport engine's own cost, with no sockets and no threads: two engines joined in
// memory (tests/unit/transport/engine_harness.hpp brings the RC QPs up), RDMA WRITEs of
// SIZE bytes at path MTU 4096. Each iteration posts one signalled WRITE and moves its
// packets and ACKs until it completes. The sender's poll_tx (headers, gather MR -> slot,
// ICRC) and the receiver's on_packet (parse, ICRC check, rkey check, place slot -> MR) are
// timed apart and reported per data packet: send_ns_per_pkt, recv_ns_per_pkt.
//
// Also: reg_mr + dereg_mr of 1 GiB, and the heap bytes one idle RC QP costs (queues of one
// WR each, so mostly the QP's own state).
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <sys/mman.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <vector>

#include "engine_harness.hpp"

namespace {

using uroce::test::EngineHarness;
using uroce::test::PairOptions;
using uroce::test::QpPair;
using namespace uroce::transport;
using BenchClock = std::chrono::steady_clock;
using uroce::Nanos;
using uroce::TimePoint;

constexpr size_t kBurst = 16;

struct Wire {
  std::array<std::vector<uint8_t>, kBurst> bufs;
  std::array<TxSlot, kBurst> slots;
  Wire() {
    for (auto& b : bufs) b.assign(4096 + 128, 0);
  }
  std::span<TxSlot> offer() {
    for (size_t k = 0; k < kBurst; ++k) slots[k] = TxSlot{.buf = bufs[k]};
    return slots;
  }
};

void BM_EngineRcWrite(benchmark::State& state) {
  const auto size = static_cast<uint32_t>(state.range(0));
  EngineHarness h({.active_mtu = Mtu::k4096});
  PairOptions o;
  o.mtu = Mtu::k4096;
  o.buffer_size = size_t{size} + 4096;
  const QpPair p = h.connect(o);
  Engine& tx = h.engine(0);
  Engine& rx = h.engine(1);
  Wire fwd, back;
  std::array<Wc, 16> wcs{};
  TimePoint now{0};
  Nanos send_ns{0}, recv_ns{0};
  uint64_t packets = 0;
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.send_flags = kSendSignaled;
  wr.rdma.remote_addr = p.b.addr();
  wr.rdma.rkey = p.b.mr.rkey;
  const Sge sge = p.a.sge(0, size);
  wr.sg_list = std::span<const Sge>(&sge, 1);
  for (auto _ : state) {
    now += Nanos(1000);
    if (!tx.post_send(now, p.a.qpn, wr).is_ok()) {
      state.SkipWithError("post_send failed");
      return;
    }
    for (;;) {
      const auto t0 = BenchClock::now();
      const size_t n = tx.poll_tx(now, fwd.offer());
      const auto t1 = BenchClock::now();
      for (size_t k = 0; k < n; ++k) {
        rx.on_packet(now, fwd.slots[k].meta, std::span(fwd.bufs[k].data(), fwd.slots[k].len));
      }
      const auto t2 = BenchClock::now();
      send_ns += t1 - t0;
      recv_ns += t2 - t1;
      packets += n;
      const size_t acks = rx.poll_tx(now, back.offer());
      for (size_t k = 0; k < acks; ++k) {
        tx.on_packet(now, back.slots[k].meta, std::span(back.bufs[k].data(), back.slots[k].len));
      }
      if (tx.poll_cq(p.a.send_cq, wcs) > 0) break;
      if (n == 0 && acks == 0) now += Nanos(1000);  // nothing moved: let a timer come due
    }
  }
  const double pk = static_cast<double>(packets);
  state.counters["send_ns_per_pkt"] = static_cast<double>(send_ns.count()) / pk;
  state.counters["recv_ns_per_pkt"] = static_cast<double>(recv_ns.count()) / pk;
  state.counters["pkts_per_msg"] = pk / static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * size);
}
BENCHMARK(BM_EngineRcWrite)->Arg(64)->Arg(4096)->Arg(65536)->Arg(1 << 20);

void BM_RegMr1GiB(benchmark::State& state) {
  constexpr size_t kLen = size_t{1} << 30;
  // Reserved, not touched: registration must not depend on the pages being resident.
  void* mem = mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    state.SkipWithError("mmap of 1 GiB failed");
    return;
  }
  Engine e(EngineConfig{});
  const PdId pd = e.alloc_pd().value();
  for (auto _ : state) {
    auto mr = e.reg_mr(pd, mem, kLen, kAccessLocalWrite | kAccessRemoteWrite);
    if (!mr.is_ok()) {
      state.SkipWithError("reg_mr failed");
      break;
    }
    benchmark::DoNotOptimize(mr.value().lkey);
    (void)e.dereg_mr(mr.value().lkey);
  }
  munmap(mem, kLen);
}
BENCHMARK(BM_RegMr1GiB)->Unit(benchmark::kMicrosecond);

void BM_IdleRcQpHeapBytes(benchmark::State& state) {
  constexpr uint32_t kQps = 1000;
  for (auto _ : state) {
    EngineConfig cfg;
    cfg.limits.max_qp = kQps + 16;
    Engine e(cfg);
    const PdId pd = e.alloc_pd().value();
    const CqId cq = e.create_cq(16).value();
    QpInitAttr init;
    init.qp_type = QpType::kRc;
    init.send_cq = cq;
    init.recv_cq = cq;
    init.cap = {1, 1, 1, 1, 0};
    const size_t before = mallinfo2().uordblks;
    for (uint32_t i = 0; i < kQps; ++i) {
      if (!e.create_qp(pd, init).is_ok()) {
        state.SkipWithError("create_qp failed");
        return;
      }
    }
    const size_t after = mallinfo2().uordblks;
    state.counters["heap_bytes_per_qp"] =
        static_cast<double>(after - before) / static_cast<double>(kQps);
  }
}
BENCHMARK(BM_IdleRcQpHeapBytes)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
