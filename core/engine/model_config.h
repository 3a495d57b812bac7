#pragma once
/// Model hyper-parameters, parsed from a Hugging Face config.json or GGUF
/// metadata, validated once so the forward pass can trust them.

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
};
const char* ModelArchName(ModelArch arch);

struct RopeScaling {
  enum class Type : uint8_t { kNone, kLinear, kLlama3 };
  Type type = Type::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
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

  /// Checks internal consistency (divisibility, positivity). Errors name the field.
  absl::Status Validate() const;
  /// Number of parameters (embedding and LM head counted once when tied).
  int64_t NumParameters() const;
  std::string Summary() const;
};

/// Parses config.json text. `source` names the file in errors.
absl::StatusOr<ModelConfig> ParseHfConfig(const std::string& json_text, const std::string& source);
/// Reads the hyper-parameters of a GGUF file (general.architecture llama, qwen2 or gpt2).
absl::StatusOr<ModelConfig> ConfigFromGguf(const formats::GgufFile& gguf);
/// Inverse RoPE frequencies (rotary_dim / 2 values) with rope scaling applied: `rope_scaling`, then each divided
/// by its `rope_freq_factors` entry.
std::vector<float> RopeInverseFrequencies(const ModelConfig& config);
/// Llama 3's scaling as per-frequency divisors of the unscaled inverse frequencies, the values llama.cpp's converter
/// writes as `rope_freqs.weight` (rotary_dim / 2). Requires rope_scaling.type == kLlama3.
std::vector<float> Llama3RopeFreqFactors(const ModelConfig& config);

}  // namespace orca::engine
