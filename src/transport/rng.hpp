// SplitMix64: the engine's only source of randomness (the random bits of lkeys and rkeys).
// Seeded from EngineConfig::seed so a simulation replays bit for bit; no global RNG.
#pragma once

#include <cstdint>

namespace uroce::transport {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

}  // namespace uroce::transport
