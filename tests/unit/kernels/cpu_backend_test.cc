// The CPU backend against plain scalar references: GEMMs on both paths (the
// AVX-512 few-row kernel and oneDNN) with strided, transposed and bf16
// weights; norms; RoPE in both styles; embeddings; and paged KvWrite +
// Attention over random block tables with sequences at different positions.
// The CPU backend is the reference the CUDA backend is compared against, so
// this is where its arithmetic is pinned down.

#include "kernels/cpu/cpu_backend.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/common/dtype.h"
#include "gtest/gtest.h"
#include "kernels/cpu/avx512_kernels.h"
#include "kernels/cpu/bf16_dot_attention.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/generic_kernels.h"
#include "kernels/cpu/sampling_kernels.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace orca::kernels {
namespace {

using testing::AllClose;
using testing::AttentionCase;
using testing::DeviceRunner;
using testing::GemmCase;
using testing::RandomFloats;

std::unique_ptr<CpuBackend> MakeCpu(int64_t small_gemm_max_rows = 16, int64_t panel_gemm_max_rows = 128,
                                    bool pack_weights = false, bool bf16_dot = true) {
  CpuBackend::Options o;
  o.num_threads = 2;
  o.small_gemm_max_rows = small_gemm_max_rows;
  o.panel_gemm_max_rows = panel_gemm_max_rows;
  o.pack_weights = pack_weights;
  o.bf16_dot = bf16_dot;
  return CpuBackend::Create(o);
}

// ---- GEMM --------------------------------------------------------------------------

class CpuGemmTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(CpuGemmTest, MatchesScalarReference) {
  const GemmCase& c = GetParam();
  auto cpu = MakeCpu(c.small_gemm_max_rows, c.panel_gemm_max_rows, c.cpu_pack);
  const testing::GemmData d = testing::MakeGemmData(c, 17);
  DeviceRunner run(*cpu);
  const std::vector<float> y = testing::RunGemm(run, c, d);
  const testing::GemmReference ref = testing::ReferenceGemm(c, d);
  ASSERT_EQ(y.size(), ref.y.size());
  // Rounding error scales with Σ|x·w|; bf16 paths may also round x to bf16 (2^-8).
  const double tol = c.dtype == DType::kF32 ? 2e-6 : 8e-3;
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_NEAR(y[i], ref.y[i], tol * ref.magnitude[i] + 1e-6) << c.name << " output " << i;
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuGemmTest, ::testing::ValuesIn(testing::StandardGemmCases()),
                         [](const ::testing::TestParamInfo<GemmCase>& info) { return info.param.name; });

TEST(CpuGemmPathTest, SmallAndOnednnPathsAgree) {
  // The same decode-sized GEMM through both paths (when AVX-512 exists).
  GemmCase c;
  c.m = 6, c.n = 48, c.k = 80, c.ld_pad = 3, c.bias = true;
  const testing::GemmData d = testing::MakeGemmData(c, 5);
  auto small = MakeCpu(16), onednn = MakeCpu(0, 0);
  DeviceRunner r1(*small), r2(*onednn);
  EXPECT_TRUE(AllClose(testing::RunGemm(r1, c, d), testing::RunGemm(r2, c, d), 1e-5, 1e-5));
}

TEST(CpuGemmPathTest, WeightsPackedAtUploadMatchRowMajorPathsForEveryRowCount) {
  // The engine's default: UploadWeight packs f32/bf16 weights into panels once, and every GEMM
  // (decode rows, batches, prefill) runs on them. They must agree with the row-major paths
  // (streaming kernel, on-the-fly panels, oneDNN) and with the reference. bf16 runs on both
  // packed layouts: AVX512-BF16 pair panels (where the CPU has them) and the f32-FMA [k][32] panels.
  // On AMX hosts bf16 weights stay row-major by design (oneDNN's AMX tiles run them), and the
  // results must still agree.
  if (!GetCpuFeatures().avx512) GTEST_SKIP() << "panels need AVX-512";
  const bool amx = GetCpuFeatures().amx_bf16;
  for (bool bf16_dot : {true, false})
    for (DType dt : {DType::kBF16, DType::kF32})
      for (int64_t m : {1, 3, 6, 13, 24, 200, 300}) {
        GemmCase c;
        c.m = m, c.n = 77, c.k = m == 300 ? 1001 : 45, c.ld_pad = 2, c.bias = true, c.dtype = dt;
        const testing::GemmData d = testing::MakeGemmData(c, 9);
        const testing::GemmReference ref = testing::ReferenceGemm(c, d);
        auto packed = MakeCpu(4, 128, true, bf16_dot), row_major = MakeCpu(4, 128, false);
        DeviceRunner rp(*packed), rr(*row_major);
        void* storage = nullptr;
        absl::StatusOr<WeightView> w = packed->UploadWeight(d.view, &storage, WeightUse::kMatmul);
        ASSERT_TRUE(w.ok()) << w.status();
        const bool want_packed = !(amx && dt == DType::kBF16);
        EXPECT_EQ(w->packed, want_packed) << DTypeName(dt) << (amx ? " on an AMX host" : "");
        EXPECT_EQ(storage != nullptr, want_packed);
        packed->Free(storage);
        const auto a = testing::RunGemm(rp, c, d), b = testing::RunGemm(rr, c, d);
        const double tol = dt == DType::kF32 ? 2e-6 : 8e-3;
        for (size_t i = 0; i < a.size(); ++i) {
          ASSERT_NEAR(a[i], ref.y[i], tol * ref.magnitude[i] + 1e-6)
              << DTypeName(dt) << " bf16_dot " << bf16_dot << " m " << m << " i " << i;
          ASSERT_NEAR(a[i], b[i], tol * ref.magnitude[i] + 1e-6)
              << DTypeName(dt) << " bf16_dot " << bf16_dot << " m " << m << " i " << i;
        }
      }
}

// LinearMany computes packed weights of one k in one parallel region, each thread streaming a
// contiguous share of all the jobs' panels. With jobs of different quantized types (a Q4_K_M
// file's fused Q/K/V has Q6_K V in some layers) and thread counts whose shares end inside
// jobs, every column must still be computed exactly once, as Linear alone computes it.
TEST(CpuGemmPathTest, FusedPackedJobsOfMixedTypesMatchEachJobAlone) {
  constexpr int64_t k = 512;
  struct Job {
    DType dtype;
    int64_t n;
  };
  const std::vector<Job> specs = {{DType::kQ4_K, 200}, {DType::kQ6_K, 48}, {DType::kQ8_0, 37}, {DType::kQ4_K, 16}};
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<uint8_t>> rows(specs.size());
  for (size_t j = 0; j < specs.size(); ++j) {
    const size_t row_bytes = DTypeRowBytes(specs[j].dtype, k);
    rows[j].resize(row_bytes * specs[j].n);
    std::vector<float> row(k);
    for (int64_t r = 0; r < specs[j].n; ++r) {
      for (float& v : row) v = normal(gen) * 0.05f;
      QuantizeRow(specs[j].dtype, row.data(), rows[j].data() + r * row_bytes, k);
    }
  }
  for (int threads : {1, 2, 3}) {
    CpuBackend::Options o;
    o.num_threads = threads;
    auto cpu = CpuBackend::Create(o);
    std::vector<WeightView> ws;
    std::vector<void*> storage(specs.size());
    for (size_t j = 0; j < specs.size(); ++j) {
      absl::StatusOr<WeightView> w = cpu->UploadWeight(
          WeightView{rows[j].data(), specs[j].dtype, specs[j].n, k, k, false}, &storage[j], WeightUse::kMatmul);
      ASSERT_TRUE(w.ok()) << w.status();
      ws.push_back(*w);
    }
    for (int64_t m : {1, 2, 5, 40}) {
      std::vector<float> x(m * k);
      for (float& v : x) v = normal(gen);
      std::vector<std::vector<float>> many(specs.size()), alone(specs.size());
      std::vector<Backend::LinearOut> outs;
      for (size_t j = 0; j < specs.size(); ++j) {
        many[j].assign(m * specs[j].n, std::numeric_limits<float>::quiet_NaN());  // a column left out stays NaN
        alone[j].assign(m * specs[j].n, 0.0f);
        outs.push_back({&ws[j], nullptr, many[j].data()});
        cpu->Linear(x.data(), m, ws[j], nullptr, alone[j].data(), false);
      }
      cpu->LinearMany(x.data(), m, outs.data(), static_cast<int>(outs.size()));
      for (size_t j = 0; j < specs.size(); ++j)
        for (size_t i = 0; i < many[j].size(); ++i)
          ASSERT_EQ(std::memcmp(&many[j][i], &alone[j][i], 4), 0)
              << threads << " threads, m " << m << ", job " << j << " (" << DTypeName(specs[j].dtype) << "), output "
              << i << ": " << many[j][i] << " vs " << alone[j][i];
    }
    for (void* p : storage) cpu->Free(p);
  }
}

// Resident KiB of the mapping that starts at `addr` (/proc/self/smaps), or -1.
long MappingRssKb(const void* addr) {
  std::ifstream smaps("/proc/self/smaps");
  char start[32];
  std::snprintf(start, sizeof(start), "%lx-", reinterpret_cast<unsigned long>(addr));
  bool in = false;
  for (std::string line; std::getline(smaps, line);) {
    if (line.find('-') != std::string::npos && line.find(' ') > line.find('-') && std::isxdigit(line[0]))
      in = line.rfind(start, 0) == 0;
    else if (in && line.rfind("Rss:", 0) == 0)
      return std::strtol(line.c_str() + 4, nullptr, 10);
  }
  return -1;
}

TEST(CpuGemmPathTest, WeightsUsedInPlaceAreFaultedInAtUpload) {
  // A weight the GEMMs read where it is (row-major: unpacked, or bf16 on AMX hosts) sits in a
  // mapped model file; its page faults belong to loading, not to the first request.
  constexpr int64_t n = 256, k = 2048;  // 2 MiB of f32
  const std::string path = ::testing::TempDir() + "/cpu_backend_touch.bin";
  {
    std::vector<float> w(n * k, 0.5f);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(w.data()), n * k * 4);
  }
  const int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  void* map = mmap(nullptr, n * k * 4, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  ASSERT_NE(map, MAP_FAILED);
  ASSERT_EQ(MappingRssKb(map), 0) << "the test needs the mapping untouched before the upload";
  auto cpu = MakeCpu(4, 128, /*pack_weights=*/false);
  void* storage = nullptr;
  absl::StatusOr<WeightView> w =
      cpu->UploadWeight(WeightView{map, DType::kF32, n, k, k, false}, &storage, WeightUse::kMatmul);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->data, map);  // used in place
  EXPECT_EQ(storage, nullptr);
  EXPECT_EQ(MappingRssKb(map), n * k * 4 / 1024);
  munmap(map, n * k * 4);
  std::remove(path.c_str());
}

