#pragma once
// Host emulation of the device side of CUDA for kernels_cuda_emulated_test:
// every CUDA thread of a block is a fiber of one host thread, scheduled round
// robin; __syncthreads parks a fiber until every thread of the block arrives,
// a warp shuffle until all 32 lanes of its warp do (a divergent barrier or
// shuffle is reported as a deadlock). Blocks run one after another.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "cuda_runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static  // one block at a time: function statics are the block's shared memory

extern dim3 threadIdx;
extern dim3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;

void EmulatedBlockBarrier();
float EmulatedShuffleXor(float value, int lane_mask);
float* EmulatedDynamicShared();
/// Runs a kernel now, or records it when `stream` is capturing (the body holds its arguments by value).
cudaError_t EmulatedRun(unsigned grid, unsigned block, size_t shared, cudaStream_t stream, std::function<void()> body);

template <typename F>
cudaError_t EmulatedLaunch(unsigned grid, unsigned block, size_t shared, cudaStream_t stream, F body) {
  return EmulatedRun(grid, block, shared, stream, std::function<void()>(body));
}

inline void __syncthreads() { EmulatedBlockBarrier(); }
[[noreturn]] inline void __trap() { std::abort(); }  // a device-side trap ends the kernel, here the process
inline float __shfl_xor_sync(unsigned mask, float value, int lane_mask) {
  if (mask != 0xffffffffu) std::abort();  // the kernels only use full-warp shuffles
  return EmulatedShuffleXor(value, lane_mask);
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}
using std::max;
using std::min;
