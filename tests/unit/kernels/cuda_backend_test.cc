// Every CudaBackend op against the CpuBackend (the reference) on random
// inputs, plus the scalar references where they are cheap. Needs a GPU: each
// test skips without one (the binary still proves the backend builds and
// links), except the device-selection checks, which run everywhere.

#include "kernels/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/common/dtype.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace orca::kernels {
namespace {

using testing::AllClose;
using testing::AttentionCase;
using testing::DeviceRunner;
using testing::GemmCase;
using testing::RandomFloats;

TEST(CudaBackendDeviceTest, CreateRejectsDevicesThatAreNotVisible) {
  const int count = CudaBackend::DeviceCount();
  EXPECT_GE(count, 0);
  for (int index : {-1, count}) {
    absl::StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::Create(index);
    ASSERT_FALSE(b.ok()) << "device " << index;
    EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable) << b.status();
  }
}

class CudaTest {
 protected:
  // Returns false (and the caller skips) when there is no GPU.
  bool MakeBackends() {
    if (CudaBackend::DeviceCount() == 0) return false;
    absl::StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::Create(0);
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok()) return false;
    cuda_ = std::move(*b);
    CpuBackend::Options o;
    o.num_threads = 2;
    cpu_ = CpuBackend::Create(o);
    return true;
  }

  // Runs `op(runner)` on both backends and returns {cuda, cpu} results.
  template <typename Op>
  auto OnBoth(Op op) {
    DeviceRunner gpu(*cuda_), host(*cpu_);
    auto g = op(gpu);
    auto c = op(host);
    return std::make_pair(std::move(g), std::move(c));
  }

  std::unique_ptr<CudaBackend> cuda_;
  std::unique_ptr<CpuBackend> cpu_;
};

#define ORCA_SKIP_WITHOUT_GPU()                                    \
  do {                                                             \
    if (!MakeBackends()) GTEST_SKIP() << "no CUDA device visible"; \
  } while (0)

class CudaBackendTest : public ::testing::Test, public CudaTest {
 protected:
  void SetUp() override { ORCA_SKIP_WITHOUT_GPU(); }
};

// ---- GEMM --------------------------------------------------------------------------------

class CudaGemmTest : public ::testing::TestWithParam<GemmCase>, public CudaTest {
 protected:
  void SetUp() override { ORCA_SKIP_WITHOUT_GPU(); }
};

TEST_P(CudaGemmTest, MatchesCpuBackendAndReference) {
  const GemmCase& c = GetParam();
  const testing::GemmData d = testing::MakeGemmData(c, 31);
  auto [gpu, cpu] = OnBoth([&](DeviceRunner& run) { return testing::RunGemm(run, c, d); });
  const testing::GemmReference ref = testing::ReferenceGemm(c, d);
  ASSERT_EQ(gpu.size(), ref.y.size());
  ASSERT_EQ(cpu.size(), ref.y.size());
  // cuBLAS runs f32 as true f32 (no TF32); bf16 rounds x to bf16 like oneDNN.
  const double tol = c.dtype == DType::kF32 ? 2e-6 : 8e-3;
  for (size_t i = 0; i < gpu.size(); ++i) {
    ASSERT_NEAR(gpu[i], ref.y[i], tol * ref.magnitude[i] + 1e-6) << c.name << " output " << i;
    ASSERT_NEAR(gpu[i], cpu[i], 2 * tol * ref.magnitude[i] + 1e-6) << c.name << " output " << i;
  }
}

std::vector<GemmCase> CudaGemmCases() {
  std::vector<GemmCase> cases = testing::StandardGemmCases();
  GemmCase big;
  big.name = "LargeBf16Prefill";
  big.m = 300, big.n = 256, big.k = 512, big.ld_pad = 64, big.dtype = DType::kBF16, big.bias = true;
  cases.push_back(big);
  GemmCase wide = big;
  wide.name = "LargeF32TransposedAcc";
  wide.dtype = DType::kF32, wide.transposed = true, wide.accumulate = true, wide.m = 129;
  cases.push_back(wide);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaGemmTest, ::testing::ValuesIn(CudaGemmCases()),
                         [](const ::testing::TestParamInfo<GemmCase>& info) { return info.param.name; });

// ---- Norms and elementwise ------------------------------------------------------------------

TEST_F(CudaBackendTest, RmsNormMatchesCpuInPlace) {
  for (int64_t h : {64, 77, 4096}) {
    const int64_t m = 7;
    const std::vector<float> x = RandomFloats(m * h, 1, -3, 3), w = RandomFloats(h, 2);
    auto [gpu, cpu] = OnBoth([&](DeviceRunner& run) {
      float* dx = run.Upload(x);
      run.backend().RmsNorm(dx, run.Upload(w), m, h, 1e-6f, dx);
      return run.Download(dx, x.size());
    });
    EXPECT_TRUE(AllClose(gpu, cpu, 1e-5, 1e-5)) << "h " << h;
  }
}

