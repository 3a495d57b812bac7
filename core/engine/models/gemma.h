#pragma once
/// What Gemma 2 and Gemma 3 share (gemma2.cc, gemma3.cc): the Hugging Face layout, the configuration keys,
/// the layer (RMSNorm before and after attention and MLP, GeGLU, scaled embeddings, local and global layers),
/// and the GGUF keys llama.cpp's converter writes for them.

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/engine/models/model_family.h"

namespace orca::engine::gemma {

/// Tensor names of Gemma's Hugging Face checkpoints ("" for roles Gemma does not have; q/k norms only when
/// `qk_norm`).
std::string HfTensorName(TensorRole role, int32_t layer);
/// config.json (`default_pattern`: every how many layers one is global when neither sliding_window_pattern nor
/// layer_types says; `qk_norm`: Gemma 3's q/k norms).
absl::Status ParseHf(const nlohmann::json& j, const std::string& model_type, const std::string& src,
                     int32_t default_pattern, ModelConfig* c);
/// GGUF keys under `{arch}.` (llama.cpp's reading: the window, its pattern, the local RoPE base, soft-caps, the
/// attention scale derived from the shape).
absl::Status ParseGguf(const formats::GgufFile& g, const std::string& arch, const std::string& src,
                       int32_t default_pattern, ModelConfig* c);
/// One layer's weights (norms with ModelConfig::norm_weight_offset added).
absl::Status LoadLayer(LayerLoader& ld, const ModelConfig& c, int32_t l, LayerWeights* lw);
/// norm → QKV → (q/k norms) → RoPE → attention → post-norm + residual; norm → GeGLU → down → post-norm + residual.
absl::Status ForwardLayer(LayerOps& ops, int32_t l, const LayerWeights& lw);
/// The keys llama.cpp reads for a Gemma file.
void WriteGgufKeys(const ModelConfig& c, formats::GgufWriter* w);
/// Random-weight tensors (norm weights small around 0: the checkpoint stores w of a (1 + w) norm).
std::vector<SynthTensorSpec> SynthTensors(const ModelConfig& c);
/// config.json of a random-weight Gemma.
void SynthConfigJson(const ModelConfig& c, const std::string& model_type, const std::string& architecture,
                     nlohmann::json* out);
/// The features every Gemma has, on a config built from sizes.
void SynthConfig(ModelConfig* c, int32_t default_pattern);
/// The pattern (every how many layers one is global) that `local_layers` follows; 0 when it follows none.
int32_t LocalPattern(const ModelConfig& c);

}  // namespace orca::engine::gemma
