#include "kernels/cpu/cpu_backend.h"

#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "core/common/status_macros.h"
#include "kernels/cpu/avx512_kernels.h"
#include "kernels/cpu/bf16_dot_attention.h"
#include "kernels/cpu/bf16_dot_gemm.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/generic_kernels.h"
#include "kernels/cpu/quant_layout.h"
#include "kernels/cpu/quant_pack.h"

namespace orca::kernels {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kHugePage = size_t{2} << 20;
// Query tokens per attention work item in prefill: enough items to balance threads.
constexpr int32_t kQueryChunk = 16;

inline float LoadAs(const void* base, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(base)[i];
    case DType::kBF16:
      return Bf16ToF32(static_cast<const uint16_t*>(base)[i]);
    case DType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(base)[i]);
    default:  // quantized: never a KV cache dtype
      return 0;
  }
}

inline void StoreAs(void* base, DType dtype, int64_t i, float v) {
  if (dtype == DType::kBF16)
    static_cast<uint16_t*>(base)[i] = F32ToBf16(v);
  else
    static_cast<float*>(base)[i] = v;
}

// Bytes of a bf16/f32 weight packed into panels: [k][32], or bf16dot's pair panels.
size_t FloatPanelBytes(const WeightView& w, bool pairs) {
  return (pairs ? bf16dot::PanelElements(w.n, w.k) : avx512::PackedPanelElements(w.n, w.k)) * DTypeSize(w.dtype);
}

// Reads one byte of every page of a weight the GEMMs will read where it is (a mapped file),
// so the page faults happen here, at load, not in the first request that reads it.
void TouchPages(const WeightView& w, int threads) {
  const int64_t rows = w.transposed ? w.k : w.n, cols = w.transposed ? w.n : w.k;
  if (rows <= 0) return;
  const size_t span = static_cast<size_t>(rows - 1) * DTypeRowBytes(w.dtype, w.ld) + DTypeRowBytes(w.dtype, cols);
  const auto* p = static_cast<const volatile char*>(w.data);
  constexpr size_t kPage = 4096;
  const int64_t pages = static_cast<int64_t>((span + kPage - 1) / kPage);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < pages; ++i) (void)p[std::min(span - 1, static_cast<size_t>(i) * kPage)];
}

}  // namespace

std::unique_ptr<CpuBackend> CpuBackend::Create(const Options& options) {
  return std::unique_ptr<CpuBackend>(new CpuBackend(options));
}

CpuBackend::CpuBackend(const Options& options)
    : num_threads_(options.num_threads > 0 ? options.num_threads : std::max(1u, std::thread::hardware_concurrency())),
      small_gemm_max_rows_(options.small_gemm_max_rows),
      panel_gemm_max_rows_(options.panel_gemm_max_rows),
      pack_weights_(options.pack_weights),
      avx512_(GetCpuFeatures().avx512),
      amx_(GetCpuFeatures().amx_bf16),
      bf16_dot_(options.bf16_dot && GetCpuFeatures().avx512_bf16),
      quant_isa_(options.quant_isa.value_or(quant::BestIsa())),
      decode_prefetch_(options.decode_prefetch),
      quant_direct_max_rows_(options.quant_direct_max_rows.value_or(0)) {
  ORCA_CHECK(quant::CanRun(quant_isa_)) << "quantized GEMM path " << quant::IsaName(quant_isa_)
                                        << " does not run on this CPU";
}

CpuBackend::~CpuBackend() = default;

std::string CpuBackend::name() const {
  const auto& f = GetCpuFeatures();
  return absl::StrCat("cpu(", num_threads_, " threads", f.avx512 ? ", avx512" : "",
                      f.avx512_bf16 ? ", avx512_bf16" : "", f.amx_bf16 ? ", amx" : "", ", int8 ",
                      quant::IsaName(quant_isa_), ")");
}

absl::StatusOr<void*> CpuBackend::Allocate(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes"));
  // The whole 2 MiB pages inside a large buffer (packed weights, the KV pool, activations of a
  // long prefill) ask for transparent huge pages: one fault and one TLB entry per 2 MiB
  // instead of 512 (TinyLlama BF16 in engine_bench: 565k page faults → 124k; decode speed
  // unchanged). Only the interior: rounding buffers up to whole huge pages would make the
  // padding resident too. Where the machine has THP off ("never"), madvise changes nothing.
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + rounded) & ~(kHugePage - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  return p;
}
void CpuBackend::Free(void* ptr) { std::free(ptr); }

