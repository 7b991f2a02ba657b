// Fuzzes the UROCE_IMPAIR grammar (fault::parse_impair_spec) and the model it feeds. The input
// is the spec text. Then:
//   - the message is empty exactly when the parse succeeded; a rejection is one printable line
//     that starts with the variable's name;
//   - an accepted spec is within the documented bounds (probabilities <= 100 %, delay <= 10 s,
//     jitter <= delay, reorder only with a delay, limit 1 .. 65536, Gilbert-Elliott with
//     ge_r > 0 and never with loss=; a bottleneck with 0 < rate <= 10 Tbit/s, queue > 0,
//     kmin < kmax <= queue and 0 < pmax <= 100 % when RED is on, and a queue configuration the
//     switch model accepts) and its canonical text parses back to the same text;
//   - the model's verdicts for a few hundred packets hold a packet between delay - jitter and
//     delay + jitter (0 when reordered), mark CE only on an ECT packet, and count each outcome.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fabric/switch_queue.hpp"
#include "fault/bottleneck.hpp"
#include "fault/impair_model.hpp"
#include "fault/impair_spec.hpp"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "impair_spec_fuzz invariant violated: %s (%s)\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace uroce::fault;
  const std::string text(reinterpret_cast<const char*>(data), size);
  ImpairSpec spec;
  const std::string err = parse_impair_spec("UROCE_IMPAIR", text, spec);
  if (!err.empty()) {
    if (err.rfind("UROCE_IMPAIR: ", 0) != 0) fail("message does not name the variable", err);
    for (const char c : err) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7F) fail("message has a control or non-ASCII byte", err);
    }
    return 0;
  }
  for (const Ppb p : {spec.loss, spec.reorder, spec.dup, spec.corrupt, spec.ce}) {
    if (p > kCertain) fail("probability above 100 %", text);
  }
  if (spec.delay > kMaxDelay || spec.delay.count() < 0) fail("delay out of range", text);
  if (spec.jitter > spec.delay || spec.jitter.count() < 0) fail("jitter exceeds delay", text);
  if (spec.reorder != 0 && spec.delay.count() == 0) fail("reorder without delay", text);
  if (spec.limit < 1 || spec.limit > kMaxLimit) fail("limit out of range", text);
  if (spec.ge) {
    if (spec.loss != 0) fail("two loss models accepted", text);
    if (spec.ge->r == 0 || spec.ge->r > kCertain || spec.ge->p > kCertain ||
        spec.ge->bad_loss > kCertain || spec.ge->good_loss > kCertain) {
      fail("Gilbert-Elliott parameter out of range", text);
    }
  }
  if (spec.bottleneck) {
    const Bottleneck& b = *spec.bottleneck;
    if (b.rate == 0 || b.rate > 1'250'000'000'000) fail("rate out of range", text);
    if (b.queue == 0) fail("empty queue accepted", text);
    if (b.pmax > kCertain) fail("pmax above 100 %", text);
    if (b.pmax != 0 && !(b.kmin < b.kmax && b.kmax <= b.queue)) fail("RED thresholds", text);
    const std::string bad = uroce::fabric::validate(bottleneck_config(b, spec.limit, 1));
    if (!bad.empty()) fail("the switch model refuses an accepted bottleneck", text + ": " + bad);
  }
  const std::string canonical = format_impair_spec(spec);
  ImpairSpec again;
  if (!parse_impair_spec("UROCE_IMPAIR", canonical, again).empty()) {
    fail("canonical text does not parse", canonical);
  }
  if (format_impair_spec(again) != canonical) fail("canonical text is not stable", canonical);

  ImpairModel m(spec, spec.seed.value_or(1), 0);
  uint64_t drops = 0, ce = 0;
  const uroce::TimePoint now(1'000'000);
  for (uint32_t i = 0; i < 300; ++i) {
    const auto ecn = static_cast<uint8_t>(i & 3);
    const Verdict v = m.decide(now, ecn);
    if (v.drop) {
      ++drops;
      continue;
    }
    if (v.ce) {
      ++ce;
      if (ecn == 0 || ecn == 3) fail("CE set on a packet that is not ECT", text);
    }
    const auto hold = v.release - now;
    if (v.reordered ? hold.count() != 0
                    : (spec.delay.count() != 0 &&
                       (hold < spec.delay - spec.jitter || hold > spec.delay + spec.jitter))) {
      fail("hold outside delay +- jitter", text);
    }
    if (spec.delay.count() == 0 && hold.count() != 0) fail("held without a delay", text);
  }
  if (m.counters().dropped != drops || m.counters().ce_marked != ce) {
    fail("counters disagree with the verdicts", text);
  }
  return 0;
}