TEST(CpuGemmPathTest, LookupTablesStayInPlaceAndPackedTablesDecodeTheSameRows) {
  // Gather-only tables are not copied; a tied embedding (gather and GEMM) is packed and its
  // rows still decode to the stored values.
  GemmCase c;
  c.n = 70, c.k = 48, c.ld_pad = 3, c.dtype = DType::kBF16;
  const testing::GemmData d = testing::MakeGemmData(c, 4);
  for (bool bf16_dot : {true, false}) {
    SCOPED_TRACE(bf16_dot ? "pair panels" : "[k][32] panels");
    auto cpu = MakeCpu(4, 128, true, bf16_dot);
    void* storage = nullptr;
    absl::StatusOr<WeightView> gather = cpu->UploadWeight(d.view, &storage, WeightUse::kGather);
    ASSERT_TRUE(gather.ok());
    EXPECT_EQ(gather->data, d.view.data);
    EXPECT_EQ(storage, nullptr);
    absl::StatusOr<WeightView> both = cpu->UploadWeight(d.view, &storage, WeightUse::kMatmulAndGather);
    ASSERT_TRUE(both.ok());
    const std::vector<int32_t> ids = {0, 69, 31, 32, 5};
    std::vector<float> from_packed(ids.size() * c.k), from_table(ids.size() * c.k);
    cpu->Embedding(ids.data(), static_cast<int64_t>(ids.size()), *both, from_packed.data());
    cpu->Embedding(ids.data(), static_cast<int64_t>(ids.size()), *gather, from_table.data());
    EXPECT_EQ(from_packed, from_table);
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t j = 0; j < c.k; ++j) ASSERT_EQ(from_table[i * c.k + j], d.w_logical[ids[i] * c.k + j]);
    cpu->Free(storage);
  }
}

