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

/// k values per unit.
constexpr int64_t UnitValues(DType t) { return DTypeBlockElems(t); }

/// Bytes of one unit (16 columns × UnitValues(t) values).
constexpr size_t UnitBytes(DType t) {
  switch (t) {
    case DType::kQ8_0:
      return 512 + 32;
    case DType::kQ4_0:
      return 256 + 32;
    case DType::kQ4_1:
      return 256 + 64;
    case DType::kQ5_0:
      return 256 + 64 + 32;
    case DType::kQ5_1:
      return 256 + 64 + 64;
    case DType::kQ4_K:
      return 64 + 256 + 8 * 256;
    case DType::kQ5_K:
      return 64 + 256 + 8 * (256 + 64);
    case DType::kQ6_K:
      return 32 + 256 + 8 * (256 + 128);
    default:
      return 0;
  }
}

/// How a group's integer dot product becomes a float (see the header comment).
enum class Affine : uint8_t { kOffset, kMin, kHalves };

constexpr Affine AffineOf(DType t) {
  switch (t) {
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
      return Affine::kMin;
    case DType::kQ6_K:
      return Affine::kHalves;
    default:
      return Affine::kOffset;
  }
}

/// log2 of the offset o of offset types (and Q6_K's 32).
constexpr int OffsetShift(DType t) {
  switch (t) {
    case DType::kQ8_0:
      return 7;
    case DType::kQ4_0:
      return 3;
    case DType::kQ5_0:
      return 4;
    case DType::kQ6_K:
      return 5;
    default:
      return 0;
  }
}

constexpr bool IsPackable(DType t) { return IsQuantized(t); }

/// Bytes of one panel (16 columns × k) and of a whole packed [n, k] weight.
constexpr size_t PanelBytes(DType t, int64_t k) { return static_cast<size_t>(k / UnitValues(t)) * UnitBytes(t); }
constexpr int64_t NumPanels(int64_t n) { return (n + kPanelCols - 1) / kPanelCols; }
constexpr size_t PackedBytes(DType t, int64_t n, int64_t k) { return NumPanels(n) * PanelBytes(t, k); }

}  // namespace orca::kernels::quant
