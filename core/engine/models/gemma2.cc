// Gemma 2 (2B, 9B, 27B): the Gemma layer (gemma.h) without q/k norms; attention scores soft-capped at 50 and the
// final logits at 30 (cap · tanh(x / cap)); local (sliding-window, 4096) and global layers alternating, the first
// local; one RoPE base for both.
#include <nlohmann/json.hpp>

#include "core/common/status_macros.h"
#include "core/engine/model_weights.h"
#include "core/engine/models/gemma.h"
#include "core/formats/gguf_file.h"

namespace orca::engine {
namespace {

constexpr int32_t kPattern = 2;  // every kPattern-th layer is global

// Hugging Face's and llama.cpp's defaults, for keys a file leaves out.
void Defaults(ModelConfig* c) {
  if (c->sliding_window == 0) c->sliding_window = 4096;
  if (c->attn_softcap == 0) c->attn_softcap = 50.0f;
  if (c->final_softcap == 0) c->final_softcap = 30.0f;
}

absl::Status ParseHf(const nlohmann::json& j, const std::string& model_type, const std::string& src,
                     ModelConfig* c) {
  Defaults(c);
  ORCA_RETURN_IF_ERROR(gemma::ParseHf(j, model_type, src, kPattern, c));
  c->qk_norm = false;
  return absl::OkStatus();
}

absl::Status ParseGguf(const formats::GgufFile& g, const std::string& arch, const std::string& src, ModelConfig* c) {
  Defaults(c);
  ORCA_RETURN_IF_ERROR(gemma::ParseGguf(g, arch, src, kPattern, c));
  c->qk_norm = false;
  return absl::OkStatus();
}

std::string HfName(TensorRole role, int32_t l, const std::string& /*prefix*/) {
  if (!false && (role == TensorRole::kQNorm || role == TensorRole::kKNorm)) return "";
  return gemma::HfTensorName(role, l);
}

bool NoConv1D(TensorRole /*role*/) { return false; }
bool NoPermute(const ModelConfig& /*c*/) { return false; }
std::string GgufArchitecture(const ModelConfig& /*c*/) { return "gemma2"; }

void SynthConfig(ModelConfig* c) {
  c->model_type = "gemma2";
  c->qk_norm = false;
  Defaults(c);
  gemma::SynthConfig(c, kPattern);
}

void SynthConfigJson(const ModelConfig& c, nlohmann::json* out) {
  gemma::SynthConfigJson(c, "gemma2", "Gemma2ForCausalLM", out);
}

}  // namespace

extern const ModelFamily kGemma2Family;
const ModelFamily kGemma2Family = {
    .arch = ModelArch::kGemma2,
    .name = "gemma2",
    .hf_model_types = {"gemma2"},
    .hf_architectures = {"Gemma2ForCausalLM"},
    .gguf_architectures = {"gemma2"},
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
