#pragma once
/// Element types of tensors and their conversions (f32, f16, bf16).

#include <cstdint>
#include <cstring>
#include <string_view>

namespace orca {

enum class DType : uint8_t { kF32 = 0, kF16 = 1, kBF16 = 2 };

/// Bytes per element.
constexpr size_t DTypeSize(DType t) { return t == DType::kF32 ? 4 : 2; }
const char* DTypeName(DType t);
/// Parses "f32"/"float32", "f16"/"float16", "bf16"/"bfloat16". Returns false otherwise.
bool ParseDType(std::string_view name, DType* out);

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

float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);

/// Converts `n` elements of `src` (of type `from`) to f32.
void ConvertToF32(const void* src, DType from, float* dst, size_t n);
/// Converts `n` f32 elements to `to`.
void ConvertFromF32(const float* src, DType to, void* dst, size_t n);

}  // namespace orca
