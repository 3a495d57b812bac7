// Granite 3.x (dense): Llama's layer with four multipliers: token embeddings scaled (embedding_multiplier), the
// attention's scores scaled by attention_multiplier instead of 1/√head_dim, every block's output scaled before
// the residual add (residual_multiplier), and the logits divided by logits_scaling. llama.cpp's converter permutes
// Q/K for adjacent-pair RoPE, as for Llama.
#include <nlohmann/json.hpp>

#include "core/common/status_macros.h"
#include "core/engine/model_weights.h"
#include "core/engine/models/config_fields.h"
#include "core/engine/models/llama.h"
#include "core/formats/gguf_file.h"
#include "core/formats/gguf_writer.h"

namespace orca::engine {
namespace {

absl::Status ParseHf(const nlohmann::json& j, const std::string& model_type, const std::string& src,
                     ModelConfig* c) {
  ORCA_RETURN_IF_ERROR(ParseRotaryDecoderHf(j, model_type, src, c));
  ORCA_ASSIGN_OR_RETURN(double embedding, NumField(j, "embedding_multiplier", src, 1.0));
  ORCA_ASSIGN_OR_RETURN(double residual, NumField(j, "residual_multiplier", src, 1.0));
  ORCA_ASSIGN_OR_RETURN(double attention, NumField(j, "attention_multiplier", src, 0.0));
  ORCA_ASSIGN_OR_RETURN(double logits, NumField(j, "logits_scaling", src, 1.0));
  c->embedding_scale = static_cast<float>(embedding);
  c->residual_scale = static_cast<float>(residual);
  c->attention_scale = static_cast<float>(attention);
  c->logit_scale = static_cast<float>(logits);
  return absl::OkStatus();
}

absl::Status ParseGguf(const formats::GgufFile& g, const std::string& arch, const std::string& src, ModelConfig* c) {
  ORCA_RETURN_IF_ERROR(ReadRotaryDecoderGguf(g, arch, src, c));
  c->rope_style = kernels::RopeStyle::kInterleaved;  // the converter permuted Q/K, as for Llama
  auto get = [&](const std::string& key, float* out) -> absl::Status {
    if (!g.Has(arch + "." + key)) return absl::OkStatus();
    ORCA_ASSIGN_OR_RETURN(double v, g.GetFloat(arch + "." + key));
    *out = static_cast<float>(v);
    return absl::OkStatus();
  };
  ORCA_RETURN_IF_ERROR(get("embedding_scale", &c->embedding_scale));
  ORCA_RETURN_IF_ERROR(get("residual_scale", &c->residual_scale));
  ORCA_RETURN_IF_ERROR(get("attention.scale", &c->attention_scale));
  ORCA_RETURN_IF_ERROR(get("logit_scale", &c->logit_scale));
  return absl::OkStatus();
}

std::string HfName(TensorRole role, int32_t l, const std::string& /*prefix*/) { return llama::HfTensorName(role, l); }

std::string GgufArchitecture(const ModelConfig& /*c*/) { return "granite"; }
bool Permutes(const ModelConfig& /*c*/) { return true; }

void WriteGgufKeys(const ModelConfig& c, formats::GgufWriter* w) {
  llama::WriteGgufKeys(c, w);
  w->SetF32("granite.embedding_scale", c.embedding_scale);
  w->SetF32("granite.residual_scale", c.residual_scale);
  w->SetF32("granite.attention.scale", c.attention_scale);
  w->SetF32("granite.logit_scale", c.logit_scale);
}

// Granite 3.x's 2B values.
void SynthConfig(ModelConfig* c) {
  c->model_type = "granite";
  c->embedding_scale = 12.0f;
  c->residual_scale = 0.22f;
  c->attention_scale = 0.015625f;
  c->logit_scale = 8.0f;
}

std::vector<SynthTensorSpec> SynthTensors(const ModelConfig& c) {
  // Embeddings are multiplied by 12 on the way in.
  std::vector<SynthTensorSpec> t = llama::SynthTensors(c);
  t.front().stddev /= c.embedding_scale;
  return t;
}

void SynthConfigJson(const ModelConfig& c, nlohmann::json* out) {
  llama::SynthConfigJson(c, "GraniteForCausalLM", out);
  (*out)["embedding_multiplier"] = c.embedding_scale;
  (*out)["residual_multiplier"] = c.residual_scale;
  (*out)["attention_multiplier"] = c.attention_scale;
  (*out)["logits_scaling"] = c.logit_scale;
}

}  // namespace

extern const ModelFamily kGraniteFamily;
const ModelFamily kGraniteFamily = {
    .arch = ModelArch::kGranite,
    .name = "granite",
    .hf_model_types = {"granite"},
    .hf_architectures = {"GraniteForCausalLM"},
    .gguf_architectures = {"granite"},
    .norm = NormKind::kRms,
    .learned_positions = false,
    .parse_hf = ParseHf,
    .parse_gguf = ParseGguf,
    .hf_tensor_name = HfName,
    .load_layer = llama::LoadLayer,
    .forward_layer = llama::ForwardLayer,
    .gguf_architecture = GgufArchitecture,
    .gguf_permutes_qk = Permutes,
    .write_gguf_keys = WriteGgufKeys,
    .synth_config = SynthConfig,
    .synth_tensors = SynthTensors,
    .synth_config_json = SynthConfigJson,
};

}  // namespace orca::engine
