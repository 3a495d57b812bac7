#pragma once
/// Attention over a bf16 KV cache on AVX512-BF16's dot product (vdpbf16ps).
/// Callers check GetCpuFeatures().avx512_bf16 and AttentionShapeSupported first.
///
/// The f32 kernels (avx512_kernels.h) widen every K and V element to f32 and
/// spend one FMA per product; here each vdpbf16ps takes two products per lane
/// straight from the cache's bf16 values, so the arithmetic of a block is half
/// the instructions. The other factor is rounded to bf16 as well (round to
/// nearest even): the query once per row, the unnormalized probabilities
/// exp(s − max) once per block. That is the precision of the bf16 GEMMs
/// (bf16_dot_gemm.h), of bf16 flash attention on GPUs, and close to llama.cpp's
/// (f16 queries and probabilities against an f16 cache); sums stay in f32, and
/// the softmax (max, exponentials, their sum) stays in f32 on unrounded scores.
///
/// A row's result depends only on its own query and context: the same
/// instructions in the same order whether it is a prompt row, a decode row
/// alone, or a row in a batch.

#include <cstdint>

namespace orca::kernels::bf16dot {

/// 16-token blocks and head_dim a multiple of 16 up to 128.
inline bool AttentionShapeSupported(int32_t head_dim, int32_t block_size) {
  return block_size == 16 && head_dim % 16 == 0 && head_dim > 0 && head_dim <= 128;
}

/// One KV head's blocks of one sequence in a bf16 pool: block b of the context is
/// pool + table[b] · block_stride + head_offset, 16 tokens of head_dim values (K as
/// [head_dim][16], V as [16][head_dim]).
struct HeadBlocks {
  const uint16_t* pool = nullptr;
  const int32_t* table = nullptr;
  int64_t block_stride = 0;  ///< elements from one block of the pool to the next
  int64_t head_offset = 0;   ///< elements from a block's start to this head's values
  const uint16_t* Block(int32_t b) const { return pool + table[b] * block_stride + head_offset; }
};

/// scores[g · ld_scores + j] = scale · Σ_d qb[g · head_dim + d] · K[j][d] for the `ctx` keys
/// j < ctx and g < group: qb the group's query heads as one row rounded by bf16dot::ConvertRows (bf16_dot_gemm.h). Each
/// pair of K rows is interleaved once and serves every head; entries past ctx up to the next multiple of 16 are written
/// too (scores needs room for them). Blocks before `first_block` (a sliding window's unseen keys) are neither read nor
/// written.
void GroupScores(const uint16_t* qb, int32_t group, const HeadBlocks& k, int32_t head_dim, int32_t ctx, float scale,
                 float* scores, int64_t ld_scores, int32_t first_block = 0);

/// out[g · head_dim + d] = Σ_{j < ctx} bf16(p[g · ld_p + j]) · V[j][d] (p past ctx is not read,
/// nor are rows of V past ctx): the accumulators stay in registers across the blocks. Blocks before `first_block`
/// (their weights 0: out of a sliding window) are skipped, neither their p nor their V rows read.
void GroupAccumulate(const float* p, int64_t ld_p, int32_t group, const HeadBlocks& v, int32_t head_dim, int32_t ctx,
                     float* out, int32_t first_block = 0);

}  // namespace orca::kernels::bf16dot
