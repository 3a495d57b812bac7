#pragma once
// Shared by the kernel tests: random inputs, a runner that moves host vectors
// through any Backend's device memory, plain scalar references (float64
// accumulation) and a paged-attention scenario builder — random block tables,
// several sequences at different start positions, unwritten cache slots
// poisoned with NaN so that reading one shows up in the output.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/common/dtype.h"
#include "gtest/gtest.h"
#include "kernels/include/backend.h"

namespace orca::kernels::testing {

inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline float RoundBf16(float v) { return Bf16ToF32(F32ToBf16(v)); }

/// Host bytes of `values` stored as `dtype` (f32 or bf16).
inline std::vector<uint8_t> StoreAs(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * DTypeSize(dtype));
  ConvertFromF32(values.data(), dtype, bytes.data(), values.size());
  return bytes;
}

/// Element `i` of host bytes stored as `dtype`, as f32.
inline float LoadAs(const std::vector<uint8_t>& bytes, DType dtype, size_t i) {
  float v;
  ConvertToF32(bytes.data() + i * DTypeSize(dtype), dtype, &v, 1);
  return v;
}

/// Device buffers of one backend, freed with the runner.
class DeviceRunner {
 public:
  explicit DeviceRunner(Backend& backend) : backend_(backend) {}
  ~DeviceRunner() {
    backend_.Synchronize();
    for (void* p : buffers_) backend_.Free(p);
  }
  DeviceRunner(const DeviceRunner&) = delete;
  DeviceRunner& operator=(const DeviceRunner&) = delete;

  Backend& backend() { return backend_; }

  void* Bytes(const void* host, size_t bytes) {
    void* p = Alloc(bytes);
    if (bytes > 0) backend_.CopyToDevice(p, host, bytes);
    return p;
  }
  void* Alloc(size_t bytes) {
    absl::StatusOr<void*> p = backend_.Allocate(std::max<size_t>(bytes, 1));
    EXPECT_TRUE(p.ok()) << p.status();
    buffers_.push_back(p.ok() ? *p : nullptr);
    return buffers_.back();
  }
  template <typename T>
  T* Upload(const std::vector<T>& v) {
    return static_cast<T*>(Bytes(v.data(), v.size() * sizeof(T)));
  }
  template <typename T>
  std::vector<T> Download(const T* device, size_t n) {
    std::vector<T> v(n);
    if (n > 0) backend_.CopyToHost(v.data(), device, n * sizeof(T));
    backend_.Synchronize();
    return v;
  }

 private:
  Backend& backend_;
  std::vector<void*> buffers_;
};

// ---- GEMM reference ---------------------------------------------------------------

struct GemmCase {
  std::string name;
  int64_t m = 1, n = 1, k = 1;
  int64_t ld_pad = 0;  ///< extra elements per stored row (a strided view)
  bool transposed = false;
  DType dtype = DType::kF32;
  bool bias = false;
  bool accumulate = false;
  int64_t small_gemm_max_rows = 16;   ///< CPU: which GEMM path serves the case
  int64_t panel_gemm_max_rows = 128;  ///< CPU: rows up to this use the panel kernel, more oneDNN
  bool cpu_pack = false;              ///< CPU: UploadWeight packs the weight into panels (the engine's default)
};

inline void PrintTo(const GemmCase& c, std::ostream* os) { *os << c.name; }

/// Host data of one GEMM case (weights stored in their dtype, strided).
struct GemmData {
  std::vector<float> x, w_logical, bias, y0;  ///< w_logical: [n, k], values as stored
  std::vector<uint8_t> w_bytes;               ///< stored layout, row stride ld
  WeightView view;                            ///< over w_bytes (host)
};

inline GemmData MakeGemmData(const GemmCase& c, uint32_t seed) {
  GemmData d;
  d.x = RandomFloats(static_cast<size_t>(c.m * c.k), seed);
  d.w_logical = RandomFloats(static_cast<size_t>(c.n * c.k), seed + 1, -0.5f, 0.5f);
  if (c.dtype == DType::kBF16)
    for (float& v : d.w_logical) v = RoundBf16(v);
  d.bias = RandomFloats(static_cast<size_t>(c.n), seed + 2);
  d.y0 = RandomFloats(static_cast<size_t>(c.m * c.n), seed + 3);
  const int64_t rows = c.transposed ? c.k : c.n, cols = c.transposed ? c.n : c.k, ld = cols + c.ld_pad;
  std::vector<float> stored(static_cast<size_t>(rows * ld), std::numeric_limits<float>::quiet_NaN());
  for (int64_t j = 0; j < c.n; ++j)
    for (int64_t l = 0; l < c.k; ++l) {
      const float v = d.w_logical[j * c.k + l];
      stored[c.transposed ? l * ld + j : j * ld + l] = v;
    }
  d.w_bytes = StoreAs(stored, c.dtype);
  d.view.data = d.w_bytes.data();
  d.view.dtype = c.dtype;
  d.view.n = c.n;
  d.view.k = c.k;
  d.view.ld = ld;
  d.view.transposed = c.transposed;
  return d;
}

