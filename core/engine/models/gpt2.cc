// GPT-2: LayerNorm with biases, learned position embeddings, one fused QKV projection with biases, GELU (tanh) MLP,
// every projection biased; Hugging Face stores the projections as Conv1D [in, out].
#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/engine/model_weights.h"
#include "core/engine/models/config_fields.h"
#include "core/engine/models/model_family.h"
#include "core/formats/gguf_file.h"
#include "core/formats/gguf_writer.h"

namespace orca::engine {
namespace {

using json = nlohmann::json;

absl::Status ParseHf(const json& j, const std::string& /*model_type*/, const std::string& src, ModelConfig* out) {
  ModelConfig& c = *out;
  c.model_type = "gpt2";
  ORCA_ASSIGN_OR_RETURN(int64_t hidden, IntField(j, "n_embd", src, std::nullopt));
  ORCA_ASSIGN_OR_RETURN(int64_t layers, IntField(j, "n_layer", src, std::nullopt));
  ORCA_ASSIGN_OR_RETURN(int64_t heads, IntField(j, "n_head", src, std::nullopt));
  ORCA_ASSIGN_OR_RETURN(int64_t inner, IntField(j, "n_inner", src, 4 * hidden));
  ORCA_ASSIGN_OR_RETURN(int64_t vocab, IntField(j, "vocab_size", src, std::nullopt));
  ORCA_ASSIGN_OR_RETURN(int64_t max_pos, IntField(j, "n_positions", src, int64_t{1024}));
  ORCA_ASSIGN_OR_RETURN(double eps, NumField(j, "layer_norm_epsilon", src, 1e-5));
  if (auto act = j.find("activation_function"); act != j.end() && act->is_string()) {
    std::string a = act->get<std::string>();
    if (a != "gelu_new" && a != "gelu_pytorch_tanh" && a != "gelu_fast")
      return absl::UnimplementedError(
          absl::StrCat(src, ": activation_function '", a, "' is not supported (gelu_new is)"));
  }
  c.hidden_size = static_cast<int32_t>(hidden);
  c.num_layers = static_cast<int32_t>(layers);
  c.num_heads = static_cast<int32_t>(heads);
  c.num_kv_heads = c.num_heads;
  c.head_dim = heads > 0 ? static_cast<int32_t>(hidden / heads) : 0;
  c.intermediate_size = static_cast<int32_t>(inner);
  c.vocab_size = static_cast<int32_t>(vocab);
  c.max_position = static_cast<int32_t>(max_pos);
  c.norm_eps = static_cast<float>(eps);
  c.tie_word_embeddings = BoolField(j, "tie_word_embeddings", true);
  c.attention_bias = true;
  c.mlp_bias = true;
  c.rotary_dim = 0;
  return absl::OkStatus();
}

absl::Status ParseGguf(const formats::GgufFile& g, const std::string& arch, const std::string& /*src*/,
                       ModelConfig* c) {
  auto eps = g.GetFloat(arch + ".attention.layer_norm_epsilon");
  c->norm_eps = static_cast<float>(eps.ok() ? *eps : 1e-5);
  c->attention_bias = true;
  c->mlp_bias = true;
  return absl::OkStatus();
}

std::string HfName(TensorRole role, int32_t l, const std::string& prefix) {
  const std::string h = absl::StrCat(prefix, "h.", l, ".");
  switch (role) {
    case TensorRole::kTokenEmbedding:
      return prefix + "wte.weight";
    case TensorRole::kPositionEmbedding:
      return prefix + "wpe.weight";
    case TensorRole::kFinalNorm:
      return prefix + "ln_f.weight";
    case TensorRole::kFinalNormBias:
      return prefix + "ln_f.bias";
    case TensorRole::kLmHead:
      return "lm_head.weight";
    case TensorRole::kAttnNorm:
      return h + "ln_1.weight";
    case TensorRole::kAttnNormBias:
      return h + "ln_1.bias";
    case TensorRole::kQkv:
      return h + "attn.c_attn.weight";
    case TensorRole::kQkvBias:
      return h + "attn.c_attn.bias";
    case TensorRole::kO:
      return h + "attn.c_proj.weight";
    case TensorRole::kOBias:
      return h + "attn.c_proj.bias";
    case TensorRole::kFfnNorm:
      return h + "ln_2.weight";
    case TensorRole::kFfnNormBias:
      return h + "ln_2.bias";
    case TensorRole::kUp:
      return h + "mlp.c_fc.weight";
    case TensorRole::kUpBias:
      return h + "mlp.c_fc.bias";
    case TensorRole::kDown:
      return h + "mlp.c_proj.weight";
    case TensorRole::kDownBias:
      return h + "mlp.c_proj.bias";
    default:
      return "";
  }
}

bool IsConv1D(TensorRole role) {
  return role == TensorRole::kQkv || role == TensorRole::kO || role == TensorRole::kUp || role == TensorRole::kDown;
}

absl::Status LoadLayer(LayerLoader& ld, const ModelConfig& c, int32_t l, LayerWeights* lw) {
  const int64_t H = c.hidden_size;
  ORCA_ASSIGN_OR_RETURN(lw->attn_norm, ld.Replicated(TensorRole::kAttnNorm, l, H));
  ORCA_ASSIGN_OR_RETURN(lw->attn_norm_bias, ld.Replicated(TensorRole::kAttnNormBias, l, H));
  ORCA_RETURN_IF_ERROR(ld.FusedQkv(l, /*biases=*/true, lw));
  ORCA_RETURN_IF_ERROR(ld.AttentionOutput(l, /*bias=*/true, lw));
  ORCA_ASSIGN_OR_RETURN(lw->ffn_norm, ld.Replicated(TensorRole::kFfnNorm, l, H));
  ORCA_ASSIGN_OR_RETURN(lw->ffn_norm_bias, ld.Replicated(TensorRole::kFfnNormBias, l, H));
  return ld.Mlp(l, /*gated=*/false, /*biases=*/true, lw);
}

absl::Status ForwardLayer(LayerOps& ops, int32_t l, const LayerWeights& lw) {
  ops.Norm(NormKind::kLayer, lw.attn_norm, lw.attn_norm_bias);
  ops.QkvProjection(lw);
  ops.PositionAndCache(l, /*rotary=*/false);
  ops.Attend(l);
  ORCA_RETURN_IF_ERROR(ops.AttentionOutput(lw));
  ops.Norm(NormKind::kLayer, lw.ffn_norm, lw.ffn_norm_bias);
  ops.GeluUp(lw);
  return ops.MlpOutput(lw);
}

std::string GgufArchitecture(const ModelConfig& /*c*/) { return "gpt2"; }

void WriteGgufKeys(const ModelConfig& c, formats::GgufWriter* w) {
  w->SetF32("gpt2.attention.layer_norm_epsilon", c.norm_eps);
}

void SynthConfig(ModelConfig* c) {
  c->model_type = "gpt2";
  c->num_kv_heads = c->num_heads;
  c->attention_bias = true;
  c->rotary_dim = 0;
  c->rope_scaling = RopeScaling{};
}

std::vector<SynthTensorSpec> SynthTensors(const ModelConfig& c) {
  const int64_t H = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
  const double in_h = 1.0 / std::sqrt(static_cast<double>(H)), in_f = 1.0 / std::sqrt(static_cast<double>(F));
  const double emb = 2.5 / std::sqrt(static_cast<double>(H));
  using I = SynthTensorSpec::Init;
  std::vector<SynthTensorSpec> t;
  t.push_back({"transformer.wte.weight", {V, H}, I::kNormal, emb});
  t.push_back({"transformer.wpe.weight", {c.max_position, H}, I::kNormal, 0.1});
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = absl::StrCat("transformer.h.", l, ".");
    t.push_back({p + "ln_1.weight", {H}, I::kOnes});
    t.push_back({p + "ln_1.bias", {H}, I::kNormal, 0.02});
    t.push_back({p + "attn.c_attn.weight", {H, 3 * H}, I::kNormal, in_h});  // Conv1D [in, out]
    t.push_back({p + "attn.c_attn.bias", {3 * H}, I::kNormal, 0.02});
    t.push_back({p + "attn.c_proj.weight", {H, H}, I::kNormal, in_h * 0.5});
    t.push_back({p + "attn.c_proj.bias", {H}, I::kNormal, 0.02});
    t.push_back({p + "ln_2.weight", {H}, I::kOnes});
    t.push_back({p + "ln_2.bias", {H}, I::kNormal, 0.02});
    t.push_back({p + "mlp.c_fc.weight", {H, F}, I::kNormal, in_h});
    t.push_back({p + "mlp.c_fc.bias", {F}, I::kNormal, 0.02});
    t.push_back({p + "mlp.c_proj.weight", {F, H}, I::kNormal, in_f * 0.5});
    t.push_back({p + "mlp.c_proj.bias", {H}, I::kNormal, 0.02});
  }
  t.push_back({"transformer.ln_f.weight", {H}, I::kOnes});
  t.push_back({"transformer.ln_f.bias", {H}, I::kZeros});
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {V, H}, I::kNormal, emb});
  return t;
}

