// Compiled with AVX-512 + AVX512-BF16 flags (see kernels/CMakeLists.txt); only
// called after a runtime CPU check.
#include "kernels/cpu/bf16_dot_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace orca::kernels::bf16dot {
namespace {

inline __m512bh AsBh(__m512i v) { return reinterpret_cast<__m512bh&>(v); }

// Lane j of the result holds (a[j], b[j]) as one bf16 pair: elements 2j and 2j + 1 of a
// vpermw/vpermt2w index. kSecond is where the second operand's element j sits (16 when both
// rows are one 512-bit load, 32 for vpermt2w's second register).
template <int kSecond>
inline __m512i InterleaveIndex() {
  alignas(64) uint16_t idx[32];
  for (int j = 0; j < 16; ++j) {
    idx[2 * j] = static_cast<uint16_t>(j);
    idx[2 * j + 1] = static_cast<uint16_t>(kSecond + j);
  }
  return _mm512_load_si512(idx);
}

inline __m256i AsInt(__m256bh v) {
  __m256i r;
  std::memcpy(&r, &v, sizeof(r));
  return r;
}

inline int32_t Pair(const uint16_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// f(std::integral_constant<int, n>{}) for the run-time n in [1, N] (nothing for 0): a
// register-blocked kernel's remainder, with its size known at compile time.
template <int N, typename F>
void WithSize(int32_t n, F&& f) {
  if constexpr (N > 0) {
    if (n == N) return f(std::integral_constant<int, N>{});
    WithSize<N - 1>(n, f);
  }
}

// f(std::integral_constant<int, G>{}, g) for query-head chunks [g, g + G) of a KV head's group:
// chunks of 8, then the rest in one.
template <typename F>
void ForHeadChunks(int32_t group, F&& f) {
  int32_t g = 0;
  for (; g + 8 <= group; g += 8) f(std::integral_constant<int, 8>{}, g);
  WithSize<7>(group - g, [&](auto n) { f(n, g); });
}

// G heads against one block: K rows 2t and 2t + 1 (32 contiguous bf16 values) become one
// vector of 16 (K[2t][j], K[2t+1][j]) pairs, used by every head. Each head sums in C chains
// (pair t into chain t mod C; pairs, head_dim / 2, are a multiple of 8), enough chains in all
// to cover the dot product's latency.
template <int G>
void Scores(const uint16_t* qb, int32_t head_dim, const HeadBlocks& blocks, int32_t first_block, int32_t nblocks,
            float scale, float* scores, int64_t ld_scores) {
  constexpr int C = G <= 3 ? 4 : 2;
  const __m512i idx = InterleaveIndex<16>();
  for (int32_t b = first_block; b < nblocks; ++b) {
    const uint16_t* kt = blocks.Block(b);
    __m512 acc[G][C];
    for (int g = 0; g < G; ++g)
      for (int c = 0; c < C; ++c) acc[g][c] = _mm512_setzero_ps();
    const int32_t pairs = head_dim / 2;
    for (int32_t t = 0; t < pairs; t += C)
      for (int c = 0; c < C; ++c) {
        const __m512bh k = AsBh(_mm512_permutexvar_epi16(idx, _mm512_loadu_si512(kt + 32 * (t + c))));
        for (int g = 0; g < G; ++g)
          acc[g][c] = _mm512_dpbf16_ps(acc[g][c], k, AsBh(_mm512_set1_epi32(Pair(qb + g * head_dim + 2 * (t + c)))));
      }
    for (int g = 0; g < G; ++g) {
      __m512 sum = acc[g][0];
      for (int c = 1; c < C; ++c) sum = _mm512_add_ps(sum, acc[g][c]);
      _mm512_storeu_ps(scores + g * ld_scores + 16 * b, _mm512_mul_ps(sum, _mm512_set1_ps(scale)));
    }
  }
}

// out[g][16·s .. 16·(s + S)) = Σ_j pb[g][j] · V[j][same] over the context for G heads and S
// 16-dimension slices from `slice`: rows j = 2t, 2t + 1 of a block are interleaved once per
// slice and serve every head; the sums stay in registers from the first block to the last.
// pb holds the probabilities in bf16, 0 past ctx (written well before: a broadcast from a
// store just made would wait for it).
template <int G, int S>
void AccumulateSlices(const uint16_t* pb, int64_t ld_pb, const HeadBlocks& blocks, int32_t head_dim,
                      int32_t first_block, int32_t ctx, int32_t slice, float* out) {
  const __m512i idx = InterleaveIndex<32>();
  __m512 acc[G][S];
  for (int g = 0; g < G; ++g)
    for (int i = 0; i < S; ++i) acc[g][i] = _mm512_setzero_ps();
  for (int32_t b = first_block, nblocks = (ctx + 15) / 16; b < nblocks; ++b) {
    const int32_t count = std::min(16, ctx - 16 * b);
    const uint16_t* v = blocks.Block(b) + 16 * slice;
    const uint16_t* pbb = pb + 16 * b;
    auto pair_step = [&](int32_t t, bool second_row) {
      const uint16_t* r0 = v + static_cast<int64_t>(2 * t) * head_dim;
      for (int i = 0; i < S; ++i) {
        const __m512i lo = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + 16 * i)));
        const __m512i hi =
            second_row
                ? _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + head_dim + 16 * i)))
                : _mm512_setzero_si512();
        const __m512bh pv = AsBh(_mm512_permutex2var_epi16(lo, idx, hi));
        for (int g = 0; g < G; ++g)
          acc[g][i] = _mm512_dpbf16_ps(acc[g][i], pv, AsBh(_mm512_set1_epi32(Pair(pbb + g * ld_pb + 2 * t))));
      }
    };
    const int32_t full = count / 2;
    for (int32_t t = 0; t < full; ++t) pair_step(t, true);
    if (count % 2 != 0) pair_step(full, false);  // the last row alone: the row past ctx is not read
  }
  for (int g = 0; g < G; ++g)
    for (int i = 0; i < S; ++i) _mm512_storeu_ps(out + g * head_dim + 16 * (slice + i), acc[g][i]);
}

