// Compiled with AVX-512 flags (see kernels/CMakeLists.txt); only called after a
// runtime CPU check.
#include "kernels/cpu/avx512_kernels.h"

#include <immintrin.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/avx512_transpose.h"

namespace orca::kernels::avx512 {
namespace {

// 64-byte aligned scratch per thread, one buffer per Tag; grows, never shrinks.
template <int Tag>
float* Scratch(size_t floats) {
  struct Buffer {
    float* data = nullptr;
    size_t size = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buf;
  if (buf.size < floats) {
    std::free(buf.data);
    buf.data = static_cast<float*>(std::aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64));
    buf.size = floats;
  }
  return buf.data;
}
// A whole W panel packed on the fly (PanelGemm, PackPanels).
float* PanelScratch(size_t floats) { return Scratch<0>(floats); }
// One k chunk of a bf16 panel widened to f32 (L1-sized; PanelRows).
float* ChunkScratch(size_t floats) { return Scratch<1>(floats); }

constexpr int64_t kKStep = 32;  // bf16 elements per 64-byte load
// Rows of W ahead of the current block to prefetch (two 4-row blocks): decode is
// bound by how fast W streams in, and the hardware prefetcher alone leaves the
// memory pipe idle between blocks (+60% single-thread bandwidth measured).
constexpr int64_t kPrefetchRows = 8;

inline int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// bf16 → f32 of a 64-byte load as two vectors holding the even and the odd
// elements: one shift / one and each, instead of two ops per 16 values. x is
// packed in the same even/odd order, so dot products are unchanged.
inline void SplitBf16(__m512i v, __m512* even, __m512* odd) {
  *even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  *odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// Horizontal sums of four vectors as one 128-bit vector [Σa, Σb, Σc, Σd].
inline __m128 Reduce4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  const __m512 abcd = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, 0x44), _mm512_shuffle_ps(ab, cd, 0xEE));
  const __m256 half = _mm256_add_ps(_mm512_castps512_ps256(abcd), _mm512_extractf32x8_ps(abcd, 1));
  return _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
}

// y[r, j] (+)= Σ c[r][j] (+ bias[j]).
template <int MR, int NR>
inline void StoreTile(__m512 (&c)[MR][NR], float* y, int64_t ldy, const float* bias, bool accumulate) {
  for (int r = 0; r < MR; ++r) {
    if constexpr (NR == 4) {
      __m128 v = Reduce4(c[r][0], c[r][1], c[r][2], c[r][3]);
      if (bias) v = _mm_add_ps(v, _mm_loadu_ps(bias));
      if (accumulate) v = _mm_add_ps(v, _mm_loadu_ps(y + r * ldy));
      _mm_storeu_ps(y + r * ldy, v);
    } else {
      for (int j = 0; j < NR; ++j) {
        float v = _mm512_reduce_add_ps(c[r][j]);
        if (bias) v += bias[j];
        if (accumulate) v += y[r * ldy + j];
        y[r * ldy + j] = v;
      }
    }
  }
}

template <int MR, int NR>
inline void TileBf16(const float* xp, int64_t kp, const uint16_t* w, int64_t ld, int64_t k, float* y, int64_t ldy,
                     const float* bias, bool accumulate, bool prefetch) {
  __m512 c[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) c[r][j] = _mm512_setzero_ps();
  const int64_t full = k / kKStep;
  for (int64_t kb = 0; kb < full; ++kb) {
    __m512 xe[MR], xo[MR];
    for (int r = 0; r < MR; ++r) {
      xe[r] = _mm512_loadu_ps(xp + r * kp + kb * kKStep);
      xo[r] = _mm512_loadu_ps(xp + r * kp + kb * kKStep + 16);
    }
    if (prefetch)
      for (int j = 0; j < NR; ++j)
        _mm_prefetch(reinterpret_cast<const char*>(w + (j + kPrefetchRows) * ld + kb * kKStep), _MM_HINT_T0);
    for (int j = 0; j < NR; ++j) {
      __m512 we, wo;
      SplitBf16(_mm512_loadu_si512(w + j * ld + kb * kKStep), &we, &wo);
      for (int r = 0; r < MR; ++r) {
        c[r][j] = _mm512_fmadd_ps(xe[r], we, c[r][j]);
        c[r][j] = _mm512_fmadd_ps(xo[r], wo, c[r][j]);
      }
    }
  }
  if (const int64_t rem = k - full * kKStep; rem > 0) {
    const __mmask32 mask = (rem == 32) ? 0xFFFFFFFFu : ((1u << rem) - 1u);
    __m512 xe[MR], xo[MR];
    for (int r = 0; r < MR; ++r) {
      xe[r] = _mm512_loadu_ps(xp + r * kp + full * kKStep);
      xo[r] = _mm512_loadu_ps(xp + r * kp + full * kKStep + 16);
    }
    for (int j = 0; j < NR; ++j) {
      __m512 we, wo;
      SplitBf16(_mm512_maskz_loadu_epi16(mask, w + j * ld + full * kKStep), &we, &wo);
      for (int r = 0; r < MR; ++r) {
        c[r][j] = _mm512_fmadd_ps(xe[r], we, c[r][j]);
        c[r][j] = _mm512_fmadd_ps(xo[r], wo, c[r][j]);
      }
    }
  }
  StoreTile<MR, NR>(c, y, ldy, bias, accumulate);
}

