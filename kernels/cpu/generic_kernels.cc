#include "kernels/cpu/generic_kernels.h"

#include <algorithm>
#include <cmath>

namespace orca::kernels::generic {
namespace {
inline float Load(const void* base, DType dtype, int64_t i) {
  return dtype == DType::kBF16 ? Bf16ToF32(static_cast<const uint16_t*>(base)[i]) : static_cast<const float*>(base)[i];
}
}  // namespace

void BlockScores(const float* q, const void* kt, DType dtype, int32_t head_dim, int32_t block_size, int32_t count,
                 float scale, float* scores) {
  for (int32_t j = 0; j < count; ++j) {
    float s = 0;
    for (int32_t d = 0; d < head_dim; ++d) s += q[d] * Load(kt, dtype, static_cast<int64_t>(d) * block_size + j);
    scores[j] = s * scale;
  }
}

void BlockAccumulate(const float* p, const void* v, DType dtype, int32_t head_dim, int32_t count, float* out) {
  for (int32_t j = 0; j < count; ++j)
    for (int32_t d = 0; d < head_dim; ++d) out[d] += p[j] * Load(v, dtype, static_cast<int64_t>(j) * head_dim + d);
}

void GroupBlockScores(const float* q, int32_t group, const void* kt, DType dtype, int32_t head_dim, int32_t block_size,
                      int32_t count, float scale, float* scores, int64_t ld_scores) {
  for (int32_t g = 0; g < group; ++g)
    BlockScores(q + g * head_dim, kt, dtype, head_dim, block_size, count, scale, scores + g * ld_scores);
}

void GroupBlockAccumulate(const float* p, int64_t ld_p, int32_t group, const void* v, DType dtype, int32_t head_dim,
                          int32_t count, float* out) {
  for (int32_t g = 0; g < group; ++g) BlockAccumulate(p + g * ld_p, v, dtype, head_dim, count, out + g * head_dim);
}

float ExpSubtractSum(float* x, int32_t n, float max) {
  float sum = 0;
  for (int32_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  return sum;
}

float Max(const float* x, int32_t n) {
  float m = -INFINITY;
  for (int32_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

int32_t ArgMax(const float* x, int32_t n) {
  int32_t best = 0;
  float m = -INFINITY;
  for (int32_t i = 0; i < n; ++i)
    if (x[i] > m) m = x[i], best = i;  // NaN compares false: skipped
  return best;
}

double ExpSum(const float* x, int32_t n, float max) {
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i] - max));
  return sum;
}

}  // namespace orca::kernels::generic
