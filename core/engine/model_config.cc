#include "core/engine/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/common/status_macros.h"
#include "core/engine/models/model_family.h"
#include "core/formats/gguf_file.h"

namespace orca::engine {
namespace {

using json = nlohmann::json;

// A token id or list of them (bos_token_id, eos_token_id); ids that do not
// fit an int32 are kept as -1 for Validate() to reject by name.
std::vector<int32_t> IdList(const json& j, const char* key) {
  std::vector<int32_t> out;
  auto it = j.find(key);
  if (it == j.end()) return out;
  auto id = [](const json& v) {
    const int64_t x = v.get<int64_t>();
    return x < 0 || x > std::numeric_limits<int32_t>::max() ? -1 : static_cast<int32_t>(x);
  };
  if (it->is_number_integer()) out.push_back(id(*it));
  if (it->is_array())
    for (const auto& v : *it)
      if (v.is_number_integer()) out.push_back(id(v));
  return out;
}

}  // namespace

const char* ModelArchName(ModelArch arch) { return FamilyOf(arch).name; }

absl::StatusOr<ModelConfig> ParseHfConfig(const std::string& json_text, const std::string& source) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  std::string model_type, architecture;
  if (auto it = j.find("model_type"); it != j.end() && it->is_string()) model_type = it->get<std::string>();
  if (auto it = j.find("architectures"); it != j.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
    architecture = (*it)[0].get<std::string>();
  const ModelFamily* family = FindHfFamily(model_type, architecture);
  if (family == nullptr)
    return absl::UnimplementedError(absl::StrCat(source, ": model_type '", model_type, "'",
                                                 architecture.empty() ? "" : absl::StrCat(" (", architecture, ")"),
                                                 " is not supported (", SupportedHfModelTypes(), " are)"));
  absl::StatusOr<ModelConfig> config = ModelConfig{};  // NOLINT: filled below
  config->arch = family->arch;
  if (model_type.empty()) model_type = family->hf_model_types.front();
  ORCA_RETURN_IF_ERROR(family->parse_hf(j, model_type, source, &*config));
  std::vector<int32_t> bos = IdList(j, "bos_token_id");
  if (!bos.empty()) config->bos_token_id = bos[0];
  config->bos_token_id_set = !bos.empty();
  config->eos_token_ids = IdList(j, "eos_token_id");
  ORCA_RETURN_IF_ERROR(Annotate(config->Validate(), source));
  return config;
}

absl::StatusOr<ModelConfig> ConfigFromGguf(const formats::GgufFile& g) {
  const std::string src = g.Describe();
  ORCA_ASSIGN_OR_RETURN(std::string arch, g.GetString("general.architecture"));
  const ModelFamily* family = FindGgufFamily(arch);
  if (family == nullptr)
    return absl::UnimplementedError(absl::StrCat(src, ": GGUF architecture '", arch, "' is not supported (",
                                                 SupportedGgufArchitectures(), " are)"));
  ModelConfig c;
  c.model_type = arch;
  auto req = [&](const std::string& key) -> absl::StatusOr<int64_t> { return g.GetInt(arch + "." + key); };
  auto opt_int = [&](const std::string& key, int64_t dflt) -> int64_t {
    auto v = g.GetInt(arch + "." + key);
    return v.ok() ? *v : dflt;
  };
  ORCA_ASSIGN_OR_RETURN(int64_t hidden, req("embedding_length"));
  ORCA_ASSIGN_OR_RETURN(int64_t layers, req("block_count"));
  ORCA_ASSIGN_OR_RETURN(int64_t heads, req("attention.head_count"));
  ORCA_ASSIGN_OR_RETURN(int64_t ffn, req("feed_forward_length"));
  c.hidden_size = static_cast<int32_t>(hidden);
  c.num_layers = static_cast<int32_t>(layers);
  c.num_heads = static_cast<int32_t>(heads);
  c.num_kv_heads = static_cast<int32_t>(opt_int("attention.head_count_kv", heads));
  c.intermediate_size = static_cast<int32_t>(ffn);
  c.max_position = static_cast<int32_t>(opt_int("context_length", 2048));
  c.head_dim = heads > 0 ? static_cast<int32_t>(opt_int("attention.key_length", hidden / heads)) : 0;
  if (const formats::TensorInfo* emb = g.Find("token_embd.weight"); emb != nullptr && emb->shape.size() == 2)
    c.vocab_size = static_cast<int32_t>(emb->shape[0]);
  else
    c.vocab_size = static_cast<int32_t>(opt_int("vocab_size", 0));
  c.tie_word_embeddings = g.Find("output.weight") == nullptr;
  c.arch = family->arch;
  ORCA_RETURN_IF_ERROR(family->parse_gguf(g, arch, src, &c));
  auto token_id = [](int64_t v) {
    return v < 0 || v > std::numeric_limits<int32_t>::max() ? -1 : static_cast<int32_t>(v);
  };
  if (auto bos = g.GetInt("tokenizer.ggml.bos_token_id"); bos.ok()) {
    c.bos_token_id = token_id(*bos);
    c.bos_token_id_set = true;
  }
  if (auto eos = g.GetInt("tokenizer.ggml.eos_token_id"); eos.ok()) c.eos_token_ids = {token_id(*eos)};
  absl::Status valid = c.Validate();
  if (!valid.ok()) {
    // Name the GGUF keys rather than the config.json fields.
    std::string msg(valid.message());
    msg = absl::StrReplaceAll(msg, {{"rope_theta", arch + ".rope.freq_base"},
                                    {"bos_token_id", "tokenizer.ggml.bos_token_id"},
                                    {"eos_token_id", "tokenizer.ggml.eos_token_id"}});
    return absl::Status(valid.code(), absl::StrCat(src, ": ", msg));
  }
  return c;
}

absl::Status ModelConfig::Validate() const {
  auto positive = [](const char* name, int64_t v) -> absl::Status {
    if (v <= 0) return absl::InvalidArgumentError(absl::StrCat(name, " must be positive, got ", v));
    return absl::OkStatus();
  };
  ORCA_RETURN_IF_ERROR(positive("vocab_size", vocab_size));
  ORCA_RETURN_IF_ERROR(positive("hidden_size", hidden_size));
  ORCA_RETURN_IF_ERROR(positive("num_layers", num_layers));
  ORCA_RETURN_IF_ERROR(positive("num_heads", num_heads));
  ORCA_RETURN_IF_ERROR(positive("num_kv_heads", num_kv_heads));
  ORCA_RETURN_IF_ERROR(positive("head_dim", head_dim));
  ORCA_RETURN_IF_ERROR(positive("intermediate_size", intermediate_size));
  ORCA_RETURN_IF_ERROR(positive("max_position", max_position));
  if (num_heads % num_kv_heads != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("num_heads (", num_heads, ") must be a multiple of num_kv_heads (", num_kv_heads, ")"));
  if (arch == ModelArch::kGpt2 && head_dim * num_heads != hidden_size)
    return absl::InvalidArgumentError(
        absl::StrCat("n_embd (", hidden_size, ") must be divisible by n_head (", num_heads, ")"));
  if (arch != ModelArch::kGpt2) {
    if (rotary_dim <= 0 || rotary_dim > head_dim || rotary_dim % 2 != 0 || rotary_dim > 1024)
      return absl::InvalidArgumentError(
          absl::StrCat("rotary dimension ", rotary_dim, " must be even and in (0, head_dim=", head_dim, "]"));
  }
  if (!(norm_eps > 0)) return absl::InvalidArgumentError("norm epsilon must be positive");
  if (arch != ModelArch::kGpt2 && !(std::isfinite(rope_theta) && rope_theta > 0))
    return absl::InvalidArgumentError(
        absl::StrCat("rope_theta must be a positive number, got ", rope_theta, " (RoPE would divide by zero)"));
  if (arch != ModelArch::kGpt2 && rope_scaling.type != RopeScaling::Type::kNone) {
    const RopeScaling& s = rope_scaling;
    if (!(std::isfinite(s.factor) && s.factor > 0))
      return absl::InvalidArgumentError(absl::StrCat("rope_scaling factor must be a positive number, got ", s.factor));
    if (s.type == RopeScaling::Type::kLlama3 &&
        !(std::isfinite(s.low_freq_factor) && std::isfinite(s.high_freq_factor) && s.low_freq_factor > 0 &&
          s.high_freq_factor > 0 && s.high_freq_factor != s.low_freq_factor && s.original_max_position > 0))
      return absl::InvalidArgumentError(
          absl::StrCat("llama3 rope_scaling needs positive, different low_freq_factor and high_freq_factor and a "
                       "positive original_max_position_embeddings, got ",
                       s.low_freq_factor, ", ", s.high_freq_factor, ", ", s.original_max_position));
  }
  if (sliding_window < 0) return absl::InvalidArgumentError(absl::StrCat("sliding_window must be >= 0, got ", sliding_window));
  if (!local_layers.empty() && static_cast<int32_t>(local_layers.size()) != num_layers)
    return absl::InvalidArgumentError(
        absl::StrCat(local_layers.size(), " local/global layer flags for ", num_layers, " layers"));
  for (const auto& [name, v] : {std::pair<const char*, double>{"rope_local_base_freq", rope_theta_local},
                                {"attention scale", attention_scale},
                                {"embedding scale", embedding_scale},
                                {"attn_logit_softcapping", attn_softcap},
                                {"final_logit_softcapping", final_softcap},
                                {"residual_multiplier", residual_scale},
                                {"logits_scaling", logit_scale}})
    if (!(std::isfinite(v) && v >= 0))
      return absl::InvalidArgumentError(absl::StrCat(name, " must be a non-negative number, got ", v));
  if (!std::isfinite(attn_temperature_scale) || (attn_temperature_scale != 0 && attn_temperature_floor <= 0))
    return absl::InvalidArgumentError(absl::StrCat("attention temperature scale ", attn_temperature_scale,
                                                   " must be finite, with a positive floor (original context), got ",
                                                   attn_temperature_floor));
  if (rope_scaling.type == RopeScaling::Type::kYarn &&
      !(rope_scaling.original_max_position > 0 && rope_scaling.beta_fast > rope_scaling.beta_slow &&
        rope_scaling.beta_slow > 0 && std::isfinite(rope_scaling.attention_factor) &&
        rope_scaling.attention_factor >= 0))
    return absl::InvalidArgumentError(absl::StrCat(
        "yarn rope_scaling needs a positive original_max_position_embeddings and beta_fast > beta_slow > 0, got ",
        rope_scaling.original_max_position, ", ", rope_scaling.beta_fast, ", ", rope_scaling.beta_slow));
  if (!rope_freq_factors.empty() && static_cast<int64_t>(rope_freq_factors.size()) != rotary_dim / 2)
    return absl::InvalidArgumentError(
        absl::StrCat(rope_freq_factors.size(), " RoPE frequency factors for ", rotary_dim / 2, " rotary frequencies"));
  if (bos_token_id_set && (bos_token_id < 0 || bos_token_id >= vocab_size))
    return absl::InvalidArgumentError(
        absl::StrCat("bos_token_id ", bos_token_id, " is outside the vocabulary (vocab_size ", vocab_size, ")"));
  for (int32_t id : eos_token_ids)
    if (id < 0 || id >= vocab_size)
      return absl::InvalidArgumentError(
          absl::StrCat("eos_token_id ", id, " is outside the vocabulary (vocab_size ", vocab_size, ")"));
  return absl::OkStatus();
}

int64_t ModelConfig::NumParameters() const {
  const int64_t h = hidden_size, q = static_cast<int64_t>(num_heads) * head_dim,
                kv = static_cast<int64_t>(num_kv_heads) * head_dim, f = intermediate_size;
  int64_t per_layer = h * q + 2 * h * kv + q * h;  // attention
  per_layer += (arch == ModelArch::kGpt2 ? 2 : 3) * h * f;
  per_layer += 2 * h;  // norms
  if (qk_norm) per_layer += 2 * head_dim;
  if (arch == ModelArch::kGemma2 || arch == ModelArch::kGemma3) per_layer += 2 * h;  // post-attention/-MLP norms
  int64_t total = per_layer * num_layers + static_cast<int64_t>(vocab_size) * h + h;
  if (!tie_word_embeddings) total += static_cast<int64_t>(vocab_size) * h;
  if (arch == ModelArch::kGpt2) total += static_cast<int64_t>(max_position) * h;
  return total;
}

namespace {

std::string RopeScalingSummary(const ModelConfig& c) {
  std::string out;
  if (c.rope_scaling.type == RopeScaling::Type::kLinear)
    absl::StrAppend(&out, ", RoPE scaled linearly by ", c.rope_scaling.factor);
  if (c.rope_scaling.type == RopeScaling::Type::kLlama3)
    absl::StrAppend(&out, ", RoPE scaled as Llama 3 (factor ", c.rope_scaling.factor, ")");
  if (c.rope_scaling.type == RopeScaling::Type::kLongRope)
    absl::StrAppend(&out, ", LongRoPE (", c.max_position > c.rope_scaling.original_max_position ? "long" : "short",
                    " factors, original context ", c.rope_scaling.original_max_position, ")");
  if (c.rope_scaling.type == RopeScaling::Type::kYarn)
    absl::StrAppend(&out, ", RoPE scaled by YaRN (factor ", c.rope_scaling.factor, ", original context ",
                    c.rope_scaling.original_max_position, ")");
  if (c.attn_temperature_scale != 0)
    absl::StrAppend(&out, ", attention temperature 1 + ", c.attn_temperature_scale, " ln(1 + floor(position / ",
                    c.attn_temperature_floor, "))");
  if (c.sliding_window > 0) {
    int32_t local = 0;
    for (int32_t l = 0; l < c.num_layers; ++l) local += c.IsLocalLayer(l) ? 1 : 0;
    absl::StrAppend(&out, ", sliding window ", c.sliding_window, " on ", local, " of ", c.num_layers, " layers");
  }
  if (!c.rope_freq_factors.empty()) {
    const auto [lo, hi] = std::minmax_element(c.rope_freq_factors.begin(), c.rope_freq_factors.end());
    absl::StrAppend(&out, ", RoPE frequencies divided by rope_freqs.weight (", *lo, "-", *hi, ")");
  }
  return out;
}

}  // namespace

std::string ModelConfig::Summary() const {
  return absl::StrCat(ModelArchName(arch), " (", model_type, "): ", num_layers, " layers, hidden ", hidden_size, ", ",
                      num_heads, " heads (", num_kv_heads, " kv, dim ", head_dim, "), ffn ", intermediate_size,
                      ", vocab ", vocab_size, ", context ", max_position, ", ",
                      static_cast<double>(NumParameters()) / 1e6, "M params", RopeScalingSummary(*this));
}

namespace {

double UnscaledInverseFrequency(const ModelConfig& c, int32_t i) {
  return 1.0 / std::pow(c.rope_theta, (2.0 * i) / c.rotary_dim);
}

// Llama 3's divisor of inverse frequency f: 1 for wavelengths under original_max_position / high_freq_factor, `factor`
// over original_max_position / low_freq_factor, and between them the reciprocal of the interpolation
// (1 - smooth) / factor + smooth.
double Llama3Divisor(const RopeScaling& s, double f) {
  const double low_wavelen = s.original_max_position / s.low_freq_factor;
  const double high_wavelen = s.original_max_position / s.high_freq_factor;
  const double wavelen = 2 * M_PI / f;
  if (wavelen > low_wavelen) return s.factor;
  if (wavelen < high_wavelen) return 1.0;
  const double smooth =
      (s.original_max_position / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return 1.0 / ((1 - smooth) / s.factor + smooth);
}

// YaRN's frequency i: interpolated (divided by the factor) below the correction range's low end, extrapolated
// (unchanged) above its high end, linearly mixed between; the range's ends are the dimensions that turn
// beta_fast and beta_slow times over the original context (floored and ceiled, within [0, rotary_dim - 1]).
double YarnFrequency(const ModelConfig& c, int32_t i, double f) {
  const RopeScaling& s = c.rope_scaling;
  auto dim = [&](double rotations) {
    return c.rotary_dim * std::log(s.original_max_position / (rotations * 2 * M_PI)) / (2 * std::log(c.rope_theta));
  };
  const double low = std::max(0.0, std::floor(dim(s.beta_fast)));
  const double high = std::min(c.rotary_dim - 1.0, std::ceil(dim(s.beta_slow)));
  const double ramp = std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
  const double extrapolation = 1 - ramp;
  return f / s.factor * (1 - extrapolation) + f * extrapolation;
}

}  // namespace

std::vector<float> RopeInverseFrequencies(const ModelConfig& c) {
  const int32_t half = c.rotary_dim / 2;
  std::vector<float> inv(half);
  for (int32_t i = 0; i < half; ++i) {
    double f = UnscaledInverseFrequency(c, i);
    const RopeScaling& s = c.rope_scaling;
    if (s.type == RopeScaling::Type::kLinear) {
      f /= s.factor;
    } else if (s.type == RopeScaling::Type::kLlama3) {
      f /= Llama3Divisor(s, f);
    } else if (s.type == RopeScaling::Type::kYarn) {
      f = YarnFrequency(c, i, f);
    }
    if (!c.rope_freq_factors.empty()) f /= c.rope_freq_factors[i];
    inv[i] = static_cast<float>(f);
  }
  return inv;
}

std::vector<float> LocalRopeInverseFrequencies(const ModelConfig& c) {
  std::vector<float> inv(c.rotary_dim / 2);
  for (int32_t i = 0; i < c.rotary_dim / 2; ++i)
    inv[i] = static_cast<float>(1.0 / std::pow(c.rope_theta_local, (2.0 * i) / c.rotary_dim));
  return inv;
}

std::vector<float> Llama3RopeFreqFactors(const ModelConfig& c) {
  std::vector<float> factors(c.rotary_dim / 2);
  for (int32_t i = 0; i < c.rotary_dim / 2; ++i)
    factors[i] = static_cast<float>(Llama3Divisor(c.rope_scaling, UnscaledInverseFrequency(c, i)));
  return factors;
}

}  // namespace orca::engine