template <int MR, int NR>
inline void TileF32(const float* xp, int64_t kp, const float* w, int64_t ld, int64_t k, float* y, int64_t ldy,
                    const float* bias, bool accumulate, bool prefetch) {
  __m512 c[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) c[r][j] = _mm512_setzero_ps();
  const int64_t full = k / 16;
  for (int64_t kb = 0; kb < full; ++kb) {
    __m512 xv[MR];
    for (int r = 0; r < MR; ++r) xv[r] = _mm512_loadu_ps(xp + r * kp + kb * 16);
    if (prefetch)
      for (int j = 0; j < NR; ++j)
        _mm_prefetch(reinterpret_cast<const char*>(w + (j + kPrefetchRows) * ld + kb * 16), _MM_HINT_T0);
    for (int j = 0; j < NR; ++j) {
      const __m512 wv = _mm512_loadu_ps(w + j * ld + kb * 16);
      for (int r = 0; r < MR; ++r) c[r][j] = _mm512_fmadd_ps(xv[r], wv, c[r][j]);
    }
  }
  if (const int64_t rem = k - full * 16; rem > 0) {
    const __mmask16 mask = static_cast<__mmask16>((1u << rem) - 1u);
    __m512 xv[MR];
    for (int r = 0; r < MR; ++r) xv[r] = _mm512_loadu_ps(xp + r * kp + full * 16);
    for (int j = 0; j < NR; ++j) {
      const __m512 wv = _mm512_maskz_loadu_ps(mask, w + j * ld + full * 16);
      for (int r = 0; r < MR; ++r) c[r][j] = _mm512_fmadd_ps(xv[r], wv, c[r][j]);
    }
  }
  StoreTile<MR, NR>(c, y, ldy, bias, accumulate);
}

template <int MR, int NR>
struct Bf16TileFn {
  static void Run(const float* xp, int64_t kp, const void* w, int64_t ld, int64_t k, float* y, int64_t ldy,
                  const float* bias, bool acc, bool pf) {
    TileBf16<MR, NR>(xp, kp, static_cast<const uint16_t*>(w), ld, k, y, ldy, bias, acc, pf);
  }
};
template <int MR, int NR>
struct F32TileFn {
  static void Run(const float* xp, int64_t kp, const void* w, int64_t ld, int64_t k, float* y, int64_t ldy,
                  const float* bias, bool acc, bool pf) {
    TileF32<MR, NR>(xp, kp, static_cast<const float*>(w), ld, k, y, ldy, bias, acc, pf);
  }
};

using TileFn = void (*)(const float*, int64_t, const void*, int64_t, int64_t, float*, int64_t, const float*, bool,
                        bool);

template <template <int, int> class T>
TileFn PickTile(int mr, int nr) {
  static const TileFn table[4][4] = {
      {T<1, 1>::Run, T<1, 2>::Run, T<1, 3>::Run, T<1, 4>::Run},
      {T<2, 1>::Run, T<2, 2>::Run, T<2, 3>::Run, T<2, 4>::Run},
      {T<3, 1>::Run, T<3, 2>::Run, T<3, 3>::Run, T<3, 4>::Run},
      {T<4, 1>::Run, T<4, 2>::Run, T<4, 3>::Run, T<4, 4>::Run},
  };
  return table[mr - 1][nr - 1];
}

// Rows [0, nr) of W (nr <= 32, row stride ld) as an f32 panel [k][32], zero-padded.
void PackPanel(const void* w, DType dtype, int64_t ld, int64_t k, int nr, float* panel) {
  for (int64_t k0 = 0; k0 < k; k0 += 16) {
    const int kk = static_cast<int>(std::min<int64_t>(16, k - k0));
    const __mmask16 km = kk == 16 ? 0xFFFF : static_cast<__mmask16>((1u << kk) - 1);
    for (int half = 0; half < 2; ++half) {
      __m512 r[16];
      for (int j = 0; j < 16; ++j) {
        const int row = half * 16 + j;
        if (row >= nr) {
          r[j] = _mm512_setzero_ps();
        } else if (dtype == DType::kBF16) {
          const uint16_t* src = static_cast<const uint16_t*>(w) + row * ld + k0;
          r[j] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(km, src)), 16));
        } else {
          r[j] = _mm512_maskz_loadu_ps(km, static_cast<const float*>(w) + row * ld + k0);
        }
      }
      Transpose16(r);
      for (int t = 0; t < kk; ++t) _mm512_store_ps(panel + (k0 + t) * 32 + half * 16, r[t]);
    }
  }
}

