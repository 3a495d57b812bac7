#pragma once
/// Llama's pieces that its descendants (Qwen3, and the families after it) reuse: its Hugging Face tensor names,
/// its layer's tensors for `orca model synth`, its config.json and its GGUF keys.

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/engine/models/model_family.h"

namespace orca::engine::llama {

/// One layer's weights: input norm, Q/K/V (biases when attention_bias; per-head q/k norms when qk_norm), O,
/// post-attention norm, gate/up/down (biases when mlp_bias).
absl::Status LoadLayer(LayerLoader& ld, const ModelConfig& c, int32_t l, LayerWeights* lw);
/// RMSNorm → QKV (→ q/k norms) → RoPE → attention → O + residual; RMSNorm → SwiGLU → down + residual.
absl::Status ForwardLayer(LayerOps& ops, int32_t l, const LayerWeights& lw);
/// "model.layers.3.self_attn.q_proj.weight" and the like ("" for roles Llama does not have).
std::string HfTensorName(TensorRole role, int32_t layer);
/// Embedding, per layer: input norm, Q/K/V (with biases when attention_bias), O, post-attention norm,
/// gate/up/down; final norm, and the LM head when untied. Norms are ones, matrices scaled so activations
/// stay O(1).
std::vector<SynthTensorSpec> SynthTensors(const ModelConfig& c);
/// config.json of a Llama-shaped model (architectures and model_type from `architecture` and c.model_type).
void SynthConfigJson(const ModelConfig& c, const std::string& architecture, nlohmann::json* out);
/// `{arch}.attention.head_count_kv`, RMSNorm epsilon, RoPE base, dimension count and linear scaling, vocab size.
void WriteGgufKeys(const ModelConfig& c, formats::GgufWriter* w);

}  // namespace orca::engine::llama