// ---- Norms and elementwise ------------------------------------------------------------

TEST(CpuBackendTest, RmsNormMatchesReferenceInPlace) {
  auto cpu = MakeCpu();
  const int64_t m = 5, h = 77;
  std::vector<float> x = RandomFloats(m * h, 1, -3, 3), w = RandomFloats(h, 2);
  std::vector<double> ref(x.size());
  for (int64_t i = 0; i < m; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < h; ++j) ss += static_cast<double>(x[i * h + j]) * x[i * h + j];
    const double inv = 1.0 / std::sqrt(ss / h + 1e-5);
    for (int64_t j = 0; j < h; ++j) ref[i * h + j] = x[i * h + j] * inv * w[j];
  }
  cpu->RmsNorm(x.data(), w.data(), m, h, 1e-5f, x.data());
  EXPECT_TRUE(AllClose(x, ref, 1e-5, 1e-5));
}

// A norm over rows held in two slices (OLMo 2's q/k norms under tensor parallelism): each slice's sums of
// squares, added, normalise each slice as RmsNorm normalises the whole row.
TEST(CpuBackendTest, RmsNormFromSummedSliceSquaresIsRmsNormOfTheWholeRow) {
  auto cpu = MakeCpu();
  const int64_t m = 5, h = 96, half = h / 2;
  const std::vector<float> x = RandomFloats(m * h, 6, -3, 3), w = RandomFloats(h, 7);
  std::vector<float> whole(x.size());
  cpu->RmsNorm(x.data(), w.data(), m, h, 1e-5f, whole.data());
  std::vector<float> left(m * half), right(m * half);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < half; ++j) left[i * half + j] = x[i * h + j], right[i * half + j] = x[i * h + half + j];
  std::vector<float> sums(m), right_sums(m);
  cpu->SumSquares(left.data(), m, half, sums.data());
  cpu->SumSquares(right.data(), m, half, right_sums.data());
  for (int64_t i = 0; i < m; ++i) sums[i] += right_sums[i];  // the all-reduce
  cpu->RmsNormFromSums(left.data(), w.data(), sums.data(), m, half, h, 1e-5f, left.data());
  cpu->RmsNormFromSums(right.data(), w.data() + half, sums.data(), m, half, h, 1e-5f, right.data());
  std::vector<double> got(x.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < half; ++j) got[i * h + j] = left[i * half + j], got[i * h + half + j] = right[i * half + j];
  EXPECT_TRUE(AllClose(whole, got, 1e-5, 1e-5));
}