// One k-row of a panel as two f32 vectors (columns 0-15 and 16-31).
inline void LoadPanelRow(const float* p, __m512* w0, __m512* w1) {
  *w0 = _mm512_load_ps(p);
  *w1 = _mm512_load_ps(p + 16);
}
inline void LoadPanelRow(const uint16_t* p, __m512* w0, __m512* w1) {
  const __m512i v = _mm512_load_si512(p);
  *w0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(v)), 16));
  *w1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(v, 1)), 16));
}

// MR rows of x against k rows of one panel ([k][32] f32 or bf16): 2 × MR
// accumulators of 16 outputs each, starting from y when `load_y` (a running sum
// or accumulate) else 0, plus bias when given. With PF > 0, each k step also
// prefetches PF cache lines from `pf` onward (the next panel, on its way from
// memory while this one computes).
template <int MR, int PF, typename P>
inline void PanelKernel(const float* x, int64_t ldx, const P* panel, int64_t k, float* y, int64_t ldy, int nr,
                        const float* bias, bool load_y, const char* pf) {
  const __mmask16 m0 = nr >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? 0xFFFF : (nr <= 16 ? 0 : static_cast<__mmask16>((1u << (nr - 16)) - 1));
  __m512 c0[MR], c1[MR];
  for (int r = 0; r < MR; ++r) {
    c0[r] = load_y ? _mm512_maskz_loadu_ps(m0, y + r * ldy) : _mm512_setzero_ps();
    c1[r] = load_y ? _mm512_maskz_loadu_ps(m1, y + r * ldy + 16) : _mm512_setzero_ps();
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int l = 0; l < PF; ++l) _mm_prefetch(pf + (kk * PF + l) * 64, _MM_HINT_T1);
    __m512 w0, w1;
    LoadPanelRow(panel + kk * 32, &w0, &w1);
    for (int r = 0; r < MR; ++r) {
      const __m512 xv = _mm512_set1_ps(x[r * ldx + kk]);
      c0[r] = _mm512_fmadd_ps(xv, w0, c0[r]);
      c1[r] = _mm512_fmadd_ps(xv, w1, c1[r]);
    }
  }
  if (bias) {
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, bias), b1 = _mm512_maskz_loadu_ps(m1, bias + 16);
    for (int r = 0; r < MR; ++r) c0[r] = _mm512_add_ps(c0[r], b0), c1[r] = _mm512_add_ps(c1[r], b1);
  }
  for (int r = 0; r < MR; ++r) {
    _mm512_mask_storeu_ps(y + r * ldy, m0, c0[r]);
    _mm512_mask_storeu_ps(y + r * ldy + 16, m1, c1[r]);
  }
}

// Up to this many rows (one row block), a bf16 panel row is widened in
// registers at each use; beyond, each k chunk of the panel is widened to f32
// once, in L1, and every row block runs FMAs only.
constexpr int64_t kConvertOnTheFlyRows = 8;

// All m rows of x against one panel. With more than one row block, k is cut
// into chunks whose panel rows and x columns fit L1 together, so every row
// block after the first reads them from L1 instead of L2; y carries the running
// sums between chunks (stored and reloaded as the same f32 values). `next`
// (optional) is the panel the caller reads after this one, `next_lines_per_k`
// its bytes per k step / 64 (1 for bf16, 2 for f32): the first row block
// prefetches it into L2 so memory streams while the FMAs run.
template <typename P>
void PanelRows(const float* x, int64_t m, int64_t k, const P* panel, const float* bias, float* y, int64_t ldy,
               bool accumulate, int nr, const void* next = nullptr, int next_lines_per_k = 0) {
  constexpr int64_t kL1Floats = 8192;  // 32 KiB of the 48 KiB L1D
  const int64_t kc_max = m <= 8 ? k : std::max<int64_t>(16, kL1Floats / (m + 32) / 16 * 16);
  constexpr bool kBf16 = std::is_same_v<P, uint16_t>;
  const bool widen = kBf16 && m > kConvertOnTheFlyRows;
  float* wide = widen ? ChunkScratch(static_cast<size_t>(kc_max) * 32) : nullptr;
  const char* pf = static_cast<const char*>(next);
  for (int64_t k0 = 0; k0 < k; k0 += kc_max) {
    const int64_t kc = std::min(kc_max, k - k0);
    const bool load_y = accumulate || k0 > 0;
    const float* b = k0 + kc == k ? bias : nullptr;
    const char* pfk = pf ? pf + k0 * next_lines_per_k * 64 : nullptr;
    auto rows = [&](const auto* pk) {
      int64_t r = 0;
      auto first_block = [&](auto mr_tag) {
        constexpr int MR = decltype(mr_tag)::value;
        if (pfk != nullptr && next_lines_per_k == 2)
          PanelKernel<MR, 2>(x + r * k + k0, k, pk, kc, y + r * ldy, ldy, nr, b, load_y, pfk);
        else if (pfk != nullptr && next_lines_per_k == 1)
          PanelKernel<MR, 1>(x + r * k + k0, k, pk, kc, y + r * ldy, ldy, nr, b, load_y, pfk);
        else
          PanelKernel<MR, 0>(x + r * k + k0, k, pk, kc, y + r * ldy, ldy, nr, b, load_y, nullptr);
      };
      if (m >= 8)
        first_block(std::integral_constant<int, 8>{}), r = 8;
      else if (m >= 4)
        first_block(std::integral_constant<int, 4>{}), r = 4;
      else
        first_block(std::integral_constant<int, 1>{}), r = 1;
      for (; r + 8 <= m; r += 8) PanelKernel<8, 0>(x + r * k + k0, k, pk, kc, y + r * ldy, ldy, nr, b, load_y, nullptr);
      for (; r + 4 <= m; r += 4) PanelKernel<4, 0>(x + r * k + k0, k, pk, kc, y + r * ldy, ldy, nr, b, load_y, nullptr);
      for (; r < m; ++r) PanelKernel<1, 0>(x + r * k + k0, k, pk, kc, y + r * ldy, ldy, nr, b, load_y, nullptr);
    };
    if (widen) {
      const auto* src = reinterpret_cast<const uint16_t*>(panel + k0 * 32);
      for (int64_t i = 0; i < kc * 32; i += 16)
        _mm512_store_ps(wide + i,
                        _mm512_castsi512_ps(_mm512_slli_epi32(
                            _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(src + i))), 16)));
      rows(static_cast<const float*>(wide));
    } else {
      rows(panel + k0 * 32);
    }
  }
}

}  // namespace