/// Per output: the float64 reference and Σ|x·w| (the scale of rounding error).
struct GemmReference {
  std::vector<double> y, magnitude;
};

inline GemmReference ReferenceGemm(const GemmCase& c, const GemmData& d) {
  GemmReference r;
  r.y.resize(static_cast<size_t>(c.m * c.n));
  r.magnitude.resize(r.y.size());
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double acc = 0, mag = 0;
      for (int64_t l = 0; l < c.k; ++l) {
        const double p = static_cast<double>(d.x[i * c.k + l]) * d.w_logical[j * c.k + l];
        acc += p;
        mag += std::abs(p);
      }
      if (c.bias) {
        acc += d.bias[j];
        mag += std::abs(d.bias[j]);
      }
      if (c.accumulate) {
        acc += d.y0[i * c.n + j];
        mag += std::abs(d.y0[i * c.n + j]);
      }
      r.y[i * c.n + j] = acc;
      r.magnitude[i * c.n + j] = mag;
    }
  return r;
}

/// Runs Linear on `runner`'s backend (weights through UploadWeight) and returns y.
inline std::vector<float> RunGemm(DeviceRunner& run, const GemmCase& c, const GemmData& d) {
  Backend& be = run.backend();
  void* storage = nullptr;
  absl::StatusOr<WeightView> w = be.UploadWeight(d.view, &storage);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return {};
  const float* x = run.Upload(d.x);
  const float* bias = c.bias ? run.Upload(d.bias) : nullptr;
  float* y = run.Upload(d.y0);
  be.Linear(x, c.m, *w, bias, y, c.accumulate);
  std::vector<float> out = run.Download(y, d.y0.size());
  if (storage != nullptr) be.Free(storage);
  return out;
}

// ---- Paged attention scenario ----------------------------------------------------

struct SeqShape {
  int32_t start_pos = 0;
  int32_t num_tokens = 1;
};

struct AttentionCase {
  std::string name;
  int32_t num_q_heads = 4;
  int32_t num_kv_heads = 2;
  int32_t head_dim = 64;
  int32_t block_size = 16;
  DType kv_dtype = DType::kF32;
  std::vector<SeqShape> seqs;
};

inline void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

/// Host data: K/V of every position of every sequence (history written before
/// the iteration, then this iteration's rows), queries, and a shuffled block
/// assignment so tables are not contiguous.
struct AttentionData {
  int32_t num_blocks = 0;
  std::vector<std::vector<int32_t>> tables;
  std::vector<std::vector<float>> k, v;  ///< per seq: [start_pos + num_tokens][kv_width]
  std::vector<float> q;                  ///< [N, q_width]
  std::vector<int32_t> q_offset;
  int32_t num_tokens = 0;
};

