// The bf16-cache attention kernels (bf16_dot_attention.h) against plain
// references written from their definition, with the kernels' roundings (query
// and probabilities to bf16, round to nearest even) applied to the same inputs,
// so the comparison is tight: every head count through the register chunks and
// their remainders, every supported head_dim, contexts ending anywhere in a block,
// blocks scattered over a pool, and everything past the context NaN (it must not
// be read). Skips on CPUs without AVX512-BF16.

#include "kernels/cpu/bf16_dot_attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/bf16_dot_gemm.h"
#include "kernels/cpu/cpu_features.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace orca::kernels {
namespace {

using testing::RandomFloats;
using testing::RoundBf16;

class Bf16DotAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!GetCpuFeatures().avx512_bf16) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  }
};

// The queries go through the GEMMs' activation rounding (bf16dot::ConvertRows) as one row.
TEST_F(Bf16DotAttentionTest, QueriesRoundToNearestEven) {
  std::vector<float> x = RandomFloats(64, 3);
  x[0] = 1.0f + 1.0f / 256;           // halfway between two bf16 values: even (1.0)
  x[1] = 1.0f + 3.0f / 256;           // halfway: even (1 + 1/64)
  x[2] = std::nextafter(x[0], 2.0f);  // just past halfway: up
  std::vector<uint16_t> got(x.size());
  bf16dot::ConvertRows(x.data(), static_cast<int64_t>(x.size()), 0, 1, got.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(Bf16ToF32(got[i]), RoundBf16(x[i])) << i;
  EXPECT_EQ(Bf16ToF32(got[0]), 1.0f);
  EXPECT_EQ(Bf16ToF32(got[1]), 1.0f + 1.0f / 64);
  EXPECT_EQ(Bf16ToF32(got[2]), 1.0f + 1.0f / 128);
}

// A pool of `blocks` blocks of 2 KV heads, holding head 1 of a sequence in scattered blocks (the
// table runs backwards over every other block), rows past ctx in its last block NaN, as the pool
// may hold anything there.
struct Pool {
  std::vector<uint16_t> data;
  std::vector<int32_t> table;
  int64_t block_stride = 0, head_offset = 0;
  bf16dot::HeadBlocks View() const { return {data.data(), table.data(), block_stride, head_offset}; }
};

// value(j, d) for key j < ctx; `k_layout`: [head_dim][16] per block, else [16][head_dim].
template <typename F>
Pool MakePool(int32_t head_dim, int32_t ctx, bool k_layout, F value) {
  const int32_t nblocks = (ctx + 15) / 16, pool_blocks = 2 * nblocks + 1;
  Pool pool;
  pool.block_stride = 2 * 16 * head_dim;
  pool.head_offset = 16 * head_dim;
  pool.data.assign(static_cast<size_t>(pool_blocks * pool.block_stride),
                   F32ToBf16(std::numeric_limits<float>::quiet_NaN()));
  for (int32_t b = 0; b < nblocks; ++b) pool.table.push_back(pool_blocks - 1 - 2 * b);
  for (int32_t j = 0; j < ctx; ++j)
    for (int32_t d = 0; d < head_dim; ++d) {
      const int64_t block = pool.table[j / 16] * pool.block_stride + pool.head_offset;
      const int64_t at = k_layout ? d * 16 + j % 16 : (j % 16) * head_dim + d;
      pool.data[static_cast<size_t>(block + at)] = F32ToBf16(value(j, d));
    }
  return pool;
}

TEST_F(Bf16DotAttentionTest, ScoresMatchTheRoundedQueryAgainstTheCache) {
  for (int32_t head_dim : {16, 32, 64, 80, 96, 128})
    for (int32_t group : {1, 2, 3, 5, 7, 8, 9, 12, 16})
      for (int32_t ctx : {1, 2, 15, 16, 17, 40, 64}) {
        SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim << " group " << group << " ctx " << ctx);
        const uint32_t seed = static_cast<uint32_t>(head_dim * 1000 + group * 17 + ctx);
        const std::vector<float> kf = RandomFloats(static_cast<size_t>(ctx) * head_dim, seed);
        const Pool k = MakePool(head_dim, ctx, true, [&](int32_t j, int32_t d) { return kf[j * head_dim + d]; });
        const std::vector<float> q = RandomFloats(static_cast<size_t>(group) * head_dim, seed + 1);
        std::vector<uint16_t> qb(q.size());
        bf16dot::ConvertRows(q.data(), static_cast<int64_t>(q.size()), 0, 1, qb.data());
        const int64_t ld = (ctx + 15) / 16 * 16 + 5;  // rows of scores land anywhere
        const float sentinel = -12345.0f, scale = 0.125f;
        std::vector<float> scores(static_cast<size_t>(group) * ld, sentinel);
        bf16dot::GroupScores(qb.data(), group, k.View(), head_dim, ctx, scale, scores.data(), ld);
        for (int32_t g = 0; g < group; ++g)
          for (int64_t j = 0; j < ld; ++j) {
            const float got = scores[static_cast<size_t>(g * ld + j)];
            if (j >= (ctx + 15) / 16 * 16) {
              ASSERT_EQ(got, sentinel) << "wrote past the last block at head " << g << " key " << j;
              continue;
            }
            if (j >= ctx) continue;  // the last block's tail: written, never read
            double want = 0, mag = 0;
            for (int32_t d = 0; d < head_dim; ++d) {
              const double prod = static_cast<double>(RoundBf16(q[static_cast<size_t>(g * head_dim + d)])) *
                                  RoundBf16(kf[static_cast<size_t>(j * head_dim + d)]);
              want += prod;
              mag += std::abs(prod);
            }
            ASSERT_NEAR(got, scale * want, scale * mag * 1e-6 + 1e-30) << "head " << g << " key " << j;
          }
      }
}

