// Dequantizing GEMM/GEMV and row gathers over ggml block-quantized weights (Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: every type whose row in core/common/dtype.h's traits table says
// CudaGemm::kDequant) as GGUF stores them: each thread decodes whole blocks with the format's
// reference decoders (core/common/ggml_blocks.h, host and device code) and dots them with the
// activations, so the weights stay in their file's bytes on the device.
//
// One CUDA block per output feature j; its threads stride over the row's quant blocks and
// keep kRowsPerPass partial sums (activation rows) each, reduced over the block at the end
// of a pass. Correctness first: a block is decoded into registers/local memory once per pass
// of kRowsPerPass activation rows, f32 FMAs; no tensor cores or int8 dot products yet.

#include <algorithm>

#include "core/common/dtype.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_utils.cuh"

namespace orca::kernels::cuda {
namespace {

constexpr int kRowsPerPass = 8;
constexpr int kQuantThreads = 128;

// y[i, j] (+)= x[i, :] · dequant(W[j, :]) (+ bias[j] when bias != nullptr), for i < m.
template <typename Block>
__global__ void QuantLinearKernel(const float* __restrict__ x, int64_t m, const uint8_t* __restrict__ w,
                                  int64_t row_bytes, int64_t k, const float* __restrict__ bias, float* __restrict__ y,
                                  int64_t n, bool accumulate) {
  constexpr int E = Block::kElems;
  const int64_t j = blockIdx.x;
  const Block* row = reinterpret_cast<const Block*>(w + j * row_bytes);
  const int64_t num_blocks = k / E;
  for (int64_t i0 = 0; i0 < m; i0 += kRowsPerPass) {
    const int rows = m - i0 < kRowsPerPass ? static_cast<int>(m - i0) : kRowsPerPass;
    float acc[kRowsPerPass];
    for (int r = 0; r < kRowsPerPass; ++r) acc[r] = 0.0f;
    for (int64_t b = threadIdx.x; b < num_blocks; b += blockDim.x) {
      float v[E];
      ggml::DecodeBlock(row[b], v);
      for (int r = 0; r < rows; ++r) {
        const float* xr = x + (i0 + r) * k + b * E;
        float s = 0.0f;
        for (int e = 0; e < E; ++e) s += v[e] * xr[e];
        acc[r] += s;
      }
    }
    for (int r = 0; r < rows; ++r) {  // `rows` is uniform over the block: every thread reduces
      const float total = BlockSum(acc[r]);
      if (threadIdx.x == 0) {
        float* out = y + (i0 + r) * n + j;
        const float b = bias != nullptr ? bias[j] : 0.0f;
        *out = accumulate ? *out + total + b : total + b;
      }
    }
  }
}

// out[i, :] (+)= dequant(table[rows[i], :]) for i < m.
template <typename Block>
__global__ void GatherQuantRowsKernel(const int32_t* __restrict__ rows, const uint8_t* __restrict__ table,
                                      int64_t row_bytes, int64_t k, bool add, float* __restrict__ out) {
  constexpr int E = Block::kElems;
  const int64_t i = blockIdx.x;
  const Block* row = reinterpret_cast<const Block*>(table + static_cast<int64_t>(rows[i]) * row_bytes);
  float* dst = out + i * k;
  for (int64_t b = threadIdx.x; b < k / E; b += blockDim.x) {
    float v[E];
    ggml::DecodeBlock(row[b], v);
    for (int e = 0; e < E; ++e) dst[b * E + e] = add ? dst[b * E + e] + v[e] : v[e];
  }
}

unsigned QuantThreads(int64_t num_blocks) {
  const int64_t warps = std::min<int64_t>((num_blocks + 31) / 32, kQuantThreads / 32);
  return static_cast<unsigned>(std::max<int64_t>(warps, 1) * 32);
}

constexpr bool IsDequantRow(const DTypeTraits& row) { return row.cuda_gemm == CudaGemm::kDequant; }

// Calls f(Block{}) with the block struct of `dtype` when its row says CudaGemm::kDequant; false otherwise.
template <typename F>
bool WithBlockType(DType dtype, F f) {
  return VisitDType<&IsDequantRow>(dtype, [&](auto type) { f(typename GgmlBlock<decltype(type)::value>::type{}); });
}

}  // namespace

cudaError_t LaunchQuantLinear(const float* x, int64_t m, const void* w, DType dtype, int64_t n, int64_t k, int64_t ld,
                              const float* bias, float* y, bool accumulate, cudaStream_t stream) {
  if (TraitsOf(dtype).cuda_gemm != CudaGemm::kDequant || k % DTypeBlockElems(dtype) != 0 ||
      ld % DTypeBlockElems(dtype) != 0 || ld < k)
    return cudaErrorInvalidValue;
  if (m <= 0 || n <= 0) return cudaSuccess;
  if (n > 0x7fffffff) return cudaErrorInvalidValue;  // one CUDA block per output feature
  const int64_t row_bytes = static_cast<int64_t>(DTypeRowBytes(dtype, ld));
  const unsigned threads = QuantThreads(k / DTypeBlockElems(dtype));
  cudaError_t result = cudaErrorInvalidValue;
  WithBlockType(dtype, [&](auto block) {
    using Block = decltype(block);
    result = Launch(QuantLinearKernel<Block>, static_cast<unsigned>(n), threads, 0, stream, x, m,
                    static_cast<const uint8_t*>(w), row_bytes, k, bias, y, n, accumulate);
  });
  return result;
}

cudaError_t LaunchGatherQuantRows(const int32_t* rows, int64_t m, const void* table, DType dtype, int64_t k, int64_t ld,
                                  bool add, float* out, cudaStream_t stream) {
  if (TraitsOf(dtype).cuda_gemm != CudaGemm::kDequant || k % DTypeBlockElems(dtype) != 0 ||
      ld % DTypeBlockElems(dtype) != 0 || ld < k)
    return cudaErrorInvalidValue;
  if (m <= 0 || k <= 0) return cudaSuccess;
  const int64_t row_bytes = static_cast<int64_t>(DTypeRowBytes(dtype, ld));
  const unsigned threads = QuantThreads(k / DTypeBlockElems(dtype));
  cudaError_t result = cudaErrorInvalidValue;
  WithBlockType(dtype, [&](auto block) {
    using Block = decltype(block);
    result = Launch(GatherQuantRowsKernel<Block>, static_cast<unsigned>(m), threads, 0, stream, rows,
                    static_cast<const uint8_t*>(table), row_bytes, k, add, out);
  });
  return result;
}

}  // namespace orca::kernels::cuda
