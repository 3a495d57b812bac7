#include "core/engine/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "core/engine/models/model_family.h"
#include "core/formats/gguf_file.h"
#include "core/formats/safetensors_file.h"

namespace orca::engine {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string GgufName(TensorRole role, int32_t l) {
  const std::string b = absl::StrCat("blk.", l, ".");
  switch (role) {
    case TensorRole::kTokenEmbedding:
      return "token_embd.weight";
    case TensorRole::kPositionEmbedding:
      return "position_embd.weight";
    case TensorRole::kFinalNorm:
      return "output_norm.weight";
    case TensorRole::kFinalNormBias:
      return "output_norm.bias";
    case TensorRole::kLmHead:
      return "output.weight";
    case TensorRole::kAttnNorm:
      return b + "attn_norm.weight";
    case TensorRole::kAttnNormBias:
      return b + "attn_norm.bias";
    case TensorRole::kQ:
      return b + "attn_q.weight";
    case TensorRole::kK:
      return b + "attn_k.weight";
    case TensorRole::kV:
      return b + "attn_v.weight";
    case TensorRole::kQBias:
      return b + "attn_q.bias";
    case TensorRole::kKBias:
      return b + "attn_k.bias";
    case TensorRole::kVBias:
      return b + "attn_v.bias";
    case TensorRole::kQkv:
      return b + "attn_qkv.weight";
    case TensorRole::kQkvBias:
      return b + "attn_qkv.bias";
    case TensorRole::kQNorm:
      return b + "attn_q_norm.weight";
    case TensorRole::kKNorm:
      return b + "attn_k_norm.weight";
    case TensorRole::kPostAttnNorm:
      return b + "post_attention_norm.weight";
    case TensorRole::kPostFfnNorm:
      return b + "post_ffw_norm.weight";
    case TensorRole::kO:
      return b + "attn_output.weight";
    case TensorRole::kOBias:
      return b + "attn_output.bias";
    case TensorRole::kFfnNorm:
      return b + "ffn_norm.weight";
    case TensorRole::kFfnNormBias:
      return b + "ffn_norm.bias";
    case TensorRole::kGate:
      return b + "ffn_gate.weight";
    case TensorRole::kUp:
      return b + "ffn_up.weight";
    case TensorRole::kUpBias:
      return b + "ffn_up.bias";
    case TensorRole::kDown:
      return b + "ffn_down.weight";
    case TensorRole::kDownBias:
      return b + "ffn_down.bias";
  }
  return "";
}

// generation_config.json may list more end-of-sequence ids than config.json
// (Llama-3: <|end_of_text|> and <|eot_id|>).
absl::Status MergeGenerationConfigEos(const std::string& dir, ModelConfig* config) {
  const std::string path = dir + "/generation_config.json";
  auto text = ReadFileToString(path);
  if (!text.ok()) return absl::OkStatus();
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("eos_token_id")) return absl::OkStatus();
  std::vector<int64_t> ids;
  const auto& e = j["eos_token_id"];
  if (e.is_number_integer()) ids.push_back(e.get<int64_t>());
  if (e.is_array())
    for (const auto& v : e)
      if (v.is_number_integer()) ids.push_back(v.get<int64_t>());
  for (int64_t id : ids) {
    if (id < 0 || id >= config->vocab_size)
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": eos_token_id ", id, " is outside the vocabulary (vocab_size ", config->vocab_size, ")"));
    if (std::find(config->eos_token_ids.begin(), config->eos_token_ids.end(), id) == config->eos_token_ids.end())
      config->eos_token_ids.push_back(static_cast<int32_t>(id));
  }
  return absl::OkStatus();
}

}  // namespace

Checkpoint::~Checkpoint() = default;

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& path) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->path_ = path;
  if (IsDirectory(path)) {
    ckpt->format_ = Format::kHuggingFace;
    const std::string config_path = path + "/config.json";
    ORCA_ASSIGN_OR_RETURN(std::string text, ReadFileToString(config_path));
    ORCA_ASSIGN_OR_RETURN(ckpt->config_, ParseHfConfig(text, config_path));
    ORCA_RETURN_IF_ERROR(MergeGenerationConfigEos(path, &ckpt->config_));
    ORCA_ASSIGN_OR_RETURN(auto source, formats::SafetensorsSource::Open(path));
    const ModelFamily& family = FamilyOf(ckpt->config_.arch);
    ckpt->hf_prefix_ = family.hf_prefixes.front();
    for (const std::string& prefix : family.hf_prefixes)
      if (source->Find(family.hf_tensor_name(TensorRole::kTokenEmbedding, 0, prefix)) != nullptr) {
        ckpt->hf_prefix_ = prefix;
        break;
      }
    // Untied checkpoints carry an lm_head; tied ones may omit it even if config says otherwise.
    if (!ckpt->config_.tie_word_embeddings &&
        source->Find(family.hf_tensor_name(TensorRole::kLmHead, 0, ckpt->hf_prefix_)) == nullptr)
      ckpt->config_.tie_word_embeddings = true;
    ckpt->tensors_ = std::move(source);
    return ckpt;
  }
  if (path.size() >= 5 && path.substr(path.size() - 5) == ".gguf") {
    ckpt->format_ = Format::kGguf;
    ORCA_ASSIGN_OR_RETURN(auto gguf, formats::GgufFile::Open(path));
    ORCA_ASSIGN_OR_RETURN(ckpt->config_, ConfigFromGguf(*gguf));
    ckpt->tensors_ = std::move(gguf);
    return ckpt;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": not a model directory (config.json + safetensors) nor a .gguf file"));
}

const formats::GgufFile* Checkpoint::gguf() const {
  return format_ == Format::kGguf ? static_cast<const formats::GgufFile*>(tensors_.get()) : nullptr;
}

std::string Checkpoint::TensorName(TensorRole role, int32_t layer) const {
  if (format_ == Format::kGguf) return GgufName(role, layer);
  return HfTensorName(config_.arch, hf_prefix_, role, layer);
}

std::string Checkpoint::GgufTensorName(TensorRole role, int32_t layer) { return GgufName(role, layer); }

std::string Checkpoint::HfTensorName(ModelArch arch, const std::string& hf_prefix, TensorRole role, int32_t layer) {
  return FamilyOf(arch).hf_tensor_name(role, layer, hf_prefix);
}

bool Checkpoint::IsHfConv1D(ModelArch arch, TensorRole role) { return FamilyOf(arch).hf_conv1d(role); }

bool Checkpoint::IsTransposed(TensorRole role) const {
  return format_ == Format::kHuggingFace && IsHfConv1D(config_.arch, role);
}

absl::StatusOr<const formats::TensorInfo*> Checkpoint::FindOptional(TensorRole role, int32_t layer) const {
  const std::string name = TensorName(role, layer);
  const formats::TensorInfo* info = name.empty() ? nullptr : tensors_->Find(name);
  if (info != nullptr && !info->unsupported.empty()) return absl::UnimplementedError(info->unsupported);
  return info;
}

absl::StatusOr<const formats::TensorInfo*> Checkpoint::Find(TensorRole role, int32_t layer) const {
  ORCA_ASSIGN_OR_RETURN(const formats::TensorInfo* info, FindOptional(role, layer));
  if (info == nullptr)
    return absl::NotFoundError(
        absl::StrCat(tensors_->Describe(), ": tensor '", TensorName(role, layer), "' is missing"));
  return info;
}

}  // namespace orca::engine
