// The CUDA backend's non-GEMM, non-attention kernels: norms (one block per
// row with warp-shuffle reductions), activations, RoPE, embeddings, KV writes
// and row gathers. Each mirrors the CPU backend's arithmetic (same rounding
// rules for bf16, double-precision RoPE angles) so the two agree to f32 noise.

#include <algorithm>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_utils.cuh"

namespace orca::kernels::cuda {
namespace {

constexpr int kElementwiseThreads = 256;
// Grid-stride loops cap the grid; this many blocks saturate any current GPU.
constexpr int64_t kMaxElementwiseBlocks = 8192;

unsigned ElementwiseBlocks(int64_t n) {
  return static_cast<unsigned>(
      std::min<int64_t>((n + kElementwiseThreads - 1) / kElementwiseThreads, kMaxElementwiseBlocks));
}

// Threads for a kernel with one block per row of `width` elements.
unsigned RowThreads(int64_t width) {
  const int64_t warps = std::min<int64_t>((width + 31) / 32, kRowThreads / 32);
  return static_cast<unsigned>(std::max<int64_t>(warps, 1) * 32);
}

__device__ __forceinline__ int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// ---- Conversions and bias ---------------------------------------------------

__global__ void ConvertToBf16Kernel(const float* __restrict__ x, int64_t n, uint16_t* __restrict__ out) {
  for (int64_t i = GlobalThread(); i < n; i += GridStride()) out[i] = F32ToBf16Bits(x[i]);
}

__global__ void ConvertToF16Kernel(const float* __restrict__ x, int64_t n, uint16_t* __restrict__ out) {
  for (int64_t i = GlobalThread(); i < n; i += GridStride()) out[i] = F32ToF16Bits(x[i]);
}

__global__ void BroadcastBiasKernel(float* __restrict__ y, const float* __restrict__ bias, int64_t m, int64_t n,
                                    bool accumulate) {
  const int64_t total = m * n;
  for (int64_t i = GlobalThread(); i < total; i += GridStride()) {
    const float b = bias[i % n];
    y[i] = accumulate ? y[i] + b : b;
  }
}

// ---- Embeddings and gathers -------------------------------------------------

__global__ void GatherTableRowsKernel(const int32_t* __restrict__ rows, const void* __restrict__ table, DType dtype,
                                      int64_t k, int64_t ld, bool add, float* __restrict__ out) {
  const int64_t i = blockIdx.x;
  const int64_t src = static_cast<int64_t>(rows[i]) * ld;
  float* dst = out + i * k;
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
    const float v = LoadAsF32(table, dtype, src + j);
    dst[j] = add ? dst[j] + v : v;
  }
}

__global__ void GatherRowsKernel(const float* __restrict__ src, const int32_t* __restrict__ rows, int64_t h,
                                 float* __restrict__ dst) {
  const int64_t i = blockIdx.x;
  const float* s = src + static_cast<int64_t>(rows[i]) * h;
  float* d = dst + i * h;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) d[j] = s[j];
}

// ---- Norms (x may alias y: each element is read before it is written) -------

__global__ void RmsNormKernel(const float* x, const float* __restrict__ weight, int64_t h, float eps, float* y) {
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * h;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * h;
  float ss = 0.0f;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) ss += xr[j] * xr[j];
  ss = BlockSum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(h) + eps);
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) yr[j] = xr[j] * inv * weight[j];
}

__global__ void SumSquaresKernel(const float* __restrict__ x, int64_t h, float* __restrict__ sums) {
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * h;
  float ss = 0.0f;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) ss += xr[j] * xr[j];
  ss = BlockSum(ss);
  if (threadIdx.x == 0) sums[blockIdx.x] = ss;
}

__global__ void RmsNormFromSumsKernel(const float* x, const float* __restrict__ weight, const float* __restrict__ sums,
                                      int64_t h, int64_t total_h, float eps, float* y) {
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * h;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * h;
  const float inv = 1.0f / sqrtf(sums[blockIdx.x] / static_cast<float>(total_h) + eps);
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) yr[j] = xr[j] * inv * weight[j];
}