TEST_F(CudaBackendTest, SumSquaresAndRmsNormFromSumsMatchCpu) {
  const int64_t m = 6, h = 300, total = 1200;
  const std::vector<float> x = RandomFloats(m * h, 8, -3, 3), w = RandomFloats(h, 9);
  auto [gpu, cpu] = OnBoth([&](DeviceRunner& run) {
    float* dx = run.Upload(x);
    float* sums = run.Upload(std::vector<float>(m, 0.0f));
    run.backend().SumSquares(dx, m, h, sums);
    std::vector<float> out = run.Download(sums, m);
    run.backend().RmsNormFromSums(dx, run.Upload(w), sums, m, h, total, 1e-6f, dx);
    std::vector<float> y = run.Download(dx, x.size());
    out.insert(out.end(), y.begin(), y.end());
    return out;
  });
  EXPECT_TRUE(AllClose(gpu, cpu, 1e-5, 1e-5));
}

TEST_F(CudaBackendTest, LayerNormMatchesCpuWithAndWithoutBeta) {
  const int64_t m = 5, h = 1000;
  const std::vector<float> x = RandomFloats(m * h, 3, 1, 5), g = RandomFloats(h, 4), b = RandomFloats(h, 5);
  for (const bool with_beta : {true, false}) {
    auto [gpu, cpu] = OnBoth([&](DeviceRunner& run) {
      float* y = static_cast<float*>(run.Alloc(x.size() * sizeof(float)));
      run.backend().LayerNorm(run.Upload(x), run.Upload(g), with_beta ? run.Upload(b) : nullptr, m, h, 1e-5f, y);
      return run.Download(y, x.size());
    });
    EXPECT_TRUE(AllClose(gpu, cpu, 1e-5, 1e-5)) << "beta " << with_beta;
  }
}

TEST_F(CudaBackendTest, ElementwiseOpsMatchCpu) {
  const int64_t m = 37, n = 3001;  // not a multiple of any block size
  const std::vector<float> a = RandomFloats(m * n, 6, -8, 8), b = RandomFloats(m * n, 7, -2, 2);
  auto [gpu, cpu] = OnBoth([&](DeviceRunner& run) {
    Backend& be = run.backend();
    float* sum = run.Upload(a);
    be.Add(sum, run.Upload(b), m * n);
    float* gate = run.Upload(a);
    be.SiluMul(gate, run.Upload(b), m, n, gate);  // in place, as the engine does
    float* gelu = run.Upload(a);
    be.GeluTanh(gelu, m * n);
    std::vector<float> out = run.Download(sum, a.size());
    for (const float* p : {static_cast<const float*>(gate), static_cast<const float*>(gelu)}) {
      const std::vector<float> part = run.Download(p, a.size());
      out.insert(out.end(), part.begin(), part.end());
    }
    return out;
  });
  EXPECT_TRUE(AllClose(gpu, cpu, 1e-6, 1e-5));
}

TEST_F(CudaBackendTest, RopeMatchesCpuInBothStyles) {
  const int32_t nq = 8, nkv = 2, d = 64;
  const std::vector<int32_t> positions = {0, 1, 2, 31, 4095, 131071};
  const int64_t m = static_cast<int64_t>(positions.size());
  const std::vector<float> q = RandomFloats(m * nq * d, 8), k = RandomFloats(m * nkv * d, 9);
  for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
    for (int32_t rotary_dim : {64, 32}) {
      std::vector<float> inv_freq(rotary_dim / 2);
      for (int32_t i = 0; i < rotary_dim / 2; ++i)
        inv_freq[i] = static_cast<float>(1.0 / std::pow(500000.0, 2.0 * i / rotary_dim));
      auto [gpu, cpu] = OnBoth([&](DeviceRunner& run) {
        float* dq = run.Upload(q);
        float* dk = run.Upload(k);
        RopeParams rope;
        rope.style = style;
        rope.rotary_dim = rotary_dim;
        rope.inv_freq = run.Upload(inv_freq);
        rope.attention_factor = rotary_dim == 32 ? 1.2f : 1.0f;
        run.backend().Rope(dq, dk, run.Upload(positions), m, nq, nkv, d, rope);
        std::vector<float> out = run.Download(dq, q.size());
        const std::vector<float> ok = run.Download(dk, k.size());
        out.insert(out.end(), ok.begin(), ok.end());
        return out;
      });
      EXPECT_TRUE(AllClose(gpu, cpu, 1e-5, 1e-5)) << "style " << static_cast<int>(style) << " rotary " << rotary_dim;
    }
  }
}

