// The quantized block types of GGUF: the decoders against a plain reference
// written here from the format's definition (byte offsets and bit positions,
// not the structs), bit-exact, on random blocks with every bit pattern; the
// quantizers' round-trip error within each format's bound; corrupt scales
// found with the block and field named.

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/common/dtype.h"
#include "gtest/gtest.h"

namespace orca::formats {
namespace {

constexpr DType kQuantTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                                 DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

float Half(const uint8_t* p) { return F16ToF32(static_cast<uint16_t>(p[0] | p[1] << 8)); }
int Bit(const uint8_t* p, int bit) { return (p[bit / 8] >> (bit % 8)) & 1; }
// Bits [lo, lo + n) of byte b.
int Bits(uint8_t b, int lo, int n) { return (b >> lo) & ((1 << n) - 1); }

// Element i of one block, straight from the definition of each layout.
float ReferenceElement(DType t, const uint8_t* b, int i) {
  switch (t) {
    case DType::kQ8_0:  // d, then 32 signed bytes
      return Half(b) * static_cast<float>(static_cast<int8_t>(b[2 + i]));
    case DType::kQ4_0:  // d, 16 bytes: element j low nibble, element j + 16 high nibble
      return Half(b) * static_cast<float>(Bits(b[2 + i % 16], i < 16 ? 0 : 4, 4) - 8);
    case DType::kQ4_1:  // d, m, 16 bytes of nibbles
      return Half(b) * static_cast<float>(Bits(b[4 + i % 16], i < 16 ? 0 : 4, 4)) + Half(b + 2);
    case DType::kQ5_0:  // d, 32 high bits (little-endian word), nibbles
      return Half(b) * static_cast<float>((Bits(b[6 + i % 16], i < 16 ? 0 : 4, 4) | Bit(b + 2, i) << 4) - 16);
    case DType::kQ5_1:  // d, m, 32 high bits, nibbles
      return Half(b) * static_cast<float>(Bits(b[8 + i % 16], i < 16 ? 0 : 4, 4) | Bit(b + 4, i) << 4) + Half(b + 2);
    case DType::kQ4_K:
    case DType::kQ5_K: {
      // d, dmin, 12 bytes of 6-bit scales/mins, [Q5_K: 32 bytes of high bits], 128 bytes of nibbles.
      const uint8_t* s = b + 4;
      const int j = i / 32;  // sub-block
      int sc, m;
      if (j < 4) {
        sc = Bits(s[j], 0, 6), m = Bits(s[j + 4], 0, 6);
      } else {
        sc = Bits(s[j + 4], 0, 4) + 16 * Bits(s[j - 4], 6, 2);
        m = Bits(s[j + 4], 4, 4) + 16 * Bits(s[j], 6, 2);
      }
      const int chunk = i / 64, upper = (i % 64) / 32, l = i % 32;
      const uint8_t* qs = b + (t == DType::kQ4_K ? 16 : 48);
      int q = Bits(qs[32 * chunk + l], 4 * upper, 4);
      if (t == DType::kQ5_K) q += 16 * Bits(b[16 + l], 2 * chunk + upper, 1);
      return Half(b) * static_cast<float>(sc) * static_cast<float>(q) - Half(b + 2) * static_cast<float>(m);
    }
    case DType::kQ6_K: {
      // 128 bytes low 4 bits, 64 bytes high 2 bits, 16 int8 scales, d.
      const int half = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
      const int low = Bits(b[64 * half + 32 * (quarter % 2) + l], quarter < 2 ? 0 : 4, 4);
      const int high = Bits(b[128 + 32 * half + l], 2 * quarter, 2);
      const int scale = static_cast<int8_t>(b[192 + i / 16]);
      return Half(b + 208) * static_cast<float>(scale) * static_cast<float>((low | high << 4) - 32);
    }
    default:
      return NAN;
  }
}

// Random block bytes with finite fp16 scales (every other bit pattern is a valid block).
std::vector<uint8_t> RandomBlocks(DType t, int64_t num_blocks, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> bytes(DTypeRowBytes(t, num_blocks * DTypeBlockElems(t)));
  for (auto& v : bytes) v = static_cast<uint8_t>(gen());
  std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
  auto set_half = [&](uint8_t* p) {
    const uint16_t h = F32ToF16(scale(gen));
    p[0] = static_cast<uint8_t>(h), p[1] = static_cast<uint8_t>(h >> 8);
  };
  const size_t bb = DTypeBlockBytes(t);
  for (int64_t i = 0; i < num_blocks; ++i) {
    uint8_t* b = bytes.data() + i * bb;
    switch (t) {
      case DType::kQ4_1:
      case DType::kQ5_1:
      case DType::kQ4_K:
      case DType::kQ5_K:
        set_half(b), set_half(b + 2);
        break;
      case DType::kQ6_K:
        set_half(b + 208);
        break;
      default:
        set_half(b);
    }
  }
  return bytes;
}

class QuantTypeTest : public ::testing::TestWithParam<DType> {};

TEST_P(QuantTypeTest, DecoderIsBitExactAgainstTheDefinition) {
  const DType t = GetParam();
  const int64_t blocks = 300, be = DTypeBlockElems(t);
  const std::vector<uint8_t> bytes = RandomBlocks(t, blocks, 7);
  std::vector<float> out(blocks * be);
  DequantizeRow(t, bytes.data(), out.data(), blocks * be);
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int i = 0; i < be; ++i) {
      const float want = ReferenceElement(t, bytes.data() + blk * DTypeBlockBytes(t), i);
      ASSERT_EQ(std::memcmp(&want, &out[blk * be + i], 4), 0)
          << DTypeName(t) << " block " << blk << " element " << i << ": " << out[blk * be + i] << " vs " << want;
    }
}

// The bound of one element's round-trip error, from the format's definition
// (see ggml_quantize.h): half a step inside the block's range; at the range's
// edges, the clipping the stored precision of the scales allows.
double ErrorBound(DType t, const uint8_t* b, int i, double amax) {
  const double half_ulp = amax / 1024;  // fp16 rounding of the scales (11 significant bits)
  switch (t) {
    case DType::kQ8_0:
      return 0.5 * std::fabs(Half(b)) + half_ulp;
    case DType::kQ4_0:
    case DType::kQ5_0:
      return std::fabs(Half(b)) + half_ulp;  // the extreme opposite the largest may clip one step
    case DType::kQ4_1:
    case DType::kQ5_1:
      return 0.5 * std::fabs(Half(b)) + half_ulp;
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const int levels = t == DType::kQ4_K ? 15 : 31;
      // One step of the sub-block, plus the range lost to 6-bit scales and mins.
      const double d = Half(b), dmin = Half(b + 2);
      uint8_t sc, m;
      ggml::KQuantScaleMin(b + 4, i / 32, &sc, &m);
      return d * sc + 0.5 * levels * d + 0.5 * dmin + half_ulp;
    }
    case DType::kQ6_K: {
      const double d = std::fabs(Half(b + 208));
      const double step = d * std::abs(static_cast<int8_t>(b[192 + i / 16]));
      return step + 16 * d + half_ulp;
    }
    default:
      return 0;
  }
}

