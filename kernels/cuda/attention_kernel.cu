// Fused paged attention for a selectively batched iteration (paper §5): the
// thread blocks of every request are concatenated into ONE launch. Block b
// finds its sequence by binary search over the per-sequence prefix sums of
// block counts, then serves one KV head and one tile of query rows (rows are
// (token, q head of the KV group) pairs, so GQA heads share each K/V load).
//
// Per block, keys are streamed in chunks of 32 through shared memory:
//   1. K chunk (transposed, as the cache stores it) and V chunk are loaded
//      with coalesced reads through the sequence's block table;
//   2. warp w scores its query rows, lane j holding key j, and updates the
//      running max / sum of an online softmax with warp shuffles;
//   3. all threads accumulate O = alpha * O + P · V for their (row, dim) cells.
// Keys past a row's causal limit score -inf; keys past the tile's limit are
// never read (their cache slots may hold garbage, even NaN).

#include <atomic>
#include <cmath>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_utils.cuh"

namespace orca::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kKeys = 32;  // keys per chunk: one per lane
constexpr int kMaxRowsPerWarp = 4;
constexpr int kMaxRowsPerTile = kWarps * kMaxRowsPerWarp;
constexpr size_t kDefaultSharedLimit = 48 * 1024;
constexpr int kMaxDevices = 64;

// Shared memory in floats: q and o tiles [R][D], K^T and V chunks, P [R][kKeys],
// and four per-row scalars (running max, running sum, rescale, causal limit).
size_t SharedFloats(int32_t rows, int32_t head_dim) {
  return 2 * static_cast<size_t>(rows) * head_dim + 2 * static_cast<size_t>(kKeys) * head_dim +
         static_cast<size_t>(rows) * kKeys + 4 * static_cast<size_t>(rows);
}

__device__ __forceinline__ float LoadKv(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float LoadKv(const uint16_t* p, int64_t i) { return Bf16BitsToF32(p[i]); }

// The last sequence whose first block is <= b.
__device__ __forceinline__ int FindSequence(const AttentionSeqDesc* seqs, int num_seqs, int b) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (seqs[mid].tile_begin <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) PagedAttentionKernel(AttentionLaunch p) {
  float* shared = DynamicShared();
  const int D = p.kv.head_dim;
  const int R = p.tiling.rows_per_tile;
  const int rows_per_warp = R / kWarps;
  float* q_s = shared;                               // [R][D], pre-scaled
  float* o_s = q_s + R * D;                          // [R][D]
  float* k_s = o_s + R * D;                          // [D][kKeys]
  float* v_s = k_s + kKeys * D;                      // [kKeys][D]
  float* p_s = v_s + kKeys * D;                      // [R][kKeys]
  float* m_s = p_s + R * kKeys;                      // running max
  float* l_s = m_s + R;                              // running sum
  float* alpha_s = l_s + R;                          // rescale of this chunk
  int* ctx_s = reinterpret_cast<int*>(alpha_s + R);  // keys visible to the row

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const AttentionSeqDesc seq = p.seqs[FindSequence(p.seqs, p.num_seqs, blockIdx.x)];
  const int nkv = p.kv.num_kv_heads;
  const int group = p.num_q_heads / nkv;
  const int rows_total = seq.num_tokens * group;
  const int tiles_per_head = (rows_total + R - 1) / R;
  const int local = blockIdx.x - seq.tile_begin;
  const int kv_head = local / tiles_per_head;
  const int row0 = (local % tiles_per_head) * R;
  const int nrows = min(R, rows_total - row0);
  const int tile_ctx = seq.start_pos + (row0 + nrows - 1) / group + 1;
  const int64_t q_stride = static_cast<int64_t>(p.num_q_heads) * D;

  for (int i = tid; i < R * D; i += kThreads) {
    const int r = i / D, d = i % D;
    float val = 0.0f;
    if (r < nrows) {
      const int flat = row0 + r;
      const int64_t row = seq.q_offset + flat / group;
      const int head = kv_head * group + flat % group;
      val = p.q[row * q_stride + static_cast<int64_t>(head) * D + d] * p.scale;
    }
    q_s[i] = val;
    o_s[i] = 0.0f;
  }
  for (int r = tid; r < R; r += kThreads) {
    m_s[r] = -INFINITY;
    l_s[r] = 0.0f;
    ctx_s[r] = r < nrows ? seq.start_pos + (row0 + r) / group + 1 : 0;
  }

  const int bs = p.kv.block_size;
  const int64_t head_elems = static_cast<int64_t>(D) * bs;
  const T* kc = static_cast<const T*>(p.kv.k);
  const T* vc = static_cast<const T*>(p.kv.v);
  // A sliding window hides the keys before each row's ctx - window: start at the chunk holding the tile's
  // first visible key (its first row's, the lowest).
  const int first_key = p.window > 0 ? max(0, seq.start_pos + row0 / group + 1 - p.window) : 0;
  for (int c0 = first_key / kKeys * kKeys; c0 < tile_ctx; c0 += kKeys) {
    __syncthreads();  // the previous chunk's readers are done (first time: the tile is initialised)
    const int nkeys = min(kKeys, tile_ctx - c0);
    // K^T chunk: the key index is fastest, matching the cache's [d][offset] blocks.
    for (int i = tid; i < kKeys * D; i += kThreads) {
      const int d = i / kKeys, c = i % kKeys;
      float val = 0.0f;
      if (c < nkeys) {
        const int j = c0 + c;
        const int64_t blk = seq.block_table[j / bs];
        val = LoadKv(kc, (blk * nkv + kv_head) * head_elems + static_cast<int64_t>(d) * bs + j % bs);
      }
      k_s[i] = val;
    }
    for (int i = tid; i < kKeys * D; i += kThreads) {
      const int c = i / D, d = i % D;
      float val = 0.0f;
      if (c < nkeys) {
        const int j = c0 + c;
        const int64_t blk = seq.block_table[j / bs];
        val = LoadKv(vc, (blk * nkv + kv_head) * head_elems + static_cast<int64_t>(j % bs) * D + d);
      }
      v_s[i] = val;
    }
    __syncthreads();

    // Scores and online softmax: warp w owns rows [w * rows_per_warp, ...), lane = key.
    const int r_begin = warp * rows_per_warp;
    float s[kMaxRowsPerWarp] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int d = 0; d < D; ++d) {
      const float kd = k_s[d * kKeys + lane];
#pragma unroll
      for (int i = 0; i < kMaxRowsPerWarp; ++i)
        if (i < rows_per_warp) s[i] += q_s[(r_begin + i) * D + d] * kd;
    }
#pragma unroll
    for (int i = 0; i < kMaxRowsPerWarp; ++i) {
      const int r = r_begin + i;
      if (i >= rows_per_warp || r >= nrows) continue;  // uniform across the warp
      const float m_old = m_s[r];
      const int key = c0 + lane, lo = p.window > 0 ? ctx_s[r] - p.window : 0;
      float score = key < ctx_s[r] && key >= lo ? s[i] : -INFINITY;
      if (p.softcap > 0.0f && key < ctx_s[r] && key >= lo) score = p.softcap * tanhf(score / p.softcap);
      // A row whose window starts past this chunk has seen no key yet: m_new stays -inf, its weights 0.
      const float m_new = fmaxf(m_old, WarpMax(score));
      const float prob = m_new == -INFINITY ? 0.0f : expf(score - m_new);
      const float sum = WarpSum(prob);
      p_s[r * kKeys + lane] = prob;
      if (lane == 0) {
        const float alpha = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
        alpha_s[r] = alpha;
        l_s[r] = l_s[r] * alpha + sum;
        m_s[r] = m_new;
      }
    }
    __syncthreads();

    for (int i = tid; i < nrows * D; i += kThreads) {
      const int r = i / D, d = i % D;
      const float* pr = p_s + r * kKeys;
      float acc = o_s[i] * alpha_s[r];
      for (int c = 0; c < nkeys; ++c) acc += pr[c] * v_s[c * D + d];
      o_s[i] = acc;
    }
  }
  __syncthreads();
  for (int i = tid; i < nrows * D; i += kThreads) {
    const int r = i / D, d = i % D;
    const int flat = row0 + r;
    const int64_t row = seq.q_offset + flat / group;
    const int head = kv_head * group + flat % group;
    p.out[row * q_stride + static_cast<int64_t>(head) * D + d] = o_s[i] / l_s[r];
  }
}

