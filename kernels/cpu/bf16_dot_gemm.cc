// Compiled with AVX-512 + AVX512-BF16 flags (see kernels/CMakeLists.txt); only
// called after a runtime CPU check.
#include "kernels/cpu/bf16_dot_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "kernels/cpu/avx512_transpose.h"

namespace orca::kernels::bf16dot {
namespace {

// Rows of activations per register tile: 2 × 12 accumulators (32 columns), the
// two weight vectors and a broadcast fit the 32 zmm registers.
constexpr int kMaxTileRows = 12;
// Up to this many rows (decode), one pass over each panel's whole k; beyond, k
// is cut into blocks whose activation rows (rows · block · 2 bytes) stay in L2
// while every panel of the thread runs over them.
constexpr int64_t kStreamRows = 16;
constexpr int64_t kXBlockBytes = 384 << 10;
// Rows are blocked too (a multiple of the tile), so that a k block stays long: with
// all 2048 rows of a large prefill in one block, k blocks shrank to 128 values and y
// (rows × n f32) went through memory once per block — a gate/up projection at 46 % of
// the bf16 peak against 72 % at 512 rows (gemm_bench, EPYC).
constexpr int64_t kRowBlockRows = 16 * kMaxTileRows;
// Below this many rows the next-panel prefetch costs more than it gives: the hardware
// prefetcher alone streamed a 1.1B model's decode GEMMs 1.06-1.37x faster at 1 row and 1.14x at
// 4, and 0.80x at 8, 0.73x at 16 (paired in one process, EPYC;
// bench/results/2026-11-24_issue12-quantized-gguf.md "Decode prefetch spread over the unit").
constexpr int64_t kPrefetchMinRows = 5;

inline __m512bh AsBh(__m512i v) { return reinterpret_cast<__m512bh&>(v); }

// MR rows of xb against `pairs` k-pairs of one panel: y[r][0..nr) = (load_y ? y : 0) + Σ, then + bias.
// With PF, each pair also prefetches the 2 cache lines at the same offset of `pf` (the next panel).
template <int MR, bool PF>
void Tile(const uint16_t* xb, int64_t ldx, const uint16_t* panel, int64_t pairs, float* y, int64_t ldy, int nr,
          const float* bias, bool load_y, const char* pf) {
  const __mmask16 m0 = nr >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? 0xFFFF : (nr <= 16 ? 0 : static_cast<__mmask16>((1u << (nr - 16)) - 1));
  __m512 c0[MR], c1[MR];
  for (int r = 0; r < MR; ++r) {
    c0[r] = load_y ? _mm512_maskz_loadu_ps(m0, y + r * ldy) : _mm512_setzero_ps();
    c1[r] = load_y ? _mm512_maskz_loadu_ps(m1, y + r * ldy + 16) : _mm512_setzero_ps();
  }
  const auto* x32 = reinterpret_cast<const int32_t*>(xb);  // one k-pair per 32-bit element
  const int64_t ldx32 = ldx / 2;
  for (int64_t j = 0; j < pairs; ++j) {
    if constexpr (PF) {
      _mm_prefetch(pf + j * 128, _MM_HINT_T1);
      _mm_prefetch(pf + j * 128 + 64, _MM_HINT_T1);
    }
    const __m512bh w0 = AsBh(_mm512_load_si512(panel + j * 64));
    const __m512bh w1 = AsBh(_mm512_load_si512(panel + j * 64 + 32));
    for (int r = 0; r < MR; ++r) {
      const __m512bh xv = AsBh(_mm512_set1_epi32(x32[r * ldx32 + j]));
      c0[r] = _mm512_dpbf16_ps(c0[r], xv, w0);
      c1[r] = _mm512_dpbf16_ps(c1[r], xv, w1);
    }
  }
  if (bias != nullptr) {
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, bias), b1 = _mm512_maskz_loadu_ps(m1, bias + 16);
    for (int r = 0; r < MR; ++r) c0[r] = _mm512_add_ps(c0[r], b0), c1[r] = _mm512_add_ps(c1[r], b1);
  }
  for (int r = 0; r < MR; ++r) {
    _mm512_mask_storeu_ps(y + r * ldy, m0, c0[r]);
    _mm512_mask_storeu_ps(y + r * ldy + 16, m1, c1[r]);
  }
}

using TileFn = void (*)(const uint16_t*, int64_t, const uint16_t*, int64_t, float*, int64_t, int, const float*, bool,
                        const char*);

template <bool PF, size_t... I>
constexpr std::array<TileFn, sizeof...(I)> MakeTiles(std::index_sequence<I...>) {
  return {&Tile<static_cast<int>(I) + 1, PF>...};
}
constexpr auto kTiles = MakeTiles<false>(std::make_index_sequence<kMaxTileRows>());
constexpr auto kPrefetchTiles = MakeTiles<true>(std::make_index_sequence<kMaxTileRows>());

}  // namespace

