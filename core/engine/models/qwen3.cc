// Qwen3 (dense, 0.6B-32B): Llama's layer with an RMSNorm over every head of the queries and of the keys before
// RoPE, an explicit head_dim (heads × head_dim need not be the hidden size), no Q/K/V biases, rotate-half RoPE
// (llama.cpp keeps the Hugging Face layout: no Q/K permutation). Its layer is Llama's with qk_norm set.
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/engine/model_weights.h"
#include "core/engine/models/config_fields.h"
#include "core/engine/models/llama.h"
#include "core/formats/gguf_file.h"
#include "core/formats/gguf_writer.h"

namespace orca::engine {
namespace {

absl::Status ParseHf(const nlohmann::json& j, const std::string& model_type, const std::string& src,
                     ModelConfig* c) {
  ORCA_RETURN_IF_ERROR(ParseRotaryDecoderHf(j, model_type, src, c));
  c->qk_norm = true;
  return absl::OkStatus();
}

absl::Status ParseGguf(const formats::GgufFile& g, const std::string& arch, const std::string& src, ModelConfig* c) {
  ORCA_RETURN_IF_ERROR(ReadRotaryDecoderGguf(g, arch, src, c));
  c->rope_style = kernels::RopeStyle::kNeox;
  c->qk_norm = true;
  return absl::OkStatus();
}

std::string HfName(TensorRole role, int32_t l, const std::string& /*prefix*/) {
  if (role == TensorRole::kQNorm) return absl::StrCat("model.layers.", l, ".self_attn.q_norm.weight");
  if (role == TensorRole::kKNorm) return absl::StrCat("model.layers.", l, ".self_attn.k_norm.weight");
  return llama::HfTensorName(role, l);
}


std::string GgufArchitecture(const ModelConfig& /*c*/) { return "qwen3"; }

void WriteGgufKeys(const ModelConfig& c, formats::GgufWriter* w) {
  llama::WriteGgufKeys(c, w);
  w->SetU32("qwen3.attention.key_length", static_cast<uint32_t>(c.head_dim));
  w->SetU32("qwen3.attention.value_length", static_cast<uint32_t>(c.head_dim));
}

void SynthConfig(ModelConfig* c) {
  c->model_type = "qwen3";
  c->qk_norm = true;
  c->attention_bias = false;
}

std::vector<SynthTensorSpec> SynthTensors(const ModelConfig& c) {
  std::vector<SynthTensorSpec> t = llama::SynthTensors(c);
  // Norm weights away from 1, so that a forward pass that skipped or misapplied them would show.
  for (int l = 0; l < c.num_layers; ++l) {
    t.push_back({HfName(TensorRole::kQNorm, l, ""), {c.head_dim}, SynthTensorSpec::Init::kAroundOne, 0.3});
    t.push_back({HfName(TensorRole::kKNorm, l, ""), {c.head_dim}, SynthTensorSpec::Init::kAroundOne, 0.3});
  }
  return t;
}

void SynthConfigJson(const ModelConfig& c, nlohmann::json* out) {
  llama::SynthConfigJson(c, "Qwen3ForCausalLM", out);
  (*out)["head_dim"] = c.head_dim;
}

}  // namespace

extern const ModelFamily kQwen3Family;
const ModelFamily kQwen3Family = {
    .arch = ModelArch::kQwen3,
    .name = "qwen3",
    .hf_model_types = {"qwen3"},
    .hf_architectures = {"Qwen3ForCausalLM"},
    .gguf_architectures = {"qwen3"},
    .norm = NormKind::kRms,
    .learned_positions = false,
    .parse_hf = ParseHf,
    .parse_gguf = ParseGguf,
    .hf_tensor_name = HfName,
    .load_layer = llama::LoadLayer,
    .forward_layer = llama::ForwardLayer,
    .gguf_architecture = GgufArchitecture,
    .write_gguf_keys = WriteGgufKeys,
    .synth_config = SynthConfig,
    .synth_tensors = SynthTensors,
    .synth_config_json = SynthConfigJson,
};

}  // namespace orca::engine
