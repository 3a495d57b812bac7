#pragma once
/// Quantizers for the GGUF block types of ggml_blocks.h: f32 values in, one
/// block out, written from the formats' definitions (not a port of ggml's
/// search). A type's row quantizer (EncodeRow<Block>) is the `from_f32` entry
/// of its row in the traits table (core/common/dtype.h); use QuantizeRow there.
///
/// Per type, with `step` the block's (or sub-block's) effective quantization
/// step after its scales are rounded to their stored precision:
///   Q8_0, Q4_0, Q5_0: d = (signed value of largest magnitude) / (-2^(bits-1)),
///     so that value is exact; the opposite extreme may clip by one step.
///     (Q8_0: d = max|x| / 127, levels -127..127.)
///   Q4_1, Q5_1: d = (max - min) / (2^bits - 1), m = min.
///   Q4_K, Q5_K: per 32-value sub-block a scale s and min m (x ≈ s·q - m, m ≥ 0)
///     from the min/max fit refined by least squares on the assigned levels;
///     then s and m are rounded to 6 bits of the super-block's d and dmin.
///   Q6_K: per 16-value sub-block a symmetric scale (as Q4_0 with 6 bits),
///     rounded to int8 of the super-block's d.
/// Values are then rounded to the nearest level of the stored scales, so the
/// error of an element inside its block's range is at most step / 2.
/// Inputs must be finite.

#include <cstdint>

#include "core/common/ggml_blocks.h"

namespace orca::ggml {

/// Encodes Block::kElems values of `x` into one block.
void QuantizeBlock(const float* x, BlockQ8_0* b);
void QuantizeBlock(const float* x, BlockQ4_0* b);
void QuantizeBlock(const float* x, BlockQ4_1* b);
void QuantizeBlock(const float* x, BlockQ5_0* b);
void QuantizeBlock(const float* x, BlockQ5_1* b);
void QuantizeBlock(const float* x, BlockQ4_K* b);
void QuantizeBlock(const float* x, BlockQ5_K* b);
void QuantizeBlock(const float* x, BlockQ6_K* b);

/// Encodes `n` values (n / Block::kElems whole blocks) of a row: a table row's quantizer.
template <typename Block>
void EncodeRow(const float* src, void* dst, int64_t n) {
  Block* b = static_cast<Block*>(dst);
  for (int64_t i = 0; i < n / Block::kElems; ++i) QuantizeBlock(src + i * Block::kElems, b + i);
}

}  // namespace orca::ggml
