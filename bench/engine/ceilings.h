#pragma once
// The machine's ceilings for the engine benchmarks, measured in the same run:
// streaming read bandwidth (what a decode step can hope for) and the FMA peak
// of the cores (what a compute-bound GEMM can hope for). x86-64 with AVX-512.

#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace orca::bench {

// Streaming read of a buffer far larger than the caches with 512-bit loads.
__attribute__((target("avx512f"))) inline uint64_t SumRange(const uint64_t* p, size_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 8));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 16));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 24));
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  uint64_t sum = 0;
  for (uint64_t v : lanes) sum += v;
  return sum;
}

// The read bandwidth this machine gives right now. The buffer is kept so the
// probe can be repeated next to each decode measurement: on a shared VM the
// bandwidth a run gets drifts by ±15 % over minutes, and a ceiling read once at
// the start says little about the moment a later row was measured.
class BandwidthProbe {
 public:
  explicit BandwidthProbe(int threads) : threads_(threads), n_(kBytes / 8) {
    // On transparent huge pages: this loop streams 1.15-1.4x faster from them than from 4 KiB
    // pages (EPYC), so the ceiling is the machine's best streaming read. The engine's decode
    // kernels read their 4 KiB-page weights as fast as a huge-page copy (bench/README.md,
    // "Eleventh session").
    buf_ = static_cast<uint64_t*>(std::aligned_alloc(kHugePage, kBytes));
    ::madvise(buf_, kBytes, MADV_HUGEPAGE);
#pragma omp parallel for num_threads(threads)
    for (size_t i = 0; i < n_; ++i) buf_[i] = i;
  }
  ~BandwidthProbe() { std::free(buf_); }
  BandwidthProbe(const BandwidthProbe&) = delete;
  BandwidthProbe& operator=(const BandwidthProbe&) = delete;

  static constexpr size_t kBytes = size_t{512} << 20;
  static constexpr size_t kHugePage = size_t{2} << 20;
  /// Best of `reps` passes, GB/s.
  double Measure(int reps = 5) {
    double best = 0;
    for (int rep = 0; rep < reps; ++rep) {
      uint64_t sum = 0;
      const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads_) reduction(+ : sum)
      {
        const size_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        const size_t chunk = n_ / nt / 32 * 32;
        sum += SumRange(buf_ + t * chunk, chunk);
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (sum == 42) std::printf(" ");
      best = std::max(best, kBytes / s / 1e9);
    }
    return best;
  }

 private:
  int threads_;
  size_t n_;
  uint64_t* buf_;
};

// 2 FMA ports × 16 lanes × 2 flops per cycle need 8+ independent chains: 12 here.
__attribute__((target("avx512f"), noinline)) inline float FmaLoop(int64_t iters) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  return lanes[0];
}

/// Best of 3 runs of `loop(kIters)` on `threads` cores, in G(FL)OP/s: each call of `loop` does
/// `ops_per_iter` operations per iteration (12 independent accumulators × ops per instruction).
template <typename Loop>
double BestOfThreePeak(int threads, double ops_per_iter, Loop loop) {
  constexpr int64_t kIters = 20'000'000;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    double sink = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += static_cast<double>(loop(kIters));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (sink == 42) std::printf(" ");  // keeps the loops from being optimized away
    best = std::max(best, threads * kIters * ops_per_iter / s / 1e9);
  }
  return best;
}

/// f32 FMA peak of `threads` cores in GFLOP/s (register-only loop, best of 3).
inline double MeasureFmaPeak(int threads) {
  return BestOfThreePeak(threads, 12.0 * 32, [](int64_t n) { return FmaLoop(n); });
}

// The same for the bf16 dot product (vdpbf16ps: 32 multiply-adds per instruction), when the CPU has AVX512-BF16.
__attribute__((target("avx512f,avx512bf16"), noinline)) inline float Bf16DotLoop(int64_t iters) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512bh u = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(2e-3f));
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbf16_ps(a[i], u, u);
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  return lanes[0];
}

/// bf16 multiply-add peak of `threads` cores in GFLOP/s (2 flops per multiply-add; 0 without AVX512-BF16).
inline double MeasureBf16DotPeak(int threads) {
  if (!__builtin_cpu_supports("avx512bf16")) return 0;
  return BestOfThreePeak(threads, 12.0 * 64, [](int64_t n) { return Bf16DotLoop(n); });
}

// The same for the int8 dot product (vpdpbusd: 64 multiply-adds per instruction), when the CPU has AVX512-VNNI.
__attribute__((target("avx512f,avx512vnni"), noinline)) inline int32_t VnniLoop(int64_t iters) {
  __m512i a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_epi32(i);
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbusd_epi32(a[i], u, s);
  __m512i t = a[0];
  for (int i = 1; i < 12; ++i) t = _mm512_add_epi32(t, a[i]);
  return _mm512_reduce_add_epi32(t);
}

/// int8 multiply-add peak of `threads` cores in GOP/s (2 ops per multiply-add; 0 without AVX512-VNNI).
inline double MeasureVnniPeak(int threads) {
  if (!__builtin_cpu_supports("avx512vnni")) return 0;
  return BestOfThreePeak(threads, 12.0 * 128, [](int64_t n) { return VnniLoop(n); });
}

}  // namespace orca::bench