void PanelGemm(const float* x, int64_t m, int64_t k, const void* w, DType w_dtype, int64_t ld, const float* bias,
               float* y, int64_t ldy, bool accumulate, int64_t n_begin, int64_t n_end) {
  float* panel = PanelScratch(static_cast<size_t>(k) * 32);
  const size_t es = DTypeSize(w_dtype);
  const auto* base = static_cast<const uint8_t*>(w);
  for (int64_t n = n_begin; n < n_end; n += 32) {
    const int nr = static_cast<int>(std::min<int64_t>(32, n_end - n));
    // Pull the next panel's rows toward L2 while this one is computed.
    if (n + 64 <= n_end)
      for (int j = 0; j < 32; ++j)
        for (int64_t kk = 0; kk < k * static_cast<int64_t>(es); kk += 64)
          _mm_prefetch(reinterpret_cast<const char*>(base + ((n + 32 + j) * ld) * es + kk), _MM_HINT_T1);
    PackPanel(base + n * ld * es, w_dtype, ld, k, nr, panel);
    PanelRows(x, m, k, panel, bias ? bias + n : nullptr, y + n, ldy, accumulate, nr);
  }
}

size_t PackedPanelElements(int64_t n, int64_t k) { return static_cast<size_t>((n + 31) / 32) * k * 32; }

void PackPanels(const void* w, DType w_dtype, int64_t ld, int64_t n, int64_t k, int64_t n_begin, int64_t n_end,
                void* packed) {
  float* scratch = PanelScratch(static_cast<size_t>(k) * 32);
  const size_t es = DTypeSize(w_dtype);
  const auto* base = static_cast<const uint8_t*>(w);
  for (int64_t p = n_begin; p < n_end; p += 32) {
    const int nr = static_cast<int>(std::min<int64_t>(32, n - p));
    const size_t offset = static_cast<size_t>(p / 32) * k * 32;
    if (w_dtype == DType::kF32) {
      PackPanel(base + p * ld * es, w_dtype, ld, k, nr, static_cast<float*>(packed) + offset);
    } else {  // bf16 in, bf16 out: exact
      PackPanel(base + p * ld * es, w_dtype, ld, k, nr, scratch);
      uint16_t* out = static_cast<uint16_t*>(packed) + offset;
      for (int64_t i = 0; i < k * 32; i += 16) {
        const __m512i bits = _mm512_srli_epi32(_mm512_castps_si512(_mm512_load_ps(scratch + i)), 16);
        _mm256_store_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(bits));
      }
    }
  }
}