size_t PanelElements(int64_t n, int64_t k) { return static_cast<size_t>((n + 31) / 32) * Pairs(k) * 64; }

void PackPanels(const uint16_t* w, int64_t ld, int64_t n, int64_t k, int64_t panel_begin, int64_t panel_end,
                uint16_t* packed) {
  const int64_t kp = Pairs(k);
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    uint16_t* panel = packed + static_cast<size_t>(p) * kp * 64;
    for (int64_t j0 = 0; j0 < kp; j0 += 16) {
      // 16 pairs of 16 rows as a 16 × 16 block of 32-bit lanes, transposed to 16 pairs × 16 columns.
      const int64_t values = std::min<int64_t>(32, k - 2 * j0);
      const __mmask32 mask = values >= 32 ? 0xFFFFFFFFu : static_cast<__mmask32>((1u << values) - 1);
      const int64_t jj = std::min<int64_t>(16, kp - j0);
      for (int half = 0; half < 2; ++half) {
        __m512 r[16];
        for (int i = 0; i < 16; ++i) {
          const int64_t row = p * 32 + half * 16 + i;
          r[i] = row < n ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(mask, w + row * ld + 2 * j0))
                         : _mm512_setzero_ps();
        }
        avx512::Transpose16(r);
        for (int64_t t = 0; t < jj; ++t)
          _mm512_store_si512(panel + (j0 + t) * 64 + half * 32, _mm512_castps_si512(r[t]));
      }
    }
  }
}

void ConvertRows(const float* x, int64_t k, int64_t row_begin, int64_t row_end, uint16_t* xb) {
  const int64_t ldx = 2 * Pairs(k);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* src = x + r * k;
    uint16_t* dst = xb + r * ldx;
    for (int64_t i = 0; i < ldx; i += 16) {
      const int64_t in = std::clamp<int64_t>(k - i, 0, 16), out = std::min<int64_t>(ldx - i, 16);
      const __mmask16 lm = static_cast<__mmask16>((1u << in) - 1), sm = static_cast<__mmask16>((1u << out) - 1);
      const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lm, src + i));
      _mm256_mask_storeu_epi16(dst + i, sm, reinterpret_cast<const __m256i&>(h));
    }
  }
}

void Gemm(const uint16_t* xb, int64_t m, int64_t k, const uint16_t* packed, const float* bias, float* y, int64_t ldy,
          bool accumulate, int64_t n_total, int64_t n_begin, int64_t n_end) {
  const int64_t kp = Pairs(k), ldx = 2 * kp;
  for (int64_t r0 = 0; r0 < m; r0 += kRowBlockRows) {
    const int64_t mb = std::min(kRowBlockRows, m - r0);
    const int64_t block =
        mb <= kStreamRows ? kp : std::clamp<int64_t>(kXBlockBytes / (4 * mb) / 16 * 16, std::min<int64_t>(kp, 64), kp);
    for (int64_t j0 = 0; j0 < kp; j0 += block) {
      const int64_t jc = std::min(block, kp - j0);
      const bool load_y = accumulate || j0 > 0;
      for (int64_t n = n_begin; n < n_end; n += 32) {
        const int nr = static_cast<int>(std::min<int64_t>(32, n_total - n));
        const uint16_t* panel = packed + static_cast<size_t>(n / 32) * kp * 64 + j0 * 64;
        // The next panel's block streams toward L2 while the first row tile computes on this one.
        const char* next =
            mb >= kPrefetchMinRows && n + 32 < n_end ? reinterpret_cast<const char*>(panel + kp * 64) : nullptr;
        const float* b = bias != nullptr && j0 + jc == kp ? bias + n : nullptr;
        for (int64_t r = r0; r < r0 + mb; r += kMaxTileRows) {
          const int mr = static_cast<int>(std::min<int64_t>(kMaxTileRows, r0 + mb - r));
          const TileFn fn = r == r0 && next != nullptr ? kPrefetchTiles[mr - 1] : kTiles[mr - 1];
          fn(xb + r * ldx + 2 * j0, ldx, panel, jc, y + r * ldy + n, ldy, nr, b, load_y, next);
        }
      }
    }
  }
}

}  // namespace orca::kernels::bf16dot
