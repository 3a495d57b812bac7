// The quantized GEMM's AVX512-VNNI implementation (compiled with
// -mavx512f/bw/vl/dq/vnni; called only after a runtime CPU check). Calls with
// at most AvxDirectMaxRows(dtype) rows go to the decode kernels
// (quant_gemm_avx512_decode.cc); here one row block computes MR activation
// rows against the 16 columns of an unpacked chunk: per 32-value group, eight
// vpdpbusd per row (u8 weights × s8 activations, 4 products summed per 32-bit
// lane, one lane per column) into an int32 accumulator that starts at the
// weight's offset correction, then one conversion and two multiply-adds per row
// fold it into the f32 result.

#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/quant_gemm_impl.h"

namespace orca::kernels::quant {
namespace {

struct Avx512 {
  static constexpr int kMaxRows = 8;
  static constexpr int kDirectMaxRows = 0;  // GemmAvx512Vnni sends those calls to GemmAvx512VnniDecode

  static void Halves16(const uint8_t* src, float* dst) {
    _mm512_storeu_ps(dst, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src))));
  }

  // MR ≤ 8 rows from a multiple of 8 (RunRows steps by kMaxRows), so one RowBlockGroup
  // pointer serves every row of the block: the row block's activations, scales and
  // pre-shifted offset corrections sit at fixed offsets from it.
  template <int MR, Affine A, int kShift>
  static void Rows(const impl::RowsArgs& r) {
    static_assert(kMaxRows == kBlockRows);
    const QuantizedRows& x = *r.x;
    const __mmask16 mask = r.cols >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << r.cols) - 1u);
    __m512 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = r.load_y ? _mm512_maskz_loadu_ps(mask, r.y + i * r.ldy) : _mm512_setzero_ps();
    const RowBlockGroup* b = x.blocks.data() + r.row / kBlockRows * x.groups + r.group_first;
    for (int g = 0; g < r.groups; ++g, ++b) {
      __m512i ia[MR], ib[MR];
      for (int i = 0; i < MR; ++i) {
        if constexpr (A == Affine::kOffset) {
          static_assert(kShift == 3 || kShift == 4 || kShift == 7);
          ia[i] = _mm512_set1_epi32(kShift == 3 ? b->n_shl3[i] : kShift == 4 ? b->n_shl4[i] : b->n_shl7[i]);
        } else if constexpr (A == Affine::kHalves) {
          static_assert(kShift == 5);
          ia[i] = _mm512_set1_epi32(b->h0_shl5[i]);
          ib[i] = _mm512_set1_epi32(b->h1_shl5[i]);
        } else {
          ia[i] = _mm512_setzero_si512();
        }
      }
      // k 0..15 of the group into ia, k 16..31 into ib (Q6_K's halves) or ia. Two fixed
      // loops, fully unrolled: choosing the accumulator per v inside one loop kept GCC from
      // unrolling it, and ia/ib went through memory.
      const uint8_t* vals = r.s->vals[g];
      auto dots = [&](__m512i* sum, int v0) {
#pragma GCC unroll 4
        for (int v = v0; v < v0 + 4; ++v) {
          const __m512i w = _mm512_load_si512(vals + 64 * v);
#pragma GCC unroll 8
          for (int i = 0; i < MR; ++i) {
            int32_t four;
            __builtin_memcpy(&four, b->q[i] + 4 * v, 4);
            sum[i] = _mm512_dpbusd_epi32(sum[i], w, _mm512_set1_epi32(four));
          }
        }
      };
      dots(ia, 0);
      dots(A == Affine::kHalves ? ib : ia, 4);
      const __m512 av = _mm512_load_ps(r.s->a[g]);
      for (int i = 0; i < MR; ++i)
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[i]), _mm512_mul_ps(av, _mm512_set1_ps(b->d[i])), acc[i]);
      if constexpr (A == Affine::kHalves) {
        const __m512 bv = _mm512_load_ps(r.s->a[g] + 16);
        for (int i = 0; i < MR; ++i)
          acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ib[i]), _mm512_mul_ps(bv, _mm512_set1_ps(b->d[i])), acc[i]);
      }
      if constexpr (A == Affine::kMin) {
        const __m512 bv = _mm512_load_ps(r.s->b[g]);
        for (int i = 0; i < MR; ++i) acc[i] = _mm512_fmadd_ps(bv, _mm512_set1_ps(b->ds[i]), acc[i]);
      }
    }
    if (r.bias != nullptr) {
      const __m512 bias = _mm512_maskz_loadu_ps(mask, r.bias);
      for (int i = 0; i < MR; ++i) acc[i] = _mm512_add_ps(acc[i], bias);
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
    FillRowBlocks(row, out);
  }
}

void GemmAvx512Vnni(const GemmArgs& args) {
  const int64_t direct_max_rows =
      args.direct_max_rows > 0 ? std::max(args.direct_max_rows, kBlockMinRows - 1) : AvxDirectMaxRows(args.dtype);
  if (args.x->m <= direct_max_rows) return GemmAvx512VnniDecode(args);
  impl::Gemm<Avx512>(args);
}

}  // namespace orca::kernels::quant
