// The quantized GEMM's AVX512-VNNI decode kernels: calls with at most
// AvxDirectMaxRows(dtype) activation rows (compiled with the same flags as
// quant_gemm_avx512.cc, and reached only through its GemmAvx512Vnni). Each
// unit of a panel is decoded in registers straight from the packed bytes and
// multiplied into up to eight rows: the weights are read from memory once, at
// memory bandwidth (a second block of eight rows reads the panel from cache).
// A translation unit of its own because GCC's code for these loops depends on
// what else the unit holds: beside the tuned row-block kernels, B=1 decode of
// a Q4_K_M model measured 10-20 % slower with this same source
// (bench/results/2026-11-24_issue12-quantized-gguf.md).

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

struct Avx512Decode {
  static constexpr int kMaxRows = 0;        // no row-block path: see quant_gemm_avx512.cc
  static constexpr int kDirectMaxRows = 8;  // acc[8], w[8] and the temporaries fit the 32 zmm registers
  // Decode reads each weight once: every group requests its share of the unit's lines
  // r.prefetch.l1_bytes ahead into L1 (and l2_bytes ahead into L2), so the stream's prefetches
  // are spread evenly over the work (beyond the panel's end this is the next panel, which the
  // same thread reads next). The distances, and why, are at quant::DecodePrefetch.

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
    const int64_t l1_ahead = r.prefetch.l1_bytes, l2_ahead = r.prefetch.l2_bytes;
    for (int64_t unit = 0; unit < r.units; ++unit) {
      const uint8_t* u = r.panel + unit * kUnitBytes;
      __m512 d, dmin;
      if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
        d = HalvesAt(u);
        dmin = HalvesAt(u + 32);
      } else if constexpr (T == DType::kQ6_K) {
        d = HalvesAt(u);
      }
      for (int gg = 0; gg < kUnitGroups; ++gg) {
        const int64_t g = unit * kUnitGroups + gg;
        constexpr size_t kGroupBytes = kUnitBytes / kUnitGroups;
        for (size_t line = gg * kGroupBytes / 64 * 64; line < (gg + 1) * kGroupBytes; line += 64) {
          const char* c = reinterpret_cast<const char*>(u) + line;
          if (l2_ahead > 0) _mm_prefetch(c + l2_ahead, _MM_HINT_T1);
          if (l1_ahead > 0) _mm_prefetch(c + l1_ahead, _MM_HINT_T0);
        }
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
};

}  // namespace

void GemmAvx512VnniDecode(const GemmArgs& args) { impl::Gemm<Avx512Decode>(args); }

}  // namespace orca::kernels::quant
