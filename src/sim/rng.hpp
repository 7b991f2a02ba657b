// SplitMix64: the simulator's only source of randomness (workload draws, ECMP salt). One
// generator per purpose, each seeded from the scenario seed and a fixed stream number, so a
// change in one draw sequence never shifts another and a run replays exactly.
#pragma once

#include <cstdint>

#include "transport/rng.hpp"

namespace uroce::sim {

// The engine's generator (src/transport/rng.hpp): splitmix64(x) is the first output of a
// generator seeded with x, a bijective mix used to derive seeds and hashes.
inline uint64_t splitmix64(uint64_t x) {
  return transport::SplitMix64(x).next();
}

class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream) : gen_(splitmix64(seed ^ splitmix64(stream))) {}
  uint64_t next() { return gen_.next(); }
  // Uniform in [0, 1) with 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n), n > 0 (the modulo bias is below 2^-40 for the n used here).
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  transport::SplitMix64 gen_;
};

}  // namespace uroce::sim
