#pragma once
/// Host-side launchers for the CUDA kernels behind CudaBackend. Each queues
/// one kernel on `stream` and returns the launch status (cudaSuccess when the
/// kernel was queued; execution errors surface at the next synchronization).
/// Every pointer is a device pointer. This header is shared by nvcc-compiled
/// .cu files and g++-compiled code, so it sticks to plain types (no Abseil).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/common/dtype.h"

namespace orca::kernels::cuda {

/// Elements per thread block for the row-wise kernels (norms, embeddings, ...).
constexpr int kRowThreads = 256;

/// cudaSuccess when this build has machine code (or PTX it can JIT) for the
/// current device; cudaErrorNoKernelImageForDevice (or similar) otherwise.
cudaError_t ProbeKernelImage();

/// out[i] = convert(x[i]) for `to` in {kBF16, kF16} (round to nearest even),
/// the activation side of a reduced-precision GEMM.
cudaError_t LaunchConvertFromF32(const float* x, int64_t n, DType to, void* out, cudaStream_t stream);

/// y[i, j] = bias[j] (+ y[i, j] when `accumulate`), for y [m, n].
cudaError_t LaunchBroadcastBias(float* y, const float* bias, int64_t m, int64_t n, bool accumulate,
                                cudaStream_t stream);

/// y[i, :] (+)= x[i, :] · dequant(W)ᵀ (+ bias) for i < m: W is a row-major [n, k] matrix of a
/// block-quantized `dtype` (kernels/cuda/quant_kernels.cu) with row stride `ld` values, both
/// k and ld whole blocks; `bias` may be null. cudaErrorInvalidValue for an element type or
/// partial blocks, nothing launched.
cudaError_t LaunchQuantLinear(const float* x, int64_t m, const void* w, DType dtype, int64_t n, int64_t k, int64_t ld,
                              const float* bias, float* y, bool accumulate, cudaStream_t stream);
/// out[i, :] (+)= dequant(table[rows[i], :k]) for i < m, a block-quantized table as above.
cudaError_t LaunchGatherQuantRows(const int32_t* rows, int64_t m, const void* table, DType dtype, int64_t k, int64_t ld,
                                  bool add, float* out, cudaStream_t stream);

/// out[i, :] (+)= f32(table[rows[i] * ld : + k]) for i < m; `add` selects +=. Element types
/// only: a quantized `dtype` is cudaErrorInvalidValue, nothing launched.
cudaError_t LaunchGatherTableRows(const int32_t* rows, int64_t m, const void* table, DType dtype, int64_t k, int64_t ld,
                                  bool add, float* out, cudaStream_t stream);

cudaError_t LaunchRmsNorm(const float* x, const float* weight, int64_t m, int64_t h, float eps, float* y,
                          cudaStream_t stream);
/// sums[i] = Σ x[i, :]² (rows of h).
cudaError_t LaunchSumSquares(const float* x, int64_t m, int64_t h, float* sums, cudaStream_t stream);
/// y[i, :] = x[i, :] · weight / sqrt(sums[i] / total_h + eps) (y may alias x).
cudaError_t LaunchRmsNormFromSums(const float* x, const float* weight, const float* sums, int64_t m, int64_t h,
                                  int64_t total_h, float eps, float* y, cudaStream_t stream);
/// residual += x, then y = RmsNorm(residual) (one launch; y may alias residual).
cudaError_t LaunchAddRmsNorm(float* residual, const float* x, const float* weight, int64_t m, int64_t h, float eps,
                             float* y, cudaStream_t stream);
/// `beta` may be null.
cudaError_t LaunchLayerNorm(const float* x, const float* gamma, const float* beta, int64_t m, int64_t h, float eps,
                            float* y, cudaStream_t stream);

cudaError_t LaunchAdd(float* y, const float* x, int64_t n, cudaStream_t stream);
cudaError_t LaunchSiluMul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);
cudaError_t LaunchGeluTanh(float* x, int64_t n, cudaStream_t stream);
cudaError_t LaunchGeluMul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);
cudaError_t LaunchScale(float* x, int64_t n, float s, cudaStream_t stream);
cudaError_t LaunchSoftcap(float* x, int64_t n, float cap, cudaStream_t stream);
/// x[i, :] *= 1 + scale · ln(1 + ⌊positions[i] / floor⌋) over m rows of n values (one block per row).
cudaError_t LaunchAttentionTemperature(float* x, const int32_t* positions, int64_t m, int64_t n, float scale,
                                       int32_t floor, cudaStream_t stream);

