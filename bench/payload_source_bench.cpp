// What a 4 KiB RDMA WRITE packet's payload costs the sender, copied into the TX slot or left
// in the MR by reference (Engine::set_payload_by_reference), when the sources are warm (one
// QP's 64 KiB buffer) and cold (64 or 256 QPs' buffers, 4 or 16 MiB, taking turns of one
// 64 KiB WRITE). Per packet, as the data path does it:
//   copy:         memcpy source -> slot, ICRC over the slot, the kernel's copy slot -> skb
//   by reference: ICRC over headers + source + pad, the kernel's copy source -> skb
// (the kernel's copy stood in for by a memcpy into a 256 KiB ring, as the socket's pages).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "wire/icrc.hpp"

namespace {

constexpr size_t kPayload = 4096;
constexpr size_t kHeaders = 28;  // BTH + RETH
constexpr size_t kPacket = kHeaders + kPayload + 4;
constexpr size_t kQpBuffer = 64 * 1024;
constexpr size_t kRing = 64;  // slots, and skb stand-ins

void BM_PacketSource(benchmark::State& state) {
  const bool by_reference = state.range(0) != 0;
  const size_t qps = static_cast<size_t>(state.range(1));
  std::vector<uint8_t> sources(qps * kQpBuffer, 0x5A);
  std::vector<uint8_t> slots(kRing * kPacket, 0);
  std::vector<uint8_t> skbs(kRing * kPacket, 0);
  const uroce::wire::IpContext ctx;
  size_t qp = 0;
  size_t k = 0;
  size_t n = 0;
  for (auto _ : state) {
    const uint8_t* src = sources.data() + qp * kQpBuffer + k * kPayload;
    const auto slot = std::span<uint8_t>(slots.data() + (n % kRing) * kPacket, kPacket);
    uint8_t* skb = skbs.data() + (n % kRing) * kPacket;
    slot[0] = 0x0A;  // RC WRITE First
    if (by_reference) {
      uroce::wire::write_icrc(ctx, slot, kHeaders, std::span<const uint8_t>(src, kPayload));
      std::memcpy(skb, slot.data(), kHeaders);
      std::memcpy(skb + kHeaders, src, kPayload);
      std::memcpy(skb + kHeaders + kPayload, slot.data() + kHeaders + kPayload, 4);
    } else {
      std::memcpy(slot.data() + kHeaders, src, kPayload);
      uroce::wire::write_icrc(ctx, slot);
      std::memcpy(skb, slot.data(), kPacket);
    }
    benchmark::DoNotOptimize(skb);
    ++n;
    if (++k == kQpBuffer / kPayload) {  // a QP's turn: one 64 KiB WRITE
      k = 0;
      qp = (qp + 1) % qps;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(n * kPayload));
  state.SetLabel(by_reference ? "by reference" : "copy");
}

}  // namespace

BENCHMARK(BM_PacketSource)->ArgsProduct({{0, 1}, {1, 64, 256}})->ArgNames({"by_ref", "qps"});