TEST(CpuBackendTest, LayerNormMatchesReferenceWithAndWithoutBeta) {
  auto cpu = MakeCpu();
  const int64_t m = 4, h = 50;
  const std::vector<float> x = RandomFloats(m * h, 3, 2, 6), g = RandomFloats(h, 4), b = RandomFloats(h, 5);
  for (const bool with_beta : {true, false}) {
    std::vector<double> ref(x.size());
    for (int64_t i = 0; i < m; ++i) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < h; ++j) mean += x[i * h + j];
      mean /= h;
      for (int64_t j = 0; j < h; ++j) var += (x[i * h + j] - mean) * (x[i * h + j] - mean);
      var /= h;
      for (int64_t j = 0; j < h; ++j)
        ref[i * h + j] = (x[i * h + j] - mean) / std::sqrt(var + 1e-5) * g[j] + (with_beta ? b[j] : 0.0);
    }
    std::vector<float> y(x.size());
    cpu->LayerNorm(x.data(), g.data(), with_beta ? b.data() : nullptr, m, h, 1e-5f, y.data());
    EXPECT_TRUE(AllClose(y, ref, 1e-5, 1e-5)) << "beta " << with_beta;
  }
}

TEST(CpuBackendTest, ElementwiseOpsMatchFormulas) {
  auto cpu = MakeCpu();
  // 1000: one thread, a vector tail; 40010: split across threads, saturating inputs too.
  for (const auto& [n, range] : {std::pair<int64_t, float>{1000, 6}, std::pair<int64_t, float>{40010, 60}}) {
    const std::vector<float> a = RandomFloats(n, 6, -range, range), b = RandomFloats(n, 7, -2, 2);
    std::vector<float> sum = a;
    cpu->Add(sum.data(), b.data(), n);
    std::vector<float> silu(n), gelu = a, silu_in_place = a;
    cpu->SiluMul(a.data(), b.data(), 10, n / 10, silu.data());
    cpu->SiluMul(silu_in_place.data(), b.data(), 10, n / 10, silu_in_place.data());  // as the model runner calls it
    cpu->GeluTanh(gelu.data(), n);
    std::vector<double> ref_sum(n), ref_silu(n), ref_gelu(n);
    for (int64_t i = 0; i < n; ++i) {
      const double v = a[i];
      ref_sum[i] = v + b[i];
      ref_silu[i] = v / (1 + std::exp(-v)) * b[i];
      ref_gelu[i] = 0.5 * v * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
    }
    EXPECT_TRUE(AllClose(sum, ref_sum, 1e-6, 1e-6)) << n;
    EXPECT_TRUE(AllClose(silu, ref_silu, 1e-5, 1e-5)) << n;
    EXPECT_EQ(silu, silu_in_place) << n;
    EXPECT_TRUE(AllClose(gelu, ref_gelu, 1e-5, 1e-5)) << n;
  }
}

