#pragma once
// Device helpers shared by the .cu files of the CUDA backend: kernel launch,
// element conversions that match the CPU backend bit for bit
// (core/common/dtype.h) and warp/block reductions.
//
// ORCA_CUDA_EMULATION: the .cu files also compile as plain C++ against the
// host emulation in tests/unit/kernels/cuda_emulation (CUDA threads as fibers),
// so the kernels' logic is tested on machines without a GPU. Only Launch and
// DynamicShared differ between the two builds.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/common/dtype.h"

namespace orca::kernels::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

// Queues kernel<<<grid, block, shared, stream>>>(args...) and returns the launch status.
template <typename... Params, typename... Args>
cudaError_t Launch(void (*kernel)(Params...), unsigned grid, unsigned block, size_t shared, cudaStream_t stream,
                   Args... args) {
#ifdef ORCA_CUDA_EMULATION
  return EmulatedLaunch(grid, block, shared, stream, [=] { kernel(args...); });
#else
  // clang-format 14 would split the launch brackets into "> > >".
  // clang-format off
  kernel<<<grid, block, shared, stream>>>(args...);
  // clang-format on
  return cudaGetLastError();
#endif
}

// The block's dynamic shared memory (the launch's `shared` bytes).
__device__ __forceinline__ float* DynamicShared() {
#ifdef ORCA_CUDA_EMULATION
  return EmulatedDynamicShared();
#else
  extern __shared__ float dynamic_shared[];
  return dynamic_shared;
#endif
}

__device__ __forceinline__ float Bf16BitsToF32(uint16_t v) { return __uint_as_float(static_cast<uint32_t>(v) << 16); }

// Round to nearest even with NaN kept quiet: the same rule as orca::F32ToBf16.
__device__ __forceinline__ uint16_t F32ToBf16Bits(float f) {
  const uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

__device__ __forceinline__ float F16BitsToF32(uint16_t v) { return __half2float(__ushort_as_half(v)); }
__device__ __forceinline__ uint16_t F32ToF16Bits(float f) { return __half_as_ushort(__float2half_rn(f)); }

// Element i of a tensor whose dtype is only known at run time (uniform across
// the block, so the switch does not diverge). Element types only: a block-
// quantized type has no element i on its own (its values need their block's
// scales), so the launchers refuse such tables on the host before any kernel
// runs (cudaErrorInvalidValue); reaching one here is a bug and traps the kernel
// (the launch then fails) instead of reading garbage.
__device__ __forceinline__ float LoadAsF32(const void* base, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(base)[i];
    case DType::kBF16:
      return Bf16BitsToF32(static_cast<const uint16_t*>(base)[i]);
    case DType::kF16:
      return F16BitsToF32(static_cast<const uint16_t*>(base)[i]);
    default:  // a block type
      __trap();
  }
  return 0.0f;
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// Sum over the whole thread block; every thread gets the total. Safe to call
// repeatedly in one kernel (the second barrier orders reuse of the scratch).
__device__ __forceinline__ float BlockSum(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = WarpSum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int num_warps = (blockDim.x + 31) >> 5;
    float t = lane < num_warps ? partial[lane] : 0.0f;
    t = WarpSum(t);
    if (lane == 0) total = t;
  }
  __syncthreads();
  return total;
}

}  // namespace orca::kernels::cuda