// Up to 8 heads at a time, and as many slices as keep G · S ≤ 24 accumulators beside the pair
// vector and its halves: each (pair of rows, slice) of V is interleaved once per head chunk.
template <int G>
void AccumulateHeads(const uint16_t* pb, int64_t ld_pb, const HeadBlocks& blocks, int32_t head_dim, int32_t first_block,
                     int32_t ctx, float* out) {
  constexpr int kSlices = std::max(1, std::min(8, 24 / G));
  const int32_t slices = head_dim / 16;
  int32_t s = 0;
  for (; s + kSlices <= slices; s += kSlices)
    AccumulateSlices<G, kSlices>(pb, ld_pb, blocks, head_dim, first_block, ctx, s, out);
  WithSize<kSlices - 1>(slices - s, [&](auto n) {
    AccumulateSlices<G, decltype(n)::value>(pb, ld_pb, blocks, head_dim, first_block, ctx, s, out);
  });
}

}  // namespace

void GroupScores(const uint16_t* qb, int32_t group, const HeadBlocks& k, int32_t head_dim, int32_t ctx, float scale,
                 float* scores, int64_t ld_scores, int32_t first_block) {
  // Up to 8 heads at a time: 16 accumulators and a K pair vector.
  const int32_t nblocks = (ctx + 15) / 16;
  ForHeadChunks(group, [&](auto chunk, int32_t g) {
    Scores<decltype(chunk)::value>(qb + g * head_dim, head_dim, k, first_block, nblocks, scale, scores + g * ld_scores,
                                   ld_scores);
  });
}

void GroupAccumulate(const float* p, int64_t ld_p, int32_t group, const HeadBlocks& v, int32_t head_dim, int32_t ctx,
                     float* out, int32_t first_block) {
  // Every head's probabilities in bf16 first, 0 past ctx up to the end of its last block.
  thread_local std::vector<uint16_t> rounded;
  const int64_t ld_pb = (ctx + 15) / 16 * 16;
  if (rounded.size() < static_cast<size_t>(group * ld_pb)) rounded.resize(static_cast<size_t>(group * ld_pb));
  for (int32_t g = 0; g < group; ++g)
    for (int32_t j = first_block * 16; j < ctx; j += 16) {
      const __mmask16 live = ctx - j >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (ctx - j)) - 1u);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(rounded.data() + g * ld_pb + j),
                          AsInt(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(live, p + g * ld_p + j))));
    }
  ForHeadChunks(group, [&](auto chunk, int32_t g) {
    AccumulateHeads<decltype(chunk)::value>(rounded.data() + g * ld_pb, ld_pb, v, head_dim, first_block, ctx,
                                            out + static_cast<int64_t>(g) * head_dim);
  });
}

}  // namespace orca::kernels::bf16dot
