// Mistral 3 (Mistral Small 3.x, Ministral 3; text): Llama's layer with YaRN and Llama 4's attention temperature,
// the queries at position p multiplied after RoPE by 1 + β · ln(1 + ⌊p / original context⌋) (Ministral 3's
// `llama_4_scaling_beta`, GGUF `attention.temperature_scale`). YaRN's magnitude follows mscale / mscale_all_dim
// (Ministral 3: both 1, so no magnitude change; GGUF `rope.scaling.yarn_log_multiplier`, as llama.cpp reads it).
// From text-only checkpoints (model_type ministral3) and the language model of the multimodal ones (model_type
// mistral3: the config under text_config, whose model_type is ministral3 or, for Mistral Small 3.1/3.2, mistral;
// the vision tower ignored). llama.cpp's converter permutes Q/K as for llama (adjacent-pair RoPE in GGUF).
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

// transformers before 4.52 wrote the multimodal checkpoints' language model as language_model.model.* with its
// head as language_model.lm_head.weight, later ones as model.language_model.* and lm_head.weight.
constexpr const char* kOldMultimodalPrefix = "language_model.model.";
constexpr const char* kNewMultimodalPrefix = "model.language_model.";

// transformers 5 writes `rope_parameters` (the RoPE base and its scaling in one object), earlier versions
// `rope_theta` and `rope_scaling`: the rotary decoder's fields in the earlier form, and the object that holds the
// scaling's keys (null when none).
const json* RopeObject(const json& text, json* rest) {
  auto rp = text.find("rope_parameters");
  if (rp == text.end() || !rp->is_object()) {
    auto rs = text.find("rope_scaling");
    return rs != text.end() && rs->is_object() ? &*rs : nullptr;
  }
  if (auto theta = rp->find("rope_theta"); theta != rp->end()) (*rest)["rope_theta"] = *theta;
  // Its rope_type ("type" in Ministral3Config's defaults) says the scaling; absent or "default": none.
  if (!text.contains("rope_scaling") && (rp->contains("rope_type") || rp->contains("type")))
    (*rest)["rope_scaling"] = *rp;
  return &*rp;
}

absl::Status ParseHf(const json& j, const std::string& model_type, const std::string& src, ModelConfig* c) {
  const bool multimodal = j.contains("text_config") && j.at("text_config").is_object();
  const json& text = multimodal ? j.at("text_config") : j;
  // Mistral3Config's text model defaults to Mistral's; Ministral3ForCausalLM's config is its own.
  std::string text_type = multimodal ? "mistral" : model_type;
  if (auto t = text.find("model_type"); t != text.end() && t->is_string()) text_type = t->get<std::string>();
  if (text_type != "mistral" && text_type != "ministral3")
    return absl::UnimplementedError(
        absl::StrCat(src, ": text_config model_type '", text_type, "' is not supported (ministral3 and mistral are)"));
  json rest = text;
  const json* rope = RopeObject(text, &rest);
  if (!text.contains("tie_word_embeddings") && j.contains("tie_word_embeddings"))
    rest["tie_word_embeddings"] = j.at("tie_word_embeddings");
  // Both modellings apply a sliding window whenever the config sets one (Mistral 3's files set none).
  ORCA_RETURN_IF_ERROR(ParseRotaryDecoderHf(rest, "mistral", src, c));
  c->model_type = model_type;
  if (text_type != "ministral3") return absl::OkStatus();
  // Ministral3Attention always scales its queries, by the rope parameters' beta and original context.
  const json none = json::object();
  ORCA_ASSIGN_OR_RETURN(const double beta, NumField(rope ? *rope : none, "llama_4_scaling_beta", src, std::nullopt));
  ORCA_ASSIGN_OR_RETURN(const int64_t floor,
                        IntField(rope ? *rope : none, "original_max_position_embeddings", src, std::nullopt));
  c->attn_temperature_scale = static_cast<float>(beta);
  c->attn_temperature_floor = static_cast<int32_t>(floor);
  return absl::OkStatus();
}

absl::Status ParseGguf(const formats::GgufFile& g, const std::string& arch, const std::string& src, ModelConfig* c) {
  ORCA_RETURN_IF_ERROR(ReadRotaryDecoderGguf(g, arch, src, c, /*yarn_log_multiplier=*/true));
  c->rope_style = kernels::RopeStyle::kInterleaved;  // llama.cpp's converter permuted Q/K
  const std::string scale_key = arch + ".attention.temperature_scale";
  if (!g.Has(scale_key)) return absl::OkStatus();
  ORCA_ASSIGN_OR_RETURN(const double scale, g.GetFloat(scale_key));
  c->attn_temperature_scale = static_cast<float>(scale);
  if (scale == 0) return absl::OkStatus();
  // llama.cpp's floor is its YaRN original context: the key when present, else the training context.
  int64_t floor = c->max_position;
  if (const std::string orig_key = arch + ".rope.scaling.original_context_length"; g.Has(orig_key)) {
    ORCA_ASSIGN_OR_RETURN(floor, g.GetInt(orig_key));
  }
  if (floor <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat(src, ": ", scale_key, " ", scale, " needs a positive original context (", arch,
                     ".rope.scaling.original_context_length or ", arch, ".context_length), got ", floor));
  c->attn_temperature_floor = static_cast<int32_t>(floor);
  return absl::OkStatus();
}

std::string HfName(TensorRole role, int32_t l, const std::string& prefix) {
  if (prefix.empty()) return llama::HfTensorName(role, l);
  if (role == TensorRole::kLmHead)
    return prefix == kOldMultimodalPrefix ? "language_model.lm_head.weight" : "lm_head.weight";
  std::string name = llama::HfTensorName(role, l);
  if (name.rfind("model.", 0) == 0) name = prefix + name.substr(6);
  return name;
}

