#include "core/engine/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/common/status_macros.h"
#include "core/formats/gguf_file.h"

namespace orca::engine {
namespace {

using json = nlohmann::json;

// Typed field readers that turn nlohmann's exceptions into precise errors.
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

absl::Status ParseRopeScaling(const json& j, const std::string& src, RopeScaling* out) {
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
  } else {
    return absl::UnimplementedError(
        absl::StrCat(src, ": rope_scaling type '", type, "' is not supported (linear and llama3 are)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ParseLlamaLike(const json& j, const std::string& src, const std::string& model_type) {
  ModelConfig c;
  c.arch = ModelArch::kLlama;
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
  if (auto sw = j.find("sliding_window"); sw != j.end() && sw->is_number_integer() &&
                                          BoolField(j, "use_sliding_window", model_type == "mistral") &&
                                          sw->get<int64_t>() < max_pos)
    return absl::UnimplementedError(absl::StrCat(src, ": sliding-window attention is not supported"));
  ORCA_RETURN_IF_ERROR(ParseRopeScaling(j, src, &c.rope_scaling));
  return c;
}

absl::StatusOr<ModelConfig> ParseGpt2(const json& j, const std::string& src) {
  ModelConfig c;
  c.arch = ModelArch::kGpt2;
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
  return c;
}

}  // namespace

const char* ModelArchName(ModelArch arch) { return arch == ModelArch::kGpt2 ? "gpt2" : "llama"; }

absl::StatusOr<ModelConfig> ParseHfConfig(const std::string& json_text, const std::string& source) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  std::string model_type;
  if (auto it = j.find("model_type"); it != j.end() && it->is_string()) model_type = it->get<std::string>();
  if (model_type.empty()) {
    if (auto it = j.find("architectures"); it != j.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
      std::string a = (*it)[0].get<std::string>();
      if (a == "GPT2LMHeadModel")
        model_type = "gpt2";
      else if (a == "LlamaForCausalLM")
        model_type = "llama";
    }
  }
  absl::StatusOr<ModelConfig> config;
  if (model_type == "gpt2") {
    config = ParseGpt2(j, source);
  } else if (model_type == "llama" || model_type == "qwen2" || model_type == "mistral") {
    config = ParseLlamaLike(j, source, model_type);
  } else {
    return absl::UnimplementedError(
        absl::StrCat(source, ": model_type '", model_type, "' is not supported (gpt2, llama, qwen2, mistral are)"));
  }
  if (!config.ok()) return config.status();
  std::vector<int32_t> bos = IdList(j, "bos_token_id");
  if (!bos.empty()) config->bos_token_id = bos[0];
  config->bos_token_id_set = !bos.empty();
  config->eos_token_ids = IdList(j, "eos_token_id");
  ORCA_RETURN_IF_ERROR(Annotate(config->Validate(), source));
  return config;
}

namespace {

// llama.cpp's GGUF form of RoPE scaling: `{arch}.rope.scaling.type` (absent: linear, as llama.cpp reads it) with
// `{arch}.rope.scaling.factor` (or the older `{arch}.rope.scale_linear`; absent, 0 or 1: none), and Llama 3's scaling,
// which its converter writes as per-frequency divisors in the tensor `rope_freqs.weight` rather than as metadata.
absl::Status ReadGgufRopeScaling(const formats::GgufFile& g, const std::string& arch, const std::string& src,
                                 ModelConfig* c) {
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
  if (factor != 0 && factor != 1 && type != "none") {
    if (type != "linear")
      return absl::UnimplementedError(absl::StrCat(src, ": ", type_key, " '", type, "' with ", factor_key, " ", factor,
                                                   " is not supported (none, linear, and Llama 3's rope_freqs.weight "
                                                   "are)"));
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

absl::StatusOr<ModelConfig> ConfigFromGguf(const formats::GgufFile& g) {
  const std::string src = g.Describe();
  ORCA_ASSIGN_OR_RETURN(std::string arch, g.GetString("general.architecture"));
  ModelConfig c;
  c.model_type = arch;
  auto req = [&](const std::string& key) -> absl::StatusOr<int64_t> { return g.GetInt(arch + "." + key); };
  auto opt_int = [&](const std::string& key, int64_t dflt) -> int64_t {
    auto v = g.GetInt(arch + "." + key);
    return v.ok() ? *v : dflt;
  };
  auto opt_float = [&](const std::string& key, double dflt) -> double {
    auto v = g.GetFloat(arch + "." + key);
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
  if (arch == "llama" || arch == "qwen2" || arch == "mistral") {
    c.arch = ModelArch::kLlama;
    c.norm_eps = static_cast<float>(opt_float("attention.layer_norm_rms_epsilon", 1e-5));
    c.rope_theta = opt_float("rope.freq_base", 10000.0);
    c.rotary_dim = static_cast<int32_t>(opt_int("rope.dimension_count", c.head_dim));
    // llama.cpp's converter permutes Q/K of llama checkpoints for adjacent-pair
    // RoPE; qwen2 keeps the Hugging Face (rotate-half) layout.
    c.rope_style = arch == "qwen2" ? kernels::RopeStyle::kNeox : kernels::RopeStyle::kInterleaved;
    c.attention_bias = g.Find("blk.0.attn_q.bias") != nullptr;
    ORCA_RETURN_IF_ERROR(ReadGgufRopeScaling(g, arch, src, &c));
    // Mixtral-style files keep the llama architecture and add experts (ffn_*_exps tensors).
    if (const int64_t experts = opt_int("expert_count", 0); experts > 0)
      return absl::UnimplementedError(
          absl::StrCat(src, ": mixture-of-experts models (", arch, ".expert_count ", experts, ") are not supported"));
  } else if (arch == "gpt2") {
    c.arch = ModelArch::kGpt2;
    c.norm_eps = static_cast<float>(opt_float("attention.layer_norm_epsilon", 1e-5));
    c.attention_bias = true;
    c.mlp_bias = true;
  } else {
    return absl::UnimplementedError(
        absl::StrCat(src, ": GGUF architecture '", arch, "' is not supported (llama, qwen2, gpt2 are)"));
  }
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
  if (arch == ModelArch::kLlama) {
    if (rotary_dim <= 0 || rotary_dim > head_dim || rotary_dim % 2 != 0 || rotary_dim > 1024)
      return absl::InvalidArgumentError(
          absl::StrCat("rotary dimension ", rotary_dim, " must be even and in (0, head_dim=", head_dim, "]"));
  }
  if (!(norm_eps > 0)) return absl::InvalidArgumentError("norm epsilon must be positive");
  if (arch == ModelArch::kLlama && !(std::isfinite(rope_theta) && rope_theta > 0))
    return absl::InvalidArgumentError(
        absl::StrCat("rope_theta must be a positive number, got ", rope_theta, " (RoPE would divide by zero)"));
  if (arch == ModelArch::kLlama && rope_scaling.type != RopeScaling::Type::kNone) {
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
    }
    if (!c.rope_freq_factors.empty()) f /= c.rope_freq_factors[i];
    inv[i] = static_cast<float>(f);
  }
  return inv;
}

std::vector<float> Llama3RopeFreqFactors(const ModelConfig& c) {
  std::vector<float> factors(c.rotary_dim / 2);
  for (int32_t i = 0; i < c.rotary_dim / 2; ++i)
    factors[i] = static_cast<float>(Llama3Divisor(c.rope_scaling, UnscaledInverseFrequency(c, i)));
  return factors;
}

}  // namespace orca::engine