TEST_F(CudaBackendTest, AttentionTemperatureMatchesCpu) {
  const std::vector<int32_t> positions = {0, 15, 16, 17, 31, 32, 47, 48, 1000, 262143};
  const int64_t m = static_cast<int64_t>(positions.size());
  for (const int64_t n : {24, 77, 5000}) {
    const std::vector<float> x = RandomFloats(m * n, 33, -3, 3);
    auto [gpu, cpu] = OnBoth([&](DeviceRunner& run) {
      float* dx = run.Upload(x);
      run.backend().AttentionTemperature(dx, run.Upload(positions), m, n, 0.1f, 16);
      return run.Download(dx, x.size());
    });
    // The same double-precision factor rounded once: the products agree to the bit.
    EXPECT_EQ(gpu, cpu) << "n " << n;
    EXPECT_NE(cpu, x) << "n " << n;
  }
}

TEST_F(CudaBackendTest, AddRmsNormIsAddThenRmsNorm) {
  for (int64_t h : {64, 77, 4096}) {
    const int64_t m = 5;
    const std::vector<float> x = RandomFloats(m * h, 21, -3, 3), r = RandomFloats(m * h, 22, -3, 3),
                             w = RandomFloats(h, 23);
    // {residual, y} fused on the GPU, fused (the default pair) on the CPU, and the two ops on the GPU.
    auto run_fused = [&](DeviceRunner& run) {
      float* res = run.Upload(r);
      float* y = static_cast<float*>(run.Alloc(x.size() * sizeof(float)));
      run.backend().AddRmsNorm(res, run.Upload(x), run.Upload(w), m, h, 1e-6f, y);
      std::vector<float> out = run.Download(res, r.size());
      const std::vector<float> yy = run.Download(y, x.size());
      out.insert(out.end(), yy.begin(), yy.end());
      return out;
    };
    auto [gpu, cpu] = OnBoth(run_fused);
    EXPECT_TRUE(AllClose(gpu, cpu, 1e-5, 1e-5)) << "h " << h;
    DeviceRunner run(*cuda_);
    float* res = run.Upload(r);
    float* y = static_cast<float*>(run.Alloc(x.size() * sizeof(float)));
    run.backend().Add(res, run.Upload(x), m * h);
    run.backend().RmsNorm(res, run.Upload(w), m, h, 1e-6f, y);
    std::vector<float> separate = run.Download(res, r.size());
    const std::vector<float> yy = run.Download(y, x.size());
    separate.insert(separate.end(), yy.begin(), yy.end());
    EXPECT_EQ(gpu, separate) << "h " << h << ": the fused kernel must round like the pair";
  }
}

