#pragma once
// The ISA-independent half of the quantized GEMM (quant_gemm.h), included by
// each per-ISA translation unit (quant_gemm_{avx512,avx512_decode,avxvnni,generic}.cc) and
// compiled with that unit's instruction set: the chunk loop over a panel, and
// the unpacking of a chunk into plain u8 values and f32 scales (simple byte
// loops the compiler vectorizes for the unit's ISA). The unit provides
//   struct Isa {
//     static void Halves16(const uint8_t* src, float* dst);   // 16 fp16 → f32
//     template <int MR, Affine A, int kShift> static void Rows(const RowsArgs&);
//     static constexpr int kMaxRows;        // MR ≤ kMaxRows; 0: no Rows, every call runs Direct
//     static constexpr int kDirectMaxRows;  // 0, or the most rows one Direct call computes
//                                           // (with kMaxRows > 0: calls with m ≤ this run Direct)
//     template <DType T, int MR> static void Direct(const DirectArgs&);
//   };
// Direct (decode: a few rows) reads each unit of the panel straight into
// registers and computes every row from there, with no scratch round trip;
// the chunked scratch path amortizes the unpacking over many rows (prefill).
// Both perform the same f32 operations in the same order.
// Not a public header.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/quant_gemm.h"
#include "kernels/cpu/quant_layout.h"

namespace orca::kernels::quant::impl {

constexpr int kChunkGroups = 16;  // 512 values of k: ~11 KiB of scratch, in L1 with the activations

struct alignas(64) Scratch {
  uint8_t vals[kChunkGroups][512];  // group g, vector v (k 4v..4v+3), column c, byte b at [g][64v + 4c + b]
  float a[kChunkGroups][32];        // per column: scale of the group (Q6_K: of its two halves)
  float b[kChunkGroups][16];        // per column: min of the group (min types)
};

/// What a row-block kernel needs: the unpacked chunk and the activations.
struct RowsArgs {
  const Scratch* s;
  int groups;  // groups in the chunk
  const QuantizedRows* x;
  int64_t row;          // first activation row
  int64_t group_first;  // the chunk's first group along k
  float* y;             // &y[row][first column of the panel]
  int64_t ldy;
  int cols;           // valid columns of the panel (≤ 16)
  bool load_y;        // start from y (accumulate or a later chunk) instead of 0
  const float* bias;  // added after the last chunk (null otherwise)
};

inline void Nibbles(const uint8_t* __restrict src, uint8_t* __restrict dst) {
  for (int i = 0; i < 256; ++i) dst[i] = src[i] & 15;
  for (int i = 0; i < 256; ++i) dst[256 + i] = src[i] >> 4;
}
inline void HighBits(const uint8_t* __restrict src, uint8_t* __restrict dst) {
  for (int v = 0; v < 8; ++v)
    for (int i = 0; i < 64; ++i) dst[64 * v + i] = static_cast<uint8_t>(dst[64 * v + i] | ((src[i] >> v) & 1) << 4);
}
inline void Planes2(const uint8_t* __restrict src, uint8_t* __restrict dst) {
  for (int v = 0; v < 8; ++v) {
    const uint8_t* p = src + 64 * (v / 4);
    const int shift = 2 * (v % 4);
    for (int i = 0; i < 64; ++i) dst[64 * v + i] = static_cast<uint8_t>(dst[64 * v + i] | ((p[i] >> shift) & 3) << 4);
  }
}

// dst[c] = d[c] · sc[c] for 16 columns. The byte copy first: stores through a float* may
// alias the packed bytes as far as the compiler knows, which kept the loop scalar.
template <class S>
inline void ScalesTimes(const float* __restrict d, const S* sc, float* __restrict dst) {
  S bytes[16];
  std::memcpy(bytes, sc, sizeof(bytes));
#pragma GCC unroll 1  // left whole for the loop vectorizer (unrolled first, the int8 case stayed scalar)
  for (int c = 0; c < 16; ++c) dst[c] = d[c] * static_cast<float>(bytes[c]);
}

// One unit of type T into scratch groups [g0, g0 + UnitValues(T) / 32).
template <class I, DType T>
inline void UnpackUnit(const uint8_t* u, Scratch& s, int g0) {
  if constexpr (T == DType::kQ8_0) {
    std::memcpy(s.vals[g0], u, 512);
    I::Halves16(u + 512, s.a[g0]);
  } else if constexpr (T == DType::kQ4_0 || T == DType::kQ4_1) {
    Nibbles(u, s.vals[g0]);
    I::Halves16(u + 256, s.a[g0]);
    if constexpr (T == DType::kQ4_1) I::Halves16(u + 288, s.b[g0]);
  } else if constexpr (T == DType::kQ5_0 || T == DType::kQ5_1) {
    Nibbles(u, s.vals[g0]);
    HighBits(u + 256, s.vals[g0]);
    I::Halves16(u + 320, s.a[g0]);
    if constexpr (T == DType::kQ5_1) I::Halves16(u + 352, s.b[g0]);
  } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
    alignas(64) float d[16], dmin[16];
    I::Halves16(u, d);
    I::Halves16(u + 32, dmin);
    for (int g = 0; g < 8; ++g) {
      Nibbles(u + 320 + 256 * g, s.vals[g0 + g]);
      if constexpr (T == DType::kQ5_K) HighBits(u + 320 + 2048 + 64 * g, s.vals[g0 + g]);
      ScalesTimes(d, u + 64 + 16 * g, s.a[g0 + g]);
      ScalesTimes(dmin, u + 192 + 16 * g, s.b[g0 + g]);
      for (int c = 0; c < 16; ++c) s.b[g0 + g][c] = -s.b[g0 + g][c];
    }
  } else if constexpr (T == DType::kQ6_K) {
    alignas(64) float d[16];
    I::Halves16(u, d);
    const int8_t* scales = reinterpret_cast<const int8_t*>(u + 32);
    for (int g = 0; g < 8; ++g) {
      Nibbles(u + 288 + 256 * g, s.vals[g0 + g]);
      Planes2(u + 288 + 2048 + 128 * g, s.vals[g0 + g]);
      ScalesTimes(d, scales + 16 * (2 * g), s.a[g0 + g]);
      ScalesTimes(d, scales + 16 * (2 * g + 1), s.a[g0 + g] + 16);
    }
  }
}

