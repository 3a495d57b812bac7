#include "core/formats/ggml_quants.h"

#include <cmath>
#include <cstddef>

namespace orca::formats {

bool DTypeFromGgml(uint32_t ggml_type, DType* out) {
  switch (ggml_type) {
    case kGgmlF32:
      *out = DType::kF32;
      return true;
    case kGgmlF16:
      *out = DType::kF16;
      return true;
    case kGgmlBF16:
      *out = DType::kBF16;
      return true;
    case kGgmlQ8_0:
      *out = DType::kQ8_0;
      return true;
    case kGgmlQ4_0:
      *out = DType::kQ4_0;
      return true;
    case kGgmlQ4_1:
      *out = DType::kQ4_1;
      return true;
    case kGgmlQ5_0:
      *out = DType::kQ5_0;
      return true;
    case kGgmlQ5_1:
      *out = DType::kQ5_1;
      return true;
    case kGgmlQ4_K:
      *out = DType::kQ4_K;
      return true;
    case kGgmlQ5_K:
      *out = DType::kQ5_K;
      return true;
    case kGgmlQ6_K:
      *out = DType::kQ6_K;
      return true;
    default:
      return false;
  }
}

uint32_t GgmlTypeOf(DType t) {
  switch (t) {
    case DType::kF32:
      return kGgmlF32;
    case DType::kF16:
      return kGgmlF16;
    case DType::kBF16:
      return kGgmlBF16;
    case DType::kQ8_0:
      return kGgmlQ8_0;
    case DType::kQ4_0:
      return kGgmlQ4_0;
    case DType::kQ4_1:
      return kGgmlQ4_1;
    case DType::kQ5_0:
      return kGgmlQ5_0;
    case DType::kQ5_1:
      return kGgmlQ5_1;
    case DType::kQ4_K:
      return kGgmlQ4_K;
    case DType::kQ5_K:
      return kGgmlQ5_K;
    case DType::kQ6_K:
      return kGgmlQ6_K;
  }
  return kGgmlF32;
}

namespace {

template <typename Block>
void DecodeBlocks(const void* src, float* dst, int64_t num_blocks, int64_t block_elems) {
  const Block* b = static_cast<const Block*>(src);
  for (int64_t i = 0; i < num_blocks; ++i) DecodeBlock(b[i], dst + i * block_elems);
}

bool Finite(uint16_t half) { return (half & 0x7c00u) != 0x7c00u; }

}  // namespace

void DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  const int64_t blocks = n / DTypeBlockElems(t), be = DTypeBlockElems(t);
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      ConvertToF32(src, t, dst, static_cast<size_t>(n));
      return;
    case DType::kQ8_0:
      return DecodeBlocks<BlockQ8_0>(src, dst, blocks, be);
    case DType::kQ4_0:
      return DecodeBlocks<BlockQ4_0>(src, dst, blocks, be);
    case DType::kQ4_1:
      return DecodeBlocks<BlockQ4_1>(src, dst, blocks, be);
    case DType::kQ5_0:
      return DecodeBlocks<BlockQ5_0>(src, dst, blocks, be);
    case DType::kQ5_1:
      return DecodeBlocks<BlockQ5_1>(src, dst, blocks, be);
    case DType::kQ4_K:
      return DecodeBlocks<BlockQ4_K>(src, dst, blocks, be);
    case DType::kQ5_K:
      return DecodeBlocks<BlockQ5_K>(src, dst, blocks, be);
    case DType::kQ6_K:
      return DecodeBlocks<BlockQ6_K>(src, dst, blocks, be);
  }
}

int64_t FindCorruptBlock(DType t, const void* blocks, int64_t num_blocks, const char** field) {
  const uint8_t* p = static_cast<const uint8_t*>(blocks);
  const size_t bb = DTypeBlockBytes(t);
  // Byte offsets of the fp16 fields in a block and their names.
  struct Field {
    size_t offset;
    const char* name;
  };
  Field fields[2];
  int count = 0;
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
      fields[count++] = {0, "d"};
      break;
    case DType::kQ4_1:
    case DType::kQ5_1:
      fields[count++] = {0, "d"};
      fields[count++] = {2, "m"};
      break;
    case DType::kQ4_K:
    case DType::kQ5_K:
      fields[count++] = {0, "d"};
      fields[count++] = {2, "dmin"};
      break;
    case DType::kQ6_K:
      fields[count++] = {offsetof(BlockQ6_K, d), "d"};
      break;
    default:
      return -1;
  }
  for (int64_t i = 0; i < num_blocks; ++i) {
    const uint8_t* block = p + static_cast<size_t>(i) * bb;
    for (int f = 0; f < count; ++f) {
      const uint16_t half = static_cast<uint16_t>(block[fields[f].offset] | block[fields[f].offset + 1] << 8);
      if (!Finite(half)) {
        *field = fields[f].name;
        return i;
      }
    }
  }
  return -1;
}

}  // namespace orca::formats
