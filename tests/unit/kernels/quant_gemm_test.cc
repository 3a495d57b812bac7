// The quantized GEMM (kernels/cpu/quant_*) for every GGUF type, every shape
// class (decode and small batches up to AvxDirectMaxRows(type) rows, which AVX-512
// computes straight from the packed units in registers, 8 rows at a time, and
// more, which go through the chunked scratch; prefill; partial panels; k of one
// or several chunks; strided slices of a wider matrix) and every
// instruction-set path this CPU runs,
// including the portable one:
//   - packing is lossless: each packed row decodes bit for bit to the GGUF row;
//   - every ISA path gives exactly the portable path's result (same integer
//     sums, same f32 operations in the same order);
//   - all agree with an f64 GEMM over the dequantized weights within the error
//     the int8 activations allow, computed per output: each activation moves
//     by at most half its group's step (max|x| / 254), so an output moves by
//     at most Σ_groups step/2 · Σ|w| over the group (plus f32 rounding).

#include "kernels/cpu/quant_gemm.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/common/dtype.h"
#include "gtest/gtest.h"
#include "kernels/cpu/quant_layout.h"
#include "kernels/cpu/quant_pack.h"

namespace orca::kernels::quant {
namespace {

constexpr DType kTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                            DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

struct Shape {
  int64_t m, n, k;
  int64_t col0 = 0;  // the weight is columns [col0, col0 + k) of a wider [n, ld] matrix
  bool bias = false, accumulate = false;
};

std::string ShapeName(const Shape& s) {
  return "m" + std::to_string(s.m) + "_n" + std::to_string(s.n) + "_k" + std::to_string(s.k) +
         (s.col0 ? "_slice" : "") + (s.bias ? "_bias" : "") + (s.accumulate ? "_acc" : "");
}

// Shapes for a type: k in whole blocks (K-quants: multiples of 256).
std::vector<Shape> ShapesFor(DType t) {
  const int64_t b = DTypeBlockElems(t) == 256 ? 256 : 32;
  const int64_t direct = AvxDirectMaxRows(t);
  return {
      {1, 48, 8 * b},                           // decode, whole panels
      {1, 37, 2 * b, b, true},                  // decode, partial last panel, slice, bias
      {2, 40, 2 * b, 0, false, true},           // decode, 2 rows, partial panel, accumulate
      {3, 16, b},                               // tiny
      {4, 33, 3 * b, b, true, false},           // slice, bias
      {5, 24, 2 * b},                           // small batch
      {8, 50, 3 * b, 0, false, true},           // one full block of 8 rows, accumulate
      {13, 33, 4 * b, 2 * b, true, false},      // 8 rows + 5
      {direct, 40, 2 * b, 0, true, true},       // the most rows AVX-512 decodes in registers
      {direct + 1, 24, 3 * b, b, false},        // the fewest it runs chunked, from row-block records
      {direct + 3, 20, 2 * b},                  // chunked, partial row blocks of 3, 5, 7 rows
      {direct + 5, 33, 2 * b, 0, true},         // chunked, bias
      {direct + 7, 17, 3 * b, b, false, true},  // chunked, slice, accumulate
      // more rows than one decode kernel call takes, over a long k, bias, accumulate
      {20, 40, (b == 256 ? 12 : 50) * b, 0, true, true},
      {64, 40, 2 * b},                     // batch 64
      {130, 70, (b == 256 ? 3 : 20) * b},  // prefill-sized: several k chunks
      // a large prefill: two row blocks (256 + 44 rows) and two k blocks of 1024, bias, accumulate
      {300, 40, 2048, 0, true, true},
      // the same without accumulate: the second k block starts from the first one's sums in y
      {300, 40, 2048},
  };
}

struct Case {
  std::vector<float> x;      // [m, k]
  std::vector<uint8_t> w;    // GGUF rows [n, ld]
  std::vector<float> w_f32;  // the dequantized slice [n, k]
  std::vector<float> bias, y0;
  int64_t ld;
};

Case MakeCase(DType t, const Shape& s, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Case c;
  c.ld = s.k + 2 * s.col0;
  const size_t row_bytes = DTypeRowBytes(t, c.ld);
  c.w.resize(row_bytes * s.n);
  std::vector<float> row(c.ld), deq(c.ld);
  c.w_f32.resize(s.n * s.k);
  for (int64_t r = 0; r < s.n; ++r) {
    const float scale = 0.05f * (1 + r % 5);
    for (auto& v : row) v = normal(gen) * scale;
    QuantizeRow(t, row.data(), c.w.data() + r * row_bytes, c.ld);
    DequantizeRow(t, c.w.data() + r * row_bytes, deq.data(), c.ld);
    std::copy(deq.begin() + s.col0, deq.begin() + s.col0 + s.k, c.w_f32.begin() + r * s.k);
  }
  c.x.resize(s.m * s.k);
  for (int64_t i = 0; i < s.m * s.k; ++i) c.x[i] = normal(gen) * (i % 97 == 0 ? 8.0f : 1.0f);
  if (s.bias) {
    c.bias.resize(s.n);
    for (auto& v : c.bias) v = normal(gen);
  }
  c.y0.assign(s.m * s.n, 0.0f);
  if (s.accumulate)
    for (auto& v : c.y0) v = normal(gen);
  return c;
}

std::vector<uint8_t> Pack(DType t, const Shape& s, const Case& c) {
  WeightView w;
  w.dtype = t;
  w.n = s.n;
  w.k = s.k;
  w.ld = c.ld;
  w.data = c.w.data() + DTypeRowBytes(t, s.col0);
  std::vector<uint8_t> packed(PackedBytes(t, s.n, s.k));
  const int64_t panels = NumPanels(s.n);
  PackPanels(w, 0, panels / 2, packed.data());  // in two ranges, as threads do
  PackPanels(w, panels / 2, panels, packed.data());
  return packed;
}

std::vector<float> RunGemm(Isa isa, DType t, const Shape& s, const Case& c, const std::vector<uint8_t>& packed,
                           DecodePrefetch prefetch = {}, int64_t direct_max_rows = 0) {
  QuantizedRows xq;
  PrepareRows(s.m, s.k, &xq);
  QuantizeRows(isa, c.x.data(), 0, s.m, &xq);
  std::vector<float> y = c.y0;
  GemmArgs a;
  a.x = &xq;
  a.dtype = t;
  a.packed = packed.data();
  a.n = s.n;
  a.k = s.k;
  a.bias = s.bias ? c.bias.data() : nullptr;
  a.y = y.data();
  a.ldy = s.n;
  a.accumulate = s.accumulate;
  a.prefetch = prefetch;
  a.direct_max_rows = direct_max_rows;
  const int64_t panels = NumPanels(s.n);
  a.panel_begin = 0, a.panel_end = panels / 3;
  Gemm(isa, a);
  a.panel_begin = panels / 3, a.panel_end = panels;
  Gemm(isa, a);
  return y;
}

class QuantGemmTest : public ::testing::TestWithParam<DType> {};

TEST_P(QuantGemmTest, PackedRowsDecodeBitExactlyToTheGgufRows) {
  const DType t = GetParam();
  for (const Shape& s : ShapesFor(t)) {
    const Case c = MakeCase(t, s, 3);
    const std::vector<uint8_t> packed = Pack(t, s, c);
    std::vector<float> row(s.k);
    for (int64_t r = 0; r < s.n; ++r) {
      DequantizePackedRow(t, packed.data(), s.k, r, row.data());
      for (int64_t i = 0; i < s.k; ++i)
        ASSERT_EQ(std::memcmp(&row[i], &c.w_f32[r * s.k + i], 4), 0)
            << DTypeName(t) << " " << ShapeName(s) << " row " << r << " value " << i;
    }
  }
}

TEST_P(QuantGemmTest, EveryIsaMatchesThePortablePathAndTheF32Reference) {
  const DType t = GetParam();
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kGeneric, Isa::kAvxVnni, Isa::kAvx512Vnni})
    if (CanRun(isa)) isas.push_back(isa);
  for (const Shape& s : ShapesFor(t)) {
    const Case c = MakeCase(t, s, 5);
    const std::vector<uint8_t> packed = Pack(t, s, c);
    const std::vector<float> portable = RunGemm(Isa::kGeneric, t, s, c, packed);
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double ref = s.accumulate ? c.y0[i * s.n + j] : 0.0, bound = 0, mag = 0;
        for (int64_t g = 0; g < s.k / 32; ++g) {
          double amax = 0, wsum = 0;
          for (int64_t l = 32 * g; l < 32 * g + 32; ++l) {
            const double x = c.x[i * s.k + l], w = c.w_f32[j * s.k + l];
            ref += x * w;
            amax = std::max(amax, std::fabs(x));
            wsum += std::fabs(w);
            mag += std::fabs(x * w);
          }
          bound += amax / 254.0 * wsum;
        }
        if (s.bias) ref += c.bias[j];
        const double tol = bound * 1.0001 + 1e-5 * (mag + std::fabs(ref)) + 1e-6;
        ASSERT_NEAR(portable[i * s.n + j], ref, tol)
            << DTypeName(t) << " " << ShapeName(s) << " y[" << i << "][" << j << "]";
      }
    for (Isa isa : isas) {
      // Every decode prefetch scheme in use (only the timing may differ), and none.
      for (DecodePrefetch p : {DecodePrefetch{}, DecodePrefetchFor(1, t, true, 0x1A), DecodePrefetch{0, 0}}) {
        const std::vector<float> y = RunGemm(isa, t, s, c, packed, p);
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_EQ(y[i], portable[i]) << IsaName(isa) << " prefetch " << p.l1_bytes << "," << p.l2_bytes << " "
                                       << DTypeName(t) << " " << ShapeName(s) << " output " << i;
      }
      // Either AVX-512 path at any row count it may be given: the chunked kernels from the
      // fewest rows they can take, the decode kernels for all.
      for (int64_t limit : {kBlockMinRows - 1, int64_t{1} << 20}) {
        const std::vector<float> y = RunGemm(isa, t, s, c, packed, {}, limit);
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_EQ(y[i], portable[i]) << IsaName(isa) << " direct_max_rows " << limit << " " << DTypeName(t) << " "
                                       << ShapeName(s) << " output " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantGemmTest, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

// A CPU's direct-path limit may only raise the type's: the chunked kernels read row-block
// records, which QuantizeRows fills only from kBlockMinRows rows.
TEST(QuantGemmLimitsTest, EveryCpusDirectLimitLeavesTheChunkedPathItsRowBlockRecords) {
  for (DType t : kTypes)
    for (bool amd : {false, true})
      for (int family : {0x6, 0x17, 0x19, 0x1A}) {
        EXPECT_GE(AvxDirectMaxRowsFor(t, amd, family), AvxDirectMaxRows(t)) << DTypeName(t) << " " << family;
        EXPECT_GE(AvxDirectMaxRowsFor(t, amd, family), kBlockMinRows - 1) << DTypeName(t) << " " << family;
      }
  EXPECT_EQ(AvxDirectMaxRowsFor(DType::kQ4_K, true, 0x19), 48);  // Zen 4's measured limit
  EXPECT_EQ(AvxDirectMaxRowsFor(DType::kQ4_K, true, 0x1A), AvxDirectMaxRows(DType::kQ4_K));
}

// Every ISA quantizes activations to the same bytes as the portable loop: zero groups, tiny
// and huge magnitudes, exact .5 ties (round to nearest even), values at ±amax.
TEST(QuantizeRowsTest, EveryIsaGivesThePortableBytes) {
  const int64_t m = 2 * kBlockRows + 3, k = 256;  // row-block records: two full blocks and a partial one
  static_assert(2 * kBlockRows + 3 >= kBlockMinRows);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m * k; ++i) {
    const int64_t row = i / k, group = (i % k) / 32;
    const float scale = row == 0 ? 0.0f : std::pow(10.0f, static_cast<float>(row % 8) - 3.0f);
    x[static_cast<size_t>(i)] = group == 2 ? 0.0f : u(rng) * scale;
  }
  // Ties: amax 127 makes the scale 1, so x.5 values round to even.
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(k + 96 + i)] = i == 0 ? 127.0f : static_cast<float>(i % 8) - 3.5f;
  QuantizedRows want;
  PrepareRows(m, k, &want);
  QuantizeRows(Isa::kGeneric, x.data(), 0, m, &want);
  for (Isa isa : {Isa::kAvxVnni, Isa::kAvx512Vnni}) {
    if (!CanRun(isa)) continue;
    QuantizedRows got;
    PrepareRows(m, k, &got);
    QuantizeRows(isa, x.data(), 0, 3, &got);  // in ranges, as threads do, one ending inside a row block
    QuantizeRows(isa, x.data(), 3, 11, &got);
    QuantizeRows(isa, x.data(), 11, m, &got);
    EXPECT_EQ(got.q, want.q) << IsaName(isa);
    EXPECT_EQ(got.d, want.d) << IsaName(isa);
    EXPECT_EQ(got.ds, want.ds) << IsaName(isa);
    EXPECT_EQ(got.ns, want.ns) << IsaName(isa);
    ASSERT_EQ(got.blocks.size(), want.blocks.size()) << IsaName(isa);
    EXPECT_EQ(std::memcmp(got.blocks.data(), want.blocks.data(), got.blocks.size() * sizeof(RowBlockGroup)), 0)
        << IsaName(isa);
  }
  // The row-block copy the prefill kernel reads holds the row-major values, the corrections
  // pre-multiplied by each offset.
  ASSERT_EQ(want.blocks.size(), static_cast<size_t>((m + kBlockRows - 1) / kBlockRows * (k / 32)));
  for (int64_t row = 0; row < m; ++row)
    for (int64_t g = 0; g < k / 32; ++g) {
      const RowBlockGroup& b = want.blocks[static_cast<size_t>(row / kBlockRows * (k / 32) + g)];
      const int64_t at = row * (k / 32) + g, i = row % kBlockRows;
      EXPECT_EQ(std::memcmp(b.q[i], want.q.data() + row * k + 32 * g, 32), 0) << row << " " << g;
      EXPECT_EQ(b.d[i], want.d[at]);
      EXPECT_EQ(b.ds[i], want.ds[at]);
      EXPECT_EQ(b.n_shl3[i], 8 * want.ns[3 * at]);
      EXPECT_EQ(b.n_shl4[i], 16 * want.ns[3 * at]);
      EXPECT_EQ(b.n_shl7[i], 128 * want.ns[3 * at]);
      EXPECT_EQ(b.h0_shl5[i], 32 * want.ns[3 * at + 1]);
      EXPECT_EQ(b.h1_shl5[i], 32 * want.ns[3 * at + 2]);
    }
  // Decode-sized calls (only the AVX-512 decode kernels run them; they read the row-major fields) skip the copy.
  QuantizedRows few;
  PrepareRows(kBlockMinRows - 1, k, &few);
  QuantizeRows(BestIsa(), x.data(), 0, kBlockMinRows - 1, &few);
  EXPECT_TRUE(few.blocks.empty());
  EXPECT_EQ(want.q[static_cast<size_t>(k + 96 + 1)], -2);  // -2.5 → -2
  EXPECT_EQ(want.q[static_cast<size_t>(k + 96 + 2)], -2);  // -1.5 → -2
}

// The measured choices (quant_gemm.h): on Zen 5 at one and two rows L1 8 KiB ahead and no L2
// request; on Zen 4 none for one-row Q8_0; everywhere else L1 4 KiB and L2 16 KiB ahead.
TEST(DecodePrefetchTest, Zen5AtOneAndTwoRowsUsesTheL1RequestAloneFartherAhead) {
  auto is = [](DecodePrefetch p, int64_t l1, int64_t l2) { return p.l1_bytes == l1 && p.l2_bytes == l2; };
  for (DType t : {DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
    EXPECT_TRUE(is(DecodePrefetchFor(1, t, /*amd=*/true, 0x1A), 8192, 0));
    EXPECT_TRUE(is(DecodePrefetchFor(2, t, true, 0x1A), 8192, 0));
    EXPECT_TRUE(is(DecodePrefetchFor(3, t, true, 0x1A), 4096, 16384));
    EXPECT_TRUE(is(DecodePrefetchFor(1, t, false, 0x1A), 4096, 16384));  // not AMD: family numbers mean other things
    EXPECT_TRUE(is(DecodePrefetchFor(1, t, false, 6), 4096, 16384));     // Intel
  }
}

TEST(DecodePrefetchTest, Zen4DropsTheRequestsForOneRowOfQ8_0Only) {
  auto is = [](DecodePrefetch p, int64_t l1, int64_t l2) { return p.l1_bytes == l1 && p.l2_bytes == l2; };
  EXPECT_TRUE(is(DecodePrefetchFor(1, DType::kQ8_0, /*amd=*/true, 0x19), 0, 0));
  EXPECT_TRUE(is(DecodePrefetchFor(2, DType::kQ8_0, true, 0x19), 4096, 16384));
  for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K})
    EXPECT_TRUE(is(DecodePrefetchFor(1, t, true, 0x19), 4096, 16384)) << DTypeName(t);
  EXPECT_TRUE(is(DecodePrefetchFor(1, DType::kQ8_0, false, 0x19), 4096, 16384));  // not AMD
}

TEST(QuantIsaTest, ReportsWhatThisCpuRuns) {
  // Not an assertion about the machine: a record in the test log of which paths ran above.
  for (Isa isa : {Isa::kGeneric, Isa::kAvxVnni, Isa::kAvx512Vnni})
    std::printf("quant GEMM path %-12s %s\n", IsaName(isa), CanRun(isa) ? "runs here (tested)" : "not on this CPU");
  EXPECT_TRUE(CanRun(Isa::kGeneric));
  EXPECT_TRUE(CanRun(BestIsa()));
}

}  // namespace
}  // namespace orca::kernels::quant
