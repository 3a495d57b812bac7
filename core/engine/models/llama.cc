// Llama (and the files that keep its layout: Qwen2/2.5 with Q/K/V biases, Mistral without a sliding window,
// SmolLM, TinyLlama): RMSNorm, RoPE, grouped-query attention, SwiGLU.
#include "core/engine/models/llama.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/engine/model_weights.h"
#include "core/engine/models/config_fields.h"
#include "core/formats/gguf_file.h"
#include "core/formats/gguf_writer.h"

namespace orca::engine {
namespace llama {

std::string HfTensorName(TensorRole role, int32_t l) {
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
    case TensorRole::kQBias:
      return p + "self_attn.q_proj.bias";
    case TensorRole::kKBias:
      return p + "self_attn.k_proj.bias";
    case TensorRole::kVBias:
      return p + "self_attn.v_proj.bias";
    case TensorRole::kO:
      return p + "self_attn.o_proj.weight";
    case TensorRole::kOBias:
      return p + "self_attn.o_proj.bias";
    case TensorRole::kFfnNorm:
      return p + "post_attention_layernorm.weight";
    case TensorRole::kGate:
      return p + "mlp.gate_proj.weight";
    case TensorRole::kUp:
      return p + "mlp.up_proj.weight";
    case TensorRole::kUpBias:
      return p + "mlp.up_proj.bias";
    case TensorRole::kDown:
      return p + "mlp.down_proj.weight";
    case TensorRole::kDownBias:
      return p + "mlp.down_proj.bias";
    default:
      return "";
  }
}

absl::Status LoadLayer(LayerLoader& ld, const ModelConfig& c, int32_t l, LayerWeights* lw) {
  ORCA_ASSIGN_OR_RETURN(lw->attn_norm, ld.Replicated(TensorRole::kAttnNorm, l, c.hidden_size));
  ORCA_RETURN_IF_ERROR(ld.SeparateQkv(l, lw));
  if (c.qk_norm) {
    // One weight per position within a head, shared by every head: each rank holds it whole.
    ORCA_ASSIGN_OR_RETURN(lw->q_norm, ld.Replicated(TensorRole::kQNorm, l, c.head_dim));
    ORCA_ASSIGN_OR_RETURN(lw->k_norm, ld.Replicated(TensorRole::kKNorm, l, c.head_dim));
  }
  ORCA_RETURN_IF_ERROR(ld.AttentionOutput(l, /*bias=*/false, lw));
  ORCA_ASSIGN_OR_RETURN(lw->ffn_norm, ld.Replicated(TensorRole::kFfnNorm, l, c.hidden_size));
  return ld.Mlp(l, /*gated=*/true, c.mlp_bias, lw);
}

absl::Status ForwardLayer(LayerOps& ops, int32_t l, const LayerWeights& lw) {
  ops.Norm(NormKind::kRms, lw.attn_norm, nullptr);
  ops.QkvProjection(lw);
  if (lw.q_norm != nullptr) ops.QkNorm(lw.q_norm, lw.k_norm);
  ops.PositionAndCache(l, /*rotary=*/true);
  ops.Attend(l);
  ORCA_RETURN_IF_ERROR(ops.AttentionOutput(lw));
  ops.Norm(NormKind::kRms, lw.ffn_norm, nullptr);
  ops.SwiGlu(lw);
  return ops.MlpOutput(lw);
}

std::vector<SynthTensorSpec> SynthTensors(const ModelConfig& c) {
  const int64_t H = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, D = c.head_dim;
  const int64_t Q = static_cast<int64_t>(c.num_heads) * D, KV = static_cast<int64_t>(c.num_kv_heads) * D;
  // Scaled so activations stay O(1) through the depth and logits are well spread.
  const double in_h = 1.0 / std::sqrt(static_cast<double>(H)), in_f = 1.0 / std::sqrt(static_cast<double>(F));
  const double in_q = 1.0 / std::sqrt(static_cast<double>(Q));
  // A tied head's logits have a standard deviation of about emb * sqrt(H): keep it near 2.5 so distributions are
  // neither flat nor one-hot.
  const double emb = 2.5 / std::sqrt(static_cast<double>(H));
  using I = SynthTensorSpec::Init;
  std::vector<SynthTensorSpec> t;
  t.push_back({"model.embed_tokens.weight", {V, H}, I::kNormal, emb});
  for (int l = 0; l < c.num_layers; ++l) {
    auto name = [l](TensorRole r) { return HfTensorName(r, l); };
    t.push_back({name(TensorRole::kAttnNorm), {H}, I::kOnes});
    t.push_back({name(TensorRole::kQ), {Q, H}, I::kNormal, in_h});
    t.push_back({name(TensorRole::kK), {KV, H}, I::kNormal, in_h});
    t.push_back({name(TensorRole::kV), {KV, H}, I::kNormal, in_h});
    if (c.attention_bias) {
      t.push_back({name(TensorRole::kQBias), {Q}, I::kNormal, 0.1});
      t.push_back({name(TensorRole::kKBias), {KV}, I::kNormal, 0.1});
      t.push_back({name(TensorRole::kVBias), {KV}, I::kNormal, 0.1});
    }
    t.push_back({name(TensorRole::kO), {H, Q}, I::kNormal, in_q * 0.5});
    t.push_back({name(TensorRole::kFfnNorm), {H}, I::kOnes});
    t.push_back({name(TensorRole::kGate), {F, H}, I::kNormal, in_h});
    t.push_back({name(TensorRole::kUp), {F, H}, I::kNormal, in_h});
    t.push_back({name(TensorRole::kDown), {H, F}, I::kNormal, in_f * 0.5});
  }
  t.push_back({"model.norm.weight", {H}, I::kOnes});
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {V, H}, I::kNormal, emb});
  return t;
}

