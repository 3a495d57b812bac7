#pragma once
/// bf16 GEMMs on AVX512-BF16's dot product (vdpbf16ps: 16 lanes, each adding
/// the products of two adjacent bf16 pairs to an f32 accumulator). Callers
/// check GetCpuFeatures().avx512_bf16 first.
///
/// Weights ("pair panels"): a [n, k] bf16 weight becomes ceil(n / 32) panels
/// of 32 output columns; a panel is ceil(k / 2) k-pairs of 64 bf16 values,
/// pair j holding W[c][2j], W[c][2j + 1] of column c at elements 2c, 2c + 1
/// (k odd: the last pair's second value is 0). One 64-byte load is the weight
/// operand of one vdpbf16ps for 16 columns. Same bytes as the weight, exact.
///
/// Activations are rounded to bf16 once per call (ConvertRows, round to
/// nearest even), as oneDNN's and llama.cpp's bf16 GEMMs do: each product
/// then carries the rounding of both factors (relative 2^-9 each), summed in
/// f32. Large calls run in blocks of rows, each cut into k blocks whose
/// activations stay in L2 while the panels stream past (y carries the sums
/// between k blocks). Every row is computed in the same k order whatever m
/// and the blocking, so a row's result does not depend on the other rows of
/// the call.

#include <cstddef>
#include <cstdint>

namespace orca::kernels::bf16dot {

/// k-pairs of a row (k rounded up to even, halved).
inline int64_t Pairs(int64_t k) { return (k + 1) / 2; }
/// bf16 elements of the packed weight.
size_t PanelElements(int64_t n, int64_t k);
/// Packs panels [panel_begin, panel_end) of a row-major bf16 weight (row stride ld) into `packed` (64-byte aligned).
void PackPanels(const uint16_t* w, int64_t ld, int64_t n, int64_t k, int64_t panel_begin, int64_t panel_end,
                uint16_t* packed);
/// W[row][j] of a packed weight.
inline uint16_t PackedValue(const uint16_t* packed, int64_t k, int64_t row, int64_t j) {
  return packed[static_cast<size_t>(row / 32) * Pairs(k) * 64 + (j / 2) * 64 + (row % 32) * 2 + j % 2];
}

/// bf16 elements of m converted activation rows (each 2 · Pairs(k) long).
inline size_t ConvertedElements(int64_t m, int64_t k) { return static_cast<size_t>(m) * Pairs(k) * 2; }
/// Rows [row_begin, row_end) of x [m, k] (row stride k) to bf16 rows of stride 2 · Pairs(k).
void ConvertRows(const float* x, int64_t k, int64_t row_begin, int64_t row_end, uint16_t* xb);

/// y[m, columns [n_begin, n_end)] = xb · Wᵀ (+ bias) (+ y if accumulate); n_begin a multiple of 32, `xb` from
/// ConvertRows, y with row stride ldy, n_total the weight's n.
void Gemm(const uint16_t* xb, int64_t m, int64_t k, const uint16_t* packed, const float* bias, float* y, int64_t ldy,
          bool accumulate, int64_t n_total, int64_t n_begin, int64_t n_end);

}  // namespace orca::kernels::bf16dot