TEST_F(Bf16DotAttentionTest, AccumulateSumsRoundedProbabilitiesTimesValuesAndReadsNothingPastTheContext) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int32_t head_dim : {16, 32, 64, 80, 96, 128})
    for (int32_t group : {1, 2, 3, 4, 6, 7, 8, 9, 13})
      for (int32_t ctx : {1, 2, 5, 16, 17, 33, 50}) {
        SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim << " group " << group << " ctx " << ctx);
        const uint32_t seed = static_cast<uint32_t>(head_dim * 977 + group * 31 + ctx);
        const std::vector<float> vf = RandomFloats(static_cast<size_t>(ctx) * head_dim, seed);
        const Pool v = MakePool(head_dim, ctx, false, [&](int32_t j, int32_t d) { return vf[j * head_dim + d]; });
        const int64_t ld_p = (ctx + 15) / 16 * 16 + 3;
        std::vector<float> p(static_cast<size_t>(group) * ld_p, nan);  // past ctx: garbage, never read
        const std::vector<float> r = RandomFloats(p.size(), seed + 1);
        for (int32_t g = 0; g < group; ++g)
          for (int32_t j = 0; j < ctx; ++j)  // (0, 1], as exp(s − max)
            p[static_cast<size_t>(g * ld_p + j)] = std::exp(-4.0f * std::abs(r[static_cast<size_t>(g * ld_p + j)]));
        std::vector<float> out(static_cast<size_t>(group) * head_dim, nan);  // overwritten, not added to
        bf16dot::GroupAccumulate(p.data(), ld_p, group, v.View(), head_dim, ctx, out.data());
        for (int32_t g = 0; g < group; ++g)
          for (int32_t d = 0; d < head_dim; ++d) {
            const size_t at = static_cast<size_t>(g * head_dim + d);
            double want = 0, mag = 0;
            for (int32_t j = 0; j < ctx; ++j) {
              const double prod = static_cast<double>(RoundBf16(p[static_cast<size_t>(g * ld_p + j)])) *
                                  RoundBf16(vf[static_cast<size_t>(j) * head_dim + d]);
              want += prod;
              mag += std::abs(prod);
            }
            ASSERT_FALSE(std::isnan(out[at])) << "read past the context: head " << g << " dim " << d;
            ASSERT_NEAR(out[at], want, mag * 1e-6) << "head " << g << " dim " << d;
          }
      }
}

}  // namespace
}  // namespace orca::kernels
