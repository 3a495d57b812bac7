#pragma once
/// Hand-written AVX-512 kernels for the shapes oneDNN serves poorly: GEMMs with
/// few rows (decode: one token per request) streaming bf16/f32 weights once at
/// memory bandwidth, and the inner loops of paged attention. Callers check
/// GetCpuFeatures().avx512 first.

#include <cstdint>

#include "core/common/dtype.h"

namespace orca::kernels::avx512 {

/// Floats needed to pack x[m, k] for SmallGemm (k rounded up to 32).
int64_t PackedXFloats(int64_t m, int64_t k);

/// y[m, n] = x[m, k] · Wᵀ (+ bias) (+ y if accumulate) for a row-major [n, k]
/// weight with row stride ld, computing rows [n_begin, n_end) of the output.
/// `packed_x` must come from PackX (same m, k, weight dtype).
void PackX(const float* x, int64_t m, int64_t k, DType weight_dtype, float* packed_x);
void SmallGemm(const float* packed_x, int64_t m, int64_t k, const void* w, DType w_dtype, int64_t ld, const float* bias,
               float* y, int64_t ldy, bool accumulate, int64_t n_begin, int64_t n_end);

/// The same product for a few dozen rows (decode batches): each 32-row block of
/// W is converted to f32 and transposed into a [k][32] panel once, then every
/// row of x is multiplied against it with broadcast FMAs (the GEMM kernel
/// form), so compute, not conversion or reductions, sets the pace. Takes x
/// unpacked ([m, k], row stride k) and computes output columns [n_begin, n_end).
void PanelGemm(const float* x, int64_t m, int64_t k, const void* w, DType w_dtype, int64_t ld, const float* bias,
               float* y, int64_t ldy, bool accumulate, int64_t n_begin, int64_t n_end);

/// Elements of W's prepacked panels ([k][32] per 32 rows, in W's own dtype:
/// f32, or bf16 exactly). Decode batches reuse the packing every iteration.
size_t PackedPanelElements(int64_t n, int64_t k);
/// Packs the panels of rows [n_begin, n_end) (n_begin a multiple of 32).
void PackPanels(const void* w, DType w_dtype, int64_t ld, int64_t n, int64_t k, int64_t n_begin, int64_t n_end,
                void* packed);
/// PanelGemm on prepacked panels (64-byte aligned), output columns [n_begin, n_end).
void PackedPanelGemm(const float* x, int64_t m, int64_t k, const void* packed, DType w_dtype, const float* bias,
                     float* y, int64_t ldy, bool accumulate, int64_t n_total, int64_t n_begin, int64_t n_end);

/// scores[j] = scale * Σ_d q[d] · Kt[d][j] for j < count (Kt is one block of one
/// KV head: [head_dim][block_size]).
void BlockScores(const float* q, const void* kt, DType dtype, int32_t head_dim, int32_t block_size, int32_t count,
                 float scale, float* scores);
/// out[d] += Σ_j p[j] · V[j][d] for j < count (V is [block_size][head_dim]).
void BlockAccumulate(const float* p, const void* v, DType dtype, int32_t head_dim, int32_t count, float* out);
/// y = x / rms(x) · weight for one row of h (y may alias x); sums of squares in
/// f32 over 16 lanes, then in double across them.
void RmsNormRow(const float* x, const float* weight, int64_t h, float eps, float* y);
/// out[i] = silu(gate[i]) · up[i] (out may alias gate).
void SiluMul(const float* gate, const float* up, int64_t n, float* out);
/// In place: GPT-2's tanh approximation of GELU.
void GeluTanh(float* x, int64_t n);
/// BlockScores for `group` query heads sharing one KV head (adjacent in q,
/// head_dim apart): scores[g * ld_scores + j]. Each key is read once for all.
void GroupBlockScores(const float* q, int32_t group, const void* kt, DType dtype, int32_t head_dim, int32_t block_size,
                      int32_t count, float scale, float* scores, int64_t ld_scores);
/// BlockAccumulate for `group` heads: out[g * head_dim + d] += Σ_j p[g * ld_p + j] · V[j][d].
void GroupBlockAccumulate(const float* p, int64_t ld_p, int32_t group, const void* v, DType dtype, int32_t head_dim,
                          int32_t count, float* out);
/// In place: x[i] = exp(x[i] - max), returns Σ.
float ExpSubtractSum(float* x, int32_t n, float max);
float Max(const float* x, int32_t n);
/// The first index of the largest value, NaNs skipped; 0 when no value is above -inf.
int32_t ArgMax(const float* x, int32_t n);
/// Σ exp(x[i] - max), the exponentials in f32 and their sum in f64.
double ExpSum(const float* x, int32_t n, float max);

}  // namespace orca::kernels::avx512
