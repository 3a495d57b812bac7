// OLMo 2 (1B-32B): no norm before attention or MLP; instead RMSNorms of the attention's and the MLP's outputs
// before their residual adds, and RMSNorms of each token's whole q and whole k projections (over all heads)
// before rotate-half RoPE.
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

absl::Status ParseHf(const nlohmann::json& j, const std::string& model_type, const std::string& src, ModelConfig* c) {
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
  const std::string p = absl::StrCat("model.layers.", l, ".");
  switch (role) {
    case TensorRole::kAttnNorm:
    case TensorRole::kFfnNorm:
      return "";  // none
    case TensorRole::kQNorm:
      return p + "self_attn.q_norm.weight";
    case TensorRole::kKNorm:
      return p + "self_attn.k_norm.weight";
    case TensorRole::kPostAttnNorm:
      return p + "post_attention_layernorm.weight";
    case TensorRole::kPostFfnNorm:
      return p + "post_feedforward_layernorm.weight";
    default:
      return llama::HfTensorName(role, l);
  }
}

absl::Status LoadLayer(LayerLoader& ld, const ModelConfig& c, int32_t l, LayerWeights* lw) {
  const int64_t H = c.hidden_size;
  ORCA_RETURN_IF_ERROR(ld.SeparateQkv(l, lw));
  // The q/k norms span every head: each shard weights its own heads' slice (the runner all-reduces the squares).
  ORCA_ASSIGN_OR_RETURN(lw->q_norm, ld.HeadSliced(TensorRole::kQNorm, l, /*kv_heads=*/false));
  ORCA_ASSIGN_OR_RETURN(lw->k_norm, ld.HeadSliced(TensorRole::kKNorm, l, /*kv_heads=*/true));
  ORCA_RETURN_IF_ERROR(ld.AttentionOutput(l, /*bias=*/false, lw));
  ORCA_ASSIGN_OR_RETURN(lw->post_attn_norm, ld.Replicated(TensorRole::kPostAttnNorm, l, H));
  ORCA_RETURN_IF_ERROR(ld.Mlp(l, /*gated=*/true, /*biases=*/false, lw));
  ORCA_ASSIGN_OR_RETURN(lw->post_ffn_norm, ld.Replicated(TensorRole::kPostFfnNorm, l, H));
  return absl::OkStatus();
}

absl::Status ForwardLayer(LayerOps& ops, int32_t l, const LayerWeights& lw) {
  ops.Norm(NormKind::kNone, nullptr, nullptr);
  ops.QkvProjection(lw);
  ORCA_RETURN_IF_ERROR(ops.QkNormWhole(lw.q_norm, lw.k_norm));
  ops.PositionAndCache(l, /*rotary=*/true);
  ops.Attend(l);
  ORCA_RETURN_IF_ERROR(ops.AttentionOutput(lw, lw.post_attn_norm));
  ops.Norm(NormKind::kNone, nullptr, nullptr);
  ops.SwiGlu(lw);
  return ops.MlpOutput(lw, lw.post_ffn_norm);
}

std::string GgufArchitecture(const ModelConfig& /*c*/) { return "olmo2"; }

void SynthConfig(ModelConfig* c) {
  c->model_type = "olmo2";
  c->qk_norm = true;
  c->attention_bias = false;
}

std::vector<SynthTensorSpec> SynthTensors(const ModelConfig& c) {
  using I = SynthTensorSpec::Init;
  std::vector<SynthTensorSpec> t;
  for (SynthTensorSpec& s : llama::SynthTensors(c))
    if (s.name.find("layernorm") == std::string::npos) t.push_back(std::move(s));  // no input norms
  const int64_t Q = int64_t{c.num_heads} * c.head_dim, KV = int64_t{c.num_kv_heads} * c.head_dim;
  for (int l = 0; l < c.num_layers; ++l) {
    t.push_back({HfName(TensorRole::kQNorm, l, ""), {Q}, I::kAroundOne, 0.3});
    t.push_back({HfName(TensorRole::kKNorm, l, ""), {KV}, I::kAroundOne, 0.3});
    t.push_back({HfName(TensorRole::kPostAttnNorm, l, ""), {c.hidden_size}, I::kAroundOne, 0.3});
    t.push_back({HfName(TensorRole::kPostFfnNorm, l, ""), {c.hidden_size}, I::kAroundOne, 0.3});
  }
  return t;
}

void SynthConfigJson(const ModelConfig& c, nlohmann::json* out) { llama::SynthConfigJson(c, "Olmo2ForCausalLM", out); }

}  // namespace

extern const ModelFamily kOlmo2Family;
const ModelFamily kOlmo2Family = {
    .arch = ModelArch::kOlmo2,
    .name = "olmo2",
    .hf_model_types = {"olmo2"},
    .hf_architectures = {"Olmo2ForCausalLM"},
    .gguf_architectures = {"olmo2"},
    .norm = NormKind::kRms,
    .learned_positions = false,
    .parse_hf = ParseHf,
    .parse_gguf = ParseGguf,
    .hf_tensor_name = HfName,
    .load_layer = LoadLayer,
    .forward_layer = ForwardLayer,
    .gguf_architecture = GgufArchitecture,
    .write_gguf_keys = llama::WriteGgufKeys,
    .synth_config = SynthConfig,
    .synth_tensors = SynthTensors,
    .synth_config_json = SynthConfigJson,
};

}  // namespace orca::engine