/// f(std::integral_constant<int, rows>{}): a row count known at run time (1 ≤ rows ≤ kMax)
/// as the compile-time MR of a kernel.
template <class F, int... I>
inline void ForRowsOf(int64_t rows, F& f, std::integer_sequence<int, I...>) {
  static_cast<void>(((rows == I + 1 && (f(std::integral_constant<int, I + 1>{}), true)) || ...));
}
template <int kMax, class F>
inline void ForRows(int64_t rows, F&& f) {
  ForRowsOf(rows, f, std::make_integer_sequence<int, kMax>{});
}

/// What a direct (decode) kernel needs: a whole panel and MR ≤ kDirectMaxRows rows. Calls
/// with more rows run it once per kDirectMaxRows rows, panel by panel, so the later
/// row blocks read the panel from cache.
struct DirectArgs {
  const uint8_t* panel;  // the panel's first unit
  int64_t units;         // units along k
  const QuantizedRows* x;
  int64_t row;  // first activation row
  float* y;     // &y[row][first column of the panel]
  int64_t ldy;
  int cols;           // valid columns of the panel (≤ 16)
  bool load_y;        // accumulate into y
  const float* bias;  // null or the panel's first bias
  DecodePrefetch prefetch;
};

template <class I, DType T>
void RunDirect(const GemmArgs& a) {
  constexpr int kMax = I::kDirectMaxRows;
  const int64_t units = a.k / UnitValues(T), m = a.x->m;
  const size_t panel_bytes = PanelBytes(T, a.k);
  for (int64_t p = a.panel_begin; p < a.panel_end; ++p) {
    DirectArgs d;
    d.panel = a.packed + static_cast<size_t>(p) * panel_bytes;
    d.units = units;
    d.x = a.x;
    d.ldy = a.ldy;
    d.cols = static_cast<int>(std::min<int64_t>(kPanelCols, a.n - p * kPanelCols));
    d.load_y = a.accumulate;
    d.bias = a.bias != nullptr ? a.bias + p * kPanelCols : nullptr;
    d.prefetch = a.prefetch;
    for (int64_t row = 0; row < m; row += kMax) {
      d.row = row;
      d.y = a.y + row * a.ldy + p * kPanelCols;
      ForRows<kMax>(std::min<int64_t>(kMax, m - row), [&](auto mr) { I::template Direct<T, decltype(mr)::value>(d); });
    }
  }
}

template <class I, DType T, int MR>
inline void RowBlock(const RowsArgs& r) {
  I::template Rows<MR, AffineOf(T), OffsetShift(T)>(r);
}

/// Software prefetch of the next chunk's weights, a share before each row block. Issued
/// as one burst, the ~140 lines of a chunk fill the core's miss buffers and the burst
/// stalls (perf on a 64-row Q8_0 call on an EPYC: the burst and the unpack waiting on it
/// took ~15 % of the time); spread over the row blocks' compute, the stream keeps up.
class SpreadPrefetch {
 public:
  SpreadPrefetch(const void* begin, size_t bytes, int64_t blocks)
      : p_(static_cast<const char*>(begin)), left_((bytes + 63) / 64) {
    step_ = (left_ + static_cast<size_t>(blocks) - 1) / static_cast<size_t>(blocks);
  }
  void Next() {
    for (size_t n = std::min(step_, left_); n > 0; --n, --left_, p_ += 64) __builtin_prefetch(p_, 0, 1);
  }

 private:
  const char* p_;
  size_t left_;  // lines
  size_t step_;  // lines per row block
};

template <class I, DType T>
void RunRows(RowsArgs r, int64_t row_end, SpreadPrefetch& prefetch) {
  constexpr int kMax = I::kMaxRows;
  for (int64_t row = r.row; row < row_end;) {
    const int64_t rows = std::min<int64_t>(kMax, row_end - row);
    prefetch.Next();
    r.row = row;
    ForRows<kMax>(rows, [&](auto mr) { RowBlock<I, T, decltype(mr)::value>(r); });
    r.y += rows * r.ldy;
    row += rows;
  }
}

