#pragma once
/// Block layouts of ggml's quantized tensor types as GGUF stores them, with a
/// plain decoder for one block and for a row of blocks. Written from the
/// format's definition (the block structs of ggml and their meaning). The block
/// decoders are usable from host code and, through ORCA_HOST_DEVICE, from CUDA
/// device code (kernels/cuda/quant_kernels.cu): no library calls, no exceptions.
/// A block type's place in the traits table (its DType, name, GGUF id, scale
/// fields, kernels): core/common/dtype.h. Its quantizer: ggml_quantize.h.
///
/// Every type stores a row of a [n, k] matrix (k values) as k / kElems
/// consecutive blocks; fp16 fields are IEEE half precision, little-endian.
///
///   type   values/block  bytes  value of element i
///   Q8_0        32         34   d * qs[i]                        (qs int8)
///   Q4_0        32         18   d * (q_i - 8)                    (q_i 4 bits)
///   Q4_1        32         20   d * q_i + m
///   Q5_0        32         22   d * (q_i - 16)                   (q_i 5 bits)
///   Q5_1        32         24   d * q_i + m
///   Q4_K       256        144   d * sc_j * q_i - dmin * m_j      (8 sub-blocks of 32, 6-bit sc_j/m_j)
///   Q5_K       256        176   d * sc_j * q_i - dmin * m_j      (q_i 5 bits)
///   Q6_K       256        210   d * scales_j * (q_i - 32)        (16 sub-blocks of 16, int8 scales_j, q_i 6 bits)
///
/// 4-bit packing (Q4_0/Q4_1/Q5_0/Q5_1): byte qs[j] holds element j in its low
/// nibble and element j + 16 in its high nibble; the 5th bit of element i is
/// bit i of the 32-bit little-endian word qh.
/// K-quant 4-bit packing (Q4_K/Q5_K): the 256 values are four 64-value chunks;
/// chunk c uses qs[32c .. 32c+32): low nibbles are elements 64c + l, high
/// nibbles 64c + 32 + l. Q5_K's 5th bit of element 64c + l is bit 2c of qh[l],
/// of element 64c + 32 + l bit 2c + 1.
/// Q6_K: two 128-value halves h; within a half, for l < 32: element 128h + l
/// has low 4 bits ql[64h + l] & 15 and high 2 bits (qh[32h + l] >> 0) & 3;
/// 128h + 32 + l: ql[64h + 32 + l] & 15, (qh[32h + l] >> 2) & 3;
/// 128h + 64 + l: ql[64h + l] >> 4, (qh[32h + l] >> 4) & 3;
/// 128h + 96 + l: ql[64h + 32 + l] >> 4, (qh[32h + l] >> 6) & 3;
/// element i uses scales[i / 16].
/// K-quant 6-bit scales (Q4_K/Q5_K, 12 bytes, sub-block j of 8): for j < 4,
/// sc_j = scales[j] & 63 and m_j = scales[j + 4] & 63; for j >= 4, the low 4
/// bits come from scales[j + 4] (sc: low nibble, m: high nibble) and the top
/// 2 bits from the top bits of scales[j - 4] (sc) and scales[j] (m).

#include <cstdint>
#include <type_traits>

#include "core/common/float16.h"

