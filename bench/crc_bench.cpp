// CRC-32 and ICRC throughput: ISA-L's crc32_gzip_refl against zlib's crc32 on the same bytes,
// then uroce's whole ICRC (masked pseudo header + chained CRC over the packet in place) and
// its receive-side checks, on RoCE packets of 64 B, 1 KiB and 4 KiB (BTH .. ICRC); header
// parse and build.
#include <benchmark/benchmark.h>
#include <isa-l/crc.h>
#include <zlib.h>

#include <cstdint>
#include <vector>

#include "wire/icrc.hpp"
#include "wire/packet.hpp"

namespace {

using uroce::wire::IpContext;

std::vector<uint8_t> bytes_of(size_t n) {
  std::vector<uint8_t> v(n);
  uint32_t x = 0x12345678;
  for (auto& b : v) {
    x = x * 1103515245 + 12345;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

// An RC SEND Only of `packet_len` bytes in total, with a valid ICRC for `ctx`.
std::vector<uint8_t> packet_of(size_t packet_len, const IpContext& ctx) {
  uroce::wire::Headers h;
  h.bth.opcode = 0x04;
  h.bth.dqpn = 0x27;
  const size_t payload = packet_len - uroce::wire::kBthLen - uroce::wire::kIcrcLen;
  std::vector<uint8_t> out(packet_len);
  const auto data = bytes_of(payload);
  if (uroce::wire::build_packet(h, data, out) != packet_len) std::abort();
  uroce::wire::write_icrc(ctx, out);
  return out;
}

IpContext context(uint16_t id) {
  IpContext ctx;
  ctx.src[12] = ctx.dst[12] = 10;
  ctx.src[15] = 3;
  ctx.dst[15] = 2;
  ctx.sport = 0xC123;
  ctx.ipv4_id = id;
  return ctx;
}

void BM_IsalCrc32(benchmark::State& state) {
  const auto v = bytes_of(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(crc32_gzip_refl(0, v.data(), v.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_ZlibCrc32(benchmark::State& state) {
  const auto v = bytes_of(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(::crc32(0, v.data(), static_cast<uInt>(v.size())));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

// ICRC of a packet given without its ICRC bytes (payload not copied).
void BM_IcrcOf(benchmark::State& state) {
  const IpContext ctx = context(0);
  const auto pkt = packet_of(static_cast<size_t>(state.range(0)), ctx);
  const std::span<const uint8_t> body(pkt.data(), pkt.size() - uroce::wire::kIcrcLen);
  for (auto _ : state) benchmark::DoNotOptimize(uroce::wire::icrc_of(ctx, body));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

// Sender side as the data path does it: the ICRC written into the packet's last 4 bytes.
void BM_WriteIcrc(benchmark::State& state) {
  const IpContext ctx = context(0);
  auto pkt = packet_of(static_cast<size_t>(state.range(0)), ctx);
  for (auto _ : state) {
    uroce::wire::write_icrc(ctx, pkt);
    benchmark::DoNotOptimize(pkt.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

// Receiver side, the peer's IPv4 ID known (or zero, as uroce sends).
void BM_VerifyIcrcExact(benchmark::State& state) {
  const IpContext ctx = context(0);
  const auto pkt = packet_of(static_cast<size_t>(state.range(0)), ctx);
  for (auto _ : state) benchmark::DoNotOptimize(uroce::wire::verify_icrc_udp(ctx, pkt));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

// Receiver side from a UDP socket, peer ID unknown (Linux rxe): CRC + subspace test.
void BM_VerifyIcrcModuloId(benchmark::State& state) {
  const auto pkt = packet_of(static_cast<size_t>(state.range(0)), context(0x9A0B));
  const IpContext receiver = context(0);
  for (auto _ : state) benchmark::DoNotOptimize(uroce::wire::verify_icrc_udp(receiver, pkt));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_ParsePacket(benchmark::State& state) {
  const auto pkt = packet_of(static_cast<size_t>(state.range(0)), context(0));
  uroce::wire::ParsedPacket p;
  for (auto _ : state) benchmark::DoNotOptimize(uroce::wire::parse_packet(pkt, p));
}

// The headers of an RDMA WRITE First (BTH + RETH), as the requester writes them before it
// gathers the payload behind them; the argument is the payload length.
void BM_BuildHeaders(benchmark::State& state) {
  uroce::wire::Headers h;
  h.bth.opcode = 0x06;  // RC RDMA WRITE First
  h.bth.dqpn = 0x27;
  h.bth.psn = uroce::Psn(0x123456);
  h.reth.va = 0x7f0000001000;
  h.reth.rkey = 0x1234;
  h.reth.dma_len = 65536;
  std::vector<uint8_t> out(64);
  const auto payload = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(uroce::wire::build_headers(h, payload, out));
    benchmark::ClobberMemory();
    ++h.bth.psn;
  }
}

// Whole packets of 64 B, 1 KiB and 4 KiB, and the full-MTU packets of a 1024 and a 4096 path
// MTU (BTH + 1024 or 4096 payload bytes + ICRC): the sizes the data path moves most. ISA-L
// folds what is left after its 256-byte blocks 16 bytes at a time, so a CRC of 4092 bytes
// (a 4 KiB packet without its ICRC) costs more than one of 4108 (4112 without it).
constexpr int64_t kSizes[] = {64, 1024, 1040, 4096, 4112};

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : kSizes) b->Arg(n);
}

BENCHMARK(BM_IsalCrc32)->Apply(sizes);
BENCHMARK(BM_ZlibCrc32)->Apply(sizes);
BENCHMARK(BM_IcrcOf)->Apply(sizes);
BENCHMARK(BM_WriteIcrc)->Apply(sizes);
BENCHMARK(BM_VerifyIcrcExact)->Apply(sizes);
BENCHMARK(BM_VerifyIcrcModuloId)->Apply(sizes);
BENCHMARK(BM_ParsePacket)->Apply(sizes);
BENCHMARK(BM_BuildHeaders)->Arg(4096);

}  // namespace