TEST_P(QuantTypeTest, QuantizeThenDequantizeStaysWithinTheFormatsBound) {
  const DType t = GetParam();
  const int64_t be = DTypeBlockElems(t), n = 64 * 256;
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = normal(gen) * (i % 4096 < 2048 ? 0.02f : 3.0f);  // two magnitudes
  x[5] = 0, x[300] = 40.0f, x[301] = -40.0f;                                              // outliers
  std::fill(x.begin() + 1024, x.begin() + 1024 + 256, 0.0f);                              // an all-zero block
  std::vector<uint8_t> q(DTypeRowBytes(t, n));
  QuantizeRow(t, x.data(), q.data(), n);
  std::vector<float> y(n);
  DequantizeRow(t, q.data(), y.data(), n);
  double se = 0, var = 0;
  for (int64_t blk = 0; blk < n / be; ++blk) {
    double amax = 0;
    for (int64_t i = 0; i < be; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[blk * be + i])));
    for (int64_t i = 0; i < be; ++i) {
      const int64_t at = blk * be + i;
      const double err = std::fabs(static_cast<double>(y[at]) - x[at]);
      ASSERT_LE(err, ErrorBound(t, q.data() + blk * DTypeBlockBytes(t), static_cast<int>(i), amax) + 1e-7)
          << DTypeName(t) << " element " << at << ": " << x[at] << " -> " << y[at];
      se += err * err, var += static_cast<double>(x[at]) * x[at];
    }
  }
  for (int i = 1024; i < 1024 + 256; ++i) ASSERT_EQ(y[i], 0.0f) << DTypeName(t) << " zero block element " << i;
  // Signal-to-noise: more bits, less noise (uniform rounding noise is step²/12).
  const double snr_db = 10 * std::log10(var / se);
  const double min_db = t == DType::kQ8_0                                               ? 38
                        : t == DType::kQ6_K                                             ? 28
                        : (t == DType::kQ5_0 || t == DType::kQ5_1 || t == DType::kQ5_K) ? 22
                                                                                        : 16;
  EXPECT_GE(snr_db, min_db) << DTypeName(t);
}