/// Rows per row block of the chunked path, and the activation bytes a row block's k block may
/// hold. Every panel of a call reads the same activations, so they must stay in the core's
/// L2 (1–2 MiB) while the panels stream past: at 2048 rows × k 5632 they are 22 MiB (the
/// AVX-512 kernel's 8-row copy is 2 bytes a value), which left a Q8_0 down projection at 20 %
/// of the int8 peak against 52 % at 512 rows (gemm_bench, EPYC). Rows and k are blocked so
/// that a block's activations are at most kRowsBlockBytes; each y element still sums its k
/// chunks in order, so the result does not depend on the blocking.
inline constexpr int64_t kRowBlockRows = 256;
inline constexpr int64_t kRowsBlockBytes = 512 << 10;
inline constexpr int64_t kRowsBytesPerValue = 2;  // the AVX-512 8-row copy (RowBlockGroup); others read 1

// The row-block (prefill) path: for each block of rows and of k, each panel chunk by chunk
// into the scratch, then every row block of the activations against it.
template <class I, DType T>
void RunChunks(const GemmArgs& a) {
  static_assert(kRowBlockRows % I::kMaxRows == 0);
  thread_local Scratch scratch;
  constexpr int64_t kUnitGroups = UnitValues(T) / kGroup;
  constexpr int64_t kUnitsPerChunk = kChunkGroups / kUnitGroups;
  constexpr size_t kUnitBytes = UnitBytes(T);
  const int64_t units = a.k / UnitValues(T), m = a.x->m;
  const size_t panel_bytes = PanelBytes(T, a.k);
  const int64_t block_rows = std::min(m, kRowBlockRows);
  const int64_t block_chunks =
      std::max<int64_t>(1, kRowsBlockBytes / (block_rows * kChunkGroups * kGroup * kRowsBytesPerValue));
  const int64_t block_units = std::min(units, block_chunks * kUnitsPerChunk);
  auto chunk = [&](int64_t p, int64_t u) { return a.packed + static_cast<size_t>(p) * panel_bytes + u * kUnitBytes; };
  for (int64_t r0 = 0; r0 < m; r0 += block_rows) {
    const int64_t r1 = std::min(m, r0 + block_rows);
    const int64_t row_blocks = (r1 - r0 + I::kMaxRows - 1) / I::kMaxRows;
    for (int64_t k0 = 0; k0 < units; k0 += block_units) {
      const int64_t k1 = std::min(units, k0 + block_units);
      for (int64_t p = a.panel_begin; p < a.panel_end; ++p) {
        const int cols = static_cast<int>(std::min<int64_t>(kPanelCols, a.n - p * kPanelCols));
        for (int64_t u0 = k0; u0 < k1; u0 += kUnitsPerChunk) {
          const int64_t uc = std::min(kUnitsPerChunk, k1 - u0);
          // The next chunk streams in while this one computes: this panel's next, or the next
          // panel's first of the k block (past the thread's last panel: a harmless prefetch).
          const bool same_panel = u0 + uc < k1;
          const int64_t next_u0 = same_panel ? u0 + uc : k0;
          SpreadPrefetch prefetch(chunk(same_panel ? p : p + 1, next_u0),
                                  std::min(kUnitsPerChunk, k1 - next_u0) * kUnitBytes, row_blocks);
          for (int64_t i = 0; i < uc; ++i)
            UnpackUnit<I, T>(chunk(p, u0 + i), scratch, static_cast<int>(i * kUnitGroups));
          RowsArgs r;
          r.s = &scratch;
          r.groups = static_cast<int>(uc * kUnitGroups);
          r.x = a.x;
          r.row = r0;
          r.group_first = u0 * kUnitGroups;
          r.y = a.y + r0 * a.ldy + p * kPanelCols;
          r.ldy = a.ldy;
          r.cols = cols;
          r.load_y = a.accumulate || u0 > 0;
          r.bias = (u0 + uc == units && a.bias != nullptr) ? a.bias + p * kPanelCols : nullptr;
          RunRows<I, T>(r, r1, prefetch);
        }
      }
    }
  }
}

template <class I, DType T>
void GemmTyped(const GemmArgs& a) {
  if constexpr (I::kMaxRows == 0) {
    return RunDirect<I, T>(a);  // a decode-only implementation (correct for any m, fast for few rows)
  } else {
    if constexpr (I::kDirectMaxRows > 0) {
      if (a.x->m <= I::kDirectMaxRows) return RunDirect<I, T>(a);
    }
    RunChunks<I, T>(a);
  }
}

// The kernels of a.dtype (kPanelTypes lists them); a type without a panel row computes nothing.
template <class I>
void Gemm(const GemmArgs& a) {
  VisitPanelType(a.dtype, [&](auto type) { GemmTyped<I, decltype(type)::value>(a); });
}

}  // namespace orca::kernels::quant::impl
