#include "core/convert/quant_mix.h"

#include <cctype>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace orca::convert {
namespace {

struct MixInfo {
  QuantMix mix;
  const char* name;
  uint32_t file_type;  // LLAMA_FTYPE_*
  DType base;
};
constexpr MixInfo kMixes[] = {
    {QuantMix::kF32, "f32", 0, DType::kF32},         {QuantMix::kF16, "f16", 1, DType::kF16},
    {QuantMix::kBF16, "bf16", 32, DType::kBF16},     {QuantMix::kQ8_0, "q8_0", 7, DType::kQ8_0},
    {QuantMix::kQ4_0, "q4_0", 2, DType::kQ4_0},      {QuantMix::kQ4_1, "q4_1", 3, DType::kQ4_1},
    {QuantMix::kQ5_0, "q5_0", 8, DType::kQ5_0},      {QuantMix::kQ5_1, "q5_1", 9, DType::kQ5_1},
    {QuantMix::kQ4_K_S, "q4_k_s", 14, DType::kQ4_K}, {QuantMix::kQ4_K_M, "q4_k_m", 15, DType::kQ4_K},
    {QuantMix::kQ5_K_S, "q5_k_s", 16, DType::kQ5_K}, {QuantMix::kQ5_K_M, "q5_k_m", 17, DType::kQ5_K},
    {QuantMix::kQ6_K, "q6_k", 18, DType::kQ6_K},
};

const MixInfo& Info(QuantMix mix) {
  for (const MixInfo& m : kMixes)
    if (m.mix == mix) return m;
  return kMixes[0];
}

bool UseMoreBits(int32_t i, int32_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The layer of a "blk.N." tensor, or -1.
int32_t LayerOf(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

bool Divides(DType t, int64_t row) { return row % DTypeBlockElems(t) == 0; }

}  // namespace

bool ParseQuantMix(std::string_view name, QuantMix* out) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const MixInfo& m : kMixes)
    if (lower == m.name) {
      *out = m.mix;
      return true;
    }
  return false;
}

std::string QuantMixNames() {
  std::string out;
  for (const MixInfo& m : kMixes) absl::StrAppend(&out, out.empty() ? "" : ", ", m.name);
  return out;
}

uint32_t LlamaFileType(QuantMix mix) { return Info(mix).file_type; }

TypeChoice ChooseType(QuantMix mix, const TensorSlot& slot) {
  const DType base = Info(mix).base;
  const std::string& name = slot.name;
  // Float mixes: every matrix in the float type, 1-D tensors kept in f32 (as llama.cpp's converter writes them).
  const bool matrix = slot.shape.size() >= 2 && absl::EndsWith(name, "weight");
  if (!IsQuantized(base)) return {matrix ? base : DType::kF32, ""};
  const bool quantize = matrix && !absl::StrContains(name, "_norm.weight") && name != "position_embd.weight" &&
                        name != "token_types.weight";
  if (!quantize) return {IsQuantized(slot.source_dtype) || slot.shape.size() < 2 ? DType::kF32 : slot.source_dtype, ""};
  DType t = base;
  const int32_t layer = LayerOf(name), n = slot.num_layers;
  const bool km = mix == QuantMix::kQ4_K_M || mix == QuantMix::kQ5_K_M;
  if (name == "output.weight" || (!slot.has_output && name == "token_embd.weight")) {
    if (!Divides(base, slot.shape.back()))
      t = DType::kQ8_0;
    else if (base != DType::kQ8_0)
      t = DType::kQ6_K;
  } else if (name == "token_embd.weight") {
    t = base;
  } else if (absl::StrContains(name, "attn_v.weight")) {
    if (km && UseMoreBits(layer, n))
      t = DType::kQ6_K;
    else if (mix == QuantMix::kQ4_K_S && layer < 4)
      t = DType::kQ5_K;
  } else if (absl::StrContains(name, "ffn_down")) {
    if (km && UseMoreBits(layer, n))
      t = DType::kQ6_K;
    else if (mix == QuantMix::kQ4_K_S && layer < n / 8)
      t = DType::kQ5_K;
  } else if (absl::StrContains(name, "attn_qkv.weight")) {
    if (mix == QuantMix::kQ4_K_M)
      t = DType::kQ5_K;
    else if (mix == QuantMix::kQ5_K_M)
      t = DType::kQ6_K;
  }
  const int64_t row = slot.shape.back();
  if (Divides(t, row)) return {t, ""};
  const DType first = t;
  t = TraitsOf(t).quantize_fallback;
  if (!Divides(t, row)) t = DType::kF16;
  return {t,
          absl::StrCat("rows of ", row, " values are not whole ", DTypeName(first), " blocks; using ", DTypeName(t))};
}

}  // namespace orca::convert