// RoPE of q and of k into the paged cache in one launch equals Rope then KvWrite, on the GPU
// bit for bit and against the CPU backend (the reference) to f32 noise, in both RoPE styles,
// partial rotary dims, and f32 / bf16 caches.
TEST_F(CudaBackendTest, RopeKvWriteIsRopeThenKvWrite) {
  const int32_t nq = 8, nkv = 2, d = 64, block_size = 16, num_blocks = 6;
  const std::vector<int32_t> positions = {0, 1, 17, 31, 4095, 70000};
  const std::vector<int32_t> slots = {0, 1, 33, 47, 90, 16};
  const int64_t m = static_cast<int64_t>(positions.size());
  const std::vector<float> q = RandomFloats(m * nq * d, 24), k = RandomFloats(m * nkv * d, 25),
                           v = RandomFloats(m * nkv * d, 26);
  const size_t pool_elems = static_cast<size_t>(num_blocks) * block_size * nkv * d;
  for (DType kv_dtype : {DType::kF32, DType::kBF16}) {
    const std::vector<uint8_t> poison =
        testing::StoreAs(std::vector<float>(pool_elems, std::numeric_limits<float>::quiet_NaN()), kv_dtype);
    for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
      for (int32_t rotary_dim : {64, 32}) {
        std::vector<float> inv_freq(rotary_dim / 2);
        for (int32_t i = 0; i < rotary_dim / 2; ++i)
          inv_freq[i] = static_cast<float>(1.0 / std::pow(10000.0, 2.0 * i / rotary_dim));
        // Returns q after, then the K and V pools' bytes (as floats' worth of bytes).
        auto run_op = [&](DeviceRunner& run, bool fused) {
          Backend& be = run.backend();
          float* dq = run.Upload(q);
          float* dk = run.Upload(k);
          RopeParams rope;
          rope.style = style;
          rope.rotary_dim = rotary_dim;
          rope.inv_freq = run.Upload(inv_freq);
          KvWriteParams write;
          write.k = dk;
          write.v = run.Upload(v);
          write.slots = run.Upload(slots);
          write.num_tokens = static_cast<int32_t>(m);
          write.kv.k = run.Bytes(poison.data(), poison.size());
          write.kv.v = run.Bytes(poison.data(), poison.size());
          write.kv.dtype = kv_dtype;
          write.kv.block_size = block_size;
          write.kv.num_kv_heads = nkv;
          write.kv.head_dim = d;
          const int32_t* dpos = run.Upload(positions);
          if (fused) {
            be.RopeKvWrite(dq, dk, dpos, nq, rope, write);
          } else {
            be.Rope(dq, dk, dpos, m, nq, nkv, d, rope);
            be.KvWrite(write);
          }
          struct Out {
            std::vector<float> q;
            std::vector<uint8_t> k_pool, v_pool;
          } out{run.Download(dq, q.size()), run.Download(static_cast<const uint8_t*>(write.kv.k), poison.size()),
                run.Download(static_cast<const uint8_t*>(write.kv.v), poison.size())};
          return out;
        };
        const std::string what =
            absl::StrCat(DTypeName(kv_dtype), " style ", static_cast<int>(style), " rotary ", rotary_dim);
        DeviceRunner gpu_run(*cuda_), gpu_pair_run(*cuda_), cpu_run(*cpu_);
        const auto gpu = run_op(gpu_run, true);
        const auto gpu_pair = run_op(gpu_pair_run, false);
        const auto cpu = run_op(cpu_run, false);
        EXPECT_EQ(gpu.q, gpu_pair.q) << what;
        EXPECT_TRUE(gpu.k_pool == gpu_pair.k_pool) << what << ": K pools differ from Rope + KvWrite";
        EXPECT_TRUE(gpu.v_pool == gpu_pair.v_pool) << what << ": V pools differ from Rope + KvWrite";
        EXPECT_TRUE(AllClose(gpu.q, cpu.q, 1e-5, 1e-5)) << what;
        EXPECT_TRUE(gpu.v_pool == cpu.v_pool) << what;
        if (kv_dtype == DType::kF32) {
          std::vector<float> gk(pool_elems), ck(pool_elems);
          std::memcpy(gk.data(), gpu.k_pool.data(), gpu.k_pool.size());
          std::memcpy(ck.data(), cpu.k_pool.data(), cpu.k_pool.size());
          for (size_t i = 0; i < pool_elems; ++i)  // slots nobody wrote stay NaN in both
            if (std::isnan(ck[i])) {
              EXPECT_TRUE(std::isnan(gk[i])) << what << " element " << i;
              gk[i] = ck[i] = 0.0f;
            }
          EXPECT_TRUE(AllClose(gk, ck, 1e-5, 1e-5)) << what;
        }
      }
    }
  }
}

TEST_F(CudaBackendTest, EmbeddingsAndGatherMatchCpu) {
  const int64_t rows = 50, k = 96, ld = 100;
  const std::vector<float> table = RandomFloats(rows * ld, 10);
  const std::vector<int32_t> ids = {3, 0, 49, 3, 7, 12}, positions = {0, 1, 2, 3, 4, 5}, pick = {5, 0, 3};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const std::vector<uint8_t> bytes = testing::StoreAs(table, dt);
    auto [gpu, cpu] = OnBoth([&](DeviceRunner& run) {
      Backend& be = run.backend();
      WeightView host;
      host.data = bytes.data();
      host.dtype = dt;
      host.n = rows;
      host.k = k;
      host.ld = ld;
      void* storage = nullptr;
      absl::StatusOr<WeightView> t = be.UploadWeight(host, &storage);
      EXPECT_TRUE(t.ok()) << t.status();
      const int64_t m = static_cast<int64_t>(ids.size());
      float* out = static_cast<float*>(run.Alloc(m * k * sizeof(float)));
      be.Embedding(run.Upload(ids), m, *t, out);
      be.AddPositionEmbedding(run.Upload(positions), m, *t, out);
      float* picked = static_cast<float*>(run.Alloc(pick.size() * k * sizeof(float)));
      be.GatherRows(out, run.Upload(pick), static_cast<int64_t>(pick.size()), k, picked);
      std::vector<float> result = run.Download(out, m * k);
      const std::vector<float> p = run.Download(picked, pick.size() * k);
      result.insert(result.end(), p.begin(), p.end());
      if (storage != nullptr) be.Free(storage);
      return result;
    });
    EXPECT_TRUE(AllClose(gpu, cpu, 0, 0)) << DTypeName(dt);
  }
}

TEST_F(CudaBackendTest, GatherRefusesQuantizedTablesBeforeLaunching) {
  // LoadAsF32 has no element i of a block-quantized table: the launcher says so on the host.
  const int32_t row = 0;
  uint8_t block[34] = {};
  float out[32] = {};
  for (DType dt : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ4_K, DType::kQ5_K,
                   DType::kQ6_K}) {
    EXPECT_EQ(cuda::LaunchGatherTableRows(&row, 1, block, dt, 32, 32, /*add=*/false, out, nullptr),
              cudaErrorInvalidValue)
        << DTypeName(dt);
  }
}

