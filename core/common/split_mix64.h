#pragma once
/// A small deterministic random generator for traces, simulated engines and synthetic
/// weights, and the stateless hash made of its mixing step (block hashes, derived seeds).

#include <cmath>
#include <cstdint>

namespace orca {

/// SplitMix64's state increment (2^64 / golden ratio, odd).
inline constexpr uint64_t kSplitMix64Increment = 0x9e3779b97f4a7c15ULL;

/// SplitMix64's output function: a bijective 64-bit mixer (Stafford's variant 13 of the
/// MurmurHash3 finalizer).
inline constexpr uint64_t SplitMix64Finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// A stateless 64-bit hash of `x`: the first output of SplitMix64(x). For keys and derived
/// seeds (prefix-cache block hashes, a request's sampling seed).
inline constexpr uint64_t SplitMix64Hash(uint64_t x) { return SplitMix64Finalize(x + kSplitMix64Increment); }

/// SplitMix64 (Steele, Lea, Flood 2014) with its own conversions to doubles, bounded
/// integers and exponentials, so that traces are identical on every platform (the
/// distributions of <random> are implementation-defined).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() { return SplitMix64Finalize(state_ += kSplitMix64Increment); }
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