struct RopeLaunch {
  float* q = nullptr;
  float* k = nullptr;
  const int32_t* positions = nullptr;
  int64_t num_tokens = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t rotary_dim = 0;
  bool interleaved = false;  ///< adjacent pairs (2i, 2i+1); otherwise rotate-half (i, i + d/2)
  const float* inv_freq = nullptr;
  float attention_factor = 1.0f;
};
cudaError_t LaunchRope(const RopeLaunch& p, cudaStream_t stream);

/// One layer of the paged KV pool (see KvLayerView in kernels/include/backend.h).
struct KvCacheDesc {
  void* k = nullptr;  ///< [num_blocks][num_kv_heads][head_dim][block_size]
  void* v = nullptr;  ///< [num_blocks][num_kv_heads][block_size][head_dim]
  bool bf16 = false;  ///< element type: bf16 or f32
  int32_t block_size = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
};

/// Stores k/v rows [num_tokens, num_kv_heads * head_dim] at their slots.
cudaError_t LaunchKvWrite(const float* k, const float* v, const int32_t* slots, int32_t num_tokens,
                          const KvCacheDesc& kv, cudaStream_t stream);

/// RoPE of p.q in place and of p.k into the cache at `slots`, with v beside it: LaunchRope
/// then LaunchKvWrite in one launch (p.k itself is left unrotated).
cudaError_t LaunchRopeKvWrite(const RopeLaunch& p, const float* v, const int32_t* slots, const KvCacheDesc& kv,
                              cudaStream_t stream);

/// dst[i, :] = src[rows[i], :] for rows of h floats.
cudaError_t LaunchGatherRows(const float* src, const int32_t* rows, int64_t num_rows, int64_t h, float* dst,
                             cudaStream_t stream);

// ---- Fused paged attention --------------------------------------------------

/// One sequence of the batch as the attention kernel sees it. `tile_begin` is
/// the exclusive prefix sum of the thread blocks of earlier sequences, so one
/// launch covers the whole batch (paper §5) and a block finds its sequence by
/// binary search.
struct AttentionSeqDesc {
  const int32_t* block_table = nullptr;
  int32_t q_offset = 0;
  int32_t num_tokens = 0;
  int32_t start_pos = 0;
  int32_t tile_begin = 0;
};

/// Shape of the attention kernel's thread blocks for a head dimension.
struct AttentionTiling {
  int32_t rows_per_tile = 0;  ///< query rows (token, q head of one KV group) per block; 0 = does not fit
  size_t shared_bytes = 0;    ///< dynamic shared memory per block
};

/// The largest tile whose shared memory fits `max_shared_bytes`.
AttentionTiling ChooseAttentionTiling(int32_t head_dim, size_t max_shared_bytes);

/// Thread blocks one sequence needs: per KV head, its L * group query rows in tiles.
inline int32_t AttentionTilesForSeq(int32_t num_tokens, int32_t group, int32_t num_kv_heads, int32_t rows_per_tile) {
  const int64_t rows = static_cast<int64_t>(num_tokens) * group;
  return static_cast<int32_t>((rows + rows_per_tile - 1) / rows_per_tile * num_kv_heads);
}

struct AttentionLaunch {
  const float* q = nullptr;  ///< [N, num_q_heads * head_dim]
  float* out = nullptr;      ///< [N, num_q_heads * head_dim]
  int32_t num_q_heads = 0;
  float scale = 1.0f;
  int32_t window = 0;    ///< sliding window (AttentionParams::window); 0: none
  float softcap = 0.0f;  ///< score soft-capping (AttentionParams::softcap); 0: none
  KvCacheDesc kv;
  const AttentionSeqDesc* seqs = nullptr;  ///< device array of num_seqs
  int32_t num_seqs = 0;
  int32_t total_tiles = 0;  ///< grid size: Σ AttentionTilesForSeq
  AttentionTiling tiling;
};

/// Causal attention of every sequence's queries against its own paged K/V,
/// in one launch. Sets the kernel's dynamic shared-memory limit on first use.
cudaError_t LaunchPagedAttention(const AttentionLaunch& p, cudaStream_t stream);

}  // namespace orca::kernels::cuda
