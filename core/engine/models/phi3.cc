// Phi-3 and Phi-4-mini: Llama's layer with Q/K/V fused in one tensor (qkv_proj, rows [Q | K | V]) and gate/up
// in another (gate_up_proj, rows [gate | up]), both sliced at load into the row ranges Llama's separate tensors
// would be (views of the one tensor, each packed by the backend like a separate weight, so the forward pass runs
// the same GEMMs as for Llama; not measured against a fused GEMM); a partial rotary dimension (Phi-4-mini: 3/4 of each head); rotate-half
// RoPE; and LongRoPE, whose short or long per-frequency divisors apply as the context needs (long when the
// served context exceeds the original one: what llama.cpp and vLLM choose), with q and k scaled by its
// attention factor. Phi-3's sliding window is not applied, as llama.cpp does not.
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

// The LongRoPE divisors the served context needs.
absl::Status ChooseLongRopeFactors(const std::string& src, ModelConfig* c) {
  RopeScaling& s = c->rope_scaling;
  if (s.type != RopeScaling::Type::kLongRope) return absl::OkStatus();
  const size_t want = static_cast<size_t>(c->rotary_dim / 2);
  if (s.short_factors.size() != want || s.long_factors.size() != want)
    return absl::InvalidArgumentError(absl::StrCat(src, ": LongRoPE needs ", want, " short and long factors (rotary ",
                                                   c->rotary_dim, " / 2), got ", s.short_factors.size(), " and ",
                                                   s.long_factors.size()));
  c->rope_freq_factors = c->max_position > s.original_max_position ? s.long_factors : s.short_factors;
  return absl::OkStatus();
}

absl::Status ParseHf(const nlohmann::json& j, const std::string& model_type, const std::string& src,
                     ModelConfig* c) {
  ORCA_RETURN_IF_ERROR(ParseRotaryDecoderHf(j, model_type, src, c));
  return ChooseLongRopeFactors(src, c);
}

absl::StatusOr<std::vector<float>> F32Vector(const formats::GgufFile& g, const std::string& name, size_t n) {
  const formats::TensorInfo* t = g.Find(name);
  if (t == nullptr || t->dtype != DType::kF32 || t->shape != std::vector<int64_t>{static_cast<int64_t>(n)})
    return absl::InvalidArgumentError(
        absl::StrCat(g.Describe(), ": tensor '", name, "' must hold ", n, " f32 values (rotary dimension / 2)"));
  const float* v = reinterpret_cast<const float*>(t->data);
  return std::vector<float>(v, v + n);
}

absl::Status ParseGguf(const formats::GgufFile& g, const std::string& arch, const std::string& src, ModelConfig* c) {
  ORCA_RETURN_IF_ERROR(ReadRotaryDecoderGguf(g, arch, src, c));
  c->rope_style = kernels::RopeStyle::kNeox;
  if (g.Find("rope_factors_long.weight") == nullptr) return absl::OkStatus();
  RopeScaling& s = c->rope_scaling;
  s.type = RopeScaling::Type::kLongRope;
  const size_t n = static_cast<size_t>(c->rotary_dim / 2);
  ORCA_ASSIGN_OR_RETURN(s.long_factors, F32Vector(g, "rope_factors_long.weight", n));
  ORCA_ASSIGN_OR_RETURN(s.short_factors, F32Vector(g, "rope_factors_short.weight", n));
  s.original_max_position = c->max_position;
  if (g.Has(arch + ".rope.scaling.original_context_length")) {
    ORCA_ASSIGN_OR_RETURN(s.original_max_position, g.GetInt(arch + ".rope.scaling.original_context_length"));
  }
  if (g.Has(arch + ".rope.scaling.attn_factor")) {
    ORCA_ASSIGN_OR_RETURN(s.attention_factor, g.GetFloat(arch + ".rope.scaling.attn_factor"));
  }
  return ChooseLongRopeFactors(src, c);
}

std::string HfName(TensorRole role, int32_t l, const std::string& /*prefix*/) {
  const std::string p = absl::StrCat("model.layers.", l, ".");
  switch (role) {
    case TensorRole::kQ:
    case TensorRole::kK:
    case TensorRole::kV:
    case TensorRole::kGate:
      return "";  // fused
    case TensorRole::kQkv:
      return p + "self_attn.qkv_proj.weight";
    case TensorRole::kUp:
      return p + "mlp.gate_up_proj.weight";
    default:
      return llama::HfTensorName(role, l);
  }
}


