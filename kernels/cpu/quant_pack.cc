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

// Column c of the unit from GGUF block `b` (nullptr: a zero column past n).
void ReadBlock(DType t, const uint8_t* b, int c, UnitColumns* uc) {
  const int S = static_cast<int>(UnitValues(t));
  if (b == nullptr) {
    std::memset(uc->u[c], 0, S);
    uc->d[c] = uc->m[c] = 0;
    for (int j = 0; j < 8; ++j) uc->sc[j][c] = uc->mn[j][c] = 0;
    for (int j = 0; j < 16; ++j) uc->s6[j][c] = 0;
    return;
  }
  switch (t) {
    case DType::kQ8_0: {
      const auto* q = reinterpret_cast<const BlockQ8_0*>(b);
      uc->d[c] = q->d;
      for (int i = 0; i < 32; ++i) uc->u[c][i] = static_cast<uint8_t>(q->qs[i] + 128);
      return;
    }
    case DType::kQ4_0: {
      const auto* q = reinterpret_cast<const BlockQ4_0*>(b);
      uc->d[c] = q->d;
      ReadNibbles32(q->qs, uc->u[c]);
      return;
    }
    case DType::kQ4_1: {
      const auto* q = reinterpret_cast<const BlockQ4_1*>(b);
      uc->d[c] = q->d, uc->m[c] = q->m;
      ReadNibbles32(q->qs, uc->u[c]);
      return;
    }
    case DType::kQ5_0: {
      const auto* q = reinterpret_cast<const BlockQ5_0*>(b);
      uc->d[c] = q->d;
      ReadNibbles32(q->qs, uc->u[c]);
      AddHighBits32(q->qh, uc->u[c]);
      return;
    }
    case DType::kQ5_1: {
      const auto* q = reinterpret_cast<const BlockQ5_1*>(b);
      uc->d[c] = q->d, uc->m[c] = q->m;
      ReadNibbles32(q->qs, uc->u[c]);
      AddHighBits32(q->qh, uc->u[c]);
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = t == DType::kQ5_K;
      const auto* q4 = reinterpret_cast<const BlockQ4_K*>(b);
      const auto* q5 = reinterpret_cast<const BlockQ5_K*>(b);
      const uint8_t* qs = five ? q5->qs : q4->qs;
      const uint8_t* scales = five ? q5->scales : q4->scales;
      uc->d[c] = five ? q5->d : q4->d;
      uc->m[c] = five ? q5->dmin : q4->dmin;
      for (int j = 0; j < 8; ++j) ggml::KQuantScaleMin(scales, j, &uc->sc[j][c], &uc->mn[j][c]);
      for (int ch = 0; ch < 4; ++ch)
        for (int l = 0; l < 32; ++l) {
          uint8_t lo = qs[32 * ch + l] & 15, hi = qs[32 * ch + l] >> 4;
          if (five) {
            lo = static_cast<uint8_t>(lo | ((q5->qh[l] >> (2 * ch)) & 1) << 4);
            hi = static_cast<uint8_t>(hi | ((q5->qh[l] >> (2 * ch + 1)) & 1) << 4);
          }
          uc->u[c][64 * ch + l] = lo, uc->u[c][64 * ch + 32 + l] = hi;
        }
      return;
    }
    case DType::kQ6_K: {
      const auto* q = reinterpret_cast<const BlockQ6_K*>(b);
      uc->d[c] = q->d;
      for (int j = 0; j < 16; ++j) uc->s6[j][c] = q->scales[j];
      for (int i = 0; i < 256; ++i) uc->u[c][i] = static_cast<uint8_t>(ggml::Q6KValue(*q, i));
      return;
    }
    default:
      return;
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

void WriteUnit(DType t, const UnitColumns& uc, uint8_t* out) {
  switch (t) {
    case DType::kQ8_0:
      PutVals8(uc, 0, out);
      PutHalves(uc.d, out + 512);
      return;
    case DType::kQ4_0:
    case DType::kQ4_1:
      PutNibbles(uc, 0, out);
      PutHalves(uc.d, out + 256);
      if (t == DType::kQ4_1) PutHalves(uc.m, out + 288);
      return;
    case DType::kQ5_0:
    case DType::kQ5_1:
      PutNibbles(uc, 0, out);
      PutHighBits(uc, 0, out + 256);
      PutHalves(uc.d, out + 320);
      if (t == DType::kQ5_1) PutHalves(uc.m, out + 352);
      return;
    case DType::kQ4_K:
    case DType::kQ5_K:
      PutHalves(uc.d, out);
      PutHalves(uc.m, out + 32);
      std::memcpy(out + 64, uc.sc, 128);
      std::memcpy(out + 192, uc.mn, 128);
      for (int g = 0; g < 8; ++g) {
        PutNibbles(uc, g, out + 320 + 256 * g);
        if (t == DType::kQ5_K) PutHighBits(uc, g, out + 320 + 2048 + 64 * g);
      }
      return;
    case DType::kQ6_K:
      PutHalves(uc.d, out);
      std::memcpy(out + 32, uc.s6, 256);
      for (int g = 0; g < 8; ++g) {
        PutNibbles(uc, g, out + 288 + 256 * g);
        PutPlanes2(uc, g, out + 288 + 2048 + 128 * g);
      }
      return;
    default:
      return;
  }
}

inline float Half(const uint8_t* p) { return F16ToF32(static_cast<uint16_t>(p[0] | p[1] << 8)); }

}  // namespace

void PackPanels(const WeightView& w, int64_t panel_begin, int64_t panel_end, uint8_t* out) {
  const DType t = w.dtype;
  const int64_t units = w.k / UnitValues(t);
  const size_t row_stride = DTypeRowBytes(t, w.ld), ub = UnitBytes(t), bb = DTypeBlockBytes(t);
  UnitColumns uc;
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    uint8_t* panel = out + static_cast<size_t>(p) * PanelBytes(t, w.k);
    for (int64_t unit = 0; unit < units; ++unit) {
      for (int c = 0; c < kPanelCols; ++c) {
        const int64_t row = p * kPanelCols + c;
        const uint8_t* block = row < w.n ? static_cast<const uint8_t*>(w.data) + row * row_stride + unit * bb : nullptr;
        ReadBlock(t, block, c, &uc);
      }
      WriteUnit(t, uc, panel + unit * ub);
    }
  }
}