// Llama's layer, with the queries' temperature between RoPE and attention (llama.cpp's mistral3 graph and
// transformers' Ministral3Attention both scale the rotated queries, not the keys).
absl::Status ForwardLayer(LayerOps& ops, int32_t l, const LayerWeights& lw) {
  ops.Norm(NormKind::kRms, lw.attn_norm, nullptr);
  ops.QkvProjection(lw);
  ops.PositionAndCache(l, /*rotary=*/true);
  if (ops.config().attn_temperature_scale != 0) ops.QueryTemperature();
  ops.Attend(l);
  ORCA_RETURN_IF_ERROR(ops.AttentionOutput(lw));
  ops.Norm(NormKind::kRms, lw.ffn_norm, nullptr);
  ops.SwiGlu(lw);
  return ops.MlpOutput(lw);
}

std::string GgufArchitecture(const ModelConfig& /*c*/) { return "mistral3"; }
bool PermutesQk(const ModelConfig& /*c*/) { return true; }

void WriteGgufKeys(const ModelConfig& c, formats::GgufWriter* w) {
  llama::WriteGgufKeys(c, w);
  // Mistral 3's heads are narrower than hidden / heads (Ministral 3 3B: 32 × 128 over 3072).
  w->SetU32("mistral3.attention.key_length", static_cast<uint32_t>(c.head_dim));
  w->SetU32("mistral3.attention.value_length", static_cast<uint32_t>(c.head_dim));
  const RopeScaling& s = c.rope_scaling;
  const bool yarn = s.type == RopeScaling::Type::kYarn;
  if (yarn) {
    w->SetF32("mistral3.rope.scaling.yarn_beta_fast", static_cast<float>(s.beta_fast));
    w->SetF32("mistral3.rope.scaling.yarn_beta_slow", static_cast<float>(s.beta_slow));
    // The multiplier m for which llama.cpp's mscale(factor, 1) / mscale(factor, m) is the magnitude factor.
    const double x = 0.1 * std::log(s.factor);
    if (s.attention_factor > 0 && x > 0)
      w->SetF32("mistral3.rope.scaling.yarn_log_multiplier",
                static_cast<float>(((1 + x) / s.attention_factor - 1) / x));
  }
  if (c.attn_temperature_scale == 0) return;
  w->SetF32("mistral3.attention.temperature_scale", c.attn_temperature_scale);
  // llama.cpp's floor is the YaRN original context (written above with YaRN, which then equals the floor).
  if (!yarn)
    w->SetU32("mistral3.rope.scaling.original_context_length", static_cast<uint32_t>(c.attn_temperature_floor));
}

// A Ministral 3 text checkpoint: YaRN's magnitude 1 (mscale = mscale_all_dim = 1) unless set, the temperature's
// floor the YaRN original context (without YaRN, the context, as llama.cpp takes it from a file without one).
void SynthConfig(ModelConfig* c) {
  c->model_type = "ministral3";
  c->qk_norm = false;
  c->attention_bias = false;
  const bool yarn = c->rope_scaling.type == RopeScaling::Type::kYarn;
  if (yarn && c->rope_scaling.attention_factor == 0) c->rope_scaling.attention_factor = 1.0;
  c->attn_temperature_floor = yarn ? static_cast<int32_t>(c->rope_scaling.original_max_position) : c->max_position;
}

void SynthConfigJson(const ModelConfig& c, json* out) {
  llama::SynthConfigJson(c, "Ministral3ForCausalLM", out);
  json& j = *out;
  j["head_dim"] = c.head_dim;
  j.erase("rope_theta");
  j.erase("rope_scaling");
  // transformers 5's form, as the released Ministral 3 configs have it.
  json rope = {{"rope_type", "default"},
               {"rope_theta", c.rope_theta},
               {"llama_4_scaling_beta", c.attn_temperature_scale},
               {"original_max_position_embeddings", c.attn_temperature_floor}};
  const RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScaling::Type::kYarn) {
    rope["rope_type"] = "yarn";
    rope["factor"] = s.factor;
    rope["beta_fast"] = s.beta_fast;
    rope["beta_slow"] = s.beta_slow;
    if (s.attention_factor == 1.0) {
      rope["mscale"] = 1.0;
      rope["mscale_all_dim"] = 1.0;
    } else if (s.attention_factor > 0) {
      rope["attention_factor"] = s.attention_factor;
    }
  }
  j["rope_parameters"] = rope;
}

}  // namespace

extern const ModelFamily kMistral3Family;
const ModelFamily kMistral3Family = {
    .arch = ModelArch::kMistral3,
    .name = "mistral3",
    .hf_model_types = {"ministral3", "mistral3"},
    .hf_architectures = {"Ministral3ForCausalLM", "Mistral3ForConditionalGeneration"},
    .gguf_architectures = {"mistral3"},
    .hf_prefixes = {"", kOldMultimodalPrefix, kNewMultimodalPrefix},
    .norm = NormKind::kRms,
    .learned_positions = false,
    .parse_hf = ParseHf,
    .parse_gguf = ParseGguf,
    .hf_tensor_name = HfName,
    .load_layer = llama::LoadLayer,
    .forward_layer = ForwardLayer,
    .gguf_architecture = GgufArchitecture,
    .gguf_permutes_qk = PermutesQk,
    .write_gguf_keys = WriteGgufKeys,
    .synth_config = SynthConfig,
    .synth_tensors = llama::SynthTensors,
    .synth_config_json = SynthConfigJson,
};

}  // namespace orca::engine