// ---- Block-quantized weights (GGUF types) ----------------------------------------------------

constexpr DType kQuantTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                                 DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

// Rows of `n` × `ld` values quantized to `dt` (the host bytes of a weight with row stride ld).
std::vector<uint8_t> QuantizedRows(const std::vector<float>& values, int64_t n, int64_t ld, DType dt) {
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * DTypeRowBytes(dt, ld));
  for (int64_t r = 0; r < n; ++r) QuantizeRow(dt, values.data() + r * ld, bytes.data() + r * DTypeRowBytes(dt, ld), ld);
  return bytes;
}

// Row r of the weight as the CPU reference decoders read it (core/common/ggml_blocks.h).
std::vector<float> DecodedRow(const std::vector<uint8_t>& bytes, int64_t ld, DType dt, int64_t r, int64_t k) {
  std::vector<float> row(static_cast<size_t>(ld));
  DequantizeRow(dt, bytes.data() + r * DTypeRowBytes(dt, ld), row.data(), ld);
  row.resize(static_cast<size_t>(k));
  return row;
}

TEST_F(CudaBackendTest, QuantizedLinearMatchesTheReferenceDecodersInDouble) {
  // k = 512: two K-quant super-blocks, 16 blocks of 32; ld pads each row by one block/super-block.
  // m = 11 crosses the kernel's 8-row passes; n = 5 output features, one CUDA block each.
  const int64_t m = 11, n = 5, k = 512;
  const std::vector<float> x = RandomFloats(m * k, 21), bias = RandomFloats(n, 22), y0 = RandomFloats(m * n, 23);
  for (DType dt : kQuantTypes) {
    const int64_t ld = k + DTypeBlockElems(dt);
    const std::vector<uint8_t> bytes = QuantizedRows(RandomFloats(n * ld, 24), n, ld, dt);
    for (bool with_bias : {false, true}) {
      for (bool accumulate : {false, true}) {
        DeviceRunner run(*cuda_);
        WeightView host;
        host.data = bytes.data();
        host.dtype = dt;
        host.n = n;
        host.k = k;
        host.ld = ld;
        void* storage = nullptr;
        absl::StatusOr<WeightView> w = cuda_->UploadWeight(host, &storage, WeightUse::kMatmul);
        ASSERT_TRUE(w.ok()) << DTypeName(dt) << ": " << w.status();
        EXPECT_EQ(w->ld, k);
        float* y = run.Upload(y0);
        cuda_->Linear(run.Upload(x), m, *w, with_bias ? run.Upload(bias) : nullptr, y, accumulate);
        const std::vector<float> got = run.Download(y, m * n);
        if (storage != nullptr) cuda_->Free(storage);
        std::vector<float> want(static_cast<size_t>(m * n));
        for (int64_t j = 0; j < n; ++j) {
          const std::vector<float> row = DecodedRow(bytes, ld, dt, j, k);
          for (int64_t i = 0; i < m; ++i) {
            double s = (accumulate ? y0[i * n + j] : 0.0) + (with_bias ? bias[j] : 0.0);
            for (int64_t c = 0; c < k; ++c) s += static_cast<double>(row[c]) * x[i * k + c];
            want[i * n + j] = static_cast<float>(s);
          }
        }
        EXPECT_TRUE(AllClose(got, want, 1e-3, 1e-4))
            << DTypeName(dt) << " bias " << with_bias << " accumulate " << accumulate;
      }
    }
  }
}

TEST_F(CudaBackendTest, QuantizedEmbeddingRowsAreTheReferenceDecodersBitForBit) {
  const int64_t rows = 6, k = 256;
  const std::vector<int32_t> ids = {5, 0, 3, 3}, positions = {1, 2, 4, 0};
  for (DType dt : kQuantTypes) {
    const int64_t ld = k + DTypeBlockElems(dt);
    const std::vector<uint8_t> bytes = QuantizedRows(RandomFloats(rows * ld, 31), rows, ld, dt);
    DeviceRunner run(*cuda_);
    WeightView host;
    host.data = bytes.data();
    host.dtype = dt;
    host.n = rows;
    host.k = k;
    host.ld = ld;
    void* storage = nullptr;
    absl::StatusOr<WeightView> t = cuda_->UploadWeight(host, &storage, WeightUse::kGather);
    ASSERT_TRUE(t.ok()) << DTypeName(dt) << ": " << t.status();
    const int64_t m = static_cast<int64_t>(ids.size());
    float* out = static_cast<float*>(run.Alloc(m * k * sizeof(float)));
    cuda_->Embedding(run.Upload(ids), m, *t, out);
    const std::vector<float> embedded = run.Download(out, m * k);
    cuda_->AddPositionEmbedding(run.Upload(positions), m, *t, out);
    const std::vector<float> summed = run.Download(out, m * k);
    if (storage != nullptr) cuda_->Free(storage);
    for (int64_t i = 0; i < m; ++i) {
      const std::vector<float> a = DecodedRow(bytes, ld, dt, ids[i], k), b = DecodedRow(bytes, ld, dt, positions[i], k);
      for (int64_t c = 0; c < k; ++c) {
        ASSERT_EQ(embedded[i * k + c], a[c]) << DTypeName(dt) << " row " << i << " col " << c;
        ASSERT_EQ(summed[i * k + c], a[c] + b[c]) << DTypeName(dt) << " row " << i << " col " << c;
      }
    }
  }
}

