#pragma once
/// Quantization "mixes" (`orca model quantize --type`): a base tensor type plus
/// llama.cpp's per-tensor rules for it, so that a file Orca writes has the
/// tensor types a file llama-quantize writes (and llama.cpp loads it as that
/// file type). The rules, from llama.cpp's llama_tensor_get_type (c392e50) for
/// dense (non-MoE) models without an importance matrix:
///
///   - Only 2-D+ tensors named *.weight are quantized, never norms
///     (*_norm.weight) nor position embeddings; others keep a float type.
///   - output.weight — or token_embd.weight when the head is tied (no
///     output.weight) — is Q6_K, or Q8_0 for the q8_0 mix.
///   - attn_v.weight of layer i: Q6_K for q4_k_m / q5_k_m when
///     use_more_bits(i, n) (i < n/8, or i >= 7n/8, or (i - n/8) % 3 == 2);
///     Q5_K for q4_k_s when i < 4.
///   - ffn_down.weight of layer i: Q6_K for q4_k_m / q5_k_m when
///     use_more_bits(i, n); Q5_K for q4_k_s when i < n/8.
///   - attn_qkv.weight (fused, GPT-2): Q5_K for q4_k_m, Q6_K for q5_k_m.
///   - everything else quantized: the mix's base type (q4_k_* → Q4_K,
///     q5_k_* → Q5_K, q6_k → Q6_K, q8_0 / q4_0 / q4_1 / q5_0 / q5_1 → itself).
///   - a row length that is not a whole number of the chosen type's blocks
///     falls back to its row's quantize_fallback in the traits table
///     (core/common/dtype.h): Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0, the
///     32-value types F16; and when even that does not divide it, F16. (llama.cpp fails on a 32-value type that does
///     not divide a row; Orca falls back to F16 there too and says so.)

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/dtype.h"

namespace orca::convert {

enum class QuantMix : uint8_t {
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ4_K_S,
  kQ4_K_M,
  kQ5_K_S,
  kQ5_K_M,
  kQ6_K,
};

/// "q4_k_m", "Q8_0", "bf16", ... (case-insensitive). False for unknown names.
bool ParseQuantMix(std::string_view name, QuantMix* out);
/// The names ParseQuantMix accepts, for help texts.
std::string QuantMixNames();
/// llama.cpp's general.file_type (LLAMA_FTYPE_*) of the mix.
uint32_t LlamaFileType(QuantMix mix);

/// Where a tensor sits, for the rules above.
struct TensorSlot {
  std::string name;            ///< GGUF name, e.g. "blk.3.ffn_down.weight"
  std::vector<int64_t> shape;  ///< outermost first; the last dimension is the row
  DType source_dtype;          ///< its type in the source
  int32_t num_layers = 0;      ///< the model's layer count
  bool has_output = false;     ///< the model has an untied output.weight
};

struct TypeChoice {
  DType dtype;
  /// Why the rule's first choice was not taken (a fallback), else empty.
  std::string note;
};

/// The type `slot` is written in under `mix`.
TypeChoice ChooseType(QuantMix mix, const TensorSlot& slot);

}  // namespace orca::convert
