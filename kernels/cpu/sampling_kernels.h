#pragma once
/// Whole-vocabulary loops of token sampling (core/engine/sampler.cc), on the
/// AVX-512 kernels where the CPU has them and the portable ones elsewhere.

#include <cstdint>

namespace orca::kernels::sampling {

/// The first index of the largest value, NaNs skipped; 0 when no value is above -inf.
int32_t ArgMax(const float* x, int32_t n);
/// In place: x[i] = exp(x[i] - max) (NaN stays NaN, -inf gives 0); returns the f32 sum.
float ExpSubtractSum(float* x, int32_t n, float max);
/// log Σ exp(x[i]), from the largest value (NaNs skipped by the max, not by the sum); the
/// largest value itself when it is infinite or there is none.
float LogSumExp(const float* x, int32_t n);

}  // namespace orca::kernels::sampling
