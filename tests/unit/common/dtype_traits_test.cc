// The traits table of core/common/dtype.h (one row per tensor type): every row
// agrees with the GGUF specification (type ids, values and bytes per block),
// with its own decoder (the block size and stride the row states are the ones
// the decoder reads), with its quantizer (a round trip within the type's
// precision), and with the rules the loader, sharding and `orca model
// quantize` read from it; names and ids are unique, so lookups by either are
// unambiguous.

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/common/dtype.h"

namespace orca {
namespace {

// What the GGUF specification (ggml's enum ggml_type and its type traits) says
// of each type Orca reads: written out here, not taken from the table.
struct Spec {
  DType type;
  const char* ggml_name;  // ggml_type_name
  uint32_t id;
  int64_t block_elems;
  size_t block_bytes;
  int value_bits;  // bits of one quantized value (the mantissa's precision for float types)
  // Block types: the largest round-trip error, in steps of the block's range (2·max|x| / 2^value_bits).
  // Half a step where values round to the nearest level of the block's own range (Q8_0: ±max|x|;
  // Q4_1, Q5_1: [min, max]); a whole step where the scale is set by the signed maximum and the
  // opposite extreme may clip by one level (Q4_0, Q5_0, Q6_K's sub-blocks); the K-quants' 6-bit
  // and int8 sub-block scales add their rounding. Each with a tenth of a step for the fp16 scales.
  double tolerance_steps;
};
constexpr Spec kSpec[] = {
    {DType::kF32, "f32", 0, 1, 4, 24, 0},          {DType::kF16, "f16", 1, 1, 2, 11, 0},
    {DType::kBF16, "bf16", 30, 1, 2, 8, 0},        {DType::kQ8_0, "q8_0", 8, 32, 34, 8, 0.55},
    {DType::kQ4_0, "q4_0", 2, 32, 18, 4, 1.1},     {DType::kQ4_1, "q4_1", 3, 32, 20, 4, 0.6},
    {DType::kQ5_0, "q5_0", 6, 32, 22, 5, 1.1},     {DType::kQ5_1, "q5_1", 7, 32, 24, 5, 0.6},
    {DType::kQ4_K, "q4_K", 12, 256, 144, 4, 0.75}, {DType::kQ5_K, "q5_K", 13, 256, 176, 5, 0.75},
    {DType::kQ6_K, "q6_K", 14, 256, 210, 6, 1.1},
};

const Spec& SpecOf(DType t) {
  for (const Spec& s : kSpec)
    if (s.type == t) return s;
  ADD_FAILURE() << "no spec entry for " << DTypeName(t);
  return kSpec[0];
}

TEST(DTypeTraitsTest, EveryRowMatchesTheGgufSpec) {
  ASSERT_EQ(std::size(kDTypeTraits), std::size(kSpec)) << "a row without a spec entry here, or the reverse";
  for (const DTypeTraits& row : kDTypeTraits) {
    const Spec& spec = SpecOf(row.type);
    EXPECT_STREQ(row.name, spec.ggml_name);
    EXPECT_EQ(row.ggml_type, spec.id) << row.name;
    EXPECT_EQ(row.block_elems, spec.block_elems) << row.name;
    EXPECT_EQ(row.block_bytes, spec.block_bytes) << row.name;
    EXPECT_EQ(row.quantized, spec.block_elems > 1) << row.name;
    EXPECT_EQ(&TraitsOf(row.type), &row) << row.name << " is not the row TraitsOf finds";
  }
}

TEST(DTypeTraitsTest, NamesAndIdsAreUnique) {
  std::set<std::string> names;
  std::set<uint32_t> ids;
  for (const DTypeTraits& row : kDTypeTraits) {
    std::string lower = row.name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_TRUE(names.insert(lower).second) << "two rows named " << row.name << " (names are case-insensitive)";
    EXPECT_TRUE(ids.insert(row.ggml_type).second) << "two rows with GGUF id " << row.ggml_type;
    DType back;
    ASSERT_TRUE(DTypeFromGgml(row.ggml_type, &back)) << row.name;
    EXPECT_EQ(back, row.type);
    if (row.quantized) {
      ASSERT_TRUE(ParseWeightDType(lower, &back)) << row.name;
      EXPECT_EQ(back, row.type);
    }
  }
}

// Random blocks whose fp16 scale fields hold finite values (any other bit pattern is a valid block).
std::vector<uint8_t> RandomBlocks(const DTypeTraits& row, int64_t blocks, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> bytes(row.block_bytes * blocks);
  for (auto& b : bytes) b = static_cast<uint8_t>(gen());
  std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
  for (int64_t i = 0; i < blocks; ++i)
    for (const ScaleField& f : row.scales) {
      if (f.name == nullptr) continue;
      const uint16_t h = F32ToF16(scale(gen));
      bytes[i * row.block_bytes + f.offset] = static_cast<uint8_t>(h);
      bytes[i * row.block_bytes + f.offset + 1] = static_cast<uint8_t>(h >> 8);
    }
  if (!row.quantized && row.type != DType::kF32)  // 16-bit floats: keep them finite
    for (size_t i = 1; i < bytes.size(); i += 2) bytes[i] &= 0x3f;
  if (row.type == DType::kF32)
    for (size_t i = 3; i < bytes.size(); i += 4) bytes[i] &= 0x3f;
  return bytes;
}

// The decoder reads blocks of exactly block_bytes and writes block_elems values each:
// decoding block i on its own, from byte i·block_bytes, gives values [i·block_elems,
// (i+1)·block_elems) of the whole row, and nothing past the values asked for is
// written (a block's worth of sentinels follows them; one more block of input
// follows the row, so a decoder that reads too far reads valid bytes).
TEST(DTypeTraitsTest, BlockSizeAndBytesAreTheDecodersOwn) {
  constexpr int64_t kBlocks = 5;
  constexpr float kUnwritten = -12345.0f;
  for (const DTypeTraits& row : kDTypeTraits) {
    ASSERT_NE(row.to_f32, nullptr) << row.name;
    const std::vector<uint8_t> bytes = RandomBlocks(row, kBlocks + 1, 5);
    const int64_t n = kBlocks * row.block_elems, pad = row.block_elems + 8;
    std::vector<float> whole(n + pad, kUnwritten);
    row.to_f32(bytes.data(), whole.data(), n);
    for (int64_t i = n; i < n + pad; ++i) ASSERT_EQ(whole[i], kUnwritten) << row.name << " wrote past the row";
    for (int64_t b = 0; b < kBlocks; ++b) {
      std::vector<float> one(row.block_elems + pad, kUnwritten);
      row.to_f32(bytes.data() + b * row.block_bytes, one.data(), row.block_elems);
      for (int64_t i = 0; i < row.block_elems; ++i)
        ASSERT_EQ(std::memcmp(&one[i], &whole[b * row.block_elems + i], 4), 0)
            << row.name << " block " << b << " value " << i;
      for (int64_t i = row.block_elems; i < row.block_elems + pad; ++i)
        ASSERT_EQ(one[i], kUnwritten) << row.name << " wrote past one block";
    }
    EXPECT_EQ(DTypeRowBytes(row.type, n), kBlocks * row.block_bytes) << row.name;
  }
}

// The bound of one value's round-trip error: element types round to their
// mantissa (relative 2^-bits; f16 subnormals absolute); block types within the
// spec's tolerance in steps of the block's range.
double Bound(const Spec& spec, double x, double block_amax) {
  if (spec.block_elems == 1) return std::fabs(x) * std::ldexp(1.0, -spec.value_bits) + 1e-7;
  return spec.tolerance_steps * 2 * block_amax / std::ldexp(1.0, spec.value_bits);
}

TEST(DTypeTraitsTest, QuantizeThenDecodeStaysWithinTheTypesPrecision) {
  for (const DTypeTraits& row : kDTypeTraits) {
    if (row.from_f32 == nullptr) continue;
    const Spec& spec = SpecOf(row.type);
    const int64_t n = 64 * 256;
    std::mt19937 gen(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) x[i] = normal(gen) * (i % 2048 < 1024 ? 0.01f : 2.0f);
    std::vector<uint8_t> bytes(DTypeRowBytes(row.type, n));
    QuantizeRow(row.type, x.data(), bytes.data(), n);
    DequantizeRow(row.type, bytes.data(), y.data(), n);
    for (int64_t b = 0; b < n / row.block_elems; ++b) {
      double amax = 0;
      for (int64_t i = 0; i < row.block_elems; ++i)
        amax = std::max(amax, std::fabs(double{x[b * row.block_elems + i]}));
      for (int64_t i = b * row.block_elems; i < (b + 1) * row.block_elems; ++i)
        ASSERT_LE(std::fabs(double{y[i]} - x[i]), Bound(spec, x[i], amax))
            << row.name << " value " << i << ": " << x[i] << " -> " << y[i];
    }
  }
}

TEST(DTypeTraitsTest, CorruptScalesAreTheRowsScaleFields) {
  for (const DTypeTraits& row : kDTypeTraits) {
    if (!row.quantized) continue;
    std::vector<uint8_t> bytes = RandomBlocks(row, 4, 9);
    const char* field = nullptr;
    ASSERT_EQ(FindCorruptBlock(row.type, bytes.data(), 4, &field), -1) << row.name;
    int fields = 0;
    for (const ScaleField& f : row.scales) {
      if (f.name == nullptr) continue;
      ++fields;
      ASSERT_LE(f.offset + 2u, row.block_bytes) << row.name << " " << f.name;
      std::vector<uint8_t> bad = bytes;
      bad[2 * row.block_bytes + f.offset] = 0x00, bad[2 * row.block_bytes + f.offset + 1] = 0x7e;  // fp16 NaN
      EXPECT_EQ(FindCorruptBlock(row.type, bad.data(), 4, &field), 2) << row.name << " " << f.name;
      EXPECT_STREQ(field, f.name);
      // The field is the decoder's scale: a NaN there reaches the decoded values.
      std::vector<float> values(4 * row.block_elems);
      row.to_f32(bad.data(), values.data(), 4 * row.block_elems);
      bool nan = false;
      for (int64_t i = 2 * row.block_elems; i < 3 * row.block_elems; ++i) nan |= std::isnan(values[i]);
      EXPECT_TRUE(nan) << row.name << ": a NaN '" << f.name << "' does not reach the decoded block";
    }
    EXPECT_GE(fields, 1) << row.name << " names no scale field";
  }
}

TEST(DTypeTraitsTest, ShardingAndQuantizeRulesAreConsistent) {
  for (const DTypeTraits& row : kDTypeTraits) {
    // A tensor-parallel shard holds whole blocks.
    EXPECT_EQ(DTypeSplitElems(row.type) % row.block_elems, 0) << row.name;
    // `orca model quantize`'s fallback is a type it can write with smaller blocks (or the type itself,
    // for element types, which divide every row).
    const DTypeTraits& fallback = TraitsOf(row.quantize_fallback);
    EXPECT_NE(fallback.from_f32, nullptr) << row.name;
    if (row.quantized)
      EXPECT_LT(fallback.block_elems, row.block_elems) << row.name;
    else
      EXPECT_EQ(fallback.type, row.type);
    // Kernels: element types on the float GEMMs, block types on the quantized ones.
    EXPECT_EQ(row.cpu_gemm, row.quantized ? CpuGemm::kInt8 : CpuGemm::kFloat) << row.name;
    EXPECT_EQ(row.cuda_gemm, row.quantized ? CudaGemm::kDequant : CudaGemm::kCublas) << row.name;
  }
}

constexpr bool IsQuantizedRow(const DTypeTraits& row) { return row.quantized; }

TEST(DTypeTraitsTest, VisitDTypeCallsWithTheCompileTimeTypeOfMatchingRowsOnly) {
  for (const DTypeTraits& row : kDTypeTraits) {
    int calls = 0;
    const bool visited = VisitDType<&IsQuantizedRow>(row.type, [&](auto type) {
      ++calls;
      EXPECT_EQ(decltype(type)::value, row.type);
      EXPECT_EQ(sizeof(typename GgmlBlock<decltype(type)::value>::type), row.block_bytes) << row.name;
    });
    EXPECT_EQ(visited, row.quantized) << row.name;
    EXPECT_EQ(calls, row.quantized ? 1 : 0) << row.name;
  }
}

}  // namespace
}  // namespace orca