void PackedPanelGemm(const float* x, int64_t m, int64_t k, const void* packed, DType w_dtype, const float* bias,
                     float* y, int64_t ldy, bool accumulate, int64_t n_total, int64_t n_begin, int64_t n_end) {
  for (int64_t n = n_begin; n < n_end; n += 32) {
    const int nr = static_cast<int>(std::min<int64_t>(32, n_total - n));
    const size_t offset = static_cast<size_t>(n / 32) * k * 32;
    const size_t next_offset = offset + static_cast<size_t>(k) * 32;
    const bool has_next = n + 32 < n_end;
    const float* b = bias ? bias + n : nullptr;
    if (w_dtype == DType::kF32) {
      const float* p = static_cast<const float*>(packed);
      PanelRows(x, m, k, p + offset, b, y + n, ldy, accumulate, nr, has_next ? p + next_offset : nullptr, 2);
    } else {  // bf16: widened in registers or per k chunk (see kConvertOnTheFlyRows)
      const uint16_t* p = static_cast<const uint16_t*>(packed);
      PanelRows(x, m, k, p + offset, b, y + n, ldy, accumulate, nr, has_next ? p + next_offset : nullptr, 1);
    }
  }
}

int64_t PackedXFloats(int64_t m, int64_t k) { return m * RoundUp(k, kKStep); }

void PackX(const float* x, int64_t m, int64_t k, DType weight_dtype, float* packed_x) {
  const int64_t kp = RoundUp(k, kKStep);
  for (int64_t r = 0; r < m; ++r) {
    const float* src = x + r * k;
    float* dst = packed_x + r * kp;
    if (weight_dtype == DType::kBF16) {
      // Within every 32-element chunk: 16 even-indexed values, then 16 odd.
      for (int64_t c = 0; c < kp; c += kKStep)
        for (int64_t i = 0; i < 16; ++i) {
          int64_t e = c + 2 * i, o = c + 2 * i + 1;
          dst[c + i] = e < k ? src[e] : 0.0f;
          dst[c + 16 + i] = o < k ? src[o] : 0.0f;
        }
    } else {
      std::memcpy(dst, src, static_cast<size_t>(k) * sizeof(float));
      std::memset(dst + k, 0, static_cast<size_t>(kp - k) * sizeof(float));
    }
  }
}

void SmallGemm(const float* packed_x, int64_t m, int64_t k, const void* w, DType w_dtype, int64_t ld, const float* bias,
               float* y, int64_t ldy, bool accumulate, int64_t n_begin, int64_t n_end) {
  const int64_t kp = RoundUp(k, kKStep);
  const size_t esize = DTypeSize(w_dtype);
  const bool bf16 = w_dtype == DType::kBF16;
  constexpr int64_t kNR = 4, kMR = 4;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kNR) {
    const int nr = static_cast<int>(std::min<int64_t>(kNR, n_end - n0));
    const void* wblock = static_cast<const uint8_t*>(w) + static_cast<size_t>(n0 * ld) * esize;
    for (int64_t m0 = 0; m0 < m; m0 += kMR) {
      const int mr = static_cast<int>(std::min<int64_t>(kMR, m - m0));
      TileFn fn = bf16 ? PickTile<Bf16TileFn>(mr, nr) : PickTile<F32TileFn>(mr, nr);
      // The first row tile streams W from memory and prefetches the blocks ahead; the others hit L1.
      const bool prefetch = m0 == 0 && n0 + kNR + kPrefetchRows <= n_end;
      fn(packed_x + m0 * kp, kp, wblock, ld, k, y + m0 * ldy + n0, ldy, bias ? bias + n0 : nullptr, accumulate,
         prefetch);
    }
  }
}

namespace {

inline __m512 LoadRowAsF32(const uint16_t* p) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}
inline __m512 LoadRowAsF32(const float* p) { return _mm512_loadu_ps(p); }

// scores[0..16) of one 16-token block: four independent FMA chains over d.
template <typename T>
inline __m512 Scores16(const float* q, const T* k, int32_t head_dim) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int32_t d = 0;
  for (; d + 4 <= head_dim; d += 4)
    for (int i = 0; i < 4; ++i)
      acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[d + i]), LoadRowAsF32(k + (d + i) * 16), acc[i]);
  for (; d < head_dim; ++d) acc[0] = _mm512_fmadd_ps(_mm512_set1_ps(q[d]), LoadRowAsF32(k + d * 16), acc[0]);
  return _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
}

// out[0..16·D16) += Σ_j p[j] · V[j]: the output stays in registers across the block.
template <int D16, typename T>
inline void Accumulate(const float* p, const T* v, int32_t count, float* out) {
  __m512 acc[D16];
  for (int i = 0; i < D16; ++i) acc[i] = _mm512_loadu_ps(out + 16 * i);
  for (int32_t j = 0; j < count; ++j) {
    const __m512 pj = _mm512_set1_ps(p[j]);
    for (int i = 0; i < D16; ++i) acc[i] = _mm512_fmadd_ps(pj, LoadRowAsF32(v + j * 16 * D16 + 16 * i), acc[i]);
  }
  for (int i = 0; i < D16; ++i) _mm512_storeu_ps(out + 16 * i, acc[i]);
}

