#pragma once
/// Element types of tensors and their conversions (f32, f16, bf16), and the
/// block-quantized weight types of GGUF files (ggml's Q8_0, Q4_0, Q4_1, Q5_0,
/// Q5_1 and the K-quants Q4_K, Q5_K, Q6_K). A quantized type stores a row as a
/// sequence of fixed-size blocks (32 or 256 values each, with their own scales):
/// use DTypeRowBytes for its sizes; DTypeSize is for the element types only.
/// Block layouts and decoders: core/formats/ggml_quants.h.

#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__CUDACC__)
#define ORCA_HOST_DEVICE __host__ __device__
#else
#define ORCA_HOST_DEVICE
#endif

namespace orca {

enum class DType : uint8_t {
  kF32 = 0,
  kF16 = 1,
  kBF16 = 2,
  // Block-quantized weight types (never activations or KV).
  kQ8_0 = 3,
  kQ4_0 = 4,
  kQ4_1 = 5,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ4_K = 8,
  kQ5_K = 9,
  kQ6_K = 10,
};

constexpr bool IsQuantized(DType t) { return static_cast<uint8_t>(t) >= static_cast<uint8_t>(DType::kQ8_0); }

/// Values per block: 1 for the element types, 32 or 256 for the quantized ones.
constexpr int64_t DTypeBlockElems(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return 1;
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
      return 32;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return 256;
  }
  return 1;
}

/// Bytes per block (per element for the element types).
constexpr size_t DTypeBlockBytes(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kQ8_0:
      return 34;
    case DType::kQ4_0:
      return 18;
    case DType::kQ4_1:
      return 20;
    case DType::kQ5_0:
      return 22;
    case DType::kQ5_1:
      return 24;
    case DType::kQ4_K:
      return 144;
    case DType::kQ5_K:
      return 176;
    case DType::kQ6_K:
      return 210;
  }
  return 0;
}

/// Bytes per element of an element type (f32, f16, bf16). Not meaningful for
/// quantized types: 0 there, so that a stride computed with it is visibly wrong.
constexpr size_t DTypeSize(DType t) { return IsQuantized(t) ? 0 : DTypeBlockBytes(t); }

/// Bytes of `n` consecutive values of a row; for quantized types `n` must be a
/// multiple of DTypeBlockElems (callers check it where it comes from input).
constexpr size_t DTypeRowBytes(DType t, int64_t n) {
  return static_cast<size_t>(n / DTypeBlockElems(t)) * DTypeBlockBytes(t);
}

/// "f32", "bf16", "q4_K", ... (quantized types as ggml names them, lower-case prefix).
const char* DTypeName(DType t);
/// Parses "f32"/"float32", "f16"/"float16", "bf16"/"bfloat16". Returns false
/// otherwise (quantized types: ParseWeightDType).
bool ParseDType(std::string_view name, DType* out);
/// ParseDType plus the quantized types, case-insensitive: "q8_0", "q4_k", "Q6_K", ...
bool ParseWeightDType(std::string_view name, DType* out);

inline float Bf16ToF32(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Round-to-nearest-even, NaN preserved.
inline uint16_t F32ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

/// IEEE fp16 → f32, exact (subnormals, infinities and NaN included). Inline and
/// usable in CUDA device code (the quantized-block decoders call it).
ORCA_HOST_DEVICE inline float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: shift the mantissa up to an implicit leading one
    uint32_t e = 113;
    while ((mant & 0x400u) == 0) mant <<= 1, --e;
    bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t F32ToF16(float f);

/// Converts `n` elements of `src` (of an element type `from`: f32, f16, bf16)
/// to f32. Quantized rows: formats::DequantizeRow.
void ConvertToF32(const void* src, DType from, float* dst, size_t n);
/// Converts `n` f32 elements to the element type `to`.
void ConvertFromF32(const float* src, DType to, void* dst, size_t n);

}  // namespace orca
