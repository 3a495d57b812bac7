#pragma once
/// GEMMs of f32 activations against quant panels (quant_layout.h): the
/// activations are quantized once per call to int8 per 32-value group
/// (QuantizeRows), then each group of a panel is an integer dot product
/// (u8 weight values × s8 activations, 4 at a time: VNNI's vpdpbusd where the
/// CPU has it) scaled into f32 by the weight's and the activation's scales.
/// Each 16-column panel's k range is unpacked chunk by chunk into an L1-sized
/// scratch of plain u8 values and f32 scales, which every row block of the
/// activations then reuses: decode (1-8 rows) streams the panels once at
/// memory bandwidth, prefill (hundreds of rows) runs at the int8 peak.
///
/// Three implementations with identical results up to float summation
/// order: AVX512-VNNI (512-bit), AVX-VNNI (256-bit) and portable C++.
/// Pick one with BestIsa(); every one the CPU can run is tested.

#include <cstdint>
#include <vector>

#include "core/common/dtype.h"

namespace orca::kernels::quant {

/// Activations quantized per 32-value group: q = round(x / d), d = max|x| / 127.
struct QuantizedRows {
  int64_t m = 0;
  int64_t k = 0;
  int64_t groups = 0;       ///< k / 32 (k must be a multiple of 32)
  std::vector<int8_t> q;    ///< [m][k]
  std::vector<float> d;     ///< [m][groups]
  std::vector<float> ds;    ///< [m][groups]: d · Σq
  std::vector<int32_t> ns;  ///< [m][groups][3]: -Σq over the group, its first 16, its last 16
};

enum class Isa : uint8_t { kGeneric, kAvxVnni, kAvx512Vnni };

/// Quantizes rows [row_begin, row_end) of x [m, k] (row stride k) into `out`,
/// which must have been sized with PrepareRows(m, k, out). Every ISA gives the
/// same bytes (round to nearest even, like std::nearbyint); AVX-512 runs it
/// vectorized (kAvx512Vnni), the others portably.
void PrepareRows(int64_t m, int64_t k, QuantizedRows* out);
void QuantizeRows(Isa isa, const float* x, int64_t row_begin, int64_t row_end, QuantizedRows* out);
const char* IsaName(Isa isa);
/// The fastest implementation this CPU runs; `CanRun` for each.
Isa BestIsa();
bool CanRun(Isa isa);

struct GemmArgs {
  const QuantizedRows* x = nullptr;
  DType dtype = DType::kQ8_0;  ///< the packed weight's type
  const uint8_t* packed = nullptr;
  int64_t n = 0;  ///< output columns
  int64_t k = 0;
  const float* bias = nullptr;  ///< [n] or null
  float* y = nullptr;           ///< [m, ldy]
  int64_t ldy = 0;
  bool accumulate = false;
  int64_t panel_begin = 0;  ///< panels (16 columns each) this call computes
  int64_t panel_end = 0;
};

/// y[:, panels] (+)= x · Wᵀ (+ bias) for all x->m rows.
void Gemm(Isa isa, const GemmArgs& args);

// Per-ISA entry points (Gemm dispatches).
void GemmGeneric(const GemmArgs& args);
void GemmAvxVnni(const GemmArgs& args);
void GemmAvx512Vnni(const GemmArgs& args);
void QuantizeRowsGeneric(const float* x, int64_t row_begin, int64_t row_end, QuantizedRows* out);
void QuantizeRowsAvx512(const float* x, int64_t row_begin, int64_t row_end, QuantizedRows* out);

}  // namespace orca::kernels::quant