template <typename T>
bool AccumulateInRegisters(const float* p, const T* v, int32_t head_dim, int32_t count, float* out) {
  switch (head_dim) {
    case 32:
      Accumulate<2>(p, v, count, out);
      return true;
    case 64:
      Accumulate<4>(p, v, count, out);
      return true;
    case 80:
      Accumulate<5>(p, v, count, out);
      return true;
    case 96:
      Accumulate<6>(p, v, count, out);
      return true;
    case 128:
      Accumulate<8>(p, v, count, out);
      return true;
    default:
      return false;
  }
}

// G query heads (rows head_dim apart in q) against one 16-token block: each K row
// is widened once and serves every head (GQA), two FMA chains per head.
template <int G, typename T>
inline void GroupScores16(const float* q, int32_t head_dim, const T* k, int32_t count, float scale, float* scores,
                          int64_t ld_scores) {
  __m512 acc[G][2];
  for (int g = 0; g < G; ++g) acc[g][0] = acc[g][1] = _mm512_setzero_ps();
  int32_t d = 0;
  for (; d + 2 <= head_dim; d += 2) {
    const __m512 k0 = LoadRowAsF32(k + d * 16), k1 = LoadRowAsF32(k + (d + 1) * 16);
    for (int g = 0; g < G; ++g) {
      acc[g][0] = _mm512_fmadd_ps(_mm512_set1_ps(q[g * head_dim + d]), k0, acc[g][0]);
      acc[g][1] = _mm512_fmadd_ps(_mm512_set1_ps(q[g * head_dim + d + 1]), k1, acc[g][1]);
    }
  }
  if (d < head_dim) {
    const __m512 k0 = LoadRowAsF32(k + d * 16);
    for (int g = 0; g < G; ++g) acc[g][0] = _mm512_fmadd_ps(_mm512_set1_ps(q[g * head_dim + d]), k0, acc[g][0]);
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << count) - 1u);
  for (int g = 0; g < G; ++g)
    _mm512_mask_storeu_ps(scores + g * ld_scores, mask,
                          _mm512_mul_ps(_mm512_add_ps(acc[g][0], acc[g][1]), _mm512_set1_ps(scale)));
}

template <typename T>
void GroupScores16Any(const float* q, int32_t group, int32_t head_dim, const T* k, int32_t count, float scale,
                      float* scores, int64_t ld_scores) {
  constexpr int kChunk = 6;  // 12 accumulators + 2 K rows
  int32_t g = 0;
  for (; g + kChunk <= group; g += kChunk)
    GroupScores16<kChunk>(q + g * head_dim, head_dim, k, count, scale, scores + g * ld_scores, ld_scores);
  const float* qg = q + g * head_dim;
  float* sg = scores + g * ld_scores;
  switch (group - g) {
    case 1:
      _mm512_mask_storeu_ps(sg, static_cast<__mmask16>((1u << count) - 1u),
                            _mm512_mul_ps(Scores16(qg, k, head_dim), _mm512_set1_ps(scale)));
      break;
    case 2:
      GroupScores16<2>(qg, head_dim, k, count, scale, sg, ld_scores);
      break;
    case 3:
      GroupScores16<3>(qg, head_dim, k, count, scale, sg, ld_scores);
      break;
    case 4:
      GroupScores16<4>(qg, head_dim, k, count, scale, sg, ld_scores);
      break;
    case 5:
      GroupScores16<5>(qg, head_dim, k, count, scale, sg, ld_scores);
      break;
    default:
      break;
  }
}

// out[g][0..16·D16) += Σ_j p[g][j] · V[j] for G heads: each V row is widened once
// and serves every head; the outputs stay in registers across the block.
template <int G, int D16, typename T>
inline void GroupAccumulate(const float* p, int64_t ld_p, const T* v, int32_t count, float* out) {
  __m512 acc[G][D16];
  for (int g = 0; g < G; ++g)
    for (int i = 0; i < D16; ++i) acc[g][i] = _mm512_loadu_ps(out + g * 16 * D16 + 16 * i);
  for (int32_t j = 0; j < count; ++j) {
    __m512 row[D16];
    for (int i = 0; i < D16; ++i) row[i] = LoadRowAsF32(v + j * 16 * D16 + 16 * i);
    for (int g = 0; g < G; ++g) {
      const __m512 pj = _mm512_set1_ps(p[g * ld_p + j]);
      for (int i = 0; i < D16; ++i) acc[g][i] = _mm512_fmadd_ps(pj, row[i], acc[g][i]);
    }
  }
  for (int g = 0; g < G; ++g)
    for (int i = 0; i < D16; ++i) _mm512_storeu_ps(out + g * 16 * D16 + 16 * i, acc[g][i]);
}