namespace orca::ggml {

// Each block struct is exactly the bytes of one block; kElems is its number of values.
struct BlockQ8_0 {
  static constexpr int kElems = 32;
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ4_0 {
  static constexpr int kElems = 32;
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ4_1 {
  static constexpr int kElems = 32;
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  static constexpr int kElems = 32;
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  static constexpr int kElems = 32;
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ4_K {
  static constexpr int kElems = 256;
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5_K {
  static constexpr int kElems = 256;
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6_K {
  static constexpr int kElems = 256;
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};

// The sizes GGUF defines for each block (sizeof is what a row's bytes are computed from).
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);

/// Sub-block j (0..7) scale and min of a Q4_K/Q5_K block's 12 scale bytes.
ORCA_HOST_DEVICE inline void KQuantScaleMin(const uint8_t* s, int j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

ORCA_HOST_DEVICE inline void DecodeBlock(const BlockQ8_0& b, float* out) {
  const float d = F16ToF32(b.d);
  for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(b.qs[i]);
}

ORCA_HOST_DEVICE inline void DecodeBlock(const BlockQ4_0& b, float* out) {
  const float d = F16ToF32(b.d);
  for (int j = 0; j < 16; ++j) {
    out[j] = d * static_cast<float>((b.qs[j] & 0x0f) - 8);
    out[j + 16] = d * static_cast<float>((b.qs[j] >> 4) - 8);
  }
}

ORCA_HOST_DEVICE inline void DecodeBlock(const BlockQ4_1& b, float* out) {
  const float d = F16ToF32(b.d), m = F16ToF32(b.m);
  for (int j = 0; j < 16; ++j) {
    out[j] = d * static_cast<float>(b.qs[j] & 0x0f) + m;
    out[j + 16] = d * static_cast<float>(b.qs[j] >> 4) + m;
  }
}

ORCA_HOST_DEVICE inline uint32_t LoadLe32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

ORCA_HOST_DEVICE inline void DecodeBlock(const BlockQ5_0& b, float* out) {
  const float d = F16ToF32(b.d);
  const uint32_t qh = LoadLe32(b.qh);
  for (int j = 0; j < 16; ++j) {
    const int lo = (b.qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int hi = (b.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    out[j] = d * static_cast<float>(lo - 16);
    out[j + 16] = d * static_cast<float>(hi - 16);
  }
}

ORCA_HOST_DEVICE inline void DecodeBlock(const BlockQ5_1& b, float* out) {
  const float d = F16ToF32(b.d), m = F16ToF32(b.m);
  const uint32_t qh = LoadLe32(b.qh);
  for (int j = 0; j < 16; ++j) {
    const int lo = (b.qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int hi = (b.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    out[j] = d * static_cast<float>(lo) + m;
    out[j + 16] = d * static_cast<float>(hi) + m;
  }
}

// Q4_K and Q5_K: four 64-value chunks of two sub-blocks each (Q5_K: the 5th bits from qh).
template <typename Block>
ORCA_HOST_DEVICE inline void DecodeKQuantAffine(const Block& b, float* out) {
  const float d = F16ToF32(b.d), dmin = F16ToF32(b.dmin);
  for (int c = 0; c < 4; ++c) {
    uint8_t sc0, m0, sc1, m1;
    KQuantScaleMin(b.scales, 2 * c, &sc0, &m0);
    KQuantScaleMin(b.scales, 2 * c + 1, &sc1, &m1);
    const float d0 = d * sc0, mm0 = dmin * m0, d1 = d * sc1, mm1 = dmin * m1;
    const uint8_t* q = b.qs + 32 * c;
    for (int l = 0; l < 32; ++l) {
      int lo = q[l] & 0x0f, hi = q[l] >> 4;
      if constexpr (std::is_same_v<Block, BlockQ5_K>) {
        lo |= ((b.qh[l] >> (2 * c)) & 1) << 4;
        hi |= ((b.qh[l] >> (2 * c + 1)) & 1) << 4;
      }
      out[64 * c + l] = d0 * static_cast<float>(lo) - mm0;
      out[64 * c + 32 + l] = d1 * static_cast<float>(hi) - mm1;
    }
  }
}

ORCA_HOST_DEVICE inline void DecodeBlock(const BlockQ4_K& b, float* out) { DecodeKQuantAffine(b, out); }
ORCA_HOST_DEVICE inline void DecodeBlock(const BlockQ5_K& b, float* out) { DecodeKQuantAffine(b, out); }

/// The 6-bit value (0..63) of element i of a Q6_K block.
ORCA_HOST_DEVICE inline int Q6KValue(const BlockQ6_K& b, int i) {
  const int h = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
  const uint8_t low_byte = b.ql[64 * h + (quarter & 1) * 32 + l];
  const int low = quarter < 2 ? (low_byte & 0x0f) : (low_byte >> 4);
  const int high = (b.qh[32 * h + l] >> (2 * quarter)) & 3;
  return low | (high << 4);
}

ORCA_HOST_DEVICE inline void DecodeBlock(const BlockQ6_K& b, float* out) {
  const float d = F16ToF32(b.d);
  for (int i = 0; i < 256; ++i)
    out[i] = d * static_cast<float>(b.scales[i / 16]) * static_cast<float>(Q6KValue(b, i) - 32);
}

/// Decodes `n` values (n / Block::kElems whole blocks) of a row: a table row's decoder.
template <typename Block>
void DecodeRow(const void* src, float* dst, int64_t n) {
  const Block* b = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n / Block::kElems; ++i) DecodeBlock(b[i], dst + i * Block::kElems);
}

}  // namespace orca::ggml
