// The quantized GEMM's AVX512-VNNI implementation (compiled with
// -mavx512f/bw/vl/dq/vnni; called only after a runtime CPU check). One row
// block computes MR activation rows against the 16 columns of an unpacked
// chunk: per 32-value group, eight vpdpbusd per row (u8 weights × s8
// activations, 4 products summed per 32-bit lane, one lane per column) into an
// int32 accumulator that starts at the weight's offset correction, then one
// conversion and two multiply-adds per row fold it into the f32 result.

#include <immintrin.h>

#include "kernels/cpu/quant_gemm_impl.h"

namespace orca::kernels::quant {
namespace {

struct Avx512 {
  static constexpr int kMaxRows = 8;

  static void Halves16(const uint8_t* src, float* dst) {
    _mm512_storeu_ps(dst, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src))));
  }

  template <int MR, Affine A, int kShift>
  static void Rows(const impl::RowsArgs& r) {
    const QuantizedRows& x = *r.x;
    const __mmask16 mask = r.cols >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << r.cols) - 1u);
    __m512 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = r.load_y ? _mm512_maskz_loadu_ps(mask, r.y + i * r.ldy) : _mm512_setzero_ps();
    const int8_t* xq[MR];
    const float* xd[MR];
    const float* xds[MR];
    const int32_t* xns[MR];
    for (int i = 0; i < MR; ++i) {
      const int64_t row = r.row + i;
      xq[i] = x.q.data() + row * x.k + r.group_first * kGroup;
      xd[i] = x.d.data() + row * x.groups + r.group_first;
      xds[i] = x.ds.data() + row * x.groups + r.group_first;
      xns[i] = x.ns.data() + (row * x.groups + r.group_first) * 3;
    }
    for (int g = 0; g < r.groups; ++g) {
      __m512i ia[MR], ib[MR];
      for (int i = 0; i < MR; ++i) {
        if constexpr (A == Affine::kOffset) {
          ia[i] = _mm512_slli_epi32(_mm512_set1_epi32(xns[i][3 * g]), kShift);
        } else if constexpr (A == Affine::kHalves) {
          ia[i] = _mm512_slli_epi32(_mm512_set1_epi32(xns[i][3 * g + 1]), kShift);
          ib[i] = _mm512_slli_epi32(_mm512_set1_epi32(xns[i][3 * g + 2]), kShift);
        } else {
          ia[i] = _mm512_setzero_si512();
        }
      }
      const uint8_t* vals = r.s->vals[g];
      for (int v = 0; v < 8; ++v) {
        const __m512i w = _mm512_load_si512(vals + 64 * v);
        for (int i = 0; i < MR; ++i) {
          int32_t four;
          __builtin_memcpy(&four, xq[i] + g * kGroup + 4 * v, 4);
          const __m512i xv = _mm512_set1_epi32(four);
          if (A == Affine::kHalves && v >= 4)
            ib[i] = _mm512_dpbusd_epi32(ib[i], w, xv);
          else
            ia[i] = _mm512_dpbusd_epi32(ia[i], w, xv);
        }
      }
      const __m512 av = _mm512_load_ps(r.s->a[g]);
      for (int i = 0; i < MR; ++i) {
        const __m512 dx = _mm512_set1_ps(xd[i][g]);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[i]), _mm512_mul_ps(av, dx), acc[i]);
      }
      if constexpr (A == Affine::kHalves) {
        const __m512 bv = _mm512_load_ps(r.s->a[g] + 16);
        for (int i = 0; i < MR; ++i)
          acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ib[i]), _mm512_mul_ps(bv, _mm512_set1_ps(xd[i][g])), acc[i]);
      }
      if constexpr (A == Affine::kMin) {
        const __m512 bv = _mm512_load_ps(r.s->b[g]);
        for (int i = 0; i < MR; ++i) acc[i] = _mm512_fmadd_ps(bv, _mm512_set1_ps(xds[i][g]), acc[i]);
      }
    }
    if (r.bias != nullptr) {
      const __m512 b = _mm512_maskz_loadu_ps(mask, r.bias);
      for (int i = 0; i < MR; ++i) acc[i] = _mm512_add_ps(acc[i], b);
    }
    for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(r.y + i * r.ldy, mask, acc[i]);
  }
};

}  // namespace

void GemmAvx512Vnni(const GemmArgs& args) { impl::Gemm<Avx512>(args); }

}  // namespace orca::kernels::quant
