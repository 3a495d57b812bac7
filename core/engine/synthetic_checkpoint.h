#pragma once
/// Writes deterministic random-weight checkpoints of any family and shape in
/// Hugging Face layout (config.json + model.safetensors), for tests,
/// benchmarks and the default model; the family (core/engine/models/) says
/// which tensors and config keys. The same options and seed always give the
/// same bytes.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/common/dtype.h"
#include "core/engine/model_config.h"

namespace orca::engine {

struct SyntheticModelOptions {
  ModelArch arch = ModelArch::kLlama;
  int32_t hidden_size = 256;
  int32_t num_layers = 4;
  int32_t num_heads = 4;
  int32_t num_kv_heads = 2;       ///< rotary families only (GPT-2: = num_heads)
  int32_t head_dim = 0;           ///< 0: hidden / heads (GPT-2 and Llama always; Qwen3 may differ)
  double partial_rotary_factor = 1.0;  ///< the share of each head RoPE rotates (Phi-4-mini: 0.75)
  int32_t intermediate_size = 0;  ///< 0: 4 × hidden (gpt2) or ~8/3 × hidden rounded to 32 (llama)
  int32_t vocab_size = 512;
  int32_t max_position = 2048;
  DType dtype = DType::kBF16;
  uint64_t seed = 0;
  bool tie_word_embeddings = true;
  bool attention_bias = false;  ///< llama: Qwen2-style Q/K/V biases (written as a qwen2 checkpoint)
  double rope_theta = 10000.0;
  double rope_theta_local = 0;         ///< local layers' RoPE base (Gemma 3); 0: the family's default
  int32_t sliding_window = 0;          ///< local layers' window; 0: the family's default (none for most)
  int32_t sliding_window_pattern = 0;  ///< every how many layers one is global; 0: the family's default
  RopeScaling rope_scaling;   ///< llama: written to config.json (GGUF: Llama 3's as rope_freqs.weight)
  /// Llama 4's attention temperature (mistral3: llama_4_scaling_beta); the family sets its floor. 0: none.
  float attn_temperature_scale = 0;
  int32_t bos_token_id = -1;  ///< -1: none
  int32_t eos_token_id = -1;  ///< -1: none

  /// The config the checkpoint will have.
  ModelConfig ToConfig() const;
};

/// Creates `dir` if needed and writes config.json and model.safetensors.
absl::Status WriteSyntheticCheckpoint(const SyntheticModelOptions& options, const std::string& dir);

/// One tensor of a synthetic checkpoint, in Hugging Face naming (GPT-2 under
/// "transformer."), in the order WriteSyntheticCheckpoint writes them.
struct SyntheticTensor {
  std::string name;
  std::vector<int64_t> shape;
  int64_t NumElements() const;
};
std::vector<SyntheticTensor> SyntheticTensors(const SyntheticModelOptions& options);
/// The f32 values of `tensor` (before rounding to options.dtype): the same
/// numbers WriteSyntheticCheckpoint stores, NumElements() of them.
void SyntheticTensorValues(const SyntheticModelOptions& options, const SyntheticTensor& tensor, float* out);

}  // namespace orca::engine
