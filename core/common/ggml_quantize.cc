#include "core/common/ggml_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace orca::ggml {
namespace {

inline int Round(float v) { return static_cast<int>(std::lrintf(v)); }
inline int Clamp(int v, int lo, int hi) { return std::min(hi, std::max(lo, v)); }
// A scale as stored (fp16) and read back.
inline float StoredHalf(float v, uint16_t* half) {
  *half = F32ToF16(v);
  return F16ToF32(*half);
}

// The signed value of largest magnitude.
float SignedMax(const float* x, int n) {
  float amax = 0, mx = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), mx = x[i];
  return mx;
}

// Symmetric levels d·(q - half), q in [0, 2·half): the largest magnitude maps to q = 0.
void QuantizeSymmetric(const float* x, int n, int half, uint16_t* d_half, int* q) {
  const float d = StoredHalf(SignedMax(x, n) / -static_cast<float>(half), d_half);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; ++i) q[i] = Clamp(Round(x[i] * id) + half, 0, 2 * half - 1);
}

// Affine levels d·q + m, q in [0, levels].
void QuantizeAffine(const float* x, int n, int levels, uint16_t* d_half, uint16_t* m_half, int* q) {
  const float mn = *std::min_element(x, x + n), mx = *std::max_element(x, x + n);
  const float d = StoredHalf((mx - mn) / static_cast<float>(levels), d_half);
  const float m = StoredHalf(mn, m_half);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; ++i) q[i] = Clamp(Round((x[i] - m) * id), 0, levels);
}

}  // namespace

void QuantizeBlock(const float* x, BlockQ8_0* b) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = StoredHalf(amax / 127.0f, &b->d);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int i = 0; i < 32; ++i) b->qs[i] = static_cast<int8_t>(Clamp(Round(x[i] * id), -127, 127));
}

void QuantizeBlock(const float* x, BlockQ4_0* b) {
  int q[32];
  QuantizeSymmetric(x, 32, 8, &b->d, q);
  for (int j = 0; j < 16; ++j) b->qs[j] = static_cast<uint8_t>(q[j] | q[j + 16] << 4);
}

void QuantizeBlock(const float* x, BlockQ4_1* b) {
  int q[32];
  QuantizeAffine(x, 32, 15, &b->d, &b->m, q);
  for (int j = 0; j < 16; ++j) b->qs[j] = static_cast<uint8_t>(q[j] | q[j + 16] << 4);
}

namespace {

// The low nibbles and the 32-bit high-bit word of 5-bit values.
void Pack5(const int* q, uint8_t* qs, uint8_t* qh) {
  uint32_t high = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 15) | (q[j + 16] & 15) << 4);
    high |= static_cast<uint32_t>(q[j] >> 4) << j | static_cast<uint32_t>(q[j + 16] >> 4) << (j + 16);
  }
  for (int i = 0; i < 4; ++i) qh[i] = static_cast<uint8_t>(high >> (8 * i));
}

}  // namespace

void QuantizeBlock(const float* x, BlockQ5_0* b) {
  int q[32];
  QuantizeSymmetric(x, 32, 16, &b->d, q);
  Pack5(q, b->qs, b->qh);
}

void QuantizeBlock(const float* x, BlockQ5_1* b) {
  int q[32];
  QuantizeAffine(x, 32, 31, &b->d, &b->m, q);
  Pack5(q, b->qs, b->qh);
}