// Llama 4's query temperature: each row by 1 + scale · ln(1 + ⌊position / floor⌋), the factor stepping at
// multiples of the floor (1 below the first), positive and negative scales, rows long enough to split.
TEST(CpuBackendTest, AttentionTemperatureScalesEachRowByItsPositionsStep) {
  auto cpu = MakeCpu();
  const std::vector<int32_t> positions = {0, 15, 16, 17, 31, 32, 47, 48, 1000, 262143};
  const int32_t floor = 16;
  const int64_t m = static_cast<int64_t>(positions.size());
  for (const auto& [n, scale] : {std::pair<int64_t, float>{24, 0.1f}, std::pair<int64_t, float>{8000, -0.5f}}) {
    const std::vector<float> x = RandomFloats(m * n, 31, -3, 3);
    std::vector<float> y = x;
    cpu->AttentionTemperature(y.data(), positions.data(), m, n, scale, floor);
    std::vector<double> ref(x.size());
    for (int64_t i = 0; i < m; ++i) {
      const double steps = std::floor(static_cast<double>(positions[i]) / floor);
      for (int64_t j = 0; j < n; ++j) ref[i * n + j] = x[i * n + j] * (1 + scale * std::log(1 + steps));
    }
    EXPECT_TRUE(AllClose(y, ref, 1e-6, 1e-6)) << n;
    // Below the first step the factor is exactly 1; past it, it is not.
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(y[n + j], x[n + j]) << "position 15, value " << j;
    EXPECT_NE(y[2 * n], x[2 * n]) << "position 16";
  }
}

// ---- RoPE --------------------------------------------------------------------------------

struct RopeCase {
  RopeStyle style;
  int32_t rotary_dim;
  float attention_factor;
};

class CpuRopeTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(CpuRopeTest, RotatesPairsByPositionAngles) {
  const RopeCase rc = GetParam();
  auto cpu = MakeCpu();
  const int32_t nq = 4, nkv = 2, d = 32, half = rc.rotary_dim / 2;
  std::vector<float> inv_freq(half);
  for (int32_t i = 0; i < half; ++i) inv_freq[i] = static_cast<float>(1.0 / std::pow(10000.0, 2.0 * i / rc.rotary_dim));
  // The backend reuses its cos/sin table while the positions stay the same (every layer of
  // a forward): same positions twice, then new contents in the same buffer, then new frequencies.
  std::vector<int32_t> positions = {0, 1, 17, 4095, 70000};
  uint32_t seed = 8;
  auto check = [&](const char* what) {
    const int64_t m = static_cast<int64_t>(positions.size());
    std::vector<float> q = RandomFloats(m * nq * d, seed++), k = RandomFloats(m * nkv * d, seed++);
    auto reference = [&](std::vector<float> x, int32_t heads) {
      std::vector<double> out(x.begin(), x.end());
      for (int64_t t = 0; t < m; ++t)
        for (int32_t h = 0; h < heads; ++h)
          for (int32_t i = 0; i < half; ++i) {
            const double angle = static_cast<double>(positions[t]) * inv_freq[i];
            const double c = std::cos(angle) * rc.attention_factor, s = std::sin(angle) * rc.attention_factor;
            const int64_t base = (t * heads + h) * d;
            const int64_t ia = base + (rc.style == RopeStyle::kNeox ? i : 2 * i);
            const int64_t ib = base + (rc.style == RopeStyle::kNeox ? i + half : 2 * i + 1);
            out[ia] = x[ia] * c - x[ib] * s;
            out[ib] = x[ib] * c + x[ia] * s;
          }
      return out;
    };
    const std::vector<double> ref_q = reference(q, nq), ref_k = reference(k, nkv);
    RopeParams rope;
    rope.style = rc.style;
    rope.rotary_dim = rc.rotary_dim;
    rope.inv_freq = inv_freq.data();
    rope.attention_factor = rc.attention_factor;
    cpu->Rope(q.data(), k.data(), positions.data(), m, nq, nkv, d, rope);
    EXPECT_TRUE(AllClose(q, ref_q, 1e-5, 1e-5)) << what;
    EXPECT_TRUE(AllClose(k, ref_k, 1e-5, 1e-5)) << what;
  };
  check("first call");
  check("same positions again");
  positions[2] = 18;
  check("one position changed in place");
  for (float& f : inv_freq) f *= 0.5f;
  check("frequencies changed in place");
}