TEST_P(QuantTypeTest, CorruptScaleIsFoundWithBlockAndField) {
  const DType t = GetParam();
  std::vector<uint8_t> bytes = RandomBlocks(t, 10, 3);
  const char* field = nullptr;
  EXPECT_EQ(FindCorruptBlock(t, bytes.data(), 10, &field), -1);
  const size_t bb = DTypeBlockBytes(t);
  const size_t offset = t == DType::kQ6_K ? 208 : 0;
  bytes[7 * bb + offset] = 0x00, bytes[7 * bb + offset + 1] = 0x7e;  // fp16 NaN
  EXPECT_EQ(FindCorruptBlock(t, bytes.data(), 10, &field), 7);
  EXPECT_STREQ(field, "d");
  if (t == DType::kQ4_K || t == DType::kQ4_1) {
    bytes = RandomBlocks(t, 10, 3);
    bytes[2 * bb + 2] = 0x00, bytes[2 * bb + 3] = 0x7c;  // +inf in the min field
    EXPECT_EQ(FindCorruptBlock(t, bytes.data(), 10, &field), 2);
    EXPECT_STREQ(field, t == DType::kQ4_K ? "dmin" : "m");
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantTypeTest, ::testing::ValuesIn(kQuantTypes),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

TEST(GgmlTypeIdTest, RoundTripsEveryTypeOrcaReads) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                  DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    DType back;
    ASSERT_TRUE(DTypeFromGgml(GgmlTypeOf(t), &back)) << DTypeName(t);
    EXPECT_EQ(back, t);
  }
  DType unused;
  EXPECT_FALSE(DTypeFromGgml(10, &unused));  // Q2_K
  EXPECT_FALSE(DTypeFromGgml(9, &unused));   // Q8_1
}

TEST(WeightDTypeTest, ParsesQuantizedNamesCaseInsensitively) {
  DType t;
  ASSERT_TRUE(ParseWeightDType("q4_k", &t));
  EXPECT_EQ(t, DType::kQ4_K);
  ASSERT_TRUE(ParseWeightDType("Q8_0", &t));
  EXPECT_EQ(t, DType::kQ8_0);
  ASSERT_TRUE(ParseWeightDType("bf16", &t));
  EXPECT_EQ(t, DType::kBF16);
  EXPECT_FALSE(ParseWeightDType("q4_k_m", &t));  // a mix, not a type
  EXPECT_FALSE(ParseDType("q8_0", &t));          // not an activation type
}

}  // namespace
}  // namespace orca::formats
