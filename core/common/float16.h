#pragma once
/// Scalar conversions between f32 and the 16-bit float formats (IEEE fp16 and
/// bfloat16). The decoders of quantized blocks (ggml_blocks.h) read their fp16
/// scales with F16ToF32, in host and in CUDA device code (ORCA_HOST_DEVICE).

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ORCA_HOST_DEVICE __host__ __device__
#else
#define ORCA_HOST_DEVICE
#endif

namespace orca {

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

/// f32 → IEEE fp16, round to nearest even; overflow gives infinity, NaN stays NaN.
uint16_t F32ToF16(float f);

}  // namespace orca
