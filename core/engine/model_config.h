#pragma once
/// Model hyper-parameters, parsed from a Hugging Face config.json or GGUF
/// metadata, validated once so the forward pass can trust them.

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/include/backend.h"

namespace orca::formats {
class GgufFile;
}  // namespace orca::formats

namespace orca::engine {

enum class ModelArch : uint8_t {
  kGpt2,   ///< LayerNorm, GELU (tanh), learned positions, fused QKV with biases
  kLlama,  ///< RMSNorm, RoPE, SwiGLU, grouped-query attention (also Qwen2/Mistral/SmolLM/TinyLlama)
  kQwen3,  ///< Llama with per-head RMSNorm of q and k before RoPE and an explicit head_dim
  kGemma2,  ///< sandwich RMSNorms, GeGLU, scaled embeddings, soft-capped attention and logits, local/global layers
  kGemma3,  ///< Gemma 2 without soft-capping, with q/k norms and local layers' own RoPE base
  kGranite,     ///< Llama with embedding, attention, residual and logit multipliers
  kOlmo2,       ///< no pre-norms; norms after attention and MLP, q/k norms over the whole projections
  kStarcoder2,  ///< LayerNorm with biases, biased GQA attention with RoPE, plain GELU MLP with biases
  kPhi3,        ///< Llama with fused qkv and gate_up tensors, partial rotary dimension, LongRoPE
  kMistral3,    ///< Llama with YaRN and Llama 4's attention temperature (Mistral Small 3.x, Ministral 3)
};
const char* ModelArchName(ModelArch arch);

struct RopeScaling {
  enum class Type : uint8_t { kNone, kLinear, kLlama3, kYarn, kLongRope };
  Type type = Type::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
  /// YaRN: the rotations per original context that bound the interpolated and the extrapolated frequencies,
  /// and the magnitude factor of q and k (0: 1 + 0.1 · ln(factor), as Hugging Face and llama.cpp default).
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double attention_factor = 0.0;
  /// LongRoPE (Phi-3): per-frequency divisors for contexts up to original_max_position and beyond it
  /// (rotary_dim / 2 each); the family puts the ones its context needs in ModelConfig::rope_freq_factors.
  std::vector<float> short_factors, long_factors;
};

struct ModelConfig {
  ModelArch arch = ModelArch::kLlama;
  std::string model_type;  ///< as written in the checkpoint ("llama", "qwen2", "gpt2", ...)
  int32_t vocab_size = 0;
  int32_t hidden_size = 0;
  int32_t num_layers = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t intermediate_size = 0;
  int32_t max_position = 0;  ///< context length
  float norm_eps = 1e-5f;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  ///< biases on Q/K/V (Qwen2; GPT-2 has all biases)
  bool mlp_bias = false;
  bool qk_norm = false;  ///< per-head RMSNorm of q and k before RoPE (Qwen3)
  /// Sliding-window attention: a local layer's query sees the last `sliding_window` positions (itself
  /// included). 0: none. Which layers are local: `local_layers` (empty with a window: every layer).
  int32_t sliding_window = 0;
  std::vector<uint8_t> local_layers;
  /// RoPE base of the local layers (Gemma 3's rope_local_base_freq), unscaled. 0: as the global layers.
  double rope_theta_local = 0;
  /// Attention's score scale; 0: 1/√head_dim (Gemma: query_pre_attn_scalar^-½).
  float attention_scale = 0;
  /// Token embeddings multiplied by this (Gemma: √hidden); 0: not scaled.
  float embedding_scale = 0;
  /// Soft-capping of attention scores and of the final logits (cap · tanh(x / cap); Gemma 2); 0: none.
  float attn_softcap = 0;
  float final_softcap = 0;
  /// Added to every RMSNorm weight at load: Gemma's Hugging Face checkpoints store w for a norm that scales by
  /// (1 + w); GGUF files store 1 + w (llama.cpp's converter adds it), so theirs is 0.
  float norm_weight_offset = 0;
  /// Granite's multipliers: each block's output scaled before the residual add (residual_multiplier), and the
  /// logits divided by logit_scale (logits_scaling). 0: none.
  float residual_scale = 0;
  float logit_scale = 0;
  /// Llama 4's attention temperature (Mistral 3's `llama_4_scaling_beta`, GGUF `attention.temperature_scale`):
  /// after RoPE, the queries at position p are multiplied by
  /// 1 + attn_temperature_scale · ln(1 + ⌊p / attn_temperature_floor⌋), which grows the attention logits of
  /// positions past the original context. 0: none.
  float attn_temperature_scale = 0;
  /// Positions per step of that temperature (the YaRN original context); positive when the scale is not 0.
  int32_t attn_temperature_floor = 0;
  double rope_theta = 10000.0;
  int32_t rotary_dim = 0;
  kernels::RopeStyle rope_style = kernels::RopeStyle::kNeox;
  RopeScaling rope_scaling;
  /// Per-frequency divisors (rotary_dim / 2) from a GGUF's `rope_freqs.weight`: llama.cpp's form of Llama 3's RoPE
  /// scaling, which its converter writes as this tensor instead of metadata. Empty: none.
  std::vector<float> rope_freq_factors;
  int32_t bos_token_id = -1;
  bool bos_token_id_set = false;  ///< the checkpoint names one (then it must be in the vocabulary)
  std::vector<int32_t> eos_token_ids;

