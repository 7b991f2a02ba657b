// Fuzzes the RoCE v2 codec with an invariant, not only for crashes: whatever parse_packet()
// accepts, build_packet() must write back to exactly as many bytes, and parsing that must give
// the same opcode entry, the same header fields and the same payload. A rejected packet must
// leave no payload view. The ICRC written for any accepted packet must verify. Any violation
// aborts, which libFuzzer reports with the input.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wire/icrc.hpp"
#include "wire/packet.hpp"

namespace {

using uroce::wire::IcrcResult;
using uroce::wire::IpContext;
using uroce::wire::ParsedPacket;
using uroce::wire::ParseError;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "parser_fuzz invariant violated: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  ParsedPacket first;
  const ParseError e = uroce::wire::parse_packet(in, first);
  if (e != ParseError::kOk) {
    if (!first.payload.empty()) fail("payload view on a rejected packet");
    return 0;
  }
  if (first.info == nullptr || !first.info->valid) fail("accepted an opcode without entry");
  if (first.payload.data() < data || first.payload.data() + first.payload.size() > data + size) {
    fail("payload view outside the input");
  }

  const uint8_t opcode = first.hdr.bth.opcode;
  const size_t size_again = uroce::wire::packet_size(opcode, first.payload.size());
  if (size_again != size) fail("packet_size differs from the accepted length");
  std::vector<uint8_t> out(size_again);
  if (uroce::wire::build_packet(first.hdr, first.payload, out) != size) fail("build size");

  ParsedPacket second;
  if (uroce::wire::parse_packet(out, second) != ParseError::kOk) fail("rebuilt packet rejected");
  if (second.info != first.info) fail("opcode entry differs");
  if (second.header_len != first.header_len) fail("header length differs");
  if (!(second.hdr == first.hdr)) fail("header fields differ");
  if (second.payload.size() != first.payload.size() ||
      (!first.payload.empty() &&
       std::memcmp(second.payload.data(), first.payload.data(), first.payload.size()) != 0)) {
    fail("payload differs");
  }

  IpContext ctx;
  ctx.sport = 0xC000;
  ctx.ipv4_id = static_cast<uint16_t>(size);
  uroce::wire::write_icrc(ctx, out);
  if (uroce::wire::verify_icrc_udp(ctx, out) != IcrcResult::kOk) fail("own ICRC rejected");
  ctx.ipv4_id = 0;
  if (uroce::wire::verify_icrc_udp(ctx, out) == IcrcResult::kBad) fail("ICRC modulo ID");
  (void)uroce::wire::verify_icrc_udp(ctx, in);
  return 0;
}