TEST_F(CudaBackendTest, QuantizedWeightsOfPartialBlocksOrTransposedAreRefusedByName) {
  const std::vector<uint8_t> bytes(4096);
  WeightView host;
  host.data = bytes.data();
  host.dtype = DType::kQ4_K;
  host.n = 2;
  host.k = 200;  // not whole 256-value super-blocks
  host.ld = 256;
  void* storage = nullptr;
  absl::StatusOr<WeightView> w = cuda_->UploadWeight(host, &storage, WeightUse::kMatmul);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("q4_K"), std::string::npos) << w.status();
  host.k = 256;
  host.transposed = true;
  EXPECT_EQ(cuda_->UploadWeight(host, &storage, WeightUse::kMatmul).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(storage, nullptr);
}

// ---- KV cache and fused attention -----------------------------------------------------------

std::vector<AttentionCase> CudaAttentionCases() {
  std::vector<AttentionCase> cases = testing::StandardAttentionCases();
  AttentionCase c;
  c.name = "Head128ManySeqsBf16";
  c.num_q_heads = 16, c.num_kv_heads = 4, c.head_dim = 128, c.kv_dtype = DType::kBF16;
  for (int i = 0; i < 40; ++i) c.seqs.push_back({(i * 37) % 200, i % 5 == 0 ? 9 : 1});
  cases.push_back(c);
  AttentionCase big = c;
  big.name = "Head256OptInSharedMemory";
  big.num_q_heads = 4, big.num_kv_heads = 4, big.head_dim = 256, big.kv_dtype = DType::kF32;
  big.seqs = {{0, 40}, {100, 1}, {33, 5}};
  cases.push_back(big);
  AttentionCase wide = big;
  wide.name = "Group32SplitsTiles";
  wide.num_q_heads = 32, wide.num_kv_heads = 1, wide.head_dim = 64, wide.block_size = 32;
  wide.seqs = {{0, 3}, {70, 1}};
  cases.push_back(wide);
  return cases;
}

class CudaAttentionTest : public ::testing::TestWithParam<AttentionCase>, public CudaTest {
 protected:
  void SetUp() override { ORCA_SKIP_WITHOUT_GPU(); }
};

TEST_P(CudaAttentionTest, KvPoolAndOutputMatchCpu) {
  const AttentionCase& c = GetParam();
  const testing::AttentionData d = testing::MakeAttentionData(c, 41);
  auto [gpu, cpu_default] = OnBoth([&](DeviceRunner& run) { return testing::RunAttention(run, c, d); });
  // The GPU's attention is f32 arithmetic over the cache: compare it with the CPU's f32 kernels, not
  // with the bf16 dot products the CPU uses for a bf16 cache where it has them (their own test is
  // cpu_backend_test's CpuAttentionTest).
  CpuBackend::Options o;
  o.num_threads = 2;
  o.bf16_dot = false;
  auto f32_cpu = CpuBackend::Create(o);
  DeviceRunner f32_run(*f32_cpu);
  const testing::AttentionResult cpu = testing::RunAttention(f32_run, c, d);
  EXPECT_TRUE(cpu_default.k_pool == cpu.k_pool && cpu_default.v_pool == cpu.v_pool);
  // Same rounding rule and the same untouched NaN poison: the pools are bit-identical.
  EXPECT_TRUE(gpu.k_pool == cpu.k_pool) << c.name << ": K pools differ";
  EXPECT_TRUE(gpu.v_pool == cpu.v_pool) << c.name << ": V pools differ";
  EXPECT_TRUE(AllClose(gpu.out, cpu.out, 2e-5, 1e-4)) << c.name;
  EXPECT_TRUE(AllClose(gpu.out, testing::ReferenceAttention(c, d), 2e-5, 1e-4)) << c.name;
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaAttentionTest, ::testing::ValuesIn(CudaAttentionCases()),
                         [](const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; });