  /// YaRN's (or LongRoPE's) factor on RoPE's cos and sin (the rotated dimensions of q and k); 1 without either.
  double RopeAttentionFactor() const {
    if (rope_scaling.type == RopeScaling::Type::kLongRope)
      return rope_scaling.attention_factor > 0 ? rope_scaling.attention_factor : 1.0;
    if (rope_scaling.type != RopeScaling::Type::kYarn) return 1.0;
    if (rope_scaling.attention_factor > 0) return rope_scaling.attention_factor;
    return rope_scaling.factor <= 1 ? 1.0 : 1.0 + 0.1 * std::log(rope_scaling.factor);
  }
  /// Whether layer `layer` (global index) attends through the sliding window.
  bool IsLocalLayer(int32_t layer) const {
    return sliding_window > 0 && (local_layers.empty() || (layer < static_cast<int32_t>(local_layers.size()) &&
                                                           local_layers[layer] != 0));
  }
  /// Checks internal consistency (divisibility, positivity). Errors name the field.
  absl::Status Validate() const;
  /// Number of parameters (embedding and LM head counted once when tied).
  int64_t NumParameters() const;
  std::string Summary() const;
};

/// Parses config.json text (its model_type or architectures one of the families in core/engine/models/).
/// `source` names the file in errors.
absl::StatusOr<ModelConfig> ParseHfConfig(const std::string& json_text, const std::string& source);
/// Reads the hyper-parameters of a GGUF file (its general.architecture one of the families in core/engine/models/).
absl::StatusOr<ModelConfig> ConfigFromGguf(const formats::GgufFile& gguf);
/// Inverse RoPE frequencies (rotary_dim / 2 values) with rope scaling applied: `rope_scaling`, then each divided
/// by its `rope_freq_factors` entry.
std::vector<float> RopeInverseFrequencies(const ModelConfig& config);
/// The local layers' inverse frequencies: base `rope_theta_local`, no scaling.
std::vector<float> LocalRopeInverseFrequencies(const ModelConfig& config);
/// Llama 3's scaling as per-frequency divisors of the unscaled inverse frequencies, the values llama.cpp's converter
/// writes as `rope_freqs.weight` (rotary_dim / 2). Requires rope_scaling.type == kLlama3.
std::vector<float> Llama3RopeFreqFactors(const ModelConfig& config);

}  // namespace orca::engine