void CpuBackend::Prefault(void* ptr, size_t bytes) {
  // Every thread zeroes its share, so the pages are spread the way the ops will use them.
  constexpr size_t kChunk = size_t{1} << 20;
  const int64_t chunks = static_cast<int64_t>((bytes + kChunk - 1) / kChunk);
  auto* p = static_cast<char*>(ptr);
#pragma omp parallel for num_threads(num_threads_) schedule(static)
  for (int64_t c = 0; c < chunks; ++c)
    std::memset(p + c * kChunk, 0, std::min(kChunk, bytes - static_cast<size_t>(c) * kChunk));
}
void CpuBackend::CopyToDevice(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::CopyToHost(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

absl::StatusOr<WeightView> CpuBackend::UploadWeight(const WeightView& host, void** storage, WeightUse use) {
  *storage = nullptr;
  if (host.empty() || host.packed || use == WeightUse::kGather) return host;  // lookup tables stay mapped
  if (TraitsOf(host.dtype).cpu_gemm == CpuGemm::kNone)
    return absl::InvalidArgumentError(
        absl::StrCat("the CPU backend has no GEMM for ", DTypeName(host.dtype), " weights"));
  const bool quantized = quant::IsPackable(host.dtype);
  if (quantized) {
    const int64_t block = DTypeBlockElems(host.dtype);
    if (host.transposed || host.k % block != 0 || host.ld < host.k || host.ld % block != 0)
      return absl::InvalidArgumentError(absl::StrCat("a ", DTypeName(host.dtype), " weight [", host.n, ", ", host.k,
                                                     "] (row stride ", host.ld, ") is not whole ", block,
                                                     "-value blocks per row"));
  } else if (!(pack_weights_ && avx512_ && !host.transposed && host.dtype != DType::kF16 &&
               !(amx_ && host.dtype == DType::kBF16))) {
    // Row-major: the streaming / on-the-fly panel / oneDNN paths read the weight in place.
    TouchPages(host, num_threads_);
    return host;
  }
  // Pack once, here, in place of the row-major copy (see the class comment).
  const bool pairs = bf16_dot_ && host.dtype == DType::kBF16;
  const size_t bytes = quantized ? quant::PackedBytes(host.dtype, host.n, host.k) : FloatPanelBytes(host, pairs);
  ORCA_ASSIGN_OR_RETURN(void* packed, Allocate(bytes));
  const int64_t panels = quantized ? quant::NumPanels(host.n) : (host.n + 31) / 32;
#pragma omp parallel num_threads(num_threads_)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t p0 = panels * t / nt, p1 = panels * (t + 1) / nt;
    if (p0 < p1) {
      if (quantized)
        quant::PackPanels(host, p0, p1, static_cast<uint8_t*>(packed));
      else if (pairs)
        bf16dot::PackPanels(static_cast<const uint16_t*>(host.data), host.ld, host.n, host.k, p0, p1,
                            static_cast<uint16_t*>(packed));
      else
        avx512::PackPanels(host.data, host.dtype, host.ld, host.n, host.k, p0 * 32, std::min(host.n, p1 * 32), packed);
    }
  }
  WeightView out = host;
  out.data = packed;
  out.ld = host.k;
  out.packed = true;
  out.packed_bytes = bytes;
  *storage = packed;
  return out;
}

void CpuBackend::Linear(const float* x, int64_t m, const WeightView& w, const float* bias, float* y, bool accumulate) {
  if (m <= 0) return;
  ORCA_CHECK(w.packed || !quant::IsPackable(w.dtype))
      << "a " << DTypeName(w.dtype) << " weight used without UploadWeight";
  if (w.packed) {
    const StreamJob job{&w, bias, y, accumulate};
    PackedLinears(x, m, &job, 1);
    return;
  }
  if (avx512_ && !w.transposed && w.dtype != DType::kF16) {
    if (m <= small_gemm_max_rows_) {
      SmallLinear(x, m, w, bias, y, accumulate);
      return;
    }
    // With AMX, oneDNN's bf16 tiles outrun the f32-FMA panel kernel once there are rows to fill
    // them (not measured here: this VM exposes no AMX).
    if (m <= panel_gemm_max_rows_ && !(amx_ && w.dtype == DType::kBF16)) {
      PanelLinear(x, m, w, bias, y, accumulate);
      return;
    }
  }
  onednn_.Run(x, m, w, bias, y, accumulate, num_threads_);
}

void CpuBackend::LinearMany(const float* x, int64_t m, const LinearOut* outs, int count) {
  bool all_packed = m > 0 && count <= kMaxStreamJobs;
  for (int i = 0; all_packed && i < count; ++i) all_packed = outs[i].w->packed && outs[i].w->k == outs[0].w->k;
  if (all_packed) {
    StreamJob jobs[kMaxStreamJobs];
    for (int i = 0; i < count; ++i) jobs[i] = {outs[i].w, outs[i].bias, outs[i].y, false};
    PackedLinears(x, m, jobs, count);
    return;
  }
  // Decode-sized GEMMs sharing x and W's dtype and k: x packed once, every W
  // streamed in one parallel region (one fork/join instead of `count`).
  bool fused = avx512_ && m > 0 && m <= small_gemm_max_rows_ && count > 1 && count <= kMaxStreamJobs;
  for (int i = 0; fused && i < count; ++i) {
    const WeightView& w = *outs[i].w;
    fused = !w.transposed && w.dtype != DType::kF16 && w.dtype == outs[0].w->dtype && w.k == outs[0].w->k;
  }
  if (!fused) {
    Backend::LinearMany(x, m, outs, count);
    return;
  }
  StreamJob jobs[kMaxStreamJobs];
  for (int i = 0; i < count; ++i) jobs[i] = {outs[i].w, outs[i].bias, outs[i].y, false};
  StreamLinears(x, m, jobs, count);
}

void CpuBackend::SmallLinear(const float* x, int64_t m, const WeightView& w, const float* bias, float* y,
                             bool accumulate) {
  const StreamJob job{&w, bias, y, accumulate};
  StreamLinears(x, m, &job, 1);
}

void CpuBackend::StreamLinears(const float* x, int64_t m, const StreamJob* jobs, int count) {
  const WeightView& w0 = *jobs[0].w;
  const size_t need = static_cast<size_t>(avx512::PackedXFloats(m, w0.k));
  if (packed_x_.size() < need) packed_x_.resize(need);
  avx512::PackX(x, m, w0.k, w0.dtype, packed_x_.data());
  const float* px = packed_x_.data();
  // Work is counted in 4-row blocks of W over all jobs; each thread streams one
  // contiguous share. (Handing out 64-row chunks from a shared counter measured
  // no better here: gemm_bench's model pass within noise, slightly slower.)
  int64_t start[kMaxStreamJobs + 1] = {};
  int64_t rows = 0;
  for (int i = 0; i < count; ++i) {
    start[i + 1] = start[i] + (jobs[i].w->n + 3) / 4;
    rows += jobs[i].w->n;
  }
  const int64_t total = start[count];
  // Small matrices are not worth a fork (the region's overhead exceeds the work).
  const bool big = rows * w0.k * m >= (int64_t{1} << 17);
  const int threads = big ? static_cast<int>(std::min<int64_t>(num_threads_, std::max<int64_t>(1, total / 16))) : 1;
#pragma omp parallel num_threads(threads)
  {
    auto run = [&](int64_t b0, int64_t b1) {
      for (int i = 0; i < count; ++i) {
        const int64_t lo = std::max(b0, start[i]), hi = std::min(b1, start[i + 1]);
        if (lo >= hi) continue;
        const WeightView& w = *jobs[i].w;
        avx512::SmallGemm(px, m, w.k, w.data, w.dtype, w.ld, jobs[i].bias, jobs[i].y, w.n, jobs[i].accumulate,
                          (lo - start[i]) * 4, std::min(w.n, (hi - start[i]) * 4));
      }
    };
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    run(total * tid / nt, total * (tid + 1) / nt);
  }
}

void CpuBackend::PanelLinear(const float* x, int64_t m, const WeightView& w, const float* bias, float* y,
                             bool accumulate) {
  // A row-major weight: each thread packs its 32-column panels on the fly.
  const int threads = static_cast<int>(std::min<int64_t>(num_threads_, std::max<int64_t>(1, w.n / 64)));
#pragma omp parallel num_threads(threads)
  {
    const int tid = omp_get_thread_num();
    const int nt = omp_get_num_threads();
    const int64_t panels = (w.n + 31) / 32;
    const int64_t p0 = panels * tid / nt, p1 = panels * (tid + 1) / nt;
    const int64_t n0 = p0 * 32, n1 = std::min(w.n, p1 * 32);
    if (n0 < n1) avx512::PanelGemm(x, m, w.k, w.data, w.dtype, w.ld, bias, y, w.n, accumulate, n0, n1);
  }
}

void CpuBackend::PackedLinears(const float* x, int64_t m, const StreamJob* jobs, int count) {
  // Work units are panels of every job (16 columns for quantized weights, 32 for f32/bf16); each
  // thread takes one contiguous share, so it streams contiguous packed memory.
  int64_t start[kMaxStreamJobs + 1] = {};
  bool any_quantized = false, any_pairs = false;
  double work = 0;
  for (int i = 0; i < count; ++i) {
    const WeightView& w = *jobs[i].w;
    const bool q = quant::IsPackable(w.dtype);
    any_quantized |= q;
    any_pairs |= bf16_dot_ && w.dtype == DType::kBF16;
    start[i + 1] = start[i] + (q ? quant::NumPanels(w.n) : (w.n + 31) / 32);
    work += static_cast<double>(w.n) * w.k * m;
  }
  const int64_t total = start[count], k = jobs[0].w->k;
  // Small products are not worth a fork (the region's overhead exceeds the work).
  const int threads = work >= (1 << 17) ? static_cast<int>(std::min<int64_t>(num_threads_, total)) : 1;
  if (any_quantized) quant::PrepareRows(m, k, &quantized_x_);
  if (any_pairs && bf16_x_.size() < bf16dot::ConvertedElements(m, k)) bf16_x_.resize(bf16dot::ConvertedElements(m, k));
#pragma omp parallel num_threads(threads)
  {
    const int64_t tid = omp_get_thread_num(), nt = omp_get_num_threads();
    if (any_quantized) quant::QuantizeRows(quant_isa_, x, m * tid / nt, m * (tid + 1) / nt, &quantized_x_);
    if (any_pairs) bf16dot::ConvertRows(x, k, m * tid / nt, m * (tid + 1) / nt, bf16_x_.data());
    if (any_quantized || any_pairs) {
#pragma omp barrier
    }
    const int64_t b0 = total * tid / nt, b1 = total * (tid + 1) / nt;
    for (int i = 0; i < count; ++i) {
      const int64_t lo = std::max(b0, start[i]) - start[i], hi = std::min(b1, start[i + 1]) - start[i];
      if (lo >= hi) continue;
      const WeightView& w = *jobs[i].w;
      if (quant::IsPackable(w.dtype)) {
        quant::GemmArgs a;
        a.x = &quantized_x_;
        a.dtype = w.dtype;
        a.packed = static_cast<const uint8_t*>(w.data);
        a.n = w.n;
        a.k = w.k;
        a.bias = jobs[i].bias;
        a.y = jobs[i].y;
        a.ldy = w.n;
        a.accumulate = jobs[i].accumulate;
        a.panel_begin = lo;
        a.panel_end = hi;
        a.prefetch = decode_prefetch_.value_or(
            quant::DecodePrefetchFor(m, w.dtype, GetCpuFeatures().amd, GetCpuFeatures().family));
        a.direct_max_rows = quant_direct_max_rows_ > 0
                                ? quant_direct_max_rows_
                                : quant::AvxDirectMaxRowsFor(w.dtype, GetCpuFeatures().amd, GetCpuFeatures().family);
        quant::Gemm(quant_isa_, a);
      } else if (bf16_dot_ && w.dtype == DType::kBF16) {
        bf16dot::Gemm(bf16_x_.data(), m, w.k, static_cast<const uint16_t*>(w.data), jobs[i].bias, jobs[i].y, w.n,
                      jobs[i].accumulate, w.n, lo * 32, std::min(w.n, hi * 32));
      } else {
        avx512::PackedPanelGemm(x, m, w.k, w.data, w.dtype, jobs[i].bias, jobs[i].y, w.n, jobs[i].accumulate, w.n,
                                lo * 32, std::min(w.n, hi * 32));
      }
    }
  }
}

void CpuBackend::DecodeRow(const WeightView& t, int64_t row, float* out) const {
  if (t.packed && quant::IsPackable(t.dtype)) {
    quant::DequantizePackedRow(t.dtype, static_cast<const uint8_t*>(t.data), t.k, row, out);
  } else if (t.packed && bf16_dot_ && t.dtype == DType::kBF16) {
    const auto* p = static_cast<const uint16_t*>(t.data);
    for (int64_t j = 0; j < t.k; ++j) out[j] = Bf16ToF32(bf16dot::PackedValue(p, t.k, row, j));
  } else if (t.packed) {  // [k][32] panels
    const size_t base = static_cast<size_t>(row / 32) * t.k * 32 + row % 32;
    for (int64_t j = 0; j < t.k; ++j) out[j] = LoadAs(t.data, t.dtype, static_cast<int64_t>(base) + j * 32);
  } else {
    const uint8_t* src = static_cast<const uint8_t*>(t.data) + static_cast<size_t>(row) * DTypeRowBytes(t.dtype, t.ld);
    DequantizeRow(t.dtype, src, out, t.k);
  }
}

void CpuBackend::Embedding(const int32_t* ids, int64_t m, const WeightView& table, float* out) {
#pragma omp parallel for num_threads(num_threads_) if (m > 64)
  for (int64_t i = 0; i < m; ++i) DecodeRow(table, ids[i], out + i * table.k);
}

void CpuBackend::AddPositionEmbedding(const int32_t* positions, int64_t m, const WeightView& table, float* out) {
#pragma omp parallel num_threads(num_threads_) if (m > 64)
  {
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(table.k));
#pragma omp for
    for (int64_t i = 0; i < m; ++i) {
      DecodeRow(table, positions[i], row.data());
      float* o = out + i * table.k;
      for (int64_t j = 0; j < table.k; ++j) o[j] += row[j];
    }
  }
}

