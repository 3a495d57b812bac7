#pragma once
/// GEMMs of f32 activations against quant panels (quant_layout.h): the
/// activations are quantized once per call to int8 per 32-value group
/// (QuantizeRows), then each group of a panel is an integer dot product
/// (u8 weight values × s8 activations, 4 at a time: VNNI's vpdpbusd where the
/// CPU has it) scaled into f32 by the weight's and the activation's scales.
/// Each 16-column panel's k range is unpacked chunk by chunk into an L1-sized
/// scratch of plain u8 values and f32 scales, which every row block of the
/// activations then reuses (prefill: hundreds of rows, at the int8 peak);
/// on AVX-512, decode and small batches (AvxDirectMaxRows) instead decode
/// each panel in registers, streaming the weights at memory bandwidth. Large
/// calls (thousands of rows: a long prompt, or Algorithm 1's batched prompts)
/// are cut into blocks of rows and of k whose activations stay in L2 while
/// the panels stream past.
///
/// Three implementations with identical results up to float summation
/// order: AVX512-VNNI (512-bit), AVX-VNNI (256-bit) and portable C++.
/// Pick one with BestIsa(); every one the CPU can run is tested.

#include <cstdint>
#include <vector>

#include "core/common/dtype.h"
#include "kernels/cpu/quant_layout.h"

namespace orca::kernels::quant {

inline constexpr int kBlockRows = 8;  ///< rows per RowBlockGroup

/// Everything the AVX-512 prefill kernel reads for one group of kBlockRows
/// consecutive rows, at fixed offsets from one pointer (so a row block needs
/// one address register, not three per row). A copy of the row-major fields
/// below; the offset corrections are pre-multiplied by each weight type's
/// offset (2^3, 2^4, 2^7; Q6_K: 2^5 per half), so they load instead of shift.
struct alignas(64) RowBlockGroup {
  int8_t q[kBlockRows][32];
  float d[kBlockRows];
  float ds[kBlockRows];
  int32_t n_shl3[kBlockRows], n_shl4[kBlockRows], n_shl7[kBlockRows];
  int32_t h0_shl5[kBlockRows], h1_shl5[kBlockRows];
};
static_assert(sizeof(RowBlockGroup) == 512);

/// Activations quantized per 32-value group: q = round(x / d), d = max|x| / 127.
struct QuantizedRows {
  int64_t m = 0;
  int64_t k = 0;
  int64_t groups = 0;       ///< k / 32 (k must be a multiple of 32)
  std::vector<int8_t> q;    ///< [m][k]
  std::vector<float> d;     ///< [m][groups]
  std::vector<float> ds;    ///< [m][groups]: d · Σq
  std::vector<int32_t> ns;  ///< [m][groups][3]: -Σq over the group, its first 16, its last 16
  /// [ceil(m / 8)][groups], filled only when m ≥ kBlockMinRows (the only calls
  /// whose GEMM may run the prefill kernels); empty otherwise.
  std::vector<RowBlockGroup> blocks;
};

/// Most rows for which the AVX-512 GEMM of a `type` weight runs its decode
/// kernels, decoding each unit in registers for up to 8 rows at a time instead
/// of unpacking chunks into scratch: the unpacking (nibbles, high bits, scales;
/// Q8_0 a copy) costs more than decoding the panel again for every 8 rows, up
/// to a row count that depends on how much work decoding a unit is. Measured
/// with both paths forced at every row count, alternating, in gemm_bench's 1.1B
/// model pass on an EPYC (bench/results/2026-11-24_issue12-quantized-gguf.md "Sixteenth session: the direct-path
/// limit per type"), the decode kernels stay ahead (GOP/s, two rounds) up to:
/// Q4_0 24 rows (888/878 vs 773/748), Q4_K 24 (845/868 vs 624/540), Q4_1 and
/// Q5_1 32 (723/907 vs 690/703; 836/672 vs 611/625), Q5_K 32 (768/535 vs
/// 622/504), Q5_0 and Q8_0 16, and Q6_K, the costliest unit to decode, 12
/// (ahead at 4-8 rows in three rounds of four, 1.2-1.9x at 4; a tie at 12 over
/// four rounds; at 16 the chunked one is 1.1x ahead on average, up to 1.8x).
/// In the engine (TinyLlama Q4_K_M, engine_bench, four alternating rounds),
/// decode at 20-24 sequences ran 1.1-1.2x faster than with one limit of 16.
/// (The limits live in each type's panel row, kPanelTypes in quant_layout.h.)
constexpr int64_t AvxDirectMaxRows(DType type) {
  const PanelType* p = FindPanelType(type);
  return p != nullptr ? p->avx_direct_max_rows : 16;
}

/// AvxDirectMaxRows for a CPU of this vendor and display family: the same
/// limits, but for Q4_K on Zen 4 (AMD family 0x19), whose decode kernels stay
/// ahead of the chunked ones to 48 rows. Forced both ways and paired in one
/// process (gemm_bench --compare-direct-max-rows 0,100000; bench/results/2026-11-24_issue12-quantized-gguf.md
/// "Twenty-seventh session"), the decode kernels ran 1.02-1.19x faster at 28-48
/// rows on every TinyLlama and Llama-3.1-8B layer shape, and 0.90-1.13x at 64;
/// Q4_0, Q5_K and Q8_0 were even there (0.85-1.17x by shape), Q6_K even at 16
/// rows (0.96-1.15x) and behind from 24 (0.73-1.09x, most shapes below 1). Only
/// raises a limit, so kBlockMinRows holds for every CPU.
constexpr int64_t AvxDirectMaxRowsFor(DType type, bool amd, int family) {
  if (amd && family == 0x19 && type == DType::kQ4_K) return 48;
  return AvxDirectMaxRows(type);
}

/// Fewest rows for which QuantizeRows also fills `blocks`: the AVX-512 GEMM
/// may run its prefill (row-block) kernel from here on (for the type with the
/// lowest limit), and no other path reads them.
inline constexpr int64_t kBlockMinRows = 1 + [] {
  int64_t least = kPanelTypes[0].avx_direct_max_rows;
  for (const PanelType& p : kPanelTypes) least = p.avx_direct_max_rows < least ? p.avx_direct_max_rows : least;
  return least;
}();

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

/// How far ahead of the group they are reading the AVX-512 decode kernels
/// (GemmAvx512VnniDecode) request the panel's lines into L1 and into L2, in
/// bytes (0: no such request). Only the timing depends on it. Measured, not derived
/// (these VMs expose no counters to say why), paired in one process:
/// - L1 4 KiB ahead, spread over the unit's groups: sending a whole unit's lines
///   at its start instead filled the miss buffers (Zen 4 EPYC: Q6_K 1.5-1.7x,
///   Q5_K 1.3-1.8x faster spread; bench/results/2026-11-24_issue12-quantized-gguf.md "Decode prefetch spread over
///   the unit"). The hardware prefetcher alone was 0.71-1.26x.
/// - L2 16 KiB ahead as well: on a Zen 4 EPYC the one-group types (Q8_0, Q4_x,
///   Q5_x) 1.00-1.08x at one row and 1.06-1.32x at two to four, the K-quants
///   0.95-1.10x; on an AMX Xeon the K-quants 1.28-1.33x at one row and
///   1.03-1.07x at four ("Thirteenth session", "Fourteenth session").
/// - Zen 5 (family 0x1A) at one and two rows: L1 8 KiB ahead and no L2
///   request streamed Q4_K and Q6_K 1.15-1.20x and Q8_0 1.03-1.07x faster
///   when the host gave ~80 GB/s, 1.03-1.04x (Q8_0 0.98x at two rows) at
///   ~45 GB/s. At three rows it was 1.04-1.06x at ~80 GB/s but 0.92x in a
///   slower stretch, at four and eight 0.96-1.08x, so there the two requests
///   stay ("Twentieth session").
struct DecodePrefetch {
  int64_t l1_bytes = 4096;
  int64_t l2_bytes = 16384;
};

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
  DecodePrefetch prefetch;  ///< the AVX-512 decode kernels' software prefetch
  /// Most rows the AVX-512 GEMM runs on its decode kernels; 0: AvxDirectMaxRows(dtype)
  /// (the backend passes AvxDirectMaxRowsFor its CPU).
  /// Values below kBlockMinRows - 1 count as kBlockMinRows - 1 (fewer rows have no
  /// row-block records for the chunked kernels). Only the speed depends on it.
  int64_t direct_max_rows = 0;
};

