#pragma once
/// Builds the quant-panel layout (quant_layout.h) from GGUF blocks, and reads
/// it back. Portable C++: runs at load time on any CPU.

#include <cstdint>

#include "kernels/include/backend.h"

namespace orca::kernels::quant {

/// Packs panels [panel_begin, panel_end) of a quantized [n, k] weight (row
/// stride w.ld values, not transposed) into `out`, which holds the whole
/// packed weight (PackedBytes(w.dtype, w.n, w.k) bytes). Columns past n are
/// zero (they contribute nothing). Panels are independent: threads may pack
/// disjoint ranges.
void PackPanels(const WeightView& w, int64_t panel_begin, int64_t panel_end, uint8_t* out);

/// Row `row` (an output column) of a packed weight as f32 values, equal bit for
/// bit to DequantizeRow (core/common/dtype.h) of the GGUF row it was packed from.
void DequantizePackedRow(DType t, const uint8_t* packed, int64_t k, int64_t row, float* out);

}  // namespace orca::kernels::quant