void DequantizePackedRow(DType t, const uint8_t* packed, int64_t k, int64_t row, float* out) {
  const int64_t p = row / kPanelCols;
  const int c = static_cast<int>(row % kPanelCols);
  const uint8_t* panel = packed + static_cast<size_t>(p) * PanelBytes(t, k);
  const int64_t S = UnitValues(t), units = k / S;
  const size_t ub = UnitBytes(t);
  for (int64_t unit = 0; unit < units; ++unit) {
    const uint8_t* up = panel + unit * ub;
    float* o = out + unit * S;
    for (int i = 0; i < S; ++i) {
      const int g = i / 32, v = (i % 32) / 4, b = i % 4, j = v % 4;
      const int at = 4 * c + b;
      int u = 0;
      float value = 0;
      switch (t) {
        case DType::kQ8_0:
          value = Half(up + 512 + 2 * c) * static_cast<float>(up[64 * v + at] - 128);
          break;
        case DType::kQ4_0:
        case DType::kQ4_1:
        case DType::kQ5_0:
        case DType::kQ5_1: {
          const uint8_t nib = up[64 * j + at];
          u = v < 4 ? (nib & 15) : (nib >> 4);
          const bool five = t == DType::kQ5_0 || t == DType::kQ5_1;
          if (five) u |= ((up[256 + at] >> (v < 4 ? j : 4 + j)) & 1) << 4;
          const size_t d_at = five ? 320 : 256;
          const float d = Half(up + d_at + 2 * c);
          if (t == DType::kQ4_1 || t == DType::kQ5_1)
            value = d * static_cast<float>(u) + Half(up + d_at + 32 + 2 * c);
          else
            value = d * static_cast<float>(u - (five ? 16 : 8));
          break;
        }
        case DType::kQ4_K:
        case DType::kQ5_K: {
          const uint8_t nib = up[320 + 256 * g + 64 * j + at];
          u = v < 4 ? (nib & 15) : (nib >> 4);
          if (t == DType::kQ5_K) u |= ((up[320 + 2048 + 64 * g + at] >> (v < 4 ? j : 4 + j)) & 1) << 4;
          const float a = Half(up + 2 * c) * static_cast<float>(up[64 + 16 * g + c]);
          const float mm = Half(up + 32 + 2 * c) * static_cast<float>(up[192 + 16 * g + c]);
          value = a * static_cast<float>(u) - mm;
          break;
        }
        case DType::kQ6_K: {
          const uint8_t nib = up[288 + 256 * g + 64 * j + at];
          u = v < 4 ? (nib & 15) : (nib >> 4);
          u |= ((up[288 + 2048 + 128 * g + 64 * (v / 4) + at] >> (2 * (v % 4))) & 3) << 4;
          const int8_t s = static_cast<int8_t>(up[32 + 16 * (i / 16) + c]);
          value = Half(up + 2 * c) * static_cast<float>(s) * static_cast<float>(u - 32);
          break;
        }
        default:
          break;
      }
      o[i] = value;
    }
  }
}

}  // namespace orca::kernels::quant
