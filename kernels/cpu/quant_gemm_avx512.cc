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

// Byte-wise helpers on 64 packed values.
inline __m512i Lo4(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }
inline __m512i Hi4(__m512i v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F)); }
// a | (b & c), bit by bit.
inline __m512i OrMasked(__m512i a, __m512i b, __m512i c) { return _mm512_ternarylogic_epi32(a, b, c, 0xF8); }
// Shifts every byte's bits left by s (right by -s) within 16-bit lanes; callers mask the result.
template <int S>
inline __m512i ShiftBits(__m512i v) {
  if constexpr (S > 0) return _mm512_slli_epi16(v, S);
  if constexpr (S < 0) return _mm512_srli_epi16(v, -S);
  return v;
}
inline __m512 HalvesAt(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 BytesU8At(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline __m512 BytesI8At(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline __m512 Negate(__m512 v) { return _mm512_xor_ps(v, _mm512_set1_ps(-0.0f)); }

// Group gg of the unit at u as 8 vectors of plain u8 values (vector v: k = 4v..4v+3 of
// the group, 4 bytes per column), decoded from the layout in quant_layout.h.
template <DType T>
inline void GroupValues(const uint8_t* u, int gg, __m512i w[8]) {
  auto load = [](const uint8_t* p) { return _mm512_loadu_si512(p); };
  if constexpr (T == DType::kQ8_0) {
    for (int v = 0; v < 8; ++v) w[v] = load(u + 64 * v);
  } else {
    constexpr bool kK = T == DType::kQ4_K || T == DType::kQ5_K || T == DType::kQ6_K;
    const uint8_t* nib = u + (T == DType::kQ6_K ? 288 : kK ? 320 : 0) + (kK ? 256 * gg : 0);
    for (int j = 0; j < 4; ++j) {
      const __m512i n = load(nib + 64 * j);
      w[j] = Lo4(n);
      w[4 + j] = Hi4(n);
    }
    if constexpr (T == DType::kQ5_0 || T == DType::kQ5_1 || T == DType::kQ5_K) {
      // Bit j of a high-bit byte is bit 4 of vector j, bit 4 + j that of vector 4 + j.
      const __m512i hb = load(u + (T == DType::kQ5_K ? 320 + 2048 + 64 * gg : 256));
      const __m512i bit4 = _mm512_set1_epi8(0x10);
      w[0] = OrMasked(w[0], ShiftBits<4>(hb), bit4);
      w[1] = OrMasked(w[1], ShiftBits<3>(hb), bit4);
      w[2] = OrMasked(w[2], ShiftBits<2>(hb), bit4);
      w[3] = OrMasked(w[3], ShiftBits<1>(hb), bit4);
      w[4] = OrMasked(w[4], hb, bit4);
      w[5] = OrMasked(w[5], ShiftBits<-1>(hb), bit4);
      w[6] = OrMasked(w[6], ShiftBits<-2>(hb), bit4);
      w[7] = OrMasked(w[7], ShiftBits<-3>(hb), bit4);
    } else if constexpr (T == DType::kQ6_K) {
      // Bits 2s..2s+1 of plane h are bits 4-5 of vector 4h + s.
      const uint8_t* planes = u + 288 + 2048 + 128 * gg;
      const __m512i two = _mm512_set1_epi8(0x30);
      for (int h = 0; h < 2; ++h) {
        const __m512i pl = load(planes + 64 * h);
        w[4 * h + 0] = OrMasked(w[4 * h + 0], ShiftBits<4>(pl), two);
        w[4 * h + 1] = OrMasked(w[4 * h + 1], ShiftBits<2>(pl), two);
        w[4 * h + 2] = OrMasked(w[4 * h + 2], pl, two);
        w[4 * h + 3] = OrMasked(w[4 * h + 3], ShiftBits<-2>(pl), two);
      }
    }
  }
}

struct Avx512 {
  static constexpr int kMaxRows = 8;
  static constexpr int kDirectMaxRows = 4;
  static constexpr size_t kPrefetchBytes = 2048;

  // A whole panel against MR rows, every unit decoded in registers (see quant_gemm_impl.h).
  // Per group and column the f32 operations are the scratch path's, in its order: the
  // integer sum (offset correction included), then fma(sum, a · d_x, acc), then the second
  // half (Q6_K) or the min term.
  // Each of MR activation rows from `row` on, at group `group_first`: its int8 values, scales,
  // scaled sums and offset sums.
  template <int MR>
  static void PointAtRows(const QuantizedRows& x, int64_t row, int64_t group_first, const int8_t* xq[MR],
                          const float* xd[MR], const float* xds[MR], const int32_t* xns[MR]) {
    for (int i = 0; i < MR; ++i) {
      const int64_t g = (row + i) * x.groups + group_first;
      xq[i] = x.q.data() + (row + i) * x.k + group_first * kGroup;
      xd[i] = x.d.data() + g;
      xds[i] = x.ds.data() + g;
      xns[i] = x.ns.data() + g * 3;
    }
  }

  template <DType T, int MR>
  static void Direct(const impl::DirectArgs& r) {
    constexpr Affine A = AffineOf(T);
    constexpr int kShift = OffsetShift(T);
    constexpr int kUnitGroups = static_cast<int>(UnitValues(T) / kGroup);
    constexpr size_t kUnitBytes = UnitBytes(T);
    const QuantizedRows& x = *r.x;
    const __mmask16 mask = r.cols >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << r.cols) - 1u);
    __m512 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = r.load_y ? _mm512_maskz_loadu_ps(mask, r.y + i * r.ldy) : _mm512_setzero_ps();
    const int8_t* xq[MR];
    const float* xd[MR];
    const float* xds[MR];
    const int32_t* xns[MR];
    PointAtRows<MR>(x, r.row, /*group_first=*/0, xq, xd, xds, xns);
    for (int64_t unit = 0; unit < r.units; ++unit) {
      const uint8_t* u = r.panel + unit * kUnitBytes;
      // Decode reads each weight once: request the stream ~2 KiB ahead into L1 (the hardware
      // prefetcher alone left one core at ~20-30 GB/s; with this, 30-40 on this EPYC; beyond
      // the panel's end this is the next panel, which the same thread reads next).
      for (size_t line = 0; line < kUnitBytes; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(u) + kPrefetchBytes + line, _MM_HINT_T0);
      __m512 d, dmin;
      if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
        d = HalvesAt(u);
        dmin = HalvesAt(u + 32);
      } else if constexpr (T == DType::kQ6_K) {
        d = HalvesAt(u);
      }
      for (int gg = 0; gg < kUnitGroups; ++gg) {
        const int64_t g = unit * kUnitGroups + gg;
        __m512i w[8];
        GroupValues<T>(u, gg, w);
        __m512 av, bv;
        if constexpr (T == DType::kQ8_0) {
          av = HalvesAt(u + 512);
        } else if constexpr (T == DType::kQ4_0 || T == DType::kQ4_1) {
          av = HalvesAt(u + 256);
          if constexpr (T == DType::kQ4_1) bv = HalvesAt(u + 288);
        } else if constexpr (T == DType::kQ5_0 || T == DType::kQ5_1) {
          av = HalvesAt(u + 320);
          if constexpr (T == DType::kQ5_1) bv = HalvesAt(u + 352);
        } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
          av = _mm512_mul_ps(d, BytesU8At(u + 64 + 16 * gg));
          bv = Negate(_mm512_mul_ps(dmin, BytesU8At(u + 192 + 16 * gg)));
        } else {
          av = _mm512_mul_ps(d, BytesI8At(u + 32 + 16 * (2 * gg)));
          bv = _mm512_mul_ps(d, BytesI8At(u + 32 + 16 * (2 * gg + 1)));
        }
        for (int i = 0; i < MR; ++i) {
          const int8_t* q = xq[i] + g * kGroup;
          auto dot = [&](__m512i sum, int v) {
            int32_t four;
            __builtin_memcpy(&four, q + 4 * v, 4);
            return _mm512_dpbusd_epi32(sum, w[v], _mm512_set1_epi32(four));
          };
          const __m512 dx = _mm512_set1_ps(xd[i][g]);
          if constexpr (A == Affine::kHalves) {
            __m512i s0 = _mm512_set1_epi32(xns[i][3 * g + 1] * (1 << kShift));
            __m512i s1 = _mm512_set1_epi32(xns[i][3 * g + 2] * (1 << kShift));
            for (int v = 0; v < 4; ++v) s0 = dot(s0, v), s1 = dot(s1, 4 + v);
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), _mm512_mul_ps(av, dx), acc[i]);
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), _mm512_mul_ps(bv, dx), acc[i]);
          } else {
            // Two independent chains of four dot products, joined exactly (integers).
            __m512i s0 = A == Affine::kOffset ? _mm512_set1_epi32(xns[i][3 * g] * (1 << kShift)) : _mm512_setzero_si512();
            __m512i s1 = _mm512_setzero_si512();
            for (int v = 0; v < 8; v += 2) s0 = dot(s0, v), s1 = dot(s1, v + 1);
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), _mm512_mul_ps(av, dx), acc[i]);
            if constexpr (A == Affine::kMin) acc[i] = _mm512_fmadd_ps(bv, _mm512_set1_ps(xds[i][g]), acc[i]);
          }
        }
      }
    }
    if (r.bias != nullptr) {
      const __m512 b = _mm512_maskz_loadu_ps(mask, r.bias);
      for (int i = 0; i < MR; ++i) acc[i] = _mm512_add_ps(acc[i], b);
    }
    for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(r.y + i * r.ldy, mask, acc[i]);
  }

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
    PointAtRows<MR>(x, r.row, r.group_first, xq, xd, xds, xns);
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
      // k 0..15 of the group into ia, k 16..31 into ib (Q6_K's halves) or ia. Two fixed
      // loops, fully unrolled: choosing the accumulator per v inside one loop kept GCC from
      // unrolling it, and Q6_K's ia/ib went through memory.
      const uint8_t* vals = r.s->vals[g];
      auto dots = [&](__m512i* sum, int v0) {
#pragma GCC unroll 4
        for (int v = v0; v < v0 + 4; ++v) {
          const __m512i w = _mm512_load_si512(vals + 64 * v);
#pragma GCC unroll 8
          for (int i = 0; i < MR; ++i) {
            int32_t four;
            __builtin_memcpy(&four, xq[i] + g * kGroup + 4 * v, 4);
            sum[i] = _mm512_dpbusd_epi32(sum[i], w, _mm512_set1_epi32(four));
          }
        }
      };
      dots(ia, 0);
      dots(A == Affine::kHalves ? ib : ia, 4);
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
