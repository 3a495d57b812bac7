#include "kernels/cpu/quant_pack.h"

#include <cstring>

#include "core/common/ggml_blocks.h"
#include "kernels/cpu/quant_layout.h"

namespace orca::kernels::quant {
namespace {

using ggml::BlockQ4_0;
using ggml::BlockQ4_1;
using ggml::BlockQ4_K;
using ggml::BlockQ5_0;
using ggml::BlockQ5_1;
using ggml::BlockQ5_K;
using ggml::BlockQ6_K;
using ggml::BlockQ8_0;

// One unit's 16 columns, decoded to unsigned values and raw scales.
struct UnitColumns {
  uint8_t u[kPanelCols][256];
  uint16_t d[kPanelCols];
  uint16_t m[kPanelCols];  // Q4_1/Q5_1 m, K-quant dmin
  uint8_t sc[8][kPanelCols];
  uint8_t mn[8][kPanelCols];
  int8_t s6[16][kPanelCols];
};

void ReadNibbles32(const uint8_t* qs, uint8_t* u) {
  for (int j = 0; j < 16; ++j) u[j] = qs[j] & 15, u[j + 16] = qs[j] >> 4;
}
void AddHighBits32(const uint8_t* qh, uint8_t* u) {
  const uint32_t h = ggml::LoadLe32(qh);
  for (int i = 0; i < 32; ++i) u[i] = static_cast<uint8_t>(u[i] | ((h >> i) & 1u) << 4);
}

template <DType>
constexpr bool kNoCodeFor = false;  // for the static_asserts below: a type kPanelTypes lists without its code here

// Column c of the unit from GGUF block `b` (nullptr: a zero column past n).
template <DType T>
void ReadBlock(const uint8_t* b, int c, UnitColumns* uc) {
  constexpr int S = static_cast<int>(UnitValues(T));
  if (b == nullptr) {
    std::memset(uc->u[c], 0, S);
    uc->d[c] = uc->m[c] = 0;
    for (int j = 0; j < 8; ++j) uc->sc[j][c] = uc->mn[j][c] = 0;
    for (int j = 0; j < 16; ++j) uc->s6[j][c] = 0;
    return;
  }
  const auto* q = reinterpret_cast<const typename GgmlBlock<T>::type*>(b);
  if constexpr (T == DType::kQ8_0) {
    uc->d[c] = q->d;
    for (int i = 0; i < 32; ++i) uc->u[c][i] = static_cast<uint8_t>(q->qs[i] + 128);
  } else if constexpr (T == DType::kQ4_0 || T == DType::kQ4_1 || T == DType::kQ5_0 || T == DType::kQ5_1) {
    uc->d[c] = q->d;
    if constexpr (T == DType::kQ4_1 || T == DType::kQ5_1) uc->m[c] = q->m;
    ReadNibbles32(q->qs, uc->u[c]);
    if constexpr (T == DType::kQ5_0 || T == DType::kQ5_1) AddHighBits32(q->qh, uc->u[c]);
  } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
    uc->d[c] = q->d;
    uc->m[c] = q->dmin;
    for (int j = 0; j < 8; ++j) ggml::KQuantScaleMin(q->scales, j, &uc->sc[j][c], &uc->mn[j][c]);
    for (int ch = 0; ch < 4; ++ch)
      for (int l = 0; l < 32; ++l) {
        uint8_t lo = q->qs[32 * ch + l] & 15, hi = q->qs[32 * ch + l] >> 4;
        if constexpr (T == DType::kQ5_K) {
          lo = static_cast<uint8_t>(lo | ((q->qh[l] >> (2 * ch)) & 1) << 4);
          hi = static_cast<uint8_t>(hi | ((q->qh[l] >> (2 * ch + 1)) & 1) << 4);
        }
        uc->u[c][64 * ch + l] = lo, uc->u[c][64 * ch + 32 + l] = hi;
      }
  } else if constexpr (T == DType::kQ6_K) {
    uc->d[c] = q->d;
    for (int j = 0; j < 16; ++j) uc->s6[j][c] = q->scales[j];
    for (int i = 0; i < 256; ++i) uc->u[c][i] = static_cast<uint8_t>(ggml::Q6KValue(*q, i));
  } else {
    static_assert(kNoCodeFor<T>, "a panel type without its reading code");
  }
}

void PutHalves(const uint16_t* h, uint8_t* out) { std::memcpy(out, h, 2 * kPanelCols); }

// Group g (values 32g..32g+32) of the unit's columns in each encoding.
void PutVals8(const UnitColumns& uc, int g, uint8_t* out) {
  for (int v = 0; v < 8; ++v)
    for (int c = 0; c < kPanelCols; ++c)
      for (int b = 0; b < 4; ++b) out[64 * v + 4 * c + b] = uc.u[c][32 * g + 4 * v + b];
}
void PutNibbles(const UnitColumns& uc, int g, uint8_t* out) {
  for (int j = 0; j < 4; ++j)
    for (int c = 0; c < kPanelCols; ++c)
      for (int b = 0; b < 4; ++b) {
        const uint8_t lo = uc.u[c][32 * g + 4 * j + b] & 15, hi = uc.u[c][32 * g + 16 + 4 * j + b] & 15;
        out[64 * j + 4 * c + b] = static_cast<uint8_t>(lo | hi << 4);
      }
}
void PutHighBits(const UnitColumns& uc, int g, uint8_t* out) {
  for (int c = 0; c < kPanelCols; ++c)
    for (int b = 0; b < 4; ++b) {
      uint8_t byte = 0;
      for (int j = 0; j < 4; ++j) {
        byte = static_cast<uint8_t>(byte | ((uc.u[c][32 * g + 4 * j + b] >> 4) & 1) << j);
        byte = static_cast<uint8_t>(byte | ((uc.u[c][32 * g + 16 + 4 * j + b] >> 4) & 1) << (4 + j));
      }
      out[4 * c + b] = byte;
    }
}
void PutPlanes2(const UnitColumns& uc, int g, uint8_t* out) {
  for (int h = 0; h < 2; ++h)
    for (int c = 0; c < kPanelCols; ++c)
      for (int b = 0; b < 4; ++b) {
        uint8_t byte = 0;
        for (int s = 0; s < 4; ++s)
          byte = static_cast<uint8_t>(byte | ((uc.u[c][32 * g + 4 * (4 * h + s) + b] >> 4) & 3) << (2 * s));
        out[64 * h + 4 * c + b] = byte;
      }
}

template <DType T>
void WriteUnit(const UnitColumns& uc, uint8_t* out) {
  if constexpr (T == DType::kQ8_0) {
    PutVals8(uc, 0, out);
    PutHalves(uc.d, out + 512);
  } else if constexpr (T == DType::kQ4_0 || T == DType::kQ4_1) {
    PutNibbles(uc, 0, out);
    PutHalves(uc.d, out + 256);
    if constexpr (T == DType::kQ4_1) PutHalves(uc.m, out + 288);
  } else if constexpr (T == DType::kQ5_0 || T == DType::kQ5_1) {
    PutNibbles(uc, 0, out);
    PutHighBits(uc, 0, out + 256);
    PutHalves(uc.d, out + 320);
    if constexpr (T == DType::kQ5_1) PutHalves(uc.m, out + 352);
  } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
    PutHalves(uc.d, out);
    PutHalves(uc.m, out + 32);
    std::memcpy(out + 64, uc.sc, 128);
    std::memcpy(out + 192, uc.mn, 128);
    for (int g = 0; g < 8; ++g) {
      PutNibbles(uc, g, out + 320 + 256 * g);
      if constexpr (T == DType::kQ5_K) PutHighBits(uc, g, out + 320 + 2048 + 64 * g);
    }
  } else if constexpr (T == DType::kQ6_K) {
    PutHalves(uc.d, out);
    std::memcpy(out + 32, uc.s6, 256);
    for (int g = 0; g < 8; ++g) {
      PutNibbles(uc, g, out + 288 + 256 * g);
      PutPlanes2(uc, g, out + 288 + 2048 + 128 * g);
    }
  } else {
    static_assert(kNoCodeFor<T>, "a panel type without its writing code");
  }
}