// Heads in chunks of as many as fit the registers with their V row: (G + 1) · D16 <= 30.
template <int D16, typename T>
void GroupAccumulateAny(const float* p, int64_t ld_p, int32_t group, const T* v, int32_t count, float* out) {
  constexpr int kChunk = std::min(8, 30 / D16 - 1);
  constexpr int64_t kDim = 16 * D16;
  int32_t g = 0;
  for (; g + kChunk <= group; g += kChunk) GroupAccumulate<kChunk, D16>(p + g * ld_p, ld_p, v, count, out + g * kDim);
  const int32_t rest = group - g;
  p += g * ld_p;
  out += g * kDim;
  if constexpr (kChunk > 1)
    if (rest == 1) return GroupAccumulate<1, D16>(p, ld_p, v, count, out);
  if constexpr (kChunk > 2)
    if (rest == 2) return GroupAccumulate<2, D16>(p, ld_p, v, count, out);
  if constexpr (kChunk > 3)
    if (rest == 3) return GroupAccumulate<3, D16>(p, ld_p, v, count, out);
  if constexpr (kChunk > 4)
    if (rest == 4) return GroupAccumulate<4, D16>(p, ld_p, v, count, out);
  if constexpr (kChunk > 5)
    if (rest == 5) return GroupAccumulate<5, D16>(p, ld_p, v, count, out);
  if constexpr (kChunk > 6)
    if (rest == 6) return GroupAccumulate<6, D16>(p, ld_p, v, count, out);
  if constexpr (kChunk > 7)
    if (rest == 7) return GroupAccumulate<7, D16>(p, ld_p, v, count, out);
}

template <typename T>
bool GroupAccumulateInRegisters(const float* p, int64_t ld_p, int32_t group, const T* v, int32_t head_dim,
                                int32_t count, float* out) {
  switch (head_dim) {
    case 32:
      GroupAccumulateAny<2>(p, ld_p, group, v, count, out);
      return true;
    case 64:
      GroupAccumulateAny<4>(p, ld_p, group, v, count, out);
      return true;
    case 80:
      GroupAccumulateAny<5>(p, ld_p, group, v, count, out);
      return true;
    case 96:
      GroupAccumulateAny<6>(p, ld_p, group, v, count, out);
      return true;
    case 128:
      GroupAccumulateAny<8>(p, ld_p, group, v, count, out);
      return true;
    default:
      return false;
  }
}

}  // namespace

void GroupBlockScores(const float* q, int32_t group, const void* kt, DType dtype, int32_t head_dim, int32_t block_size,
                      int32_t count, float scale, float* scores, int64_t ld_scores) {
  if (block_size != 16) {
    for (int32_t g = 0; g < group; ++g)
      BlockScores(q + g * head_dim, kt, dtype, head_dim, block_size, count, scale, scores + g * ld_scores);
    return;
  }
  if (dtype == DType::kBF16)
    GroupScores16Any(q, group, head_dim, static_cast<const uint16_t*>(kt), count, scale, scores, ld_scores);
  else
    GroupScores16Any(q, group, head_dim, static_cast<const float*>(kt), count, scale, scores, ld_scores);
}

void GroupBlockAccumulate(const float* p, int64_t ld_p, int32_t group, const void* v, DType dtype, int32_t head_dim,
                          int32_t count, float* out) {
  const bool done =
      dtype == DType::kBF16
          ? GroupAccumulateInRegisters(p, ld_p, group, static_cast<const uint16_t*>(v), head_dim, count, out)
          : GroupAccumulateInRegisters(p, ld_p, group, static_cast<const float*>(v), head_dim, count, out);
  if (done) return;
  for (int32_t g = 0; g < group; ++g) BlockAccumulate(p + g * ld_p, v, dtype, head_dim, count, out + g * head_dim);
}

void BlockScores(const float* q, const void* kt, DType dtype, int32_t head_dim, int32_t block_size, int32_t count,
                 float scale, float* scores) {
  if (block_size == 16) {
    const __m512 s = dtype == DType::kBF16 ? Scores16(q, static_cast<const uint16_t*>(kt), head_dim)
                                           : Scores16(q, static_cast<const float*>(kt), head_dim);
    _mm512_mask_storeu_ps(scores, static_cast<__mmask16>((1u << count) - 1u), _mm512_mul_ps(s, _mm512_set1_ps(scale)));
    return;
  }
  for (int32_t j = 0; j < count; ++j) {
    float s = 0;
    for (int32_t d = 0; d < head_dim; ++d) {
      float kv = dtype == DType::kBF16 ? Bf16ToF32(static_cast<const uint16_t*>(kt)[d * block_size + j])
                                       : static_cast<const float*>(kt)[d * block_size + j];
      s += q[d] * kv;
    }
    scores[j] = s * scale;
  }
}

