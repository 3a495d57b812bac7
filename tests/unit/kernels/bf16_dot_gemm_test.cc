// The AVX512-BF16 GEMM (bf16_dot_gemm.h) against a plain reference that
// rounds the activations to bf16 the same way: packing (odd k, partial
// panels, strided rows whose padding is NaN), register tiles of every row
// count, k blocking at prefill sizes, bias and accumulate; and the property the
// engine's equivalence relies on: a row's result does not depend on the other
// rows of the call. Skips on CPUs without AVX512-BF16.

#include "kernels/cpu/bf16_dot_gemm.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace orca::kernels {
namespace {

using testing::RandomFloats;
using testing::RoundBf16;

struct Aligned {
  void operator()(void* p) const { std::free(p); }
};

struct Packed {
  std::unique_ptr<uint16_t, Aligned> data;
};

// A [n, k] bf16 weight with row stride k + pad (padding NaN), packed in two panel ranges as threads do.
Packed PackWeight(const std::vector<float>& w, int64_t n, int64_t k, int64_t pad) {
  const int64_t ld = k + pad;
  std::vector<uint16_t> rows(static_cast<size_t>(n * ld), F32ToBf16(std::numeric_limits<float>::quiet_NaN()));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) rows[r * ld + j] = F32ToBf16(w[r * k + j]);
  const size_t bytes = (bf16dot::PanelElements(n, k) * 2 + 63) / 64 * 64;
  Packed p{std::unique_ptr<uint16_t, Aligned>(static_cast<uint16_t*>(std::aligned_alloc(64, bytes)))};
  const int64_t panels = (n + 31) / 32;
  bf16dot::PackPanels(rows.data(), ld, n, k, 0, panels / 2, p.data.get());
  bf16dot::PackPanels(rows.data(), ld, n, k, panels / 2, panels, p.data.get());
  return p;
}

struct Case {
  int64_t m, n, k;
  bool bias, accumulate;
};

class Bf16DotGemmTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!GetCpuFeatures().avx512_bf16) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  }
};

TEST_P(Bf16DotGemmTest, MatchesReferenceWithActivationsRoundedToBf16) {
  const Case c = GetParam();
  const std::vector<float> x = RandomFloats(static_cast<size_t>(c.m * c.k), 1, -2, 2);
  std::vector<float> w = RandomFloats(static_cast<size_t>(c.n * c.k), 2, -0.5f, 0.5f);
  for (float& v : w) v = RoundBf16(v);
  const std::vector<float> bias = RandomFloats(static_cast<size_t>(c.n), 3);
  const std::vector<float> y0 = RandomFloats(static_cast<size_t>(c.m * c.n), 4);
  const Packed p = PackWeight(w, c.n, c.k, /*pad=*/3);
  for (int64_t row = 0; row < c.n; row += 7)  // the packed layout holds the weight exactly
    for (int64_t j = 0; j < c.k; ++j)
      ASSERT_EQ(Bf16ToF32(bf16dot::PackedValue(p.data.get(), c.k, row, j)), w[row * c.k + j]) << row << " " << j;
  std::vector<uint16_t> xb(bf16dot::ConvertedElements(c.m, c.k));
  bf16dot::ConvertRows(x.data(), c.k, 0, c.m, xb.data());
  // Output columns in two ranges (as two threads compute them), y with a wider row stride.
  const int64_t ldy = c.n + 5;
  std::vector<float> y(static_cast<size_t>(c.m * ldy), -7.0f);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) y[i * ldy + j] = y0[i * c.n + j];
  const int64_t split = std::min<int64_t>(c.n, (c.n + 63) / 64 * 32);
  const float* b = c.bias ? bias.data() : nullptr;
  bf16dot::Gemm(xb.data(), c.m, c.k, p.data.get(), b, y.data(), ldy, c.accumulate, c.n, 0, split);
  bf16dot::Gemm(xb.data(), c.m, c.k, p.data.get(), b, y.data(), ldy, c.accumulate, c.n, split, c.n);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double acc = 0, mag = 0;
      for (int64_t l = 0; l < c.k; ++l) {
        const double prod = static_cast<double>(RoundBf16(x[i * c.k + l])) * w[j * c.k + l];
        acc += prod;
        mag += std::abs(prod);
      }
      if (c.bias) acc += bias[j], mag += std::abs(bias[j]);
      if (c.accumulate) acc += y0[i * c.n + j], mag += std::abs(y0[i * c.n + j]);
      // Both factors are exact here: only the f32 summation differs from the reference.
      ASSERT_NEAR(y[i * ldy + j], acc, 2e-6 * mag + 1e-6) << "row " << i << " column " << j;
    }
    for (int64_t j = c.n; j < ldy; ++j) ASSERT_EQ(y[i * ldy + j], -7.0f) << "wrote past column n";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Bf16DotGemmTest,
                         ::testing::Values(Case{1, 77, 45, true, false},     // decode, odd k, partial panel
                                           Case{5, 64, 64, false, true},     // a small batch, accumulate
                                           Case{13, 33, 96, true, true},     // a 12-row tile and a 1-row one
                                           Case{40, 96, 130, false, false},  // k blocked (block = k here)
                                           Case{300, 70, 1001, true, true}   // prefill: several k blocks, odd k
                                           ));

TEST(Bf16DotGemmRowsTest, EachRowIsTheSameAloneAndInABatch) {
  if (!GetCpuFeatures().avx512_bf16) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const int64_t n = 50;
  // 37 rows: 12/1-row tiles. 211 rows: a row block of 192 (two k blocks: 512 pairs
  // and 38) and one of 19 (one k block). Alone: one stream pass.
  for (const auto& [m, k] : {std::pair<int64_t, int64_t>{37, 900}, {211, 1100}}) {
    const std::vector<float> x = RandomFloats(static_cast<size_t>(m * k), 5);
    std::vector<float> w = RandomFloats(static_cast<size_t>(n * k), 6, -0.5f, 0.5f);
    const Packed p = PackWeight(w, n, k, 0);
    std::vector<uint16_t> xb(bf16dot::ConvertedElements(m, k));
    bf16dot::ConvertRows(x.data(), k, 0, m, xb.data());
    std::vector<float> batch(static_cast<size_t>(m * n)), alone(static_cast<size_t>(n));
    bf16dot::Gemm(xb.data(), m, k, p.data.get(), nullptr, batch.data(), n, false, n, 0, n);
    for (int64_t i = 0; i < m; ++i) {
      bf16dot::Gemm(xb.data() + i * 2 * bf16dot::Pairs(k), 1, k, p.data.get(), nullptr, alone.data(), n, false, n, 0,
                    n);
      for (int64_t j = 0; j < n; ++j)
        ASSERT_EQ(alone[j], batch[i * n + j]) << m << " rows: row " << i << " column " << j;
    }
  }
}

}  // namespace
}  // namespace orca::kernels
