#include "kernels/cpu/sampling_kernels.h"

#include <cmath>

#include "kernels/cpu/avx512_kernels.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/generic_kernels.h"

namespace orca::kernels::sampling {

int32_t ArgMax(const float* x, int32_t n) {
  return GetCpuFeatures().avx512 ? avx512::ArgMax(x, n) : generic::ArgMax(x, n);
}

float ExpSubtractSum(float* x, int32_t n, float max) {
  return GetCpuFeatures().avx512 ? avx512::ExpSubtractSum(x, n, max) : generic::ExpSubtractSum(x, n, max);
}

float LogSumExp(const float* x, int32_t n) {
  const float m = n > 0 ? x[ArgMax(x, n)] : -INFINITY;
  if (!std::isfinite(m)) return m;
  const double sum = GetCpuFeatures().avx512 ? avx512::ExpSum(x, n, m) : generic::ExpSum(x, n, m);
  return m + static_cast<float>(std::log(sum));
}

}  // namespace orca::kernels::sampling
