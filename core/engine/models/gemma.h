#pragma once
/// What Gemma 2 and Gemma 3 share (gemma2.cc, gemma3.cc): the Hugging Face layout, the configuration keys,
/// the layer (RMSNorm before and after attention and MLP, GeGLU, scaled embeddings, local and global layers),
/// and the GGUF keys llama.cpp's converter writes for them.

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/engine/models/model_family.h"

namespace orca::engine::gemma {

/// Tensor names of Gemma's Hugging Face checkpoints ("" for roles Gemma does not have), the "model." of the
/// text-only layout replaced by `prefix` when one is given (the multimodal layouts).
std::string HfTensorName(TensorRole role, int32_t layer, const std::string& prefix = "");
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

/// What tells Gemma 2 and Gemma 3 apart (gemma2.cc, gemma3.cc each define one).
struct Variant {
  ModelArch arch;
  const char* name;             ///< the family's, and its GGUF general.architecture
  const char* hf_model_type;    ///< config.json model_type
  const char* hf_architecture;  ///< config.json architectures[0]
  /// Multimodal checkpoints whose language model this family reads ("" when none): their model_type and
  /// architecture (the text model's config under text_config) and where its tensors live.
  const char* hf_multimodal_model_type;
  const char* hf_multimodal_architecture;
  const char* hf_multimodal_prefixes[2];
  int32_t pattern;              ///< every `pattern`-th layer global, unless the file says otherwise
  bool qk_norm;
  // Defaults for keys a file leaves out (Hugging Face's and llama.cpp's).
  int32_t sliding_window;
  float attn_softcap, final_softcap;
  double rope_theta_local;  ///< 0: the global layers' base
};

/// A variant's defaults on `c`, for the keys a file leaves out.
void Defaults(const Variant& v, ModelConfig* c);

/// The ModelFamily of a variant.
template <const Variant& V>
ModelFamily MakeFamily() {
  return ModelFamily{
      .arch = V.arch,
      .name = V.name,
      .hf_model_types = V.hf_multimodal_model_type[0] != '\0'
                            ? std::vector<std::string>{V.hf_model_type, V.hf_multimodal_model_type}
                            : std::vector<std::string>{V.hf_model_type},
      .hf_architectures = V.hf_multimodal_model_type[0] != '\0'
                              ? std::vector<std::string>{V.hf_architecture, V.hf_multimodal_architecture}
                              : std::vector<std::string>{V.hf_architecture},
      .gguf_architectures = {V.name},
      .hf_prefixes = {"", V.hf_multimodal_prefixes[0], V.hf_multimodal_prefixes[1]},
      .parse_hf = [](const nlohmann::json& j, const std::string& model_type, const std::string& src,
                     ModelConfig* c) -> absl::Status {
        Defaults(V, c);
        c->qk_norm = V.qk_norm;
        return ParseHf(j, model_type, src, V.pattern, c);
      },
      .parse_gguf = [](const formats::GgufFile& g, const std::string& arch, const std::string& src,
                       ModelConfig* c) -> absl::Status {
        Defaults(V, c);
        c->qk_norm = V.qk_norm;
        return ParseGguf(g, arch, src, V.pattern, c);
      },
      .hf_tensor_name = [](TensorRole role, int32_t l, const std::string& prefix) -> std::string {
        if (!V.qk_norm && (role == TensorRole::kQNorm || role == TensorRole::kKNorm)) return "";
        return HfTensorName(role, l, prefix);
      },
      .load_layer = LoadLayer,
      .forward_layer = ForwardLayer,
      .gguf_architecture = [](const ModelConfig&) -> std::string { return V.name; },
      .write_gguf_keys = WriteGgufKeys,
      .synth_config =
          [](ModelConfig* c) {
            c->model_type = V.hf_model_type;
            c->qk_norm = V.qk_norm;
            Defaults(V, c);
            SynthConfig(c, V.pattern);
          },
      .synth_tensors = SynthTensors,
      .synth_config_json = [](const ModelConfig& c, nlohmann::json* out) {
        SynthConfigJson(c, V.hf_model_type, V.hf_architecture, out);
      },
  };
}

}  // namespace orca::engine::gemma