/// Which calls get which DecodePrefetch: the measured choice for `rows`
/// activation rows of a `type` weight on a CPU of this vendor and display family.
/// On Zen 4 (AMD family 0x19) one-row Q8_0 runs without software prefetch:
/// paired in one process (gemm_bench --compare-decode-prefetch
/// 4096:16384,0:0,8192:0 --rows 1,2; bench/results/2026-11-24_issue12-quantized-gguf.md "Twenty-seventh session")
/// it streamed TinyLlama's layers 1.04-1.21x faster with none (k/v 0.97x),
/// while at two rows, and for Q4_K, Q4_0, Q5_K and Q6_K at one, dropping the
/// requests cost up to 2-3x (0.32-0.98x, two Q4_K/Q4_0 shapes 1.06-1.14x).
constexpr DecodePrefetch DecodePrefetchFor(int64_t rows, DType type, bool amd, int family) {
  if (amd && family >= 0x1A && rows <= 2) return {8192, 0};                       // Zen 5
  if (amd && family == 0x19 && rows == 1 && type == DType::kQ8_0) return {0, 0};  // Zen 4
  return {};
}

/// y[:, panels] (+)= x · Wᵀ (+ bias) for all x->m rows.
void Gemm(Isa isa, const GemmArgs& args);

// Per-ISA entry points (Gemm dispatches).
void GemmGeneric(const GemmArgs& args);
void GemmAvxVnni(const GemmArgs& args);
void GemmAvx512Vnni(const GemmArgs& args);
/// The AVX-512 decode kernels: GemmAvx512Vnni's path for m ≤ AvxDirectMaxRows(dtype), in an object file of their own.
void GemmAvx512VnniDecode(const GemmArgs& args);
void QuantizeRowsGeneric(const float* x, int64_t row_begin, int64_t row_end, QuantizedRows* out);
void QuantizeRowsAvx512(const float* x, int64_t row_begin, int64_t row_end, QuantizedRows* out);
/// Copies row `row` of out's row-major fields into out->blocks (no-op when empty).
void FillRowBlocks(int64_t row, QuantizedRows* out);

}  // namespace orca::kernels::quant