namespace {

// Σ (s·q_i - m - x_i)² with q_i the nearest level in [0, levels].
double AffineError(const float* x, int n, int levels, float s, float m, int* q) {
  double err = 0;
  const float is = s > 0 ? 1.0f / s : 0.0f;
  for (int i = 0; i < n; ++i) {
    q[i] = Clamp(Round((x[i] + m) * is), 0, levels);
    const double e = static_cast<double>(s) * q[i] - m - x[i];
    err += e * e;
  }
  return err;
}

// A K-quant sub-block: x ≈ s·q - m with s ≥ 0, m ≥ 0 (the min is never above 0).
void FitScaleMin(const float* x, int n, int levels, float* s_out, float* m_out) {
  const float mn = std::min(0.0f, *std::min_element(x, x + n)), mx = *std::max_element(x, x + n);
  float s = (mx - mn) / static_cast<float>(levels), m = -mn;
  int q[32];
  double best = AffineError(x, n, levels, s, m, q);
  *s_out = s, *m_out = m;
  for (int iter = 0; iter < 4 && s > 0; ++iter) {
    // Least squares for (s, m) on the current levels.
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; ++i) sq += q[i], sqq += q[i] * q[i], sx += x[i], sqx += q[i] * x[i];
    const double det = n * sqq - sq * sq;
    if (det <= 0) break;
    double ns = (n * sqx - sq * sx) / det, nm = (ns * sq - sx) / n;
    if (nm < 0) nm = 0, ns = sqx / sqq;
    if (!(ns > 0)) break;
    s = static_cast<float>(ns), m = static_cast<float>(nm);
    const double err = AffineError(x, n, levels, s, m, q);
    if (err < best) best = err, *s_out = s, *m_out = m;
  }
}

// Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins. Returns the levels in q[256].
void QuantizeKAffine(const float* x, int levels, uint16_t* d_half, uint16_t* dmin_half, uint8_t* scales, int* q) {
  float s[8], m[8];
  for (int j = 0; j < 8; ++j) FitScaleMin(x + 32 * j, 32, levels, &s[j], &m[j]);
  const float max_s = *std::max_element(s, s + 8), max_m = *std::max_element(m, m + 8);
  const float d = StoredHalf(max_s / 63.0f, d_half), dmin = StoredHalf(max_m / 63.0f, dmin_half);
  int sc[8], mq[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = d > 0 ? Clamp(Round(s[j] / d), 0, 63) : 0;
    mq[j] = dmin > 0 ? Clamp(Round(m[j] / dmin), 0, 63) : 0;
  }
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
    scales[j + 4] = static_cast<uint8_t>(mq[j] | (mq[j + 4] >> 4) << 6);
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | (mq[j + 4] & 15) << 4);
  }
  for (int j = 0; j < 8; ++j) {
    const float es = d * static_cast<float>(sc[j]), em = dmin * static_cast<float>(mq[j]);
    const float is = es > 0 ? 1.0f / es : 0.0f;
    for (int i = 0; i < 32; ++i) q[32 * j + i] = es > 0 ? Clamp(Round((x[32 * j + i] + em) * is), 0, levels) : 0;
  }
}

}  // namespace

void QuantizeBlock(const float* x, BlockQ4_K* b) {
  int q[256];
  QuantizeKAffine(x, 15, &b->d, &b->dmin, b->scales, q);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) b->qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | q[64 * c + 32 + l] << 4);
}

void QuantizeBlock(const float* x, BlockQ5_K* b) {
  int q[256];
  QuantizeKAffine(x, 31, &b->d, &b->dmin, b->scales, q);
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
      b->qs[32 * c + l] = static_cast<uint8_t>((lo & 15) | (hi & 15) << 4);
      b->qh[l] |= static_cast<uint8_t>((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
    }
}

void QuantizeBlock(const float* x, BlockQ6_K* b) {
  float s[16];
  for (int j = 0; j < 16; ++j) s[j] = SignedMax(x + 16 * j, 16) / -32.0f;
  const float d = StoredHalf(SignedMax(s, 16) / -128.0f, &b->d);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  std::memset(b->ql, 0, sizeof(b->ql));
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int j = 0; j < 16; ++j) {
    b->scales[j] = static_cast<int8_t>(Clamp(Round(s[j] * id), -128, 127));
    const float es = d * static_cast<float>(b->scales[j]);
    const float is = es != 0 ? 1.0f / es : 0.0f;
    for (int t = 0; t < 16; ++t) {
      const int i = 16 * j + t;
      const int q = es != 0 ? Clamp(Round(x[i] * is) + 32, 0, 63) : 32;
      const int h = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
      b->ql[64 * h + (quarter & 1) * 32 + l] |= static_cast<uint8_t>((q & 15) << (quarter < 2 ? 0 : 4));
      b->qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * quarter));
    }
  }
}

}  // namespace orca::ggml