TEST_F(CudaBackendTest, AttentionDescriptorsFollowEachCall) {
  // Two batches with the same number of sequences on one backend: the cached
  // descriptor upload must not leak from the first call into the second.
  const std::vector<AttentionCase> cases = testing::StandardAttentionCases();
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < 3; ++i) {
      const AttentionCase& c = cases[i];
      const testing::AttentionData d = testing::MakeAttentionData(c, 50 + static_cast<uint32_t>(i));
      DeviceRunner run(*cuda_);
      EXPECT_TRUE(AllClose(testing::RunAttention(run, c, d).out, testing::ReferenceAttention(c, d), 2e-5, 1e-4))
          << c.name << " round " << round;
    }
}

// ---- Graphs (stream capture) ------------------------------------------------------------------

// Ops recorded between BeginCapture and EndCapture do not run then; each replay runs them on
// whatever their buffers hold at that time, bit for bit like the same ops run eagerly.
TEST_F(CudaBackendTest, GraphReplaysItsOpsOnWhatTheBuffersHoldAtEachReplay) {
  constexpr int64_t n = 1000;
  const std::vector<float> x = RandomFloats(n, 70, -2, 2), y0 = RandomFloats(n, 71, -2, 2);
  auto eager = [&](const std::vector<float>& xv, const std::vector<float>& yv) {
    DeviceRunner r(*cuda_);
    float* ex = r.Upload(xv);
    float* ey = r.Upload(yv);
    cuda_->Add(ey, ex, n);
    cuda_->GeluTanh(ey, n);
    return r.Download(ey, n);
  };
  DeviceRunner run(*cuda_);
  float* dx = run.Upload(x);
  float* dy = run.Upload(y0);
#ifdef ORCA_CUDA_EMULATION
  const long launches0 = EmulatedGraphLaunches(0), nodes0 = EmulatedCapturedNodes(0);
#endif
  ASSERT_TRUE(cuda_->BeginCapture().ok());
  cuda_->Add(dy, dx, n);
  cuda_->GeluTanh(dy, n);
  absl::StatusOr<std::unique_ptr<OpGraph>> graph = cuda_->EndCapture();
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(run.Download(dy, n), y0) << "recording must not run the ops";
  ASSERT_TRUE(cuda_->Replay(**graph).ok());
  EXPECT_EQ(run.Download(dy, n), eager(x, y0));
  // New input: the next replay reads it (and y as the first replay left it).
  const std::vector<float> x2 = RandomFloats(n, 72, -2, 2);
  cuda_->CopyToDevice(dx, x2.data(), n * sizeof(float));
  const std::vector<float> y1 = run.Download(dy, n);
  ASSERT_TRUE(cuda_->Replay(**graph).ok());
  EXPECT_EQ(run.Download(dy, n), eager(x2, y1));
#ifdef ORCA_CUDA_EMULATION
  EXPECT_EQ(EmulatedGraphLaunches(0) - launches0, 2);
  EXPECT_EQ(EmulatedCapturedNodes(0) - nodes0, 2) << "one node per op";
#endif
}

// The runtime refuses a host wait on a capturing stream and invalidates the capture: the
// backend reports it from EndCapture and stays usable.
TEST_F(CudaBackendTest, AHostWaitInsideACaptureBreaksIt) {
  ASSERT_TRUE(cuda_->BeginCapture().ok());
  EXPECT_EQ(cudaStreamSynchronize(cuda_->stream()), cudaErrorStreamCaptureUnsupported);
#ifdef ORCA_CUDA_EMULATION
  // Allocation may synchronize the device: the emulation treats it as the same kind of error.
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
#endif
  absl::StatusOr<std::unique_ptr<OpGraph>> graph = cuda_->EndCapture();
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInternal) << graph.status();
  EXPECT_NE(graph.status().message().find("cudaErrorStreamCaptureInvalidated"), std::string::npos) << graph.status();
  const std::vector<float> x = RandomFloats(100, 73);
  DeviceRunner run(*cuda_);
  EXPECT_EQ(run.Download(run.Upload(x), x.size()), x);
  EXPECT_FALSE(cuda_->EndCapture().ok()) << "no capture is under way";
}

