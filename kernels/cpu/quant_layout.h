#pragma once
/// The CPU backend's packed layout of quantized weights ("quant panels"),
/// built once at load from GGUF blocks (quant_pack.h) in place of the mapped
/// copy, and read by the int8 GEMM kernels (quant_gemm.h).
///
/// A [n, k] weight (n output columns, k inputs) becomes ceil(n / 16) panels of
/// 16 output columns; a panel is k / S consecutive units of S values of k
/// (S = 32 for Q8_0/Q4_x/Q5_x, 256 for the K-quants), each unit holding the
/// same information as the 16 GGUF blocks it came from, regrouped so that one
/// 64-byte vector holds 4 consecutive k values of each of the 16 columns — the
/// operand shape of an int8 dot-product instruction (u8 × s8 → s32 over 4).
/// Bytes per weight are those of the GGUF type (K-quants: +1/8 bit, the scales
/// of a unit are stored per column, not packed 6-bit).
///
/// Every value is stored unsigned ("u"); its weight is
///   offset types (Q8_0 o=128, Q4_0 o=8, Q5_0 o=16): a_c · (u - o)
///   min types (Q4_1, Q5_1, Q4_K, Q5_K):           a_c · u + b_c
///   Q6_K (o=32, a per 16 values):                  a_c · (u - 32)
/// with a_c, b_c per column and 32-value group g (per 16 for Q6_K) computed
/// from the stored fp16/6-bit scales exactly as the GGUF decoders do.
///
/// Units ("col" = 16 columns, fp16 little-endian, "g" = 32-value group):
///   Q8_0  [u8 vals 512][d fp16 ×16]
///   Q4_0  [nibbles 256][d ×16]
///   Q4_1  [nibbles 256][d ×16][m ×16]
///   Q5_0  [nibbles 256][high bits 64][d ×16]
///   Q5_1  [nibbles 256][high bits 64][d ×16][m ×16]
///   Q4_K  [d ×16][dmin ×16][sc u8 8×16][m u8 8×16][8 g × nibbles 256]
///   Q5_K  [d ×16][dmin ×16][sc 8×16][m 8×16][8 g × nibbles 256][8 g × high bits 64]
///   Q6_K  [d ×16][scales i8 16×16][8 g × nibbles 256][8 g × 2-bit planes 128]
/// Within a group, vector v (0..7) holds k = 4v..4v+3 of the group for the
/// 16 columns: byte 4c + b = column c, k = 4v + b.
///   u8 vals: vector v at byte 64v.
///   nibbles: 4 vectors; byte 64j + 4c + b holds k = 4j + b (v = j) in its low
///     nibble and k = 16 + 4j + b (v = 4 + j) in its high nibble.
///   high bits (5-bit types): byte 4c + b bit j = bit 4 of k = 4j + b (v = j),
///     bit 4 + j = bit 4 of k = 16 + 4j + b (v = 4 + j).
///   2-bit planes (Q6_K): byte 64h + 4c + b, bits 2s..2s+1 = bits 4-5 of
///     vector v = 4h + s, i.e. k = 4v + b.

#include <cstddef>
#include <cstdint>

#include "core/common/dtype.h"

namespace orca::kernels::quant {

inline constexpr int kPanelCols = 16;
inline constexpr int kGroup = 32;  ///< k values per group (one int accumulation)

/// How a group's integer dot product becomes a float (see the header comment).
enum class Affine : uint8_t { kOffset, kMin, kHalves };

/// The CPU backend's row for a quantized type: one for each type whose row in
/// the traits table (core/common/dtype.h) says CpuGemm::kInt8. A unit holds
/// UnitValues(t) = DTypeBlockElems(t) values of k for the 16 columns.
struct PanelType {
  DType type;
  size_t unit_bytes;  ///< bytes of one unit (the layouts above)
  Affine affine;
  int offset_shift;  ///< log2 of the offset o of offset types (and Q6_K's 32); 0 for min types
  /// AvxDirectMaxRows (quant_gemm.h): the most activation rows for which the
  /// AVX-512 GEMM decodes the units in registers (measured per type, see there).
  int64_t avx_direct_max_rows;
};

// clang-format off
inline constexpr PanelType kPanelTypes[] = {
  //             unit bytes                  affine           shift  AVX-512 direct rows
  {DType::kQ8_0, 512 + 32,                   Affine::kOffset, 7,     16},
  {DType::kQ4_0, 256 + 32,                   Affine::kOffset, 3,     24},
  {DType::kQ4_1, 256 + 64,                   Affine::kMin,    0,     32},
  {DType::kQ5_0, 256 + 64 + 32,              Affine::kOffset, 4,     16},
  {DType::kQ5_1, 256 + 64 + 64,              Affine::kMin,    0,     32},
  {DType::kQ4_K, 64 + 256 + 8 * 256,         Affine::kMin,    0,     24},
  {DType::kQ5_K, 64 + 256 + 8 * (256 + 64),  Affine::kMin,    0,     32},
  {DType::kQ6_K, 32 + 256 + 8 * (256 + 128), Affine::kHalves, 5,     12},
};
// clang-format on

/// The panel row of `t`; nullptr for a type without one.
constexpr const PanelType* FindPanelType(DType t) {
  for (const PanelType& p : kPanelTypes)
    if (p.type == t) return &p;
  return nullptr;
}

/// Whether a traits row says the CPU backend packs and computes its type on quant panels.
constexpr bool IsPanelRow(const DTypeTraits& row) { return row.cpu_gemm == CpuGemm::kInt8; }
constexpr bool IsPackable(DType t) { return IsPanelRow(TraitsOf(t)); }

namespace internal {
constexpr bool EveryInt8TypeHasAPanelRow() {
  for (const DTypeTraits& row : kDTypeTraits)
    if (IsPanelRow(row) != (FindPanelType(row.type) != nullptr)) return false;
  return true;
}
}  // namespace internal
static_assert(internal::EveryInt8TypeHasAPanelRow(),
              "a type with CpuGemm::kInt8 in the traits table needs its row in kPanelTypes, and only those");

/// Calls f(std::integral_constant<DType, T>{}) with `t` as a compile-time T when it
/// is a panel type; false otherwise (f is instantiated for the panel types only).
template <class F>
bool VisitPanelType(DType t, F&& f) {
  return VisitDType<&IsPanelRow>(t, f);
}

/// k values per unit.
constexpr int64_t UnitValues(DType t) { return DTypeBlockElems(t); }

/// Bytes of one unit (16 columns × UnitValues(t) values); 0 for a type without a panel row.
constexpr size_t UnitBytes(DType t) { return FindPanelType(t) != nullptr ? FindPanelType(t)->unit_bytes : 0; }

constexpr Affine AffineOf(DType t) { return FindPanelType(t) != nullptr ? FindPanelType(t)->affine : Affine::kOffset; }

/// log2 of the offset o of offset types (and Q6_K's 32).
constexpr int OffsetShift(DType t) { return FindPanelType(t) != nullptr ? FindPanelType(t)->offset_shift : 0; }

/// Bytes of one panel (16 columns × k) and of a whole packed [n, k] weight.
constexpr size_t PanelBytes(DType t, int64_t k) { return static_cast<size_t>(k / UnitValues(t)) * UnitBytes(t); }
constexpr int64_t NumPanels(int64_t n) { return (n + kPanelCols - 1) / kPanelCols; }
constexpr size_t PackedBytes(DType t, int64_t n, int64_t k) { return NumPanels(n) * PanelBytes(t, k); }

}  // namespace orca::kernels::quant
