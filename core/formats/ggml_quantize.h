#pragma once
/// Quantizers for the GGUF block types of ggml_quants.h: f32 rows in, blocks
/// out, written from the formats' definitions (not a port of ggml's search).
///
/// Per type, with `step` the block's (or sub-block's) effective quantization
/// step after its scales are rounded to their stored precision:
///   Q8_0, Q4_0, Q5_0: d = (signed value of largest magnitude) / (-2^(bits-1)),
///     so that value is exact; the opposite extreme may clip by one step.
///   Q4_1, Q5_1: d = (max - min) / (2^bits - 1), m = min.
///   Q4_K, Q5_K: per 32-value sub-block a scale s and min m (x ≈ s·q - m, m ≥ 0)
///     from the min/max fit refined by least squares on the assigned levels;
///     then s and m are rounded to 6 bits of the super-block's d and dmin.
///   Q6_K: per 16-value sub-block a symmetric scale (as Q4_0 with 6 bits),
///     rounded to int8 of the super-block's d.
/// Values are then rounded to the nearest level of the stored scales, so the
/// error of an element inside its block's range is at most step / 2.

#include <cstdint>

#include "core/common/dtype.h"

namespace orca::formats {

/// Encodes `n` values of `src` as type `t` into `dst` (DTypeRowBytes(t, n)
/// bytes). For quantized types n must be a multiple of DTypeBlockElems(t);
/// element types are converted (ConvertFromF32). Inputs must be finite.
void QuantizeRow(DType t, const float* src, void* dst, int64_t n);

}  // namespace orca::formats