absl::Status LoadLayer(LayerLoader& ld, const ModelConfig& c, int32_t l, LayerWeights* lw) {
  ORCA_ASSIGN_OR_RETURN(lw->attn_norm, ld.Replicated(TensorRole::kAttnNorm, l, c.hidden_size));
  ORCA_RETURN_IF_ERROR(ld.FusedQkv(l, /*biases=*/false, lw));
  ORCA_RETURN_IF_ERROR(ld.AttentionOutput(l, /*bias=*/false, lw));
  ORCA_ASSIGN_OR_RETURN(lw->ffn_norm, ld.Replicated(TensorRole::kFfnNorm, l, c.hidden_size));
  return ld.FusedGateUp(l, lw);
}

std::string GgufArchitecture(const ModelConfig& /*c*/) { return "phi3"; }

void WriteGgufKeys(const ModelConfig& c, formats::GgufWriter* w) {
  llama::WriteGgufKeys(c, w);
  if (c.rope_scaling.type == RopeScaling::Type::kLongRope) {
    w->SetU32("phi3.rope.scaling.original_context_length",
              static_cast<uint32_t>(c.rope_scaling.original_max_position));
    w->SetF32("phi3.rope.scaling.attn_factor", static_cast<float>(c.RopeAttentionFactor()));
  }
}

// LongRoPE factors for a random-weight file: distinct short and long divisors, rising with the frequency index.
void SynthConfig(ModelConfig* c) {
  c->model_type = "phi3";
  RopeScaling& s = c->rope_scaling;
  if (s.type != RopeScaling::Type::kLongRope) return;
  s.short_factors.clear();
  s.long_factors.clear();
  for (int32_t i = 0; i < c->rotary_dim / 2; ++i) {
    s.short_factors.push_back(1.0f + 0.02f * i);
    s.long_factors.push_back(1.0f + 0.5f * i);
  }
  s.attention_factor = std::sqrt(1 + std::log(static_cast<double>(c->max_position) / s.original_max_position) /
                                         std::log(static_cast<double>(s.original_max_position)));
  c->rope_freq_factors = c->max_position > s.original_max_position ? s.long_factors : s.short_factors;
}

std::vector<SynthTensorSpec> SynthTensors(const ModelConfig& c) {
  const int64_t H = c.hidden_size, Q = int64_t{c.num_heads} * c.head_dim, KV = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t F = c.intermediate_size;
  std::vector<SynthTensorSpec> t;
  for (SynthTensorSpec& s : llama::SynthTensors(c)) {
    // Llama's q, k and v become one [Q + 2 KV, H] tensor; gate and up one [2 F, H] tensor.
    if (s.name.find("self_attn.q_proj") != std::string::npos) {
      s.name = s.name.substr(0, s.name.find("q_proj")) + "qkv_proj.weight";
      s.shape = {Q + 2 * KV, H};
    } else if (s.name.find("mlp.gate_proj") != std::string::npos) {
      s.name = s.name.substr(0, s.name.find("gate_proj")) + "gate_up_proj.weight";
      s.shape = {2 * F, H};
    } else if (s.name.find("k_proj") != std::string::npos || s.name.find("v_proj") != std::string::npos ||
               s.name.find("up_proj") != std::string::npos) {
      continue;
    }
    t.push_back(std::move(s));
  }
  return t;
}

void SynthConfigJson(const ModelConfig& c, nlohmann::json* out) {
  llama::SynthConfigJson(c, "Phi3ForCausalLM", out);
  nlohmann::json& j = *out;
  if (c.rotary_dim != c.head_dim) j["partial_rotary_factor"] = static_cast<double>(c.rotary_dim) / c.head_dim;
  const RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScaling::Type::kLongRope) {
    j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", s.short_factors}, {"long_factor", s.long_factors}};
    j["original_max_position_embeddings"] = s.original_max_position;
  }
}

}  // namespace

extern const ModelFamily kPhi3Family;
const ModelFamily kPhi3Family = {
    .arch = ModelArch::kPhi3,
    .name = "phi3",
    .hf_model_types = {"phi3"},
    .hf_architectures = {"Phi3ForCausalLM"},
    .gguf_architectures = {"phi3"},
    .norm = NormKind::kRms,
    .learned_positions = false,
    .parse_hf = ParseHf,
    .parse_gguf = ParseGguf,
    .hf_tensor_name = HfName,
    .load_layer = LoadLayer,
    .forward_layer = llama::ForwardLayer,
    .gguf_architecture = GgufArchitecture,
    .write_gguf_keys = WriteGgufKeys,
    .synth_config = SynthConfig,
    .synth_tensors = SynthTensors,
    .synth_config_json = SynthConfigJson,
};

}  // namespace orca::engine
