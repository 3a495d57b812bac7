#pragma once
/// Orca's canonical names for the tensors of a model: each family maps them to its checkpoints' own names
/// (core/engine/models/), the loader asks for weights by role.

#include <cstdint>

namespace orca::engine {

enum class TensorRole : uint8_t {
  kTokenEmbedding,
  kPositionEmbedding,
  kFinalNorm,
  kFinalNormBias,
  kLmHead,
  kAttnNorm,
  kAttnNormBias,
  kQ,
  kK,
  kV,
  kQBias,
  kKBias,
  kVBias,
  kQkv,
  kQkvBias,  // GPT-2 fused projection
  kQNorm,    // per-head RMSNorm of the queries before RoPE (Qwen3, Gemma 3)
  kKNorm,    // per-head RMSNorm of the keys before RoPE
  kO,
  kOBias,
  kPostAttnNorm,  // RMSNorm of the attention's output before the residual add (Gemma, OLMo 2)
  kFfnNorm,
  kFfnNormBias,
  kGate,
  kUp,
  kUpBias,
  kDown,
  kDownBias,
  kPostFfnNorm,  // RMSNorm of the MLP's output before the residual add
};

}  // namespace orca::engine
