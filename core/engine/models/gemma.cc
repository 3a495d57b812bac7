#include "core/engine/models/gemma.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/engine/model_weights.h"
#include "core/engine/models/config_fields.h"
#include "core/formats/gguf_file.h"
#include "core/formats/gguf_writer.h"

namespace orca::engine::gemma {

using json = nlohmann::json;

namespace {
std::string TextTensorName(TensorRole role, int32_t l);
}  // namespace

std::string HfTensorName(TensorRole role, int32_t l, const std::string& prefix) {
  std::string name = TextTensorName(role, l);
  if (!prefix.empty() && name.rfind("model.", 0) == 0) name = prefix + name.substr(6);
  return name;
}

namespace {

std::string TextTensorName(TensorRole role, int32_t l) {
  const std::string p = absl::StrCat("model.layers.", l, ".");
  switch (role) {
    case TensorRole::kTokenEmbedding:
      return "model.embed_tokens.weight";
    case TensorRole::kFinalNorm:
      return "model.norm.weight";
    case TensorRole::kLmHead:
      return "lm_head.weight";
    case TensorRole::kAttnNorm:
      return p + "input_layernorm.weight";
    case TensorRole::kQ:
      return p + "self_attn.q_proj.weight";
    case TensorRole::kK:
      return p + "self_attn.k_proj.weight";
    case TensorRole::kV:
      return p + "self_attn.v_proj.weight";
    case TensorRole::kQNorm:
      return p + "self_attn.q_norm.weight";
    case TensorRole::kKNorm:
      return p + "self_attn.k_norm.weight";
    case TensorRole::kO:
      return p + "self_attn.o_proj.weight";
    // Gemma's "post_attention_layernorm" norms the attention's output; the MLP's input norm is the "pre_" one.
    case TensorRole::kPostAttnNorm:
      return p + "post_attention_layernorm.weight";
    case TensorRole::kFfnNorm:
      return p + "pre_feedforward_layernorm.weight";
    case TensorRole::kPostFfnNorm:
      return p + "post_feedforward_layernorm.weight";
    case TensorRole::kGate:
      return p + "mlp.gate_proj.weight";
    case TensorRole::kUp:
      return p + "mlp.up_proj.weight";
    case TensorRole::kDown:
      return p + "mlp.down_proj.weight";
    default:
      return "";
  }
}

}  // namespace

namespace {

// Every `pattern`-th layer global, the others local (pattern 1: every layer global; 0: every layer local).
std::vector<uint8_t> PatternLayers(int32_t num_layers, int64_t pattern) {
  std::vector<uint8_t> local(static_cast<size_t>(num_layers));
  for (int32_t l = 0; l < num_layers; ++l) local[l] = pattern <= 0 || (l + 1) % pattern != 0;
  return local;
}

}  // namespace

int32_t LocalPattern(const ModelConfig& c) {
  for (int32_t pattern = 1; pattern <= c.num_layers; ++pattern)
    if (PatternLayers(c.num_layers, pattern) == c.local_layers) return pattern;
  return 0;
}

absl::Status ParseHf(const json& j_in, const std::string& model_type, const std::string& src, int32_t default_pattern,
                     ModelConfig* c) {
  // Multimodal Gemma 3 configs nest the language model's under text_config.
  const json& j = j_in.contains("text_config") && j_in["text_config"].is_object() ? j_in["text_config"] : j_in;
  std::string act = "gelu_pytorch_tanh";
  for (const char* key : {"hidden_activation", "hidden_act"})
    if (auto it = j.find(key); it != j.end() && it->is_string()) act = it->get<std::string>();
  if (act != "gelu_pytorch_tanh" && act != "gelu_tanh")
    return absl::UnimplementedError(
        absl::StrCat(src, ": hidden_activation '", act, "' is not supported (gelu_pytorch_tanh is)"));
  json rest = j;  // the rotary decoder's fields, without the ones read here
  rest.erase("hidden_act");
  rest.erase("sliding_window");
  ORCA_RETURN_IF_ERROR(ParseRotaryDecoderHf(rest, model_type, src, c));
  ORCA_ASSIGN_OR_RETURN(int64_t window, IntField(j, "sliding_window", src, int64_t{c->sliding_window}));
  c->sliding_window = static_cast<int32_t>(window);
  if (auto types = j.find("layer_types"); types != j.end() && types->is_array()) {
    for (const json& t : *types) c->local_layers.push_back(t.is_string() && t.get<std::string>() == "sliding_attention");
  } else {
    ORCA_ASSIGN_OR_RETURN(int64_t pattern, IntField(j, "sliding_window_pattern", src, int64_t{default_pattern}));
    c->local_layers = PatternLayers(c->num_layers, pattern);
  }
  ORCA_ASSIGN_OR_RETURN(c->rope_theta_local, NumField(j, "rope_local_base_freq", src, c->rope_theta_local));
  ORCA_ASSIGN_OR_RETURN(double q_scalar, NumField(j, "query_pre_attn_scalar", src, static_cast<double>(c->head_dim)));
  if (!(q_scalar > 0)) return absl::InvalidArgumentError(absl::StrCat(src, ": query_pre_attn_scalar must be positive"));
  c->attention_scale = static_cast<float>(1.0 / std::sqrt(q_scalar));
  ORCA_ASSIGN_OR_RETURN(double attn_cap, NumField(j, "attn_logit_softcapping", src, double{c->attn_softcap}));
  ORCA_ASSIGN_OR_RETURN(double final_cap, NumField(j, "final_logit_softcapping", src, double{c->final_softcap}));
  c->attn_softcap = static_cast<float>(attn_cap);
  c->final_softcap = static_cast<float>(final_cap);
  c->embedding_scale = std::sqrt(static_cast<float>(c->hidden_size));
  c->norm_weight_offset = 1.0f;  // Gemma's RMSNorm scales by (1 + w)
  c->tie_word_embeddings = BoolField(j, "tie_word_embeddings", true);  // Gemma's default
  return absl::OkStatus();
}

absl::Status ParseGguf(const formats::GgufFile& g, const std::string& arch, const std::string& src,
                       int32_t default_pattern, ModelConfig* c) {
  ORCA_RETURN_IF_ERROR(ReadRotaryDecoderGguf(g, arch, src, c));
  c->rope_style = kernels::RopeStyle::kNeox;
  auto opt = [&](const std::string& key, double dflt) -> absl::StatusOr<double> {
    if (!g.Has(arch + "." + key)) return dflt;
    return g.GetFloat(arch + "." + key);
  };
  ORCA_ASSIGN_OR_RETURN(double window, opt("attention.sliding_window", c->sliding_window));
  c->sliding_window = static_cast<int32_t>(window);
  const std::string pattern_key = arch + ".attention.sliding_window_pattern";
  if (!g.Has(pattern_key)) {
    c->local_layers = PatternLayers(c->num_layers, default_pattern);
  } else if (auto pattern = g.GetInt(pattern_key); pattern.ok()) {
    c->local_layers = PatternLayers(c->num_layers, *pattern);
  } else {
    ORCA_ASSIGN_OR_RETURN(std::vector<int64_t> flags, g.GetIntArray(pattern_key));
    for (int64_t f : flags) c->local_layers.push_back(f != 0);
  }
  ORCA_ASSIGN_OR_RETURN(c->rope_theta_local, opt("rope.freq_base_swa", c->rope_theta_local));
  ORCA_ASSIGN_OR_RETURN(double attn_cap, opt("attn_logit_softcapping", c->attn_softcap));
  ORCA_ASSIGN_OR_RETURN(double final_cap, opt("final_logit_softcapping", c->final_softcap));
  c->attn_softcap = static_cast<float>(attn_cap);
  c->final_softcap = static_cast<float>(final_cap);
  // llama.cpp derives the scale from the shape (query_pre_attn_scalar is not in the file): 1/√head_dim, except the
  // 27B models' 1/√(hidden / heads).
  const bool is_27b = (arch == "gemma3" && c->num_layers == 62) || (arch == "gemma2" && c->num_layers == 46);
  c->attention_scale = 1.0f / std::sqrt(static_cast<float>(is_27b ? c->hidden_size / c->num_heads : c->head_dim));
  c->embedding_scale = std::sqrt(static_cast<float>(c->hidden_size));
  c->norm_weight_offset = 0.0f;  // the converter stored 1 + w
  return absl::OkStatus();
}

absl::Status LoadLayer(LayerLoader& ld, const ModelConfig& c, int32_t l, LayerWeights* lw) {
  const int64_t H = c.hidden_size;
  const float one = c.norm_weight_offset;
  ORCA_ASSIGN_OR_RETURN(lw->attn_norm, ld.Replicated(TensorRole::kAttnNorm, l, H, false, one));
  ORCA_RETURN_IF_ERROR(ld.SeparateQkv(l, lw));
  if (c.qk_norm) {
    ORCA_ASSIGN_OR_RETURN(lw->q_norm, ld.Replicated(TensorRole::kQNorm, l, c.head_dim, false, one));
    ORCA_ASSIGN_OR_RETURN(lw->k_norm, ld.Replicated(TensorRole::kKNorm, l, c.head_dim, false, one));
  }
  ORCA_RETURN_IF_ERROR(ld.AttentionOutput(l, /*bias=*/false, lw));
  ORCA_ASSIGN_OR_RETURN(lw->post_attn_norm, ld.Replicated(TensorRole::kPostAttnNorm, l, H, false, one));
  ORCA_ASSIGN_OR_RETURN(lw->ffn_norm, ld.Replicated(TensorRole::kFfnNorm, l, H, false, one));
  ORCA_RETURN_IF_ERROR(ld.Mlp(l, /*gated=*/true, /*biases=*/false, lw));
  ORCA_ASSIGN_OR_RETURN(lw->post_ffn_norm, ld.Replicated(TensorRole::kPostFfnNorm, l, H, false, one));
  return absl::OkStatus();
}

absl::Status ForwardLayer(LayerOps& ops, int32_t l, const LayerWeights& lw) {
  ops.Norm(NormKind::kRms, lw.attn_norm, nullptr);
  ops.QkvProjection(lw);
  if (lw.q_norm != nullptr) ops.QkNorm(lw.q_norm, lw.k_norm);
  ops.PositionAndCache(l, /*rotary=*/true);
  ops.Attend(l);
  ORCA_RETURN_IF_ERROR(ops.AttentionOutput(lw, lw.post_attn_norm));
  ops.Norm(NormKind::kRms, lw.ffn_norm, nullptr);
  ops.GeGlu(lw);
  return ops.MlpOutput(lw, lw.post_ffn_norm);
}

void WriteGgufKeys(const ModelConfig& c, formats::GgufWriter* w) {
  const std::string a = FamilyOf(c.arch).gguf_architecture(c);
  w->SetU32(a + ".attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads));
  w->SetF32(a + ".attention.layer_norm_rms_epsilon", c.norm_eps);
  w->SetU32(a + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
  w->SetU32(a + ".attention.value_length", static_cast<uint32_t>(c.head_dim));
  w->SetF32(a + ".rope.freq_base", static_cast<float>(c.rope_theta));
  w->SetU32(a + ".rope.dimension_count", static_cast<uint32_t>(c.rotary_dim));
  if (c.rope_scaling.type == RopeScaling::Type::kLinear) {
    w->SetString(a + ".rope.scaling.type", "linear");
    w->SetF32(a + ".rope.scaling.factor", static_cast<float>(c.rope_scaling.factor));
  }
  if (c.rope_theta_local > 0) w->SetF32(a + ".rope.freq_base_swa", static_cast<float>(c.rope_theta_local));
  if (c.sliding_window > 0) {
    w->SetU32(a + ".attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
    if (const int32_t pattern = LocalPattern(c); pattern > 0) {
      w->SetU32(a + ".attention.sliding_window_pattern", static_cast<uint32_t>(pattern));
    } else {
      std::vector<int32_t> flags(c.local_layers.begin(), c.local_layers.end());
      w->SetI32Array(a + ".attention.sliding_window_pattern", flags);
    }
  }
  if (c.attn_softcap > 0) w->SetF32(a + ".attn_logit_softcapping", c.attn_softcap);
  if (c.final_softcap > 0) w->SetF32(a + ".final_logit_softcapping", c.final_softcap);
}

std::vector<SynthTensorSpec> SynthTensors(const ModelConfig& c) {
  const int64_t H = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, D = c.head_dim;
  const int64_t Q = static_cast<int64_t>(c.num_heads) * D, KV = static_cast<int64_t>(c.num_kv_heads) * D;
  const double in_h = 1.0 / std::sqrt(static_cast<double>(H)), in_f = 1.0 / std::sqrt(static_cast<double>(F));
  const double in_q = 1.0 / std::sqrt(static_cast<double>(Q));
  // Embeddings are scaled by √H on the way in: keep the tied head's logits near a standard deviation of 2.5.
  const double emb = 2.5 / std::sqrt(static_cast<double>(H));
  using I = SynthTensorSpec::Init;
  auto norm = [](std::string name, int64_t n) { return SynthTensorSpec{std::move(name), {n}, I::kNormal, 0.1}; };
  std::vector<SynthTensorSpec> t;
  t.push_back({HfTensorName(TensorRole::kTokenEmbedding, 0), {V, H}, I::kNormal, emb});
  for (int l = 0; l < c.num_layers; ++l) {
    auto name = [l](TensorRole r) { return HfTensorName(r, l); };
    t.push_back(norm(name(TensorRole::kAttnNorm), H));
    t.push_back({name(TensorRole::kQ), {Q, H}, I::kNormal, in_h});
    t.push_back({name(TensorRole::kK), {KV, H}, I::kNormal, in_h});
    t.push_back({name(TensorRole::kV), {KV, H}, I::kNormal, in_h});
    if (c.qk_norm) {
      t.push_back(norm(name(TensorRole::kQNorm), D));
      t.push_back(norm(name(TensorRole::kKNorm), D));
    }
    t.push_back({name(TensorRole::kO), {H, Q}, I::kNormal, in_q});
    t.push_back(norm(name(TensorRole::kPostAttnNorm), H));
    t.push_back(norm(name(TensorRole::kFfnNorm), H));
    t.push_back({name(TensorRole::kGate), {F, H}, I::kNormal, in_h});
    t.push_back({name(TensorRole::kUp), {F, H}, I::kNormal, in_h});
    t.push_back({name(TensorRole::kDown), {H, F}, I::kNormal, in_f});
    t.push_back(norm(name(TensorRole::kPostFfnNorm), H));
  }
  t.push_back(norm(HfTensorName(TensorRole::kFinalNorm, 0), H));
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {V, H}, I::kNormal, emb});
  return t;
}

void SynthConfigJson(const ModelConfig& c, const std::string& model_type, const std::string& architecture,
                     json* out) {
  json& j = *out;
  j = {{"architectures", {architecture}},
       {"model_type", model_type},
       {"hidden_size", c.hidden_size},
       {"num_hidden_layers", c.num_layers},
       {"num_attention_heads", c.num_heads},
       {"num_key_value_heads", c.num_kv_heads},
       {"head_dim", c.head_dim},
       {"intermediate_size", c.intermediate_size},
       {"vocab_size", c.vocab_size},
       {"max_position_embeddings", c.max_position},
       {"rms_norm_eps", 1e-5},
       {"rope_theta", c.rope_theta},
       {"hidden_activation", "gelu_pytorch_tanh"},
       {"query_pre_attn_scalar", c.head_dim},
       {"sliding_window", c.sliding_window},
       {"attention_bias", false},
       {"tie_word_embeddings", c.tie_word_embeddings}};
  json types = json::array();
  for (int32_t l = 0; l < c.num_layers; ++l) types.push_back(c.IsLocalLayer(l) ? "sliding_attention" : "full_attention");
  j["layer_types"] = types;
  if (c.rope_theta_local > 0) j["rope_local_base_freq"] = c.rope_theta_local;
  j["attn_logit_softcapping"] = c.attn_softcap > 0 ? json(c.attn_softcap) : json(nullptr);
  j["final_logit_softcapping"] = c.final_softcap > 0 ? json(c.final_softcap) : json(nullptr);
  if (c.rope_scaling.type == RopeScaling::Type::kLinear)
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope_scaling.factor}};
}

void Defaults(const Variant& v, ModelConfig* c) {
  if (c->sliding_window == 0) c->sliding_window = v.sliding_window;
  if (c->attn_softcap == 0) c->attn_softcap = v.attn_softcap;
  if (c->final_softcap == 0) c->final_softcap = v.final_softcap;
  if (c->rope_theta_local == 0) c->rope_theta_local = v.rope_theta_local;
}

void SynthConfig(ModelConfig* c, int32_t default_pattern) {
  c->attention_bias = false;
  c->rope_style = kernels::RopeStyle::kNeox;
  if (c->local_layers.empty()) c->local_layers = PatternLayers(c->num_layers, default_pattern);
  c->attention_scale = 1.0f / std::sqrt(static_cast<float>(c->head_dim));
  c->embedding_scale = std::sqrt(static_cast<float>(c->hidden_size));
  c->norm_weight_offset = 1.0f;
}

}  // namespace orca::engine::gemma