void CpuBackend::RmsNorm(const float* x, const float* weight, int64_t m, int64_t h, float eps, float* y) {
#pragma omp parallel for num_threads(num_threads_) if (m > 16)
  for (int64_t i = 0; i < m; ++i) {
    const float* xr = x + i * h;
    float* yr = y + i * h;
    if (avx512_) {
      avx512::RmsNormRow(xr, weight, h, eps, yr);
      continue;
    }
    double ss = 0;
    for (int64_t j = 0; j < h; ++j) ss += static_cast<double>(xr[j]) * xr[j];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / h) + eps);
    for (int64_t j = 0; j < h; ++j) yr[j] = xr[j] * inv * weight[j];
  }
}

void CpuBackend::SumSquares(const float* x, int64_t m, int64_t h, float* sums) {
#pragma omp parallel for num_threads(num_threads_) if (m > 16)
  for (int64_t i = 0; i < m; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < h; ++j) ss += static_cast<double>(x[i * h + j]) * x[i * h + j];
    sums[i] = static_cast<float>(ss);
  }
}

void CpuBackend::RmsNormFromSums(const float* x, const float* weight, const float* sums, int64_t m, int64_t h,
                                 int64_t total_h, float eps, float* y) {
#pragma omp parallel for num_threads(num_threads_) if (m > 16)
  for (int64_t i = 0; i < m; ++i) {
    const float inv = 1.0f / std::sqrt(static_cast<float>(static_cast<double>(sums[i]) / total_h) + eps);
    for (int64_t j = 0; j < h; ++j) y[i * h + j] = x[i * h + j] * inv * weight[j];
  }
}

