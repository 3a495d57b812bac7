#pragma once
/// Portable scalar versions of the attention inner loops in avx512_kernels.h and of the
/// sampler's argmax, for CPUs without AVX-512 (GEMMs then always go through oneDNN).

#include <cstdint>

#include "core/common/dtype.h"

namespace orca::kernels::generic {

void BlockScores(const float* q, const void* kt, DType dtype, int32_t head_dim, int32_t block_size, int32_t count,
                 float scale, float* scores);
void BlockAccumulate(const float* p, const void* v, DType dtype, int32_t head_dim, int32_t count, float* out);
/// Per-head loops over the two above for a GQA group (see avx512_kernels.h).
void GroupBlockScores(const float* q, int32_t group, const void* kt, DType dtype, int32_t head_dim, int32_t block_size,
                      int32_t count, float scale, float* scores, int64_t ld_scores);
void GroupBlockAccumulate(const float* p, int64_t ld_p, int32_t group, const void* v, DType dtype, int32_t head_dim,
                          int32_t count, float* out);
float ExpSubtractSum(float* x, int32_t n, float max);
float Max(const float* x, int32_t n);
int32_t ArgMax(const float* x, int32_t n);
double ExpSum(const float* x, int32_t n, float max);

}  // namespace orca::kernels::generic
