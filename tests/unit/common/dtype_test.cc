#include "core/common/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

namespace orca {
namespace {

TEST(DTypeTest, Bf16RoundTripsRepresentableValues) {
  for (float v : {0.0f, 1.0f, -2.5f, 3.140625f, 65536.0f}) EXPECT_EQ(Bf16ToF32(F32ToBf16(v)), v);
}

TEST(DTypeTest, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
}

TEST(DTypeTest, F16MatchesKnownEncodings) {
  EXPECT_EQ(F32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(F32ToF16(-2.0f), 0xc000);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(1e6f), 0x7c00);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
  for (int h = 0; h < 0x7c00; h += 7) EXPECT_EQ(F32ToF16(F16ToF32(static_cast<uint16_t>(h))), h) << h;
}

}  // namespace
}  // namespace orca