INSTANTIATE_TEST_SUITE_P(Styles, CpuRopeTest,
                         ::testing::Values(RopeCase{RopeStyle::kNeox, 32, 1.0f},
                                           RopeCase{RopeStyle::kInterleaved, 32, 1.0f},
                                           RopeCase{RopeStyle::kNeox, 16, 0.8f},
                                           RopeCase{RopeStyle::kInterleaved, 24, 1.1f}));

// ---- Embeddings and gathers ------------------------------------------------------------

TEST(CpuBackendTest, EmbeddingAndPositionsReadStridedTablesOfAnyDtype) {
  auto cpu = MakeCpu();
  const int64_t rows = 20, k = 24, ld = 30;
  const std::vector<float> table = RandomFloats(rows * ld, 10);
  const std::vector<int32_t> ids = {3, 0, 19, 3, 7}, positions = {0, 1, 2, 3, 4};
  const int64_t m = static_cast<int64_t>(ids.size());
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const std::vector<uint8_t> bytes = testing::StoreAs(table, dt);
    WeightView t;
    t.data = bytes.data();
    t.dtype = dt;
    t.n = rows;
    t.k = k;
    t.ld = ld;
    std::vector<float> out(m * k);
    cpu->Embedding(ids.data(), m, t, out.data());
    cpu->AddPositionEmbedding(positions.data(), m, t, out.data());
    std::vector<double> ref(out.size());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < k; ++j)
        ref[i * k + j] =
            testing::LoadAs(bytes, dt, ids[i] * ld + j) + testing::LoadAs(bytes, dt, positions[i] * ld + j);
    EXPECT_TRUE(AllClose(out, ref, 1e-6, 1e-6)) << DTypeName(dt);
  }
}

TEST(CpuBackendTest, GatherRowsCopiesSelectedRows) {
  auto cpu = MakeCpu();
  const int64_t h = 9;
  const std::vector<float> src = RandomFloats(6 * h, 11);
  const std::vector<int32_t> rows = {5, 0, 2};
  std::vector<float> dst(rows.size() * h);
  cpu->GatherRows(src.data(), rows.data(), static_cast<int64_t>(rows.size()), h, dst.data());
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t j = 0; j < h; ++j) EXPECT_EQ(dst[i * h + j], src[rows[i] * h + j]);
}

// ---- KV cache and attention ---------------------------------------------------------------

std::string AttentionCaseName(const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; }

class CpuAttentionTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(CpuAttentionTest, KvWriteUsesTransposedBlockLayout) {
  const AttentionCase& c = GetParam();
  auto cpu = MakeCpu();
  const testing::AttentionData d = testing::MakeAttentionData(c, 21);
  DeviceRunner run(*cpu);
  const testing::AttentionResult r = testing::RunAttention(run, c, d);
  const int32_t D = c.head_dim, bs = c.block_size, nkv = c.num_kv_heads, width = nkv * D;
  for (size_t si = 0; si < c.seqs.size(); ++si)
    for (int32_t pos = 0; pos < c.seqs[si].start_pos + c.seqs[si].num_tokens; ++pos) {
      const int64_t blk = d.tables[si][pos / bs], off = pos % bs;
      for (int32_t h = 0; h < nkv; ++h)
        for (int32_t e = 0; e < D; ++e) {
          const size_t base = static_cast<size_t>((blk * nkv + h) * D * bs);
          const float k = testing::LoadAs(r.k_pool, c.kv_dtype, base + e * bs + off);
          const float v = testing::LoadAs(r.v_pool, c.kv_dtype, base + off * D + e);
          auto cached = [&](float x) { return c.kv_dtype == DType::kBF16 ? testing::RoundBf16(x) : x; };
          ASSERT_EQ(k, cached(d.k[si][pos * width + h * D + e])) << "seq " << si << " pos " << pos;
          ASSERT_EQ(v, cached(d.v[si][pos * width + h * D + e])) << "seq " << si << " pos " << pos;
        }
    }
}

