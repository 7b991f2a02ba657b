#include "fault/impair_model.hpp"

namespace uroce::fault {
namespace {

// SplitMix64's finaliser: a bijective mix, good enough to make hashes of consecutive
// (index, field) keys independent-looking.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kFields = 8;

}  // namespace

ImpairCounters& ImpairCounters::operator+=(const ImpairCounters& o) {
  dropped += o.dropped;
  duplicated += o.duplicated;
  corrupted += o.corrupted;
  ce_marked += o.ce_marked;
  delayed += o.delayed;
  reordered += o.reordered;
  overflow += o.overflow;
  queue_dropped += o.queue_dropped;
  queue_marked += o.queue_marked;
  queue_max_bytes = queue_max_bytes > o.queue_max_bytes ? queue_max_bytes : o.queue_max_bytes;
  return *this;
}

ImpairModel::ImpairModel(const ImpairSpec& spec, uint64_t seed, uint64_t stream)
    : spec_(spec), key_(mix(seed + kGolden * (stream + 1))) {}

uint64_t ImpairModel::draw(Field f) const {
  return mix(key_ ^ ((index_ * kFields + f + 1) * kGolden));
}

bool ImpairModel::chance(Field f, Ppb p) const {
  if (p == 0) return false;
  if (p >= kCertain) return true;
  // 2^64 mod 10^9 is tiny against 2^64: the modulo bias is below 10^-10.
  return draw(f) % kCertain < p;
}

Verdict ImpairModel::decide(TimePoint now, uint8_t ecn) {
  Verdict v;
  v.release = now;
  if (spec_.ge) {
    // Move the chain first, then lose with the probability of the state it is now in: the
    // mean bad run is 1/r packets and the bad share p/(p+r).
    bad_ = bad_ ? !chance(kGeMove, spec_.ge->r) : chance(kGeMove, spec_.ge->p);
    v.drop = chance(kLoss, bad_ ? spec_.ge->bad_loss : spec_.ge->good_loss);
  } else {
    v.drop = chance(kLoss, spec_.loss);
  }
  if (v.drop) {
    ++counters_.dropped;
    ++index_;
    return v;
  }
  v.dup = chance(kDup, spec_.dup);
  v.corrupt = chance(kCorrupt, spec_.corrupt);
  v.corrupt_bit = draw(kCorruptBit);
  v.ce = (ecn & 3) != 0 && (ecn & 3) != 3 && chance(kCe, spec_.ce);
  if (spec_.delay.count() != 0) {
    v.reordered = chance(kReorder, spec_.reorder);
    if (!v.reordered) {
      Nanos hold = spec_.delay;
      if (spec_.jitter.count() != 0) {
        const auto span = static_cast<uint64_t>(2 * spec_.jitter.count() + 1);
        hold += Nanos(static_cast<int64_t>(draw(kJitter) % span)) - spec_.jitter;
      }
      v.release = now + hold;
    }
  }
  if (v.dup) ++counters_.duplicated;
  if (v.corrupt) ++counters_.corrupted;
  if (v.ce) ++counters_.ce_marked;
  if (v.reordered) ++counters_.reordered;
  if (v.release > now) ++counters_.delayed;
  ++index_;
  return v;
}

}  // namespace uroce::fault