// residual += x, then RmsNorm of the sum into y: the unfused pair's arithmetic in the same
// per-thread order (same launch shape as RmsNormKernel), one pass fewer over the row.
__global__ void AddRmsNormKernel(float* residual, const float* __restrict__ x, const float* __restrict__ weight,
                                 int64_t h, float eps, float* y) {
  float* rr = residual + static_cast<int64_t>(blockIdx.x) * h;
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * h;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * h;
  float ss = 0.0f;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    const float s = rr[j] + xr[j];
    rr[j] = s;
    ss += s * s;
  }
  ss = BlockSum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(h) + eps);
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) yr[j] = rr[j] * inv * weight[j];
}

__global__ void LayerNormKernel(const float* x, const float* __restrict__ gamma, const float* __restrict__ beta,
                                int64_t h, float eps, float* y) {
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * h;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * h;
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) sum += xr[j];
  const float mean = BlockSum(sum) / static_cast<float>(h);
  // Two passes over the (cache-resident) row: exact variance without Welford merging.
  float sq = 0.0f;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    const float c = xr[j] - mean;
    sq += c * c;
  }
  const float var = BlockSum(sq) / static_cast<float>(h);
  const float inv = 1.0f / sqrtf(var + eps);
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x)
    yr[j] = (xr[j] - mean) * inv * gamma[j] + (beta != nullptr ? beta[j] : 0.0f);
}

// ---- Elementwise -------------------------------------------------------------

__global__ void AddKernel(float* y, const float* x, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridStride()) y[i] += x[i];
}

__global__ void SiluMulKernel(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = GlobalThread(); i < n; i += GridStride()) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void GeluTanhKernel(float* x, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = GlobalThread(); i < n; i += GridStride()) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  }
}

__global__ void GeluMulKernel(const float* gate, const float* up, int64_t n, float* out) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = GlobalThread(); i < n; i += GridStride()) {
    const float g = gate[i];
    out[i] = 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
  }
}

__global__ void ScaleKernel(float* x, int64_t n, float s) {
  for (int64_t i = GlobalThread(); i < n; i += GridStride()) x[i] *= s;
}

__global__ void SoftcapKernel(float* x, int64_t n, float cap) {
  for (int64_t i = GlobalThread(); i < n; i += GridStride()) x[i] = cap * tanhf(x[i] / cap);
}

// One block per row; the factor in double, rounded once to f32, as the CPU backend does.
__global__ void AttentionTemperatureKernel(float* x, const int32_t* __restrict__ positions, int64_t n, float scale,
                                           int32_t floor) {
  const int64_t i = blockIdx.x;
  const float f = static_cast<float>(1.0 + scale * log(1.0 + static_cast<double>(positions[i] / floor)));
  float* row = x + i * n;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) row[j] *= f;
}

// ---- RoPE: one block per token; cos/sin once per frequency in shared memory --

// This block's token's cos/sin table in shared memory ([0, half) cos, [half, rotary_dim) sin).
// Angles in double like the CPU backend: positions reach 1e5+ radians.
__device__ __forceinline__ float* RopeTable(const RopeLaunch& p, int64_t t) {
  float* cs = DynamicShared();
  const int32_t half = p.rotary_dim / 2;
  const double pos = p.positions[t];
  for (int32_t i = threadIdx.x; i < half; i += blockDim.x) {
    double s, c;
    sincos(pos * static_cast<double>(p.inv_freq[i]), &s, &c);
    cs[i] = static_cast<float>(c) * p.attention_factor;
    cs[half + i] = static_cast<float>(s) * p.attention_factor;
  }
  __syncthreads();
  return cs;
}