void CpuBackend::LayerNorm(const float* x, const float* gamma, const float* beta, int64_t m, int64_t h, float eps,
                           float* y) {
#pragma omp parallel for num_threads(num_threads_) if (m > 16)
  for (int64_t i = 0; i < m; ++i) {
    const float* xr = x + i * h;
    float* yr = y + i * h;
    double mean = 0;
    for (int64_t j = 0; j < h; ++j) mean += xr[j];
    mean /= h;
    double var = 0;
    for (int64_t j = 0; j < h; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= h;
    const float inv = 1.0f / std::sqrt(static_cast<float>(var) + eps);
    for (int64_t j = 0; j < h; ++j)
      yr[j] = (xr[j] - static_cast<float>(mean)) * inv * gamma[j] + (beta ? beta[j] : 0.0f);
  }
}

void CpuBackend::GeluMul(const float* gate, const float* up, int64_t m, int64_t n, float* out) {
  const int64_t total = m * n;
  if (out != gate) std::memcpy(out, gate, sizeof(float) * total);
  GeluTanh(out, total);
#pragma omp parallel for simd num_threads(num_threads_) if (total > 65536)
  for (int64_t i = 0; i < total; ++i) out[i] *= up[i];
}

void CpuBackend::Scale(float* x, int64_t n, float s) {
#pragma omp parallel for simd num_threads(num_threads_) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void CpuBackend::Softcap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
#pragma omp parallel for num_threads(num_threads_) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

void CpuBackend::AttentionTemperature(float* x, const int32_t* positions, int64_t m, int64_t n, float scale,
                                      int32_t floor) {
  ORCA_CHECK(floor > 0) << "attention temperature floor " << floor;
  // The factor in double, rounded once to f32: llama.cpp's (llm_graph_input_attn_temp) to the bit.
#pragma omp parallel for num_threads(num_threads_) if (m * n > 65536)
  for (int64_t i = 0; i < m; ++i) {
    const float f = static_cast<float>(1.0 + scale * std::log(1.0 + static_cast<double>(positions[i] / floor)));
    float* row = x + i * n;
    for (int64_t j = 0; j < n; ++j) row[j] *= f;
  }
}

void CpuBackend::Add(float* y, const float* x, int64_t n) {
#pragma omp parallel for simd num_threads(num_threads_) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void CpuBackend::SiluMul(const float* gate, const float* up, int64_t m, int64_t n, float* out) {
  const int64_t total = m * n;
  if (avx512_) {
    // Whole 16-float vectors per thread; one thread below the fork threshold.
    const int threads = total > 16384 ? num_threads_ : 1;
#pragma omp parallel num_threads(threads)
    {
      const int64_t vecs = (total + 15) / 16, t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t b = vecs * t / nt * 16, e = std::min(total, vecs * (t + 1) / nt * 16);
      if (b < e) avx512::SiluMul(gate + b, up + b, e - b, out + b);
    }
    return;
  }
#pragma omp parallel for simd num_threads(num_threads_) if (total > 16384)
  for (int64_t i = 0; i < total; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void CpuBackend::GeluTanh(float* x, int64_t n) {
  if (avx512_) {
    const int threads = n > 16384 ? num_threads_ : 1;
#pragma omp parallel num_threads(threads)
    {
      const int64_t vecs = (n + 15) / 16, t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t b = vecs * t / nt * 16, e = std::min(n, vecs * (t + 1) / nt * 16);
      if (b < e) avx512::GeluTanh(x + b, e - b);
    }
    return;
  }
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
#pragma omp parallel for simd num_threads(num_threads_) if (n > 16384)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  }
}

void CpuBackend::Rope(float* q, float* k, const int32_t* positions, int64_t m, int32_t num_q_heads,
                      int32_t num_kv_heads, int32_t head_dim, const RopeParams& rope) {
  const int32_t half = rope.rotary_dim / 2;
  // cos/sin per (token, frequency): every layer of a forward rotates the same
  // positions, so the table is computed by the first and reused by the rest.
  RopeTable& tab = rope_table_;
  const bool same = static_cast<int32_t>(tab.inv_freq.size()) == half && tab.factor == rope.attention_factor &&
                    std::equal(tab.inv_freq.begin(), tab.inv_freq.end(), rope.inv_freq) &&
                    static_cast<int64_t>(tab.positions.size()) == m &&
                    std::equal(tab.positions.begin(), tab.positions.end(), positions);
  if (!same) {
    tab.inv_freq.assign(rope.inv_freq, rope.inv_freq + half);
    tab.factor = rope.attention_factor;
    tab.positions.assign(positions, positions + m);
    tab.cos.resize(static_cast<size_t>(m * half));
    tab.sin.resize(static_cast<size_t>(m * half));
#pragma omp parallel for num_threads(num_threads_) if (m > 8)
    for (int64_t t = 0; t < m; ++t)
      for (int32_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(positions[t]) * rope.inv_freq[i];
        tab.cos[t * half + i] = static_cast<float>(std::cos(angle)) * rope.attention_factor;
        tab.sin[t * half + i] = static_cast<float>(std::sin(angle)) * rope.attention_factor;
      }
  }
#pragma omp parallel for num_threads(num_threads_) if (m > 8)
  for (int64_t t = 0; t < m; ++t) {
    const float* cs = tab.cos.data() + t * half;
    const float* sn = tab.sin.data() + t * half;
    auto rotate = [&](float* head) {
      if (rope.style == RopeStyle::kNeox) {
        for (int32_t i = 0; i < half; ++i) {
          const float a = head[i], b = head[i + half];
          head[i] = a * cs[i] - b * sn[i];
          head[i + half] = b * cs[i] + a * sn[i];
        }
      } else {
        for (int32_t i = 0; i < half; ++i) {
          const float a = head[2 * i], b = head[2 * i + 1];
          head[2 * i] = a * cs[i] - b * sn[i];
          head[2 * i + 1] = b * cs[i] + a * sn[i];
        }
      }
    };
    for (int32_t h = 0; h < num_q_heads; ++h) rotate(q + (t * num_q_heads + h) * head_dim);
    for (int32_t h = 0; h < num_kv_heads; ++h) rotate(k + (t * num_kv_heads + h) * head_dim);
  }
}

void CpuBackend::KvWrite(const KvWriteParams& p) {
  const KvLayerView& kv = p.kv;
  const int32_t d = kv.head_dim, bs = kv.block_size, nh = kv.num_kv_heads;
#pragma omp parallel for num_threads(num_threads_) if (p.num_tokens > 64)
  for (int32_t t = 0; t < p.num_tokens; ++t) {
    const int32_t slot = p.slots[t];
    const int64_t block = slot / bs, off = slot % bs;
    for (int32_t h = 0; h < nh; ++h) {
      const float* ksrc = p.k + (static_cast<int64_t>(t) * nh + h) * d;
      const float* vsrc = p.v + (static_cast<int64_t>(t) * nh + h) * d;
      const int64_t base = (block * nh + h) * static_cast<int64_t>(d) * bs;
      for (int32_t j = 0; j < d; ++j) {
        StoreAs(kv.k, kv.dtype, base + static_cast<int64_t>(j) * bs + off, ksrc[j]);  // K transposed in block
        StoreAs(kv.v, kv.dtype, base + off * d + j, vsrc[j]);
      }
    }
  }
}

void CpuBackend::Attention(const AttentionParams& p) {
  const KvLayerView& kv = p.kv;
  const int32_t d = kv.head_dim, bs = kv.block_size, nkv = kv.num_kv_heads;
  const int32_t group = p.num_q_heads / nkv;
  attention_items_.clear();
  for (int32_t s = 0; s < p.num_seqs; ++s)
    for (int32_t g = 0; g < nkv; ++g)
      for (int32_t t = 0; t < p.seqs[s].num_tokens; t += kQueryChunk)
        attention_items_.push_back({s, g, t, std::min(p.seqs[s].num_tokens, t + kQueryChunk)});
  const auto group_scores = avx512_ ? avx512::GroupBlockScores : generic::GroupBlockScores;
  const auto group_acc = avx512_ ? avx512::GroupBlockAccumulate : generic::GroupBlockAccumulate;
  const auto vmax = avx512_ ? avx512::Max : generic::Max;
  const auto exp_sum = avx512_ ? avx512::ExpSubtractSum : generic::ExpSubtractSum;
  // A bf16 cache on a CPU with bf16 dot products: two products per lane straight from the cache
  // (bf16_dot_attention.h); every row of the call takes the same path, prompt or decode.
  const bool bf16_dot = bf16_dot_ && kv.dtype == DType::kBF16 && bf16dot::AttentionShapeSupported(d, bs);
  const size_t esize = DTypeSize(kv.dtype);
  const int64_t head_block_elems = static_cast<int64_t>(d) * bs;
  const size_t head_block_bytes = static_cast<size_t>(head_block_elems) * esize;
  const int64_t num_items = static_cast<int64_t>(attention_items_.size());
  const int64_t row_stride = static_cast<int64_t>(p.num_q_heads) * d;
  // Fork only when there is enough work: a parallel region costs microseconds,
  // far more than a tiny model's attention (and much more on a busy machine).
  int64_t work = 0;
  for (int32_t s = 0; s < p.num_seqs; ++s)
    work += static_cast<int64_t>(p.seqs[s].num_tokens) * (p.seqs[s].start_pos + p.seqs[s].num_tokens);
  work *= static_cast<int64_t>(p.num_q_heads) * d;
#pragma omp parallel num_threads(num_threads_) if (num_items > 1 && work > (1 << 16))
  {
    thread_local std::vector<float> scores, inv_sum;
    thread_local std::vector<uint16_t> q_bf16;
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < num_items; ++it) {
      const AttentionItem item = attention_items_[it];
      const AttentionSeq& seq = p.seqs[item.seq];
      const int32_t max_ctx = seq.start_pos + item.t_end;
      // The item's K and V blocks are scattered over the pool and cold (the weights streamed
      // through the caches since this layer last ran), each only a few KiB: too short for the
      // hardware prefetcher. Request them all up front so their misses overlap (A/B at batch 32,
      // prompt 128 on the 135M model: 2-5 % faster decode steps).
      // A sliding window's unseen blocks are neither prefetched nor read (their table entries may be stale).
      const int32_t min_block = p.window > 0 ? std::max(0, seq.start_pos + item.t_begin + 1 - p.window) / bs : 0;
      for (int32_t b = min_block, nb = (max_ctx + bs - 1) / bs; b < nb; ++b) {
        const size_t off = static_cast<size_t>((seq.block_table[b] * nkv + item.kv_head) * head_block_elems) * esize;
        for (size_t line = 0; line < head_block_bytes; line += 64) {
          _mm_prefetch(static_cast<const char*>(kv.k) + off + line, _MM_HINT_T0);
          _mm_prefetch(static_cast<const char*>(kv.v) + off + line, _MM_HINT_T0);
        }
      }
      const size_t padded = static_cast<size_t>((max_ctx + bs - 1) / bs * bs);
      if (scores.size() < padded * group) scores.resize(padded * group);
      if (inv_sum.size() < static_cast<size_t>(group)) inv_sum.resize(group);
      if (bf16_dot && q_bf16.size() < static_cast<size_t>(group) * d) q_bf16.resize(static_cast<size_t>(group) * d);
      for (int32_t t = item.t_begin; t < item.t_end; ++t) {
        const int32_t ctx = seq.start_pos + t + 1;
        const int32_t nblocks = (ctx + bs - 1) / bs;
        const int64_t row = seq.q_offset + t;
        // The group's query heads are adjacent in q: one pass over a block serves them all.
        const float* q = p.q + row * row_stride + static_cast<int64_t>(item.kv_head * group) * d;
        float* out = p.out + row * row_stride + static_cast<int64_t>(item.kv_head * group) * d;
        const int32_t first_block = p.window > 0 ? std::max(0, ctx - p.window) / bs : 0;
        if (bf16_dot) {
          bf16dot::ConvertRows(q, static_cast<int64_t>(group) * d, 0, 1, q_bf16.data());  // group · d is even
          const bf16dot::HeadBlocks kb{static_cast<const uint16_t*>(kv.k), seq.block_table, nkv * head_block_elems,
                                       item.kv_head * head_block_elems};
          bf16dot::GroupScores(q_bf16.data(), group, kb, d, ctx, p.scale, scores.data(), padded, first_block);
        } else {
          for (int32_t b = first_block; b < nblocks; ++b) {
            const int32_t count = std::min(bs, ctx - b * bs);
            const int64_t blk = seq.block_table[b];
            const uint8_t* kt = static_cast<const uint8_t*>(kv.k) +
                                static_cast<size_t>((blk * nkv + item.kv_head) * head_block_elems) * esize;
            group_scores(q, group, kt, kv.dtype, d, bs, count, p.scale, scores.data() + b * bs, padded);
          }
        }
        // Sliding window: keys before `lo` are out of sight (their blocks are not scored above, or scored and
        // dropped here): their scores become -inf, their weights vanish.
        const int32_t lo = p.window > 0 ? std::max(0, ctx - p.window) : 0;
        for (int32_t h = 0; h < group; ++h) {
          float* sc = scores.data() + h * padded;
          if (p.softcap > 0)
            for (int32_t j = lo; j < ctx; ++j) sc[j] = p.softcap * std::tanh(sc[j] / p.softcap);
          // Only from the first block read on: the blocks before it are neither scored nor accumulated.
          float* live = sc + first_block * bs;
          std::fill(live, sc + lo, -std::numeric_limits<float>::infinity());
          inv_sum[h] = 1.0f / exp_sum(live, ctx - first_block * bs, vmax(live, ctx - first_block * bs));
        }
        if (bf16_dot) {
          const bf16dot::HeadBlocks vb{static_cast<const uint16_t*>(kv.v), seq.block_table, nkv * head_block_elems,
                                       item.kv_head * head_block_elems};
          bf16dot::GroupAccumulate(scores.data(), padded, group, vb, d, ctx, out, first_block);
        } else {
          std::memset(out, 0, sizeof(float) * d * group);
          for (int32_t b = first_block; b < nblocks; ++b) {
            const int32_t count = std::min(bs, ctx - b * bs);
            const int64_t blk = seq.block_table[b];
            const uint8_t* vb = static_cast<const uint8_t*>(kv.v) +
                                static_cast<size_t>((blk * nkv + item.kv_head) * head_block_elems) * esize;
            group_acc(scores.data() + b * bs, padded, group, vb, kv.dtype, d, count, out);
          }
        }
        for (int32_t h = 0; h < group; ++h)
          for (int32_t j = 0; j < d; ++j) out[h * d + j] *= inv_sum[h];
      }
    }
  }
}

void CpuBackend::GatherRows(const float* src, const int32_t* rows, int64_t num_rows, int64_t h, float* dst) {
  for (int64_t i = 0; i < num_rows; ++i) std::memcpy(dst + i * h, src + rows[i] * h, sizeof(float) * h);
}

}  // namespace orca::kernels