// Raising a kernel's dynamic shared-memory limit is per device; remember what
// each device has been given so the attribute call happens once.
std::atomic<size_t> g_shared_limit[kMaxDevices][2];

template <typename T>
cudaError_t EnsureSharedLimit(size_t bytes, int slot) {
  if (bytes <= kDefaultSharedLimit) return cudaSuccess;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  std::atomic<size_t>& limit = g_shared_limit[device][slot];
  if (limit.load(std::memory_order_acquire) >= bytes) return cudaSuccess;
  cudaError_t e = cudaFuncSetAttribute(PagedAttentionKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes));
  if (e == cudaSuccess) {
    size_t seen = limit.load(std::memory_order_acquire);
    while (seen < bytes && !limit.compare_exchange_weak(seen, bytes, std::memory_order_acq_rel)) {
    }
  }
  return e;
}

}  // namespace

AttentionTiling ChooseAttentionTiling(int32_t head_dim, size_t max_shared_bytes) {
  for (int32_t rows = kMaxRowsPerTile; rows >= kWarps; rows /= 2) {
    const size_t bytes = SharedFloats(rows, head_dim) * sizeof(float);
    if (bytes <= max_shared_bytes) return {rows, bytes};
  }
  return {};
}

cudaError_t LaunchPagedAttention(const AttentionLaunch& p, cudaStream_t stream) {
  if (p.total_tiles <= 0 || p.num_seqs <= 0) return cudaSuccess;
  const int32_t rows = p.tiling.rows_per_tile;
  if (rows < kWarps || rows > kMaxRowsPerTile || rows % kWarps != 0) return cudaErrorInvalidValue;
  const size_t bytes = p.tiling.shared_bytes;
  const unsigned blocks = static_cast<unsigned>(p.total_tiles);
  if (p.kv.bf16) {
    if (cudaError_t e = EnsureSharedLimit<uint16_t>(bytes, 1); e != cudaSuccess) return e;
    return Launch(PagedAttentionKernel<uint16_t>, blocks, kThreads, bytes, stream, p);
  }
  if (cudaError_t e = EnsureSharedLimit<float>(bytes, 0); e != cudaSuccess) return e;
  return Launch(PagedAttentionKernel<float>, blocks, kThreads, bytes, stream, p);
}

}  // namespace orca::kernels::cuda