inline AttentionData MakeAttentionData(const AttentionCase& c, uint32_t seed) {
  AttentionData d;
  const int32_t kv_width = c.num_kv_heads * c.head_dim;
  int32_t blocks = 0;
  for (const SeqShape& s : c.seqs) blocks += (s.start_pos + s.num_tokens + c.block_size - 1) / c.block_size;
  d.num_blocks = blocks + 3;  // a few blocks nobody owns
  std::vector<int32_t> ids(static_cast<size_t>(d.num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  size_t next = 0;
  for (size_t si = 0; si < c.seqs.size(); ++si) {
    const SeqShape& s = c.seqs[si];
    const int32_t ctx = s.start_pos + s.num_tokens;
    const int32_t nb = (ctx + c.block_size - 1) / c.block_size;
    d.tables.emplace_back(ids.begin() + next, ids.begin() + next + nb);
    next += static_cast<size_t>(nb);
    d.k.push_back(RandomFloats(static_cast<size_t>(ctx) * kv_width, seed + 10 + 2 * static_cast<uint32_t>(si)));
    d.v.push_back(RandomFloats(static_cast<size_t>(ctx) * kv_width, seed + 11 + 2 * static_cast<uint32_t>(si)));
    d.q_offset.push_back(d.num_tokens);
    d.num_tokens += s.num_tokens;
  }
  d.q = RandomFloats(static_cast<size_t>(d.num_tokens) * c.num_q_heads * c.head_dim, seed + 5, -2.0f, 2.0f);
  return d;
}

inline int32_t SlotOf(const AttentionCase& c, const AttentionData& d, size_t seq, int32_t pos) {
  return d.tables[seq][pos / c.block_size] * c.block_size + pos % c.block_size;
}

/// What a backend produced: the attention output and the raw KV pool bytes.
struct AttentionResult {
  std::vector<float> out;
  std::vector<uint8_t> k_pool, v_pool;
};

/// Poisons the pool with NaN, writes the history (one KvWrite) and this
/// iteration's K/V (another), then runs Attention once over all sequences.
inline AttentionResult RunAttention(DeviceRunner& run, const AttentionCase& c, const AttentionData& d) {
  Backend& be = run.backend();
  const int32_t kv_width = c.num_kv_heads * c.head_dim;
  const size_t pool_elems = static_cast<size_t>(d.num_blocks) * c.block_size * kv_width;
  const std::vector<float> nan(pool_elems, std::numeric_limits<float>::quiet_NaN());
  const std::vector<uint8_t> poison = StoreAs(nan, c.kv_dtype);
  KvLayerView kv;
  kv.k = run.Bytes(poison.data(), poison.size());
  kv.v = run.Bytes(poison.data(), poison.size());
  kv.dtype = c.kv_dtype;
  kv.block_size = c.block_size;
  kv.num_kv_heads = c.num_kv_heads;
  kv.head_dim = c.head_dim;

  // Pass 1: positions before start_pos (earlier iterations); pass 2: this iteration.
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<float> k_rows, v_rows;
    std::vector<int32_t> slots;
    for (size_t si = 0; si < c.seqs.size(); ++si) {
      const SeqShape& s = c.seqs[si];
      const int32_t begin = pass == 0 ? 0 : s.start_pos, end = pass == 0 ? s.start_pos : s.start_pos + s.num_tokens;
      for (int32_t pos = begin; pos < end; ++pos) {
        slots.push_back(SlotOf(c, d, si, pos));
        k_rows.insert(k_rows.end(), d.k[si].begin() + pos * kv_width, d.k[si].begin() + (pos + 1) * kv_width);
        v_rows.insert(v_rows.end(), d.v[si].begin() + pos * kv_width, d.v[si].begin() + (pos + 1) * kv_width);
      }
    }
    if (slots.empty()) continue;
    KvWriteParams w;
    w.k = run.Upload(k_rows);
    w.v = run.Upload(v_rows);
    w.slots = run.Upload(slots);
    w.num_tokens = static_cast<int32_t>(slots.size());
    w.kv = kv;
    be.KvWrite(w);
  }

  std::vector<AttentionSeq> seqs;
  for (size_t si = 0; si < c.seqs.size(); ++si) {
    AttentionSeq s;
    s.q_offset = d.q_offset[si];
    s.num_tokens = c.seqs[si].num_tokens;
    s.start_pos = c.seqs[si].start_pos;
    s.block_table = run.Upload(d.tables[si]);
    seqs.push_back(s);
  }
  AttentionParams p;
  p.q = run.Upload(d.q);
  float* out = static_cast<float*>(run.Alloc(d.q.size() * sizeof(float)));
  p.out = out;
  p.num_q_heads = c.num_q_heads;
  p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  p.kv = kv;
  p.seqs = seqs.data();
  p.num_seqs = static_cast<int32_t>(seqs.size());
  be.Attention(p);

  AttentionResult r;
  r.out = run.Download(out, d.q.size());
  r.k_pool = run.Download(static_cast<const uint8_t*>(kv.k), poison.size());
  r.v_pool = run.Download(static_cast<const uint8_t*>(kv.v), poison.size());
  return r;
}

/// Float64 causal attention straight from the per-sequence K/V (rounded to the
/// cache dtype, as the cache stores them). With `bf16_dot` (the CPU's attention on
/// bf16 dot products, bf16_dot_attention.h) the queries are rounded to bf16 as that
/// kernel rounds them, and p_bound[i] is how far rounding its probabilities to bf16
/// may move out[i]: 2^-8 · Σ_j p_j |v_j| / Σ_j p_j, twice round-to-nearest's 2^-9,
/// since the kernel's f32 probabilities differ slightly from these before rounding.
inline std::vector<double> ReferenceAttention(const AttentionCase& c, const AttentionData& d, bool bf16_dot = false,
                                              std::vector<double>* p_bound = nullptr) {
  const int32_t D = c.head_dim, group = c.num_q_heads / c.num_kv_heads;
  const int32_t q_width = c.num_q_heads * D, kv_width = c.num_kv_heads * D;
  const double scale = 1.0 / std::sqrt(static_cast<double>(static_cast<float>(D)));
  auto cached = [&](float v) { return c.kv_dtype == DType::kBF16 ? RoundBf16(v) : v; };
  std::vector<double> out(d.q.size());
  if (p_bound != nullptr) p_bound->assign(d.q.size(), 0.0);
  for (size_t si = 0; si < c.seqs.size(); ++si) {
    const SeqShape& s = c.seqs[si];
    for (int32_t t = 0; t < s.num_tokens; ++t) {
      const int32_t ctx = s.start_pos + t + 1;
      const int64_t row = d.q_offset[si] + t;
      for (int32_t h = 0; h < c.num_q_heads; ++h) {
        const int32_t g = h / group;
        const float* q = d.q.data() + row * q_width + h * D;
        std::vector<double> scores(static_cast<size_t>(ctx));
        double mx = -1e300;
        for (int32_t j = 0; j < ctx; ++j) {
          double dot = 0;
          for (int32_t e = 0; e < D; ++e)
            dot += static_cast<double>(bf16_dot ? RoundBf16(q[e]) : q[e]) * cached(d.k[si][j * kv_width + g * D + e]);
          scores[j] = dot * scale;
          mx = std::max(mx, scores[j]);
        }
        double sum = 0;
        for (double& sc : scores) sum += (sc = std::exp(sc - mx));
        for (int32_t e = 0; e < D; ++e) {
          double acc = 0, mag = 0;
          for (int32_t j = 0; j < ctx; ++j) {
            const double pv = scores[j] * cached(d.v[si][j * kv_width + g * D + e]);
            acc += pv;
            mag += std::abs(pv);
          }
          out[row * q_width + h * D + e] = acc / sum;
          if (p_bound != nullptr && bf16_dot) (*p_bound)[row * q_width + h * D + e] = std::ldexp(mag / sum, -8);
        }
      }
    }
  }
  return out;
}

// ---- Standard cases ------------------------------------------------------------------

/// GEMM shapes covering both CPU paths; the CUDA test reuses them.
inline std::vector<GemmCase> StandardGemmCases() {
  auto make = [](std::string name, int64_t m, int64_t n, int64_t k, int64_t pad, bool t, DType dt, bool bias, bool acc,
                 int64_t small = 16, int64_t panel = 128, bool pack = false) {
    GemmCase c;
    c.name = std::move(name);
    c.m = m, c.n = n, c.k = k, c.ld_pad = pad, c.transposed = t, c.dtype = dt, c.bias = bias, c.accumulate = acc;
    c.small_gemm_max_rows = small;
    c.panel_gemm_max_rows = panel;
    c.cpu_pack = pack;
    return c;
  };
  return {
      // Few rows: the AVX-512 streaming kernel (k not a multiple of 32, n not of 4).
      make("SmallF32", 3, 13, 45, 0, false, DType::kF32, false, false),
      make("SmallF32StridedBiasAcc", 5, 29, 70, 7, false, DType::kF32, true, true),
      make("SmallBf16", 4, 37, 96, 0, false, DType::kBF16, false, false),
      make("SmallBf16StridedBias", 16, 21, 33, 5, false, DType::kBF16, true, false),
      // Decode batches: the AVX-512 panel kernel (n not a multiple of 32, k not of 16, row remainders).
      make("PanelF32", 40, 24, 64, 0, false, DType::kF32, false, false),
      make("PanelF32StridedAcc", 33, 17, 50, 9, false, DType::kF32, true, true),
      make("PanelBf16", 37, 40, 72, 3, false, DType::kBF16, true, false),
      make("PanelBf16Remainders", 45, 70, 51, 5, false, DType::kBF16, true, true),
      // Many rows (or the AVX-512 paths turned off), or transposed weights: oneDNN.
      make("LargeF32", 40, 24, 64, 0, false, DType::kF32, false, false, 16, /*panel=*/0),
      make("LargeF32StridedAcc", 33, 17, 50, 9, false, DType::kF32, true, true, 16, 0),
      make("LargeBf16", 137, 40, 72, 3, false, DType::kBF16, true, false),
      make("TransposedF32", 3, 19, 40, 4, true, DType::kF32, true, false),
      make("TransposedBf16", 24, 26, 48, 6, true, DType::kBF16, false, true),
      make("OnednnForcedSmallM", 2, 31, 64, 2, false, DType::kF32, true, false, /*small=*/0, /*panel=*/0),
      // Weights packed at upload (the engine's default on AVX-512): every row count on the panels.
      make("PackedF32Decode", 1, 45, 70, 3, false, DType::kF32, true, false, 16, 128, true),
      make("PackedBf16DecodeAcc", 3, 77, 45, 2, false, DType::kBF16, true, true, 16, 128, true),
      make("PackedBf16Batch", 24, 70, 96, 0, false, DType::kBF16, false, false, 16, 128, true),
      make("PackedF32Batch", 40, 33, 64, 5, false, DType::kF32, true, true, 16, 128, true),
      make("PackedBf16Prefill", 300, 40, 72, 3, false, DType::kBF16, true, false, 16, 128, true),
  };
}

/// An attention case of `nq` query heads over `nkv` KV heads of dimension `d`, KV blocks of `bs`.
inline AttentionCase MakeAttentionCase(std::string name, int32_t nq, int32_t nkv, int32_t d, int32_t bs, DType dt,
                                       std::vector<SeqShape> seqs) {
  AttentionCase c;
  c.name = std::move(name);
  c.num_q_heads = nq, c.num_kv_heads = nkv, c.head_dim = d, c.block_size = bs, c.kv_dtype = dt;
  c.seqs = std::move(seqs);
  return c;
}

/// Mixed batches of prompts, prompt chunks and decode steps.
inline std::vector<AttentionCase> StandardAttentionCases() {
  const auto make = MakeAttentionCase;
  // A prompt from position 0, a decode step deep in its context, a chunk of a
  // prompt continuing mid-block, and single-token sequences at block edges.
  const std::vector<SeqShape> mixed = {{0, 21}, {37, 1}, {5, 12}, {15, 1}, {16, 1}, {0, 1}};
  return {
      make("MhaF32", 4, 4, 32, 16, DType::kF32, mixed),
      make("GqaF32", 8, 2, 64, 16, DType::kF32, mixed),
      make("GqaBf16", 8, 2, 64, 16, DType::kBF16, mixed),
      make("OddBlockSize", 6, 3, 40, 5, DType::kF32, mixed),
      make("MqaLongDecode", 8, 1, 128, 16, DType::kBF16, {{300, 1}, {97, 3}}),
      make("LongPrompt", 2, 1, 16, 8, DType::kF32, {{0, 70}}),
      make("OddHeadDimBf16", 4, 2, 18, 16, DType::kBF16, mixed),  // vector tails in d
      // Groups that do not divide into the kernels' register chunks of heads.
      make("Group7Bf16", 14, 2, 64, 16, DType::kBF16, mixed),
      make("Group12F32", 12, 1, 32, 16, DType::kF32, mixed),
      // SmolLM's three query heads per KV head; head_dim 96 and 32 (other register chunks of the bf16 kernels).
      make("Group3Bf16", 9, 3, 64, 16, DType::kBF16, mixed),
      make("Dim96Bf16", 6, 2, 96, 16, DType::kBF16, mixed),
      make("Group10Dim32Bf16", 10, 1, 32, 16, DType::kBF16, mixed),
  };
}

// ---- Comparisons ---------------------------------------------------------------------

/// Largest |a - b| / (atol + rtol·|b|) over the vectors (≤ 1 passes), with the index.
template <typename A, typename B>
::testing::AssertionResult AllClose(const std::vector<A>& a, const std::vector<B>& b, double atol, double rtol) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " vs " << b.size();
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (!(std::abs(x - y) <= atol + rtol * std::abs(y)))  // also fails on NaN
      return ::testing::AssertionFailure()
             << "element " << i << ": " << x << " vs " << y << " (atol " << atol << ", rtol " << rtol << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace orca::kernels::testing
