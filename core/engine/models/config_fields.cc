#include "core/engine/models/config_fields.h"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/formats/gguf_file.h"

namespace orca::engine {

using json = nlohmann::json;

absl::StatusOr<int64_t> IntField(const json& j, const char* key, const std::string& src, std::optional<int64_t> dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (dflt) return *dflt;
    return absl::InvalidArgumentError(absl::StrCat(src, ": missing required field '", key, "'"));
  }
  if (!it->is_number_integer())
    return absl::InvalidArgumentError(absl::StrCat(src, ": field '", key, "' must be an integer"));
  return it->get<int64_t>();
}

absl::StatusOr<double> NumField(const json& j, const char* key, const std::string& src, std::optional<double> dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (dflt) return *dflt;
    return absl::InvalidArgumentError(absl::StrCat(src, ": missing required field '", key, "'"));
  }
  if (!it->is_number()) return absl::InvalidArgumentError(absl::StrCat(src, ": field '", key, "' must be a number"));
  return it->get<double>();
}

bool BoolField(const json& j, const char* key, bool dflt) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return dflt;
  return it->get<bool>();
}

double YarnMscale(double factor, double mscale) { return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0; }

namespace {

absl::Status ParseRopeScaling(const json& j, const std::string& src, int64_t max_position, RopeScaling* out) {
  auto it = j.find("rope_scaling");
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return absl::InvalidArgumentError(absl::StrCat(src, ": 'rope_scaling' must be an object"));
  std::string type;
  if (auto t = it->find("rope_type"); t != it->end() && t->is_string())
    type = t->get<std::string>();
  else if (auto t2 = it->find("type"); t2 != it->end() && t2->is_string())
    type = t2->get<std::string>();
  ORCA_ASSIGN_OR_RETURN(out->factor, NumField(*it, "factor", src, 1.0));
  if (type == "default") return absl::OkStatus();
  if (type == "linear") {
    out->type = RopeScaling::Type::kLinear;
  } else if (type == "llama3") {
    out->type = RopeScaling::Type::kLlama3;
    ORCA_ASSIGN_OR_RETURN(out->low_freq_factor, NumField(*it, "low_freq_factor", src, 1.0));
    ORCA_ASSIGN_OR_RETURN(out->high_freq_factor, NumField(*it, "high_freq_factor", src, 4.0));
    ORCA_ASSIGN_OR_RETURN(out->original_max_position,
                          IntField(*it, "original_max_position_embeddings", src, int64_t{8192}));
  } else if (type == "longrope") {
    out->type = RopeScaling::Type::kLongRope;
    for (const auto& [key, dst] : {std::pair<const char*, std::vector<float>*>{"short_factor", &out->short_factors},
                                   {"long_factor", &out->long_factors}}) {
      auto f = it->find(key);
      if (f == it->end() || !f->is_array())
        return absl::InvalidArgumentError(absl::StrCat(src, ": longrope rope_scaling needs a '", key, "' list"));
      for (const json& v : *f) {
        if (!v.is_number() || !(v.get<double>() > 0))
          return absl::InvalidArgumentError(absl::StrCat(src, ": rope_scaling ", key, " holds ", v.dump(),
                                                         "; its values divide frequencies, so must be positive"));
        dst->push_back(v.get<float>());
      }
    }
    ORCA_ASSIGN_OR_RETURN(out->original_max_position,
                          IntField(j, "original_max_position_embeddings", src, max_position));
    ORCA_ASSIGN_OR_RETURN(out->attention_factor, NumField(*it, "attention_factor", src, 0.0));
    if (out->attention_factor == 0 && max_position > out->original_max_position)
      out->attention_factor =
          std::sqrt(1 + std::log(static_cast<double>(max_position) / out->original_max_position) /
                            std::log(static_cast<double>(out->original_max_position)));
  } else if (type == "yarn") {
    out->type = RopeScaling::Type::kYarn;
    ORCA_ASSIGN_OR_RETURN(out->original_max_position,
                          IntField(*it, "original_max_position_embeddings", src, max_position));
    ORCA_ASSIGN_OR_RETURN(out->beta_fast, NumField(*it, "beta_fast", src, 32.0));
    ORCA_ASSIGN_OR_RETURN(out->beta_slow, NumField(*it, "beta_slow", src, 1.0));
    ORCA_ASSIGN_OR_RETURN(out->attention_factor, NumField(*it, "attention_factor", src, 0.0));
    // transformers' _compute_yarn_parameters: without an attention_factor, mscale and mscale_all_dim (both
    // non-zero) make it the ratio of their magnitudes (Ministral 3: 1 and 1, so 1).
    ORCA_ASSIGN_OR_RETURN(const double mscale, NumField(*it, "mscale", src, 0.0));
    ORCA_ASSIGN_OR_RETURN(const double mscale_all_dim, NumField(*it, "mscale_all_dim", src, 0.0));
    if (out->attention_factor == 0 && mscale != 0 && mscale_all_dim != 0)
      out->attention_factor = YarnMscale(out->factor, mscale) / YarnMscale(out->factor, mscale_all_dim);
  } else {
    return absl::UnimplementedError(
        absl::StrCat(src, ": rope_scaling type '", type, "' is not supported (linear, llama3, yarn and longrope are)"));
  }
  return absl::OkStatus();
}

// llama.cpp's GGUF form of RoPE scaling: `{arch}.rope.scaling.type` (absent: linear, as llama.cpp reads it) with
// `{arch}.rope.scaling.factor` (or the older `{arch}.rope.scale_linear`; absent, 0 or 1: none), and Llama 3's scaling,
// which its converter writes as per-frequency divisors in the tensor `rope_freqs.weight` rather than as metadata.
absl::Status ReadGgufRopeScaling(const formats::GgufFile& g, const std::string& arch, const std::string& src,
                                 bool yarn_log_multiplier, ModelConfig* c) {
  double factor = 0;
  std::string factor_key;
  for (const std::string& key : {arch + ".rope.scaling.factor", arch + ".rope.scale_linear"}) {
    if (!g.Has(key)) continue;
    ORCA_ASSIGN_OR_RETURN(factor, g.GetFloat(key));
    factor_key = key;
    break;
  }
  if (!(std::isfinite(factor) && factor >= 0))
    return absl::InvalidArgumentError(
        absl::StrCat(src, ": ", factor_key, " must be a positive number (or 0: no scaling), got ", factor));
  const std::string type_key = arch + ".rope.scaling.type";
  std::string type = "linear";
  if (g.Has(type_key)) {
    ORCA_ASSIGN_OR_RETURN(type, g.GetString(type_key));
  }
  if (factor != 0 && factor != 1 && type == "yarn") {
    c->rope_scaling.type = RopeScaling::Type::kYarn;
    c->rope_scaling.factor = factor;
    c->rope_scaling.original_max_position = c->max_position;
    const std::string orig_key = arch + ".rope.scaling.original_context_length";
    if (g.Has(orig_key)) {
      ORCA_ASSIGN_OR_RETURN(c->rope_scaling.original_max_position, g.GetInt(orig_key));
    }
    for (const auto& [key, dst] : {std::pair<const char*, double*>{".rope.scaling.yarn_beta_fast", &c->rope_scaling.beta_fast},
                                   {".rope.scaling.yarn_beta_slow", &c->rope_scaling.beta_slow}})
      if (g.Has(arch + key)) {
        ORCA_ASSIGN_OR_RETURN(*dst, g.GetFloat(arch + key));
      }
    const std::string log_mul_key = arch + ".rope.scaling.yarn_log_multiplier";
    if (g.Has(log_mul_key) && !yarn_log_multiplier)
      return absl::UnimplementedError(
          absl::StrCat(src, ": ", log_mul_key, " (DeepSeek's YaRN) is not supported for ", arch));
    if (g.Has(log_mul_key)) {
      // llama.cpp (llama_context): a non-zero multiplier m makes YaRN's magnitude mscale(factor, 1) /
      // mscale(factor, m), transformers' ratio with mscale 1 and mscale_all_dim m.
      ORCA_ASSIGN_OR_RETURN(const double m, g.GetFloat(log_mul_key));
      const double denominator = YarnMscale(factor, m);
      if (!(std::isfinite(m) && denominator > 0))
        return absl::InvalidArgumentError(
            absl::StrCat(src, ": ", log_mul_key, " ", m, " makes YaRN's magnitude factor non-positive"));
      if (m != 0) c->rope_scaling.attention_factor = YarnMscale(factor, 1.0) / denominator;
    }
  } else if (factor != 0 && factor != 1 && type != "none") {
    if (type != "linear")
      return absl::UnimplementedError(absl::StrCat(src, ": ", type_key, " '", type, "' with ", factor_key, " ", factor,
                                                   " is not supported (none, linear, yarn, and Llama 3's "
                                                   "rope_freqs.weight are)"));
    c->rope_scaling.type = RopeScaling::Type::kLinear;
    c->rope_scaling.factor = factor;
  }
  const formats::TensorInfo* t = g.Find("rope_freqs.weight");
  if (t == nullptr) return absl::OkStatus();
  const int64_t want = c->rotary_dim / 2;
  if (t->dtype != DType::kF32 || t->data == nullptr || t->shape.size() != 1 || t->shape[0] != want)
    return absl::InvalidArgumentError(absl::StrCat(
        src, ": rope_freqs.weight must hold ", want, " f32 values (one per rotary frequency: ", arch,
        ".rope.dimension_count ", c->rotary_dim, " / 2), got ", DTypeName(t->dtype), " ", t->ShapeString()));
  c->rope_freq_factors.resize(static_cast<size_t>(want));
  std::memcpy(c->rope_freq_factors.data(), t->data, static_cast<size_t>(want) * sizeof(float));
  for (int64_t i = 0; i < want; ++i) {
    const float v = c->rope_freq_factors[i];
    if (!(std::isfinite(v) && v > 0))
      return absl::InvalidArgumentError(absl::StrCat(src, ": rope_freqs.weight[", i, "] = ", v,
                                                     " must be a positive number (RoPE divides its frequency by it)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseRotaryDecoderHf(const json& j, const std::string& model_type, const std::string& src, ModelConfig* out) {
  ModelConfig& c = *out;
  c.model_type = model_type;
  ORCA_ASSIGN_OR_RETURN(int64_t hidden, IntField(j, "hidden_size", src, std::nullopt));
  ORCA_ASSIGN_OR_RETURN(int64_t layers, IntField(j, "num_hidden_layers", src, std::nullopt));
  ORCA_ASSIGN_OR_RETURN(int64_t heads, IntField(j, "num_attention_heads", src, std::nullopt));
  ORCA_ASSIGN_OR_RETURN(int64_t kv_heads, IntField(j, "num_key_value_heads", src, heads));
  ORCA_ASSIGN_OR_RETURN(int64_t inter, IntField(j, "intermediate_size", src, std::nullopt));
  ORCA_ASSIGN_OR_RETURN(int64_t vocab, IntField(j, "vocab_size", src, std::nullopt));
  ORCA_ASSIGN_OR_RETURN(int64_t max_pos, IntField(j, "max_position_embeddings", src, int64_t{2048}));
  ORCA_ASSIGN_OR_RETURN(double eps, NumField(j, "rms_norm_eps", src, 1e-6));
  ORCA_ASSIGN_OR_RETURN(c.rope_theta, NumField(j, "rope_theta", src, 10000.0));
  int64_t head_dim_default = heads > 0 ? hidden / heads : 0;
  ORCA_ASSIGN_OR_RETURN(int64_t head_dim, IntField(j, "head_dim", src, head_dim_default));
  c.hidden_size = static_cast<int32_t>(hidden);
  c.num_layers = static_cast<int32_t>(layers);
  c.num_heads = static_cast<int32_t>(heads);
  c.num_kv_heads = static_cast<int32_t>(kv_heads);
  c.intermediate_size = static_cast<int32_t>(inter);
  c.vocab_size = static_cast<int32_t>(vocab);
  c.max_position = static_cast<int32_t>(max_pos);
  c.norm_eps = static_cast<float>(eps);
  c.head_dim = static_cast<int32_t>(head_dim);
  c.rotary_dim = c.head_dim;
  if (auto prf = j.find("partial_rotary_factor"); prf != j.end() && prf->is_number())
    c.rotary_dim = static_cast<int32_t>(c.head_dim * prf->get<double>());
  c.rope_style = kernels::RopeStyle::kNeox;
  c.tie_word_embeddings = BoolField(j, "tie_word_embeddings", false);
  c.attention_bias = BoolField(j, "attention_bias", model_type == "qwen2");
  c.mlp_bias = BoolField(j, "mlp_bias", false);
  if (auto act = j.find("hidden_act"); act != j.end() && act->is_string() && act->get<std::string>() != "silu")
    return absl::UnimplementedError(
        absl::StrCat(src, ": hidden_act '", act->get<std::string>(), "' is not supported (silu is)"));
  // Mistral's sliding window (every layer local; later Mistral files set none).
  if (auto sw = j.find("sliding_window"); sw != j.end() && sw->is_number_integer() &&
                                          BoolField(j, "use_sliding_window", model_type == "mistral") &&
                                          sw->get<int64_t>() > 0 && sw->get<int64_t>() < max_pos)
    c.sliding_window = static_cast<int32_t>(sw->get<int64_t>());
  return ParseRopeScaling(j, src, max_pos, &c.rope_scaling);
}

absl::Status ReadRotaryDecoderGguf(const formats::GgufFile& g, const std::string& arch, const std::string& src,
                                   ModelConfig* c, bool yarn_log_multiplier) {
  auto opt_int = [&](const std::string& key, int64_t dflt) -> int64_t {
    auto v = g.GetInt(arch + "." + key);
    return v.ok() ? *v : dflt;
  };
  auto opt_float = [&](const std::string& key, double dflt) -> double {
    auto v = g.GetFloat(arch + "." + key);
    return v.ok() ? *v : dflt;
  };
  c->norm_eps = static_cast<float>(opt_float("attention.layer_norm_rms_epsilon", 1e-5));
  c->rope_theta = opt_float("rope.freq_base", 10000.0);
  c->rotary_dim = static_cast<int32_t>(opt_int("rope.dimension_count", c->head_dim));
  c->attention_bias = g.Find("blk.0.attn_q.bias") != nullptr;
  ORCA_RETURN_IF_ERROR(ReadGgufRopeScaling(g, arch, src, yarn_log_multiplier, c));
  // Mixtral-style files keep the llama architecture and add experts (ffn_*_exps tensors).
  if (const int64_t experts = opt_int("expert_count", 0); experts > 0)
    return absl::UnimplementedError(
        absl::StrCat(src, ": mixture-of-experts models (", arch, ".expert_count ", experts, ") are not supported"));
  return absl::OkStatus();
}

}  // namespace orca::engine
