// Fuzzes the CM MAD parser (src/cm) with an invariant, not only for crashes: whatever
// decode_cm_mad() accepts, encode_cm_mad() must write back to 256 bytes that decode to the
// same header and message; the cma_hdr reader must take any private data without reading
// past it. Any violation aborts, which libFuzzer reports with the input.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <variant>

#include "cm/cm_messages.hpp"
#include "cm/ip_cm_service.hpp"

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "cm_mad_fuzz invariant violated: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace uroce::cm;
  const std::span<const uint8_t> in(data, size);
  (void)decode_cma_header(in);
  CmMad first;
  const MadError e = decode_cm_mad(in, first);
  if (e != MadError::kOk) {
    if (size == kMadSize && e == MadError::kWrongSize) fail("a 256-byte MAD called wrong size");
    return 0;
  }
  if (static_cast<uint16_t>(attr_id_of(first.message)) != first.header.attr_id) {
    fail("message type differs from the attribute ID");
  }
  if (const auto* req = std::get_if<Req>(&first.message))
    (void)decode_cma_header(req->private_data);
  std::array<uint8_t, kMadSize> again{};
  encode_cm_mad(first.header, first.message, again);
  CmMad second;
  if (decode_cm_mad(again, second) != MadError::kOk) fail("re-encoded MAD refused");
  if (!(second.header == first.header)) fail("header changed through re-encoding");
  if (!(second.message == first.message)) fail("message changed through re-encoding");
  return 0;
}
