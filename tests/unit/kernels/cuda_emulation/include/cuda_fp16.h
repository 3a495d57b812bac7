#pragma once
// Host emulation of the __half conversions the CUDA backend uses.

#include <cstdint>

#include "core/common/dtype.h"

struct __half {
  uint16_t bits;
};
inline __half __ushort_as_half(uint16_t v) { return {v}; }
inline uint16_t __half_as_ushort(__half h) { return h.bits; }
inline float __half2float(__half h) { return orca::F16ToF32(h.bits); }
inline __half __float2half_rn(float f) { return {orca::F32ToF16(f)}; }
