// StarCoder2 (3B, 7B, 15B): LayerNorm with biases, grouped-query attention with biases, rotate-half RoPE, a plain
// (non-gated) tanh-GELU MLP with biases, and a sliding window on every layer (Hugging Face applies it; llama.cpp's
// files do not carry it).
#include <cmath>
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

using json = nlohmann::json;

absl::Status ParseHf(const json& j, const std::string& model_type, const std::string& src, ModelConfig* c) {
  if (auto act = j.find("hidden_act"); act != j.end() && act->is_string() &&
                                       act->get<std::string>() != "gelu_pytorch_tanh")
    return absl::UnimplementedError(
        absl::StrCat(src, ": hidden_act '", act->get<std::string>(), "' is not supported (gelu_pytorch_tanh is)"));
  json rest = j;
  rest.erase("hidden_act");
  rest.erase("sliding_window");
  ORCA_RETURN_IF_ERROR(ParseRotaryDecoderHf(rest, model_type, src, c));
  ORCA_ASSIGN_OR_RETURN(double eps, NumField(j, "norm_epsilon", src, 1e-5));
  c->norm_eps = static_cast<float>(eps);
  c->attention_bias = c->mlp_bias = BoolField(j, "use_bias", true);
  ORCA_ASSIGN_OR_RETURN(int64_t window, IntField(j, "sliding_window", src, int64_t{0}));
  if (window > 0 && window < c->max_position) c->sliding_window = static_cast<int32_t>(window);
  c->tie_word_embeddings = BoolField(j, "tie_word_embeddings", true);
  return absl::OkStatus();
}

absl::Status ParseGguf(const formats::GgufFile& g, const std::string& arch, const std::string& src, ModelConfig* c) {
  ORCA_RETURN_IF_ERROR(ReadRotaryDecoderGguf(g, arch, src, c));
  auto eps = g.GetFloat(arch + ".attention.layer_norm_epsilon");
  c->norm_eps = static_cast<float>(eps.ok() ? *eps : 1e-5);
  c->rope_style = kernels::RopeStyle::kNeox;
  c->mlp_bias = g.Find("blk.0.ffn_up.bias") != nullptr;
  return absl::OkStatus();
}

std::string HfName(TensorRole role, int32_t l, const std::string& /*prefix*/) {
  const std::string p = absl::StrCat("model.layers.", l, ".");
  switch (role) {
    case TensorRole::kFinalNormBias:
      return "model.norm.bias";
    case TensorRole::kAttnNormBias:
      return p + "input_layernorm.bias";
    case TensorRole::kFfnNormBias:
      return p + "post_attention_layernorm.bias";
    case TensorRole::kUp:
      return p + "mlp.c_fc.weight";
    case TensorRole::kUpBias:
      return p + "mlp.c_fc.bias";
    case TensorRole::kDown:
      return p + "mlp.c_proj.weight";
    case TensorRole::kDownBias:
      return p + "mlp.c_proj.bias";
    case TensorRole::kGate:
      return "";
    default:
      return llama::HfTensorName(role, l);
  }
}


absl::Status LoadLayer(LayerLoader& ld, const ModelConfig& c, int32_t l, LayerWeights* lw) {
  const int64_t H = c.hidden_size;
  ORCA_ASSIGN_OR_RETURN(lw->attn_norm, ld.Replicated(TensorRole::kAttnNorm, l, H));
  ORCA_ASSIGN_OR_RETURN(lw->attn_norm_bias, ld.Replicated(TensorRole::kAttnNormBias, l, H));
  ORCA_RETURN_IF_ERROR(ld.SeparateQkv(l, lw));
  ORCA_RETURN_IF_ERROR(ld.AttentionOutput(l, c.attention_bias, lw));
  ORCA_ASSIGN_OR_RETURN(lw->ffn_norm, ld.Replicated(TensorRole::kFfnNorm, l, H));
  ORCA_ASSIGN_OR_RETURN(lw->ffn_norm_bias, ld.Replicated(TensorRole::kFfnNormBias, l, H));
  return ld.Mlp(l, /*gated=*/false, c.mlp_bias, lw);
}

absl::Status ForwardLayer(LayerOps& ops, int32_t l, const LayerWeights& lw) {
  ops.Norm(NormKind::kLayer, lw.attn_norm, lw.attn_norm_bias);
  ops.QkvProjection(lw);
  ops.PositionAndCache(l, /*rotary=*/true);
  ops.Attend(l);
  ORCA_RETURN_IF_ERROR(ops.AttentionOutput(lw));
  ops.Norm(NormKind::kLayer, lw.ffn_norm, lw.ffn_norm_bias);
  ops.GeluUp(lw);
  return ops.MlpOutput(lw);
}