inline float Half(const uint8_t* p) { return F16ToF32(static_cast<uint16_t>(p[0] | p[1] << 8)); }

template <DType T>
void PackPanelsOf(const WeightView& w, int64_t panel_begin, int64_t panel_end, uint8_t* out) {
  const int64_t units = w.k / UnitValues(T);
  const size_t row_stride = DTypeRowBytes(T, w.ld), ub = UnitBytes(T), bb = DTypeBlockBytes(T);
  UnitColumns uc;
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    uint8_t* panel = out + static_cast<size_t>(p) * PanelBytes(T, w.k);
    for (int64_t unit = 0; unit < units; ++unit) {
      for (int c = 0; c < kPanelCols; ++c) {
        const int64_t row = p * kPanelCols + c;
        const uint8_t* block = row < w.n ? static_cast<const uint8_t*>(w.data) + row * row_stride + unit * bb : nullptr;
        ReadBlock<T>(block, c, &uc);
      }
      WriteUnit<T>(uc, panel + unit * ub);
    }
  }
}

// Value i of a unit `up` of type T, column c (the inverse of ReadBlock + WriteUnit, then the GGUF decoder's
// arithmetic on the stored scales).
template <DType T>
float PackedValue(const uint8_t* up, int c, int i) {
  const int g = i / 32, v = (i % 32) / 4, b = i % 4, j = v % 4;
  const int at = 4 * c + b;
  if constexpr (T == DType::kQ8_0) {
    return Half(up + 512 + 2 * c) * static_cast<float>(up[64 * v + at] - 128);
  } else if constexpr (T == DType::kQ4_0 || T == DType::kQ4_1 || T == DType::kQ5_0 || T == DType::kQ5_1) {
    const uint8_t nib = up[64 * j + at];
    int u = v < 4 ? (nib & 15) : (nib >> 4);
    constexpr bool kFive = T == DType::kQ5_0 || T == DType::kQ5_1;
    if constexpr (kFive) u |= ((up[256 + at] >> (v < 4 ? j : 4 + j)) & 1) << 4;
    constexpr size_t kDAt = kFive ? 320 : 256;
    const float d = Half(up + kDAt + 2 * c);
    if constexpr (T == DType::kQ4_1 || T == DType::kQ5_1)
      return d * static_cast<float>(u) + Half(up + kDAt + 32 + 2 * c);
    else
      return d * static_cast<float>(u - (kFive ? 16 : 8));
  } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
    const uint8_t nib = up[320 + 256 * g + 64 * j + at];
    int u = v < 4 ? (nib & 15) : (nib >> 4);
    if constexpr (T == DType::kQ5_K) u |= ((up[320 + 2048 + 64 * g + at] >> (v < 4 ? j : 4 + j)) & 1) << 4;
    const float a = Half(up + 2 * c) * static_cast<float>(up[64 + 16 * g + c]);
    const float mm = Half(up + 32 + 2 * c) * static_cast<float>(up[192 + 16 * g + c]);
    return a * static_cast<float>(u) - mm;
  } else if constexpr (T == DType::kQ6_K) {
    const uint8_t nib = up[288 + 256 * g + 64 * j + at];
    int u = v < 4 ? (nib & 15) : (nib >> 4);
    u |= ((up[288 + 2048 + 128 * g + 64 * (v / 4) + at] >> (2 * (v % 4))) & 3) << 4;
    const int8_t s = static_cast<int8_t>(up[32 + 16 * (i / 16) + c]);
    return Half(up + 2 * c) * static_cast<float>(s) * static_cast<float>(u - 32);
  } else {
    static_assert(kNoCodeFor<T>, "a panel type without its decoding code");
  }
}

template <DType T>
void DequantizePackedRowOf(const uint8_t* packed, int64_t k, int64_t row, float* out) {
  const int64_t p = row / kPanelCols;
  const int c = static_cast<int>(row % kPanelCols);
  const uint8_t* panel = packed + static_cast<size_t>(p) * PanelBytes(T, k);
  constexpr int64_t S = UnitValues(T);
  const int64_t units = k / S;
  for (int64_t unit = 0; unit < units; ++unit) {
    const uint8_t* up = panel + unit * UnitBytes(T);
    for (int i = 0; i < S; ++i) out[unit * S + i] = PackedValue<T>(up, c, i);
  }
}

}  // namespace

void PackPanels(const WeightView& w, int64_t panel_begin, int64_t panel_end, uint8_t* out) {
  VisitPanelType(w.dtype, [&](auto type) { PackPanelsOf<decltype(type)::value>(w, panel_begin, panel_end, out); });
}

void DequantizePackedRow(DType t, const uint8_t* packed, int64_t k, int64_t row, float* out) {
  VisitPanelType(t, [&](auto type) { DequantizePackedRowOf<decltype(type)::value>(packed, k, row, out); });
}

}  // namespace orca::kernels::quant
