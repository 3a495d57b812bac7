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

void QuantizeRowsAvx512(const float* x, int64_t row_begin, int64_t row_end, QuantizedRows* out) {
  const int64_t k = out->k, groups = out->groups;
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512i hi = _mm512_set1_epi32(127), lo = _mm512_set1_epi32(-127);
  for (int64_t row = row_begin; row < row_end; ++row) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* src = x + row * k + g * kGroup;
      const __m512 a = _mm512_loadu_ps(src), b = _mm512_loadu_ps(src + 16);
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(a, abs_mask), _mm512_and_ps(b, abs_mask)));
      // The portable path's arithmetic: the same scale, one float product, round to nearest even (MXCSR's default,
      // as std::nearbyint), clamped to ±127.
      const float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
      const __m512 vid = _mm512_set1_ps(id);
      const __m512i qa = _mm512_max_epi32(_mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(a, vid)), hi), lo);
      const __m512i qb = _mm512_max_epi32(_mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(b, vid)), hi), lo);
      int8_t* q = out->q.data() + row * k + g * kGroup;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(qa));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(qb));
      const int32_t s0 = _mm512_reduce_add_epi32(qa), s1 = _mm512_reduce_add_epi32(qb);
      const int64_t at = row * groups + g;
      out->d[at] = d;
      out->ds[at] = d * static_cast<float>(s0 + s1);
      out->ns[3 * at] = -(s0 + s1);
      out->ns[3 * at + 1] = -s0;
      out->ns[3 * at + 2] = -s1;
    }
  }
}

void GemmAvx512Vnni(const GemmArgs& args) { impl::Gemm<Avx512>(args); }

}  // namespace orca::kernels::quant