std::string GgufArchitecture(const ModelConfig& /*c*/) { return "starcoder2"; }

void WriteGgufKeys(const ModelConfig& c, formats::GgufWriter* w) {
  w->SetU32("starcoder2.attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads));
  w->SetF32("starcoder2.attention.layer_norm_epsilon", c.norm_eps);
  w->SetF32("starcoder2.rope.freq_base", static_cast<float>(c.rope_theta));
  w->SetU32("starcoder2.rope.dimension_count", static_cast<uint32_t>(c.rotary_dim));
}

void SynthConfig(ModelConfig* c) {
  c->model_type = "starcoder2";
  c->attention_bias = c->mlp_bias = true;
}

std::vector<SynthTensorSpec> SynthTensors(const ModelConfig& c) {
  const int64_t H = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, D = c.head_dim;
  const int64_t Q = static_cast<int64_t>(c.num_heads) * D, KV = static_cast<int64_t>(c.num_kv_heads) * D;
  const double in_h = 1.0 / std::sqrt(static_cast<double>(H)), in_f = 1.0 / std::sqrt(static_cast<double>(F));
  const double in_q = 1.0 / std::sqrt(static_cast<double>(Q)), emb = 2.5 / std::sqrt(static_cast<double>(H));
  using I = SynthTensorSpec::Init;
  std::vector<SynthTensorSpec> t;
  t.push_back({"model.embed_tokens.weight", {V, H}, I::kNormal, emb});
  for (int l = 0; l < c.num_layers; ++l) {
    auto name = [l](TensorRole r) { return HfName(r, l, ""); };
    t.push_back({name(TensorRole::kAttnNorm), {H}, I::kAroundOne, 0.1});
    t.push_back({name(TensorRole::kAttnNormBias), {H}, I::kNormal, 0.02});
    t.push_back({name(TensorRole::kQ), {Q, H}, I::kNormal, in_h});
    t.push_back({name(TensorRole::kQBias), {Q}, I::kNormal, 0.1});
    t.push_back({name(TensorRole::kK), {KV, H}, I::kNormal, in_h});
    t.push_back({name(TensorRole::kKBias), {KV}, I::kNormal, 0.1});
    t.push_back({name(TensorRole::kV), {KV, H}, I::kNormal, in_h});
    t.push_back({name(TensorRole::kVBias), {KV}, I::kNormal, 0.1});
    t.push_back({name(TensorRole::kO), {H, Q}, I::kNormal, in_q * 0.5});
    t.push_back({name(TensorRole::kOBias), {H}, I::kNormal, 0.02});
    t.push_back({name(TensorRole::kFfnNorm), {H}, I::kAroundOne, 0.1});
    t.push_back({name(TensorRole::kFfnNormBias), {H}, I::kNormal, 0.02});
    t.push_back({name(TensorRole::kUp), {F, H}, I::kNormal, in_h});
    t.push_back({name(TensorRole::kUpBias), {F}, I::kNormal, 0.02});
    t.push_back({name(TensorRole::kDown), {H, F}, I::kNormal, in_f * 0.5});
    t.push_back({name(TensorRole::kDownBias), {H}, I::kNormal, 0.02});
  }
  t.push_back({"model.norm.weight", {H}, I::kOnes});
  t.push_back({"model.norm.bias", {H}, I::kZeros});
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {V, H}, I::kNormal, emb});
  return t;
}

void SynthConfigJson(const ModelConfig& c, json* out) {
  llama::SynthConfigJson(c, "Starcoder2ForCausalLM", out);
  json& j = *out;
  j.erase("rms_norm_eps");
  j.erase("attention_bias");
  j["norm_epsilon"] = 1e-5;
  j["use_bias"] = true;
  j["hidden_act"] = "gelu_pytorch_tanh";
  if (c.sliding_window > 0) j["sliding_window"] = c.sliding_window;
}

}  // namespace

extern const ModelFamily kStarcoder2Family;
const ModelFamily kStarcoder2Family = {
    .arch = ModelArch::kStarcoder2,
    .name = "starcoder2",
    .hf_model_types = {"starcoder2"},
    .hf_architectures = {"Starcoder2ForCausalLM"},
    .gguf_architectures = {"starcoder2"},
    .norm = NormKind::kLayer,
    .learned_positions = false,
    .parse_hf = ParseHf,
    .parse_gguf = ParseGguf,
    .hf_tensor_name = HfName,
    .load_layer = LoadLayer,
    .forward_layer = ForwardLayer,
    .gguf_architecture = GgufArchitecture,
    .write_gguf_keys = WriteGgufKeys,
    .synth_config = SynthConfig,
    .synth_tensors = SynthTensors,
    .synth_config_json = SynthConfigJson,
};

}  // namespace orca::engine
