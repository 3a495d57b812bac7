// The quantized GEMM's AVX-VNNI implementation (256-bit vpdpbusd, VEX-encoded:
// CPUs with AVX-VNNI but no AVX-512, e.g. Intel's hybrid client cores;
// compiled with -mavx2 -mfma -mf16c -mavxvnni, called after a runtime check).
// The same arithmetic as quant_gemm_avx512.cc on two 8-column halves of each
// panel; with 16 vector registers a row block is at most 2 rows.

#include <immintrin.h>

#include "kernels/cpu/quant_gemm_impl.h"

namespace orca::kernels::quant {
namespace {

struct AvxVnni {
  static constexpr int kMaxRows = 2;
  static constexpr int kDirectMaxRows = 0;

  static void Halves16(const uint8_t* src, float* dst) {
    _mm256_storeu_ps(dst, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src))));
    _mm256_storeu_ps(dst + 8, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16))));
  }

  static __m256i MaskOf(int cols) {
    alignas(32) int32_t m[8];
    for (int c = 0; c < 8; ++c) m[c] = c < cols ? -1 : 0;
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
  }

  template <int MR, Affine A, int kShift>
  static void Rows(const impl::RowsArgs& r) {
    const QuantizedRows& x = *r.x;
    const __m256i mask[2] = {MaskOf(r.cols), MaskOf(r.cols - 8)};
    __m256 acc[MR][2];
    for (int i = 0; i < MR; ++i)
      for (int h = 0; h < 2; ++h)
        acc[i][h] = r.load_y ? _mm256_maskload_ps(r.y + i * r.ldy + 8 * h, mask[h]) : _mm256_setzero_ps();
    for (int g = 0; g < r.groups; ++g) {
      const int64_t gx = r.group_first + g;
      __m256i ia[MR][2], ib[MR][2];
      for (int i = 0; i < MR; ++i) {
        const int32_t* ns = x.ns.data() + ((r.row + i) * x.groups + gx) * 3;
        for (int h = 0; h < 2; ++h) {
          if constexpr (A == Affine::kOffset) {
            ia[i][h] = _mm256_slli_epi32(_mm256_set1_epi32(ns[0]), kShift);
          } else if constexpr (A == Affine::kHalves) {
            ia[i][h] = _mm256_slli_epi32(_mm256_set1_epi32(ns[1]), kShift);
            ib[i][h] = _mm256_slli_epi32(_mm256_set1_epi32(ns[2]), kShift);
          } else {
            ia[i][h] = _mm256_setzero_si256();
          }
        }
      }
      const uint8_t* vals = r.s->vals[g];
      for (int v = 0; v < 8; ++v) {
        const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(vals + 64 * v));
        const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(vals + 64 * v + 32));
        for (int i = 0; i < MR; ++i) {
          int32_t four;
          __builtin_memcpy(&four, x.q.data() + (r.row + i) * x.k + gx * kGroup + 4 * v, 4);
          const __m256i xv = _mm256_set1_epi32(four);
          if (A == Affine::kHalves && v >= 4) {
            ib[i][0] = _mm256_dpbusd_avx_epi32(ib[i][0], w0, xv);
            ib[i][1] = _mm256_dpbusd_avx_epi32(ib[i][1], w1, xv);
          } else {
            ia[i][0] = _mm256_dpbusd_avx_epi32(ia[i][0], w0, xv);
            ia[i][1] = _mm256_dpbusd_avx_epi32(ia[i][1], w1, xv);
          }
        }
      }
      for (int i = 0; i < MR; ++i) {
        const int64_t at = (r.row + i) * x.groups + gx;
        const __m256 dx = _mm256_set1_ps(x.d[at]);
        for (int h = 0; h < 2; ++h) {
          const __m256 av = _mm256_mul_ps(_mm256_load_ps(r.s->a[g] + 8 * h), dx);
          acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[i][h]), av, acc[i][h]);
          if constexpr (A == Affine::kHalves) {
            const __m256 bv = _mm256_mul_ps(_mm256_load_ps(r.s->a[g] + 16 + 8 * h), dx);
            acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ib[i][h]), bv, acc[i][h]);
          }
          if constexpr (A == Affine::kMin)
            acc[i][h] = _mm256_fmadd_ps(_mm256_load_ps(r.s->b[g] + 8 * h), _mm256_set1_ps(x.ds[at]), acc[i][h]);
        }
      }
    }
    for (int i = 0; i < MR; ++i)
      for (int h = 0; h < 2; ++h) {
        if (r.bias != nullptr) acc[i][h] = _mm256_add_ps(acc[i][h], _mm256_maskload_ps(r.bias + 8 * h, mask[h]));
        _mm256_maskstore_ps(r.y + i * r.ldy + 8 * h, mask[h], acc[i][h]);
      }
  }
};

}  // namespace

void GemmAvxVnni(const GemmArgs& args) { impl::Gemm<AvxVnni>(args); }

}  // namespace orca::kernels::quant