// A recorded attention launch has the grid of its batch shape (B one-token sequences), not of
// their contexts; StageAttention before each replay gives it the step's positions and block
// tables. Two steps with other contexts and other tables: each replay equals eager attention.
TEST_F(CudaBackendTest, CapturedAttentionReadsTheSequencesStagedBeforeEachReplay) {
  const int32_t nq = 4, nkv = 2, d = 64, bs = 16, num_blocks = 9;
  DeviceRunner run(*cuda_);
  const size_t pool = static_cast<size_t>(num_blocks) * nkv * d * bs;
  KvLayerView kv;
  kv.k = run.Upload(RandomFloats(pool, 74));
  kv.v = run.Upload(RandomFloats(pool, 75));
  kv.dtype = DType::kF32;
  kv.block_size = bs;
  kv.num_kv_heads = nkv;
  kv.head_dim = d;
  const std::vector<float> q = RandomFloats(3 * nq * d, 76);
  float* dq = run.Upload(q);
  float* out = static_cast<float*>(run.Alloc(q.size() * sizeof(float)));
  auto params = [&](const std::vector<AttentionSeq>& seqs) {
    AttentionParams p;
    p.q = dq;
    p.out = out;
    p.num_q_heads = nq;
    p.scale = 0.125f;
    p.kv = kv;
    p.seqs = seqs.data();
    p.num_seqs = static_cast<int32_t>(seqs.size());
    return p;
  };
  const int32_t* t0 = run.Upload(std::vector<int32_t>{0, 1, 2});
  const int32_t* t1 = run.Upload(std::vector<int32_t>{3, 4, 5});
  const int32_t* t2 = run.Upload(std::vector<int32_t>{6, 7, 8});
  const int32_t* u0 = run.Upload(std::vector<int32_t>{8, 2, 4});
  const int32_t* u2 = run.Upload(std::vector<int32_t>{1, 0, 6});
  const std::vector<std::vector<AttentionSeq>> steps = {
      {{0, 1, 5, t0}, {1, 1, 20, t1}, {2, 1, 33, t2}},
      {{0, 1, 9, u0}, {1, 1, 30, t1}, {2, 1, 40, u2}},
      {{0, 1, 47, t0}, {1, 1, 0, u2}, {2, 1, 16, t2}},
  };
  std::vector<std::vector<float>> want;
  for (const auto& seqs : steps) {
    cuda_->Attention(params(seqs));
    want.push_back(run.Download(out, q.size()));
  }
  EXPECT_NE(want[0], want[1]);
  EXPECT_NE(want[1], want[2]);

  cuda_->StageAttention(params(steps[0]));
  ASSERT_TRUE(cuda_->BeginCapture().ok());
  cuda_->Attention(params(steps[0]));
  absl::StatusOr<std::unique_ptr<OpGraph>> graph = cuda_->EndCapture();
  ASSERT_TRUE(graph.ok()) << graph.status();
  for (size_t i = 0; i < steps.size(); ++i) {
    cuda_->StageAttention(params(steps[i]));
    ASSERT_TRUE(cuda_->Replay(**graph).ok());
    EXPECT_EQ(run.Download(out, q.size()), want[i]) << "step " << i;
  }
}

// ---- Memory and copies ---------------------------------------------------------------------------

TEST_F(CudaBackendTest, StagedCopiesSurviveHostBufferReuseAcrossTheRing) {
  // ~9 MiB of 16 KiB copies from ONE host buffer rewritten after each call:
  // more than the pinned ring holds, so segments are recycled.
  constexpr size_t kChunk = 16 << 10, kChunks = 600;
  DeviceRunner run(*cuda_);
  uint8_t* dev = static_cast<uint8_t*>(run.Alloc(kChunk * kChunks));
  std::vector<uint8_t> host(kChunk);
  for (size_t i = 0; i < kChunks; ++i) {
    std::memset(host.data(), static_cast<int>(i & 0xff), kChunk);
    cuda_->CopyToDevice(dev + i * kChunk, host.data(), kChunk);
  }
  const std::vector<uint8_t> back = run.Download(dev, kChunk * kChunks);
  for (size_t i = 0; i < kChunks; ++i)
    ASSERT_EQ(back[i * kChunk + kChunk / 2], static_cast<uint8_t>(i & 0xff)) << "chunk " << i;
}

TEST_F(CudaBackendTest, LargeCopiesRoundTrip) {
  const std::vector<float> big = RandomFloats(3 << 20, 60);  // 12 MiB: the direct path
  DeviceRunner run(*cuda_);
  EXPECT_EQ(run.Download(run.Upload(big), big.size()), big);
}

TEST_F(CudaBackendTest, AllocationFailureIsAStatusAndLeavesTheBackendUsable) {
  absl::StatusOr<void*> p = cuda_->Allocate(size_t{1} << 50);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted) << p.status();
  const std::vector<float> x = RandomFloats(100, 61);
  DeviceRunner run(*cuda_);
  EXPECT_EQ(run.Download(run.Upload(x), x.size()), x);
}

TEST_F(CudaBackendTest, NameDescribesTheDevice) {
  EXPECT_EQ(cuda_->name().rfind("cuda:0 (", 0), 0u) << cuda_->name();
  EXPECT_EQ(cuda_->device_index(), 0);
  EXPECT_NE(cuda_->stream(), nullptr);
}

}  // namespace
}  // namespace orca::kernels
