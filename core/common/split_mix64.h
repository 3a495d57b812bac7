#pragma once
/// A small deterministic random generator for traces and simulated engines.

#include <cmath>
#include <cstdint>

namespace orca {

/// SplitMix64 (Steele, Lea, Flood 2014) with its own conversions to doubles, bounded
/// integers and exponentials, so that traces are identical on every platform (the
/// distributions of <random> are implementation-defined).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1).
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  /// Uniform integer in [lo, hi]; requires lo <= hi. Multiply-shift: bias below span/2^64.
  int64_t NextInt(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    const unsigned __int128 product = static_cast<unsigned __int128>(Next()) * span;
    return lo + static_cast<int64_t>(product >> 64);
  }
  /// Exponentially distributed with `rate` (> 0): inter-arrival time of a Poisson process.
  double NextExponential(double rate) { return -std::log1p(-NextDouble()) / rate; }

 private:
  uint64_t state_;
};

}  // namespace orca