void SynthConfigJson(const ModelConfig& c, json* out) {
  *out = {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"n_embd", c.hidden_size},
          {"n_layer", c.num_layers},
          {"n_head", c.num_heads},
          {"n_inner", c.intermediate_size},
          {"vocab_size", c.vocab_size},
          {"n_positions", c.max_position},
          {"n_ctx", c.max_position},
          {"layer_norm_epsilon", 1e-5},
          {"activation_function", "gelu_new"},
          {"tie_word_embeddings", c.tie_word_embeddings}};
}

}  // namespace

extern const ModelFamily kGpt2Family;
const ModelFamily kGpt2Family = {
    .arch = ModelArch::kGpt2,
    .name = "gpt2",
    .hf_model_types = {"gpt2"},
    .hf_architectures = {"GPT2LMHeadModel"},
    .gguf_architectures = {"gpt2"},
    .hf_prefixes = {"transformer.", ""},  // HF GPT-2 checkpoints come both ways
    .norm = NormKind::kLayer,
    .learned_positions = true,
    .parse_hf = ParseHf,
    .parse_gguf = ParseGguf,
    .hf_tensor_name = HfName,
    .hf_conv1d = IsConv1D,
    .load_layer = LoadLayer,
    .forward_layer = ForwardLayer,
    .gguf_architecture = GgufArchitecture,
    .write_gguf_keys = WriteGgufKeys,
    .synth_config = SynthConfig,
    .synth_tensors = SynthTensors,
    .synth_config_json = SynthConfigJson,
};

}  // namespace orca::engine