// Rotates pair i of one head in place: (i, i + half), or (2i, 2i + 1) when interleaved.
__device__ __forceinline__ void RotatePair(float* head, int32_t i, int32_t half, bool interleaved, const float* cs,
                                           const float* sn) {
  const int32_t ia = interleaved ? 2 * i : i;
  const int32_t ib = interleaved ? 2 * i + 1 : i + half;
  const float a = head[ia], b = head[ib];
  head[ia] = a * cs[i] - b * sn[i];
  head[ib] = b * cs[i] + a * sn[i];
}

__global__ void RopeKernel(RopeLaunch p) {
  const int32_t half = p.rotary_dim / 2;
  const int64_t t = blockIdx.x;
  const float* cs = RopeTable(p, t);
  const float* sn = cs + half;
  const int32_t heads = p.num_q_heads + p.num_kv_heads;
  for (int32_t idx = threadIdx.x; idx < heads * half; idx += blockDim.x) {
    const int32_t h = idx / half, i = idx % half;
    float* head = h < p.num_q_heads ? p.q + (t * p.num_q_heads + h) * p.head_dim
                                    : p.k + (t * p.num_kv_heads + (h - p.num_q_heads)) * p.head_dim;
    RotatePair(head, i, half, p.interleaved, cs, sn);
  }
}

// ---- KV cache writes: K transposed inside its block, V row-major -------------

__device__ __forceinline__ void StoreKv(float* base, int64_t i, float v) { base[i] = v; }
__device__ __forceinline__ void StoreKv(uint16_t* base, int64_t i, float v) { base[i] = F32ToBf16Bits(v); }

// Where element j of KV head h of the token in `slot` goes: K transposed inside its block, V row-major.
__device__ __forceinline__ void KvOffsets(const KvCacheDesc& kv, int32_t slot, int32_t h, int32_t j, int64_t* k_at,
                                          int64_t* v_at) {
  const int64_t block = slot / kv.block_size, off = slot % kv.block_size;
  const int64_t base = (block * kv.num_kv_heads + h) * static_cast<int64_t>(kv.head_dim) * kv.block_size;
  *k_at = base + static_cast<int64_t>(j) * kv.block_size + off;
  *v_at = base + off * kv.head_dim + j;
}

template <typename T>
__global__ void KvWriteKernel(const float* __restrict__ k, const float* __restrict__ v,
                              const int32_t* __restrict__ slots, KvCacheDesc kv) {
  const int64_t t = blockIdx.x;
  const int32_t d = kv.head_dim;
  const int32_t width = kv.num_kv_heads * d;
  for (int32_t idx = threadIdx.x; idx < width; idx += blockDim.x) {
    int64_t k_at, v_at;
    KvOffsets(kv, slots[t], idx / d, idx % d, &k_at, &v_at);
    StoreKv(static_cast<T*>(kv.k), k_at, k[t * width + idx]);
    StoreKv(static_cast<T*>(kv.v), v_at, v[t * width + idx]);
  }
}

// RoPE of q in place, and of k on its way into the cache (the k rows themselves are left as
// they were), with v stored beside it: RopeKernel then KvWriteKernel in one launch.
template <typename T>
__global__ void RopeKvWriteKernel(RopeLaunch p, const float* __restrict__ v, const int32_t* __restrict__ slots,
                                  KvCacheDesc kv) {
  const int32_t half = p.rotary_dim / 2;
  const int64_t t = blockIdx.x;
  const float* cs = RopeTable(p, t);
  const float* sn = cs + half;
  for (int32_t idx = threadIdx.x; idx < p.num_q_heads * half; idx += blockDim.x) {
    const int32_t h = idx / half, i = idx % half;
    RotatePair(p.q + (t * p.num_q_heads + h) * p.head_dim, i, half, p.interleaved, cs, sn);
  }
  const int32_t d = kv.head_dim;
  const int32_t width = kv.num_kv_heads * d;
  for (int32_t idx = threadIdx.x; idx < width; idx += blockDim.x) {
    const int32_t h = idx / d, j = idx % d;
    const float* head = p.k + t * width + h * d;
    float value = head[j];
    if (j < p.rotary_dim) {
      // j is the first (a) or second (b) member of pair i.
      const bool first = p.interleaved ? (j % 2 == 0) : j < half;
      const int32_t i = p.interleaved ? j / 2 : (first ? j : j - half);
      const int32_t ia = p.interleaved ? 2 * i : i;
      const int32_t ib = p.interleaved ? 2 * i + 1 : i + half;
      const float a = head[ia], b = head[ib];
      value = first ? a * cs[i] - b * sn[i] : b * cs[i] + a * sn[i];
    }
    int64_t k_at, v_at;
    KvOffsets(kv, slots[t], h, j, &k_at, &v_at);
    StoreKv(static_cast<T*>(kv.k), k_at, value);
    StoreKv(static_cast<T*>(kv.v), v_at, v[t * width + idx]);
  }
}

}  // namespace

