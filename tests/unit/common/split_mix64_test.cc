// SplitMix64 is the one mixer behind traces, prompts, block hashes, unseeded sampling seeds
// and synthetic weights. Its outputs are pinned: a change here changes reference data
// (synthetic checkpoints, bench traces) and the cache keys of prefix caching.

#include "core/common/split_mix64.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace orca {
namespace {

TEST(SplitMix64Test, MatchesTheReferenceSequence) {
  // Steele, Lea and Flood's generator as in Vigna's splitmix64.c, seeded with 0.
  SplitMix64 rng(0);
  EXPECT_EQ(rng.Next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(rng.Next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(rng.Next(), 0x06c45d188009454fULL);
}

TEST(SplitMix64Test, DerivedDrawsArePinned) {
  SplitMix64 rng(1234);
  // The conversions traces use: arrivals (exponential), prompt and output lengths (bounded ints).
  EXPECT_EQ(rng.NextDouble(), 0x1.7619ec365e303p-1);
  EXPECT_EQ(rng.NextInt(32, 512), 317);
  EXPECT_EQ(rng.NextInt(1, 128), 26);
  EXPECT_DOUBLE_EQ(rng.NextExponential(2.0), 0x1.76536582f850ap-3);  // libm's log1p: within 4 ulps
}

}  // namespace
}  // namespace orca
