// Gemma 3 (text; 270M-27B): the Gemma layer (gemma.h) with q/k norms and no soft-capping; five local
// (sliding-window) layers to one global, the local ones with their own unscaled RoPE base (10000), the global one
// with the file's base and its linear scaling.
#include <nlohmann/json.hpp>

#include "core/common/status_macros.h"
#include "core/engine/model_weights.h"
#include "core/engine/models/gemma.h"
#include "core/formats/gguf_file.h"

namespace orca::engine {
namespace {

constexpr int32_t kPattern = 6;  // every kPattern-th layer is global

// Hugging Face's and llama.cpp's default for the local layers' RoPE base, for files that leave it out.
void Defaults(ModelConfig* c) {
  if (c->rope_theta_local == 0) c->rope_theta_local = 10000.0;
}

absl::Status ParseHf(const nlohmann::json& j, const std::string& model_type, const std::string& src,
                     ModelConfig* c) {
  Defaults(c);
  ORCA_RETURN_IF_ERROR(gemma::ParseHf(j, model_type, src, kPattern, c));
  c->qk_norm = true;
  return absl::OkStatus();
}

absl::Status ParseGguf(const formats::GgufFile& g, const std::string& arch, const std::string& src, ModelConfig* c) {
  Defaults(c);
  ORCA_RETURN_IF_ERROR(gemma::ParseGguf(g, arch, src, kPattern, c));
  c->qk_norm = true;
  return absl::OkStatus();
}

std::string HfName(TensorRole role, int32_t l, const std::string& /*prefix*/) {
  if (!true && (role == TensorRole::kQNorm || role == TensorRole::kKNorm)) return "";
  return gemma::HfTensorName(role, l);
}

bool NoConv1D(TensorRole /*role*/) { return false; }
bool NoPermute(const ModelConfig& /*c*/) { return false; }
std::string GgufArchitecture(const ModelConfig& /*c*/) { return "gemma3"; }

void SynthConfig(ModelConfig* c) {
  c->model_type = "gemma3";
  c->qk_norm = true;
  Defaults(c);
  gemma::SynthConfig(c, kPattern);
}

void SynthConfigJson(const ModelConfig& c, nlohmann::json* out) {
  gemma::SynthConfigJson(c, "gemma3_text", "Gemma3ForCausalLM", out);
}

}  // namespace

extern const ModelFamily kGemma3Family;
const ModelFamily kGemma3Family = {
    .arch = ModelArch::kGemma3,
    .name = "gemma3",
    // Text-only checkpoints; the multimodal ones (model_type gemma3) keep their language model under other names.
    .hf_model_types = {"gemma3_text"},
    .hf_architectures = {"Gemma3ForCausalLM"},
    .gguf_architectures = {"gemma3"},
    .norm = NormKind::kRms,
    .learned_positions = false,
    .parse_hf = ParseHf,
    .parse_gguf = ParseGguf,
    .hf_tensor_name = HfName,
    .hf_conv1d = NoConv1D,
    .load_layer = gemma::LoadLayer,
    .forward_layer = gemma::ForwardLayer,
    .gguf_architecture = GgufArchitecture,
    .gguf_permutes_qk = NoPermute,
    .write_gguf_keys = gemma::WriteGgufKeys,
    .synth_config = SynthConfig,
    .synth_tensors = gemma::SynthTensors,
    .synth_config_json = SynthConfigJson,
};

}  // namespace orca::engine