cudaError_t ProbeKernelImage() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, AddKernel);
}

cudaError_t LaunchConvertFromF32(const float* x, int64_t n, DType to, void* out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  uint16_t* bits = static_cast<uint16_t*>(out);
  const unsigned blocks = ElementwiseBlocks(n);
  if (to == DType::kBF16) return Launch(ConvertToBf16Kernel, blocks, kElementwiseThreads, 0, stream, x, n, bits);
  if (to == DType::kF16) return Launch(ConvertToF16Kernel, blocks, kElementwiseThreads, 0, stream, x, n, bits);
  return cudaErrorInvalidValue;
}

cudaError_t LaunchBroadcastBias(float* y, const float* bias, int64_t m, int64_t n, bool accumulate,
                                cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  return Launch(BroadcastBiasKernel, ElementwiseBlocks(m * n), kElementwiseThreads, 0, stream, y, bias, m, n,
                accumulate);
}

cudaError_t LaunchGatherTableRows(const int32_t* rows, int64_t m, const void* table, DType dtype, int64_t k, int64_t ld,
                                  bool add, float* out, cudaStream_t stream) {
  if (IsQuantized(dtype)) return cudaErrorInvalidValue;  // LoadAsF32 reads element types only
  if (m <= 0 || k <= 0) return cudaSuccess;
  return Launch(GatherTableRowsKernel, static_cast<unsigned>(m), RowThreads(k), 0, stream, rows, table, dtype, k, ld,
                add, out);
}

cudaError_t LaunchRmsNorm(const float* x, const float* weight, int64_t m, int64_t h, float eps, float* y,
                          cudaStream_t stream) {
  if (m <= 0 || h <= 0) return cudaSuccess;
  return Launch(RmsNormKernel, static_cast<unsigned>(m), RowThreads(h), 0, stream, x, weight, h, eps, y);
}

cudaError_t LaunchSumSquares(const float* x, int64_t m, int64_t h, float* sums, cudaStream_t stream) {
  if (m <= 0 || h <= 0) return cudaSuccess;
  return Launch(SumSquaresKernel, static_cast<unsigned>(m), RowThreads(h), 0, stream, x, h, sums);
}

cudaError_t LaunchRmsNormFromSums(const float* x, const float* weight, const float* sums, int64_t m, int64_t h,
                                  int64_t total_h, float eps, float* y, cudaStream_t stream) {
  if (m <= 0 || h <= 0) return cudaSuccess;
  return Launch(RmsNormFromSumsKernel, static_cast<unsigned>(m), RowThreads(h), 0, stream, x, weight, sums, h, total_h,
                eps, y);
}

cudaError_t LaunchAddRmsNorm(float* residual, const float* x, const float* weight, int64_t m, int64_t h, float eps,
                             float* y, cudaStream_t stream) {
  if (m <= 0 || h <= 0) return cudaSuccess;
  return Launch(AddRmsNormKernel, static_cast<unsigned>(m), RowThreads(h), 0, stream, residual, x, weight, h, eps, y);
}

cudaError_t LaunchLayerNorm(const float* x, const float* gamma, const float* beta, int64_t m, int64_t h, float eps,
                            float* y, cudaStream_t stream) {
  if (m <= 0 || h <= 0) return cudaSuccess;
  return Launch(LayerNormKernel, static_cast<unsigned>(m), RowThreads(h), 0, stream, x, gamma, beta, h, eps, y);
}