void SynthConfigJson(const ModelConfig& c, const std::string& architecture, nlohmann::json* out) {
  nlohmann::json& j = *out;
  j = {{"architectures", {architecture}},
       {"model_type", c.model_type},
       {"hidden_size", c.hidden_size},
       {"num_hidden_layers", c.num_layers},
       {"num_attention_heads", c.num_heads},
       {"num_key_value_heads", c.num_kv_heads},
       {"intermediate_size", c.intermediate_size},
       {"vocab_size", c.vocab_size},
       {"max_position_embeddings", c.max_position},
       {"rms_norm_eps", 1e-5},
       {"rope_theta", c.rope_theta},
       {"hidden_act", "silu"},
       {"attention_bias", c.attention_bias},
       {"tie_word_embeddings", c.tie_word_embeddings}};
  if (c.head_dim * c.num_heads != c.hidden_size) j["head_dim"] = c.head_dim;
  const RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScaling::Type::kLinear) j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", s.factor}};
  if (s.type == RopeScaling::Type::kYarn)
    j["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", s.factor},
                         {"original_max_position_embeddings", s.original_max_position}};
  if (s.type == RopeScaling::Type::kLlama3)
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", s.factor},
                         {"low_freq_factor", s.low_freq_factor},
                         {"high_freq_factor", s.high_freq_factor},
                         {"original_max_position_embeddings", s.original_max_position}};
}

void WriteGgufKeys(const ModelConfig& c, formats::GgufWriter* w) {
  const std::string a = FamilyOf(c.arch).gguf_architecture(c);
  w->SetU32(a + ".attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads));
  w->SetF32(a + ".attention.layer_norm_rms_epsilon", c.norm_eps);
  w->SetF32(a + ".rope.freq_base", static_cast<float>(c.rope_theta));
  w->SetU32(a + ".rope.dimension_count", static_cast<uint32_t>(c.rotary_dim));
  if (c.rope_scaling.type == RopeScaling::Type::kLinear) {
    w->SetString(a + ".rope.scaling.type", "linear");
    w->SetF32(a + ".rope.scaling.factor", static_cast<float>(c.rope_scaling.factor));
  }
  if (c.rope_scaling.type == RopeScaling::Type::kYarn) {
    w->SetString(a + ".rope.scaling.type", "yarn");
    w->SetF32(a + ".rope.scaling.factor", static_cast<float>(c.rope_scaling.factor));
    w->SetU32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(c.rope_scaling.original_max_position));
  }
  w->SetU32(a + ".vocab_size", static_cast<uint32_t>(c.vocab_size));
}

}  // namespace llama

namespace {

absl::Status ParseHf(const nlohmann::json& j, const std::string& model_type, const std::string& src,
                     ModelConfig* c) {
  return ParseRotaryDecoderHf(j, model_type, src, c);
}

absl::Status ParseGguf(const formats::GgufFile& g, const std::string& arch, const std::string& src, ModelConfig* c) {
  ORCA_RETURN_IF_ERROR(ReadRotaryDecoderGguf(g, arch, src, c));
  // llama.cpp's converter permutes Q/K of llama checkpoints for adjacent-pair RoPE; qwen2 keeps the Hugging Face
  // (rotate-half) layout.
  c->rope_style = arch == "qwen2" ? kernels::RopeStyle::kNeox : kernels::RopeStyle::kInterleaved;
  return absl::OkStatus();
}

std::string HfName(TensorRole role, int32_t layer, const std::string& /*prefix*/) {
  return llama::HfTensorName(role, layer);
}



std::string GgufArchitecture(const ModelConfig& c) { return c.model_type == "qwen2" ? "qwen2" : "llama"; }

bool PermutesQk(const ModelConfig& c) { return GgufArchitecture(c) == "llama"; }

// A sliding window makes it a Mistral (v0.1) checkpoint, Q/K/V biases a Qwen2 one.
void SynthConfig(ModelConfig* c) {
  c->model_type = c->sliding_window > 0 ? "mistral" : c->attention_bias ? "qwen2" : "llama";
  c->qk_norm = false;
}

void SynthConfigJson(const ModelConfig& c, nlohmann::json* out) {
  llama::SynthConfigJson(c,
                         c.model_type == "mistral" ? "MistralForCausalLM"
                         : c.attention_bias        ? "Qwen2ForCausalLM"
                                                   : "LlamaForCausalLM",
                         out);
  if (c.sliding_window > 0) (*out)["sliding_window"] = c.sliding_window;
}

}  // namespace

extern const ModelFamily kLlamaFamily;
const ModelFamily kLlamaFamily = {
    .arch = ModelArch::kLlama,
    .name = "llama",
    .hf_model_types = {"llama", "qwen2", "mistral"},
    .hf_architectures = {"LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM"},
    .gguf_architectures = {"llama", "qwen2", "mistral"},
    .norm = NormKind::kRms,
    .learned_positions = false,
    .parse_hf = ParseHf,
    .parse_gguf = ParseGguf,
    .hf_tensor_name = HfName,
    .load_layer = llama::LoadLayer,
    .forward_layer = llama::ForwardLayer,
    .gguf_architecture = GgufArchitecture,
    .gguf_permutes_qk = PermutesQk,
    .write_gguf_keys = llama::WriteGgufKeys,
    .synth_config = SynthConfig,
    .synth_tensors = llama::SynthTensors,
    .synth_config_json = SynthConfigJson,
};

}  // namespace orca::engine