// Both kernels where the CPU has bf16 dot products: with them a bf16 cache's attention rounds the
// queries (the reference does the same) and the probabilities (bounded per element) to bf16.
TEST_P(CpuAttentionTest, MatchesCausalReferencePerSequence) {
  const AttentionCase& c = GetParam();
  const testing::AttentionData d = testing::MakeAttentionData(c, 22);
  for (bool bf16_dot : {true, false}) {
    SCOPED_TRACE(bf16_dot ? "bf16_dot" : "f32 kernels");
    auto cpu = MakeCpu(16, 128, false, bf16_dot);
    DeviceRunner run(*cpu);
    const testing::AttentionResult r = testing::RunAttention(run, c, d);
    const bool rounds = bf16_dot && GetCpuFeatures().avx512_bf16 && c.kv_dtype == DType::kBF16 &&
                        bf16dot::AttentionShapeSupported(c.head_dim, c.block_size);
    std::vector<double> bound;
    const std::vector<double> want = testing::ReferenceAttention(c, d, rounds, &bound);
    ASSERT_EQ(r.out.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_LE(std::abs(r.out[i] - want[i]), 2e-5 + 1e-4 * std::abs(want[i]) + bound[i])
          << "element " << i << ": " << r.out[i] << " vs " << want[i] << " (bf16 bound " << bound[i] << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuAttentionTest, ::testing::ValuesIn(testing::StandardAttentionCases()),
                         AttentionCaseName);

// Long contexts (hundreds of tokens, many KV blocks): decode rows and prompts at them, for one
// KV head (MQA, where a decode row alone is one work item) and for GQA.
std::vector<AttentionCase> LongContextCases() {
  const auto make = testing::MakeAttentionCase;
  // Decode at contexts 256, 257, 512 and 701; a 530-token prompt; a prompt continuing at 300 whose
  // last query chunk is one row (16 + 1 rows).
  const std::vector<testing::SeqShape> edges = {{255, 1}, {256, 1}, {511, 1}, {700, 1}, {0, 530}, {300, 17}};
  return {
      make("LongMqaBf16", 8, 1, 64, 16, DType::kBF16, edges),
      make("LongGqaF32", 6, 3, 32, 16, DType::kF32, edges),
      make("LongOddBlockBf16", 4, 2, 40, 7, DType::kBF16, {{699, 1}, {260, 9}}),
  };
}

INSTANTIATE_TEST_SUITE_P(Long, CpuAttentionTest, ::testing::ValuesIn(LongContextCases()), AttentionCaseName);

class CpuLongAttentionTest : public ::testing::TestWithParam<AttentionCase> {};

// A row's result depends only on its context, never on how the rows are grouped into work items
// or batched (what selective batching's equivalence rests on): the last row of a 701-token prompt
// equals, bit for bit, the same row decoded alone and decoded beside a prompt, each with its
// blocks placed elsewhere in the pool.
TEST_P(CpuLongAttentionTest, RowIsTheSameInAPromptAloneAndInABatch) {
  const AttentionCase& base = GetParam();
  const int32_t ctx = 701, width = base.num_q_heads * base.head_dim;
  AttentionCase prompt = base, alone = base, batch = base;
  prompt.seqs = {{0, ctx}};
  alone.seqs = {{ctx - 1, 1}};
  batch.seqs = {{40, 3}, {ctx - 1, 1}, {0, 130}};
  const testing::AttentionData dp = testing::MakeAttentionData(prompt, 31);
  testing::AttentionData da = testing::MakeAttentionData(alone, 32), db = testing::MakeAttentionData(batch, 33);
  da.k[0] = dp.k[0], da.v[0] = dp.v[0];
  db.k[1] = dp.k[0], db.v[1] = dp.v[0];
  const std::vector<float> q(dp.q.end() - width, dp.q.end());  // the prompt's last row
  std::copy(q.begin(), q.end(), da.q.begin());
  std::copy(q.begin(), q.end(), db.q.begin() + static_cast<int64_t>(db.q_offset[1]) * width);
  auto cpu = MakeCpu();
  DeviceRunner run(*cpu);
  const std::vector<float> op = testing::RunAttention(run, prompt, dp).out;
  const std::vector<float> oa = testing::RunAttention(run, alone, da).out;
  const std::vector<float> ob = testing::RunAttention(run, batch, db).out;
  for (int32_t j = 0; j < width; ++j) {
    const float want = op[static_cast<size_t>(ctx - 1) * width + j];
    ASSERT_EQ(oa[static_cast<size_t>(j)], want) << "alone, element " << j;
    ASSERT_EQ(ob[static_cast<size_t>(db.q_offset[1]) * width + j], want) << "in a batch, element " << j;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuLongAttentionTest, ::testing::ValuesIn(LongContextCases()), AttentionCaseName);

// ---- softmax pieces ------------------------------------------------------------------

TEST(Avx512SoftmaxTest, ExpSubtractSumMatchesStdExpToAboutAnUlp) {
  if (!GetCpuFeatures().avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  // Every length 1..70 (tails of every size) over the range softmax sees: 0 down to far below underflow.
  for (int32_t n = 1; n <= 70; ++n) {
    std::vector<float> x(n);
    for (int32_t i = 0; i < n; ++i) x[i] = -120.0f * static_cast<float>(i) / 70 + 0.37f * static_cast<float>(i % 3);
    const float max = *std::max_element(x.begin(), x.end());
    std::vector<float> got = x;
    const float sum = avx512::ExpSubtractSum(got.data(), n, max);
    double want_sum = 0;
    for (int32_t i = 0; i < n; ++i) {
      const double want = std::exp(static_cast<double>(x[i]) - max);
      want_sum += want;
      ASSERT_NEAR(got[i], want, 3e-7 * want + 1e-38) << "n " << n << " i " << i << " x " << x[i];
    }
    EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum) << "n " << n;
  }
  float nan_in[2] = {std::numeric_limits<float>::quiet_NaN(), 0.0f};
  avx512::ExpSubtractSum(nan_in, 2, 0.0f);
  EXPECT_TRUE(std::isnan(nan_in[0]));
  EXPECT_EQ(nan_in[1], 1.0f);
}

// The sampler's argmax on every path this CPU runs: the first position of the largest value,
// NaNs skipped wherever they are, -inf-only or empty input giving 0; lengths through every
// vector tail.
TEST(SamplingKernelsTest, ArgMaxIsTheFirstLargestValueSkippingNaN) {
  std::vector<std::pair<const char*, int32_t (*)(const float*, int32_t)>> paths = {{"generic", generic::ArgMax}};
  if (GetCpuFeatures().avx512) paths.push_back({"avx512", avx512::ArgMax});
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(21);
  for (int trial = 0; trial < 3000; ++trial) {
    const int32_t n = trial % 80;
    std::vector<float> x(n);
    const int levels = trial % 3 == 0 ? 3 : 1000;  // few distinct values: ties for the maximum
    for (float& v : x) v = static_cast<float>(std::uniform_int_distribution<int>(0, levels)(rng)) - levels / 2.0f;
    for (float& v : x) {
      const int r = std::uniform_int_distribution<int>(0, 19)(rng);
      if (r == 0) v = nan;
      if (r == 1) v = -inf;
    }
    if (trial % 7 == 0)
      for (float& v : x) v = trial % 2 ? -inf : nan;
    int32_t want = 0;
    float best = -inf;
    for (int32_t i = 0; i < n; ++i)
      if (!std::isnan(x[i]) && x[i] > best) best = x[i], want = i;
    for (const auto& [name, argmax] : paths) ASSERT_EQ(argmax(x.data(), n), want) << name << " trial " << trial;
  }
}

// Σ exp(x - max) for log-probabilities on every path this CPU runs, against f64: lengths through
// every vector tail and a 128256-token vocabulary, values from the max down past underflow.
TEST(SamplingKernelsTest, ExpSumIsTheF64SumToAboutAnUlp) {
  std::vector<std::pair<const char*, double (*)(const float*, int32_t, float)>> paths = {{"generic", generic::ExpSum}};
  if (GetCpuFeatures().avx512) paths.push_back({"avx512", avx512::ExpSum});
  std::mt19937 rng(8);
  for (int32_t n : {1, 2, 15, 16, 17, 31, 33, 70, 1000, 128256}) {
    std::vector<float> x(n);
    for (float& v : x) v = std::uniform_real_distribution<float>(-130.0f, 12.0f)(rng);
    const float max = *std::max_element(x.begin(), x.end());
    double want = 0;
    for (float v : x) want += std::exp(static_cast<double>(v) - max);
    for (const auto& [name, exp_sum] : paths)
      EXPECT_NEAR(exp_sum(x.data(), n, max), want, 3e-7 * want) << name << " n " << n;
    const float lse = sampling::LogSumExp(x.data(), n);
    EXPECT_NEAR(lse, max + std::log(want), 1e-5 * std::max(1.0f, std::fabs(lse))) << "n " << n;
  }
}

}  // namespace
}  // namespace orca::kernels