cudaError_t LaunchAdd(float* y, const float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return Launch(AddKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, y, x, n);
}

cudaError_t LaunchSiluMul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return Launch(SiluMulKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, gate, up, n, out);
}

cudaError_t LaunchGeluMul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Launch(GeluMulKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, gate, up, n, out);
}

cudaError_t LaunchScale(float* x, int64_t n, float s, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Launch(ScaleKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, x, n, s);
}

cudaError_t LaunchSoftcap(float* x, int64_t n, float cap, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Launch(SoftcapKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, x, n, cap);
}

cudaError_t LaunchAttentionTemperature(float* x, const int32_t* positions, int64_t m, int64_t n, float scale,
                                       int32_t floor, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  if (floor <= 0) return cudaErrorInvalidValue;
  return Launch(AttentionTemperatureKernel, static_cast<unsigned>(m), RowThreads(n), 0, stream, x, positions, n, scale,
                floor);
}

cudaError_t LaunchGeluTanh(float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return Launch(GeluTanhKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, x, n);
}

cudaError_t LaunchRope(const RopeLaunch& p, cudaStream_t stream) {
  if (p.num_tokens <= 0 || p.rotary_dim < 2) return cudaSuccess;
  const int64_t pairs = static_cast<int64_t>(p.num_q_heads + p.num_kv_heads) * (p.rotary_dim / 2);
  const size_t shared = sizeof(float) * static_cast<size_t>(p.rotary_dim);
  return Launch(RopeKernel, static_cast<unsigned>(p.num_tokens), RowThreads(pairs), shared, stream, p);
}

cudaError_t LaunchKvWrite(const float* k, const float* v, const int32_t* slots, int32_t num_tokens,
                          const KvCacheDesc& kv, cudaStream_t stream) {
  if (num_tokens <= 0) return cudaSuccess;
  const unsigned threads = RowThreads(static_cast<int64_t>(kv.num_kv_heads) * kv.head_dim);
  const unsigned blocks = static_cast<unsigned>(num_tokens);
  if (kv.bf16) return Launch(KvWriteKernel<uint16_t>, blocks, threads, 0, stream, k, v, slots, kv);
  return Launch(KvWriteKernel<float>, blocks, threads, 0, stream, k, v, slots, kv);
}

cudaError_t LaunchRopeKvWrite(const RopeLaunch& p, const float* v, const int32_t* slots, const KvCacheDesc& kv,
                              cudaStream_t stream) {
  if (p.num_tokens <= 0) return cudaSuccess;
  if (p.rotary_dim < 2) {
    // Nothing rotates: the plain write.
    return LaunchKvWrite(p.k, v, slots, static_cast<int32_t>(p.num_tokens), kv, stream);
  }
  const int64_t width = std::max<int64_t>(static_cast<int64_t>(p.num_q_heads) * (p.rotary_dim / 2),
                                          static_cast<int64_t>(kv.num_kv_heads) * kv.head_dim);
  const size_t shared = sizeof(float) * static_cast<size_t>(p.rotary_dim);
  const unsigned blocks = static_cast<unsigned>(p.num_tokens);
  if (kv.bf16) return Launch(RopeKvWriteKernel<uint16_t>, blocks, RowThreads(width), shared, stream, p, v, slots, kv);
  return Launch(RopeKvWriteKernel<float>, blocks, RowThreads(width), shared, stream, p, v, slots, kv);
}

cudaError_t LaunchGatherRows(const float* src, const int32_t* rows, int64_t num_rows, int64_t h, float* dst,
                             cudaStream_t stream) {
  if (num_rows <= 0 || h <= 0) return cudaSuccess;
  return Launch(GatherRowsKernel, static_cast<unsigned>(num_rows), RowThreads(h), 0, stream, src, rows, h, dst);
}

}  // namespace orca::kernels::cuda
