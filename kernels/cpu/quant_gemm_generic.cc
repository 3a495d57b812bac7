// The quantized GEMM in portable C++ (any CPU), and what every ISA shares:
// activation quantization and dispatch. Same arithmetic as the SIMD versions:
// exact integer group sums, then the same f32 scaling per group.

#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_gemm_impl.h"

namespace orca::kernels::quant {
namespace {

struct Generic {
  static constexpr int kMaxRows = 4;
  static constexpr int kDirectMaxRows = 0;

  static void Halves16(const uint8_t* src, float* dst) {
    for (int c = 0; c < 16; ++c) dst[c] = F16ToF32(static_cast<uint16_t>(src[2 * c] | src[2 * c + 1] << 8));
  }

  template <int MR, Affine A, int kShift>
  static void Rows(const impl::RowsArgs& r) {
    const QuantizedRows& x = *r.x;
    for (int i = 0; i < MR; ++i) {
      const int64_t row = r.row + i;
      float* y = r.y + i * r.ldy;
      float acc[16];
      for (int c = 0; c < 16; ++c) acc[c] = r.load_y && c < r.cols ? y[c] : 0.0f;
      for (int g = 0; g < r.groups; ++g) {
        const int64_t gx = r.group_first + g, at = row * x.groups + gx;
        const int8_t* xq = x.q.data() + row * x.k + gx * kGroup;
        const int32_t* ns = x.ns.data() + at * 3;
        const uint8_t* vals = r.s->vals[g];
        for (int c = 0; c < 16; ++c) {
          int32_t sum[2] = {0, 0};
          for (int v = 0; v < 8; ++v)
            for (int b = 0; b < 4; ++b)
              sum[A == Affine::kHalves && v >= 4] += static_cast<int32_t>(vals[64 * v + 4 * c + b]) * xq[4 * v + b];
          if constexpr (A == Affine::kOffset) sum[0] += ns[0] * (1 << kShift);
          if constexpr (A == Affine::kHalves) sum[0] += ns[1] * (1 << kShift), sum[1] += ns[2] * (1 << kShift);
          acc[c] = std::fma(static_cast<float>(sum[0]), r.s->a[g][c] * x.d[at], acc[c]);
          if constexpr (A == Affine::kHalves)
            acc[c] = std::fma(static_cast<float>(sum[1]), r.s->a[g][16 + c] * x.d[at], acc[c]);
          if constexpr (A == Affine::kMin) acc[c] = std::fma(r.s->b[g][c], x.ds[at], acc[c]);
        }
      }
      for (int c = 0; c < r.cols; ++c) y[c] = acc[c] + (r.bias != nullptr ? r.bias[c] : 0.0f);
    }
  }
};

}  // namespace

void GemmGeneric(const GemmArgs& args) { impl::Gemm<Generic>(args); }

void PrepareRows(int64_t m, int64_t k, QuantizedRows* out) {
  out->m = m;
  out->k = k;
  out->groups = k / kGroup;
  const size_t groups = static_cast<size_t>(m * out->groups);
  if (out->q.size() < static_cast<size_t>(m * k)) out->q.resize(static_cast<size_t>(m * k));
  if (out->d.size() < groups) out->d.resize(groups), out->ds.resize(groups), out->ns.resize(3 * groups);
  const size_t records = m >= kBlockMinRows ? static_cast<size_t>((m + kBlockRows - 1) / kBlockRows * out->groups) : 0;
  if (records == 0)
    out->blocks.clear();
  else if (out->blocks.size() < records)
    out->blocks.resize(records);
}

void FillRowBlocks(int64_t row, QuantizedRows* out) {
  if (out->blocks.empty()) return;
  const int64_t groups = out->groups;
  const int i = static_cast<int>(row % kBlockRows);
  RowBlockGroup* rec = out->blocks.data() + row / kBlockRows * groups;
  for (int64_t g = 0; g < groups; ++g, ++rec) {
    const int64_t at = row * groups + g;
    std::memcpy(rec->q[i], out->q.data() + row * out->k + g * kGroup, kGroup);
    rec->d[i] = out->d[at];
    rec->ds[i] = out->ds[at];
    const int32_t* ns = out->ns.data() + 3 * at;
    rec->n_shl3[i] = ns[0] * (1 << 3);
    rec->n_shl4[i] = ns[0] * (1 << 4);
    rec->n_shl7[i] = ns[0] * (1 << 7);
    rec->h0_shl5[i] = ns[1] * (1 << 5);
    rec->h1_shl5[i] = ns[2] * (1 << 5);
  }
}

void QuantizeRows(Isa isa, const float* x, int64_t row_begin, int64_t row_end, QuantizedRows* out) {
  if (isa == Isa::kAvx512Vnni)
    QuantizeRowsAvx512(x, row_begin, row_end, out);
  else
    QuantizeRowsGeneric(x, row_begin, row_end, out);
}

void QuantizeRowsGeneric(const float* x, int64_t row_begin, int64_t row_end, QuantizedRows* out) {
  const int64_t k = out->k, groups = out->groups;
  for (int64_t row = row_begin; row < row_end; ++row) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* src = x + row * k + g * kGroup;
      int8_t* q = out->q.data() + row * k + g * kGroup;
      float amax = 0;
      for (int i = 0; i < kGroup; ++i) amax = std::max(amax, std::fabs(src[i]));
      const float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
      int32_t s0 = 0, s1 = 0;
      for (int i = 0; i < kGroup; ++i) {
        const int v = static_cast<int>(std::nearbyint(src[i] * id));
        q[i] = static_cast<int8_t>(std::min(127, std::max(-127, v)));
        (i < 16 ? s0 : s1) += q[i];
      }
      const int64_t at = row * groups + g;
      out->d[at] = d;
      out->ds[at] = d * static_cast<float>(s0 + s1);
      out->ns[3 * at] = -(s0 + s1);
      out->ns[3 * at + 1] = -s0;
      out->ns[3 * at + 2] = -s1;
    }
    FillRowBlocks(row, out);
  }
}

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kGeneric:
      return "generic";
    case Isa::kAvxVnni:
      return "avx-vnni";
    case Isa::kAvx512Vnni:
      return "avx512-vnni";
  }
  return "?";
}

bool CanRun(Isa isa) {
  const CpuFeatures& f = GetCpuFeatures();
  switch (isa) {
    case Isa::kGeneric:
      return true;
    case Isa::kAvxVnni:
      return f.avx_vnni;
    case Isa::kAvx512Vnni:
      return f.avx512 && f.avx512_vnni;
  }
  return false;
}

Isa BestIsa() {
  if (CanRun(Isa::kAvx512Vnni)) return Isa::kAvx512Vnni;
  if (CanRun(Isa::kAvxVnni)) return Isa::kAvxVnni;
  return Isa::kGeneric;
}

void Gemm(Isa isa, const GemmArgs& args) {
  switch (isa) {
    case Isa::kAvx512Vnni:
      return GemmAvx512Vnni(args);
    case Isa::kAvxVnni:
      return GemmAvxVnni(args);
    case Isa::kGeneric:
      return GemmGeneric(args);
  }
}

}  // namespace orca::kernels::quant
