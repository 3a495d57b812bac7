#pragma once
/// GEMMs through oneDNN's matmul primitive: y = x · Wᵀ (+ bias) (+ y), with
/// weights used in place (strided views of the mapped checkpoint). bf16
/// weights run as bf16 × bf16 → f32 (AVX512-BF16, or AMX where the CPU has
/// it); f32 weights as f32. Primitives are cached per shape. Not thread-safe:
/// one instance per compute thread.

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "kernels/include/backend.h"

namespace orca::kernels {

class OnednnGemm {
 public:
  OnednnGemm();
  ~OnednnGemm();
  OnednnGemm(const OnednnGemm&) = delete;
  OnednnGemm& operator=(const OnednnGemm&) = delete;

  void Run(const float* x, int64_t m, const WeightView& w, const float* bias, float* y, bool accumulate,
           int num_threads);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace orca::kernels
