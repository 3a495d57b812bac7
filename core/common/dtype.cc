#include "core/common/dtype.h"

#include <cctype>
#include <cstdlib>
#include <string>

namespace orca {
namespace {

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

}  // namespace

bool ParseDType(std::string_view name, DType* out) {
  if (name == "f32" || name == "float32" || name == "float")
    *out = DType::kF32;
  else if (name == "f16" || name == "float16" || name == "half")
    *out = DType::kF16;
  else if (name == "bf16" || name == "bfloat16")
    *out = DType::kBF16;
  else
    return false;
  return true;
}

bool ParseWeightDType(std::string_view name, DType* out) {
  if (ParseDType(name, out)) return true;
  for (const DTypeTraits& row : kDTypeTraits)
    if (row.quantized && EqualsIgnoringCase(name, row.name)) {
      *out = row.type;
      return true;
    }
  return false;
}

bool DTypeFromGgml(uint32_t ggml_type, DType* out) {
  for (const DTypeTraits& row : kDTypeTraits)
    if (row.ggml_type == ggml_type) {
      *out = row.type;
      return true;
    }
  return false;
}

void ConvertToF32(const void* src, DType from, float* dst, size_t n) {
  if (IsQuantized(from)) std::abort();  // DequantizeRow (a programming error here)
  DequantizeRow(from, src, dst, static_cast<int64_t>(n));
}

void ConvertFromF32(const float* src, DType to, void* dst, size_t n) {
  if (IsQuantized(to)) std::abort();  // QuantizeRow (a programming error here)
  QuantizeRow(to, src, dst, static_cast<int64_t>(n));
}

void DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  const DTypeTraits& row = TraitsOf(t);
  if (row.to_f32 == nullptr) std::abort();  // not a type
  row.to_f32(src, dst, n);
}

void QuantizeRow(DType t, const float* src, void* dst, int64_t n) {
  const DTypeTraits& row = TraitsOf(t);
  if (row.from_f32 == nullptr) std::abort();  // a type without a quantizer: callers check from_f32
  row.from_f32(src, dst, n);
}

int64_t FindCorruptBlock(DType t, const void* blocks, int64_t num_blocks, const char** field) {
  const DTypeTraits& row = TraitsOf(t);
  if (!row.quantized || row.scales[0].name == nullptr) return -1;
  const uint8_t* p = static_cast<const uint8_t*>(blocks);
  for (int64_t i = 0; i < num_blocks; ++i) {
    const uint8_t* block = p + static_cast<size_t>(i) * row.block_bytes;
    for (const ScaleField& f : row.scales) {
      if (f.name == nullptr) continue;
      const uint16_t half = static_cast<uint16_t>(block[f.offset] | block[f.offset + 1] << 8);
      if ((half & 0x7c00u) == 0x7c00u) {  // exponent all ones: infinity or NaN
        *field = f.name;
        return i;
      }
    }
  }
  return -1;
}

}  // namespace orca