void BlockAccumulate(const float* p, const void* v, DType dtype, int32_t head_dim, int32_t count, float* out) {
  if (dtype == DType::kBF16 ? AccumulateInRegisters(p, static_cast<const uint16_t*>(v), head_dim, count, out)
                            : AccumulateInRegisters(p, static_cast<const float*>(v), head_dim, count, out))
    return;
  const int32_t vec = head_dim / 16 * 16;
  for (int32_t j = 0; j < count; ++j) {
    const __m512 pj = _mm512_set1_ps(p[j]);
    if (dtype == DType::kBF16) {
      const uint16_t* row = static_cast<const uint16_t*>(v) + static_cast<int64_t>(j) * head_dim;
      for (int32_t d = 0; d < vec; d += 16)
        _mm512_storeu_ps(out + d, _mm512_fmadd_ps(pj, LoadRowAsF32(row + d), _mm512_loadu_ps(out + d)));
      for (int32_t d = vec; d < head_dim; ++d) out[d] += p[j] * Bf16ToF32(row[d]);
    } else {
      const float* row = static_cast<const float*>(v) + static_cast<int64_t>(j) * head_dim;
      for (int32_t d = 0; d < vec; d += 16)
        _mm512_storeu_ps(out + d, _mm512_fmadd_ps(pj, _mm512_loadu_ps(row + d), _mm512_loadu_ps(out + d)));
      for (int32_t d = vec; d < head_dim; ++d) out[d] += p[j] * row[d];
    }
  }
}

float Max(const float* x, int32_t n) {
  __m512 m = _mm512_set1_ps(-INFINITY);
  int32_t i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
  float r = _mm512_reduce_max_ps(m);
  for (; i < n; ++i) r = std::max(r, x[i]);
  return r;
}

int32_t ArgMax(const float* x, int32_t n) {
  // The largest value first (vmaxps returns its second operand when the first is NaN, so
  // NaNs never enter m), then its first position.
  __m512 m = _mm512_set1_ps(-INFINITY);
  int32_t i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
  float best = _mm512_reduce_max_ps(m);
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  if (!(best > -INFINITY)) return 0;
  const __m512 bv = _mm512_set1_ps(best);
  for (i = 0; i + 16 <= n; i += 16)
    if (const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), bv, _CMP_EQ_OQ); eq != 0)
      return i + __builtin_ctz(eq);
  for (; i < n; ++i)
    if (x[i] == best) return i;
  return 0;  // not reached: best is one of the values
}

namespace {

// e^x for 16 floats: x = n·ln2 + r with |r| <= ln2/2, e^r by its degree-6 Taylor
// polynomial (relative error < 2e-7, about one ulp), scaled by 2^n. Inputs below
// -104 give 0 (as e^x rounds to in f32); NaN stays NaN.
inline __m512 Exp(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.4426950408889634f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

}  // namespace

void RmsNormRow(const float* x, const float* weight, int64_t h, float eps, float* y) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 32 <= h; j += 32) {
    const __m512 a = _mm512_loadu_ps(x + j), b = _mm512_loadu_ps(x + j + 16);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
    acc1 = _mm512_fmadd_ps(b, b, acc1);
  }
  for (; j < h; j += 16) {
    const __mmask16 m = h - j >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (h - j)) - 1u);
    const __m512 a = _mm512_maskz_loadu_ps(m, x + j);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, _mm512_add_ps(acc0, acc1));
  double ss = 0;
  for (float v : lanes) ss += v;
  const __m512 inv = _mm512_set1_ps(1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(h)) + eps));
  for (j = 0; j < h; j += 16) {
    const __mmask16 m = h - j >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (h - j)) - 1u);
    const __m512 v =
        _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + j), inv), _mm512_maskz_loadu_ps(m, weight + j));
    _mm512_mask_storeu_ps(y + j, m, v);
  }
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 sig = _mm512_div_ps(one, _mm512_add_ps(one, Exp(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_mul_ps(g, sig), _mm512_maskz_loadu_ps(m, up + i)));
  }
}

void GeluTanh(float* x, int64_t n) {
  // 0.5·v·(1 + tanh(z)) with tanh(z) = 1 - 2 / (e^{2z} + 1).
  const __m512 one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f), half = _mm512_set1_ps(0.5f);
  const __m512 c = _mm512_set1_ps(0.7978845608028654f), a = _mm512_set1_ps(0.044715f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 z = _mm512_mul_ps(c, _mm512_fmadd_ps(_mm512_mul_ps(a, v), _mm512_mul_ps(v, v), v));
    const __m512 t = _mm512_sub_ps(one, _mm512_div_ps(two, _mm512_add_ps(Exp(_mm512_mul_ps(two, z)), one)));
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, t)));
  }
}

float ExpSubtractSum(float* x, int32_t n, float max) {
  const __m512 mv = _mm512_set1_ps(max);
  __m512 acc = _mm512_setzero_ps();
  int32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = Exp(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv));
    _mm512_storeu_ps(x + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 e = Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + i), mv));
    _mm512_mask_storeu_ps(x + i, mask, e);
    acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(mask, e));
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc);
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

double ExpSum(const float* x, int32_t n, float max) {
  const __m512 mv = _mm512_set1_ps(max);
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int32_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 e = _mm512_maskz_mov_ps(m, Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mv)));
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}

}  // namespace orca::kernels::avx512
