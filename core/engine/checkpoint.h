#pragma once
/// A model checkpoint on disk: a Hugging Face directory (config.json +
/// safetensors) or a GGUF file. Gives the parsed config and maps Orca's
/// canonical tensor roles to the checkpoint's own tensor names.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/engine/model_config.h"
#include "core/engine/tensor_role.h"
#include "core/formats/tensor_source.h"

namespace orca::formats {
class GgufFile;
}  // namespace orca::formats

namespace orca::engine {

class Checkpoint {
 public:
  enum class Format : uint8_t { kHuggingFace, kGguf };

  /// `path`: a directory with config.json and model.safetensors[.index.json],
  /// or a .gguf file.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& path);
  ~Checkpoint();

  const std::string& path() const { return path_; }
  Format format() const { return format_; }
  const ModelConfig& config() const { return config_; }
  const formats::TensorSource& tensors() const { return *tensors_; }
  /// The GGUF file (metadata, vocabulary) or nullptr for HF checkpoints.
  const formats::GgufFile* gguf() const;

  /// The checkpoint's name for a role (layer ignored for global tensors).
  std::string TensorName(TensorRole role, int32_t layer) const;
  /// A role's name in GGUF files ("blk.3.attn_q.weight", llama.cpp's names, which every family shares), and in
  /// Hugging Face checkpoints of an architecture (its family's names under `hf_prefix`, one of
  /// ModelFamily::hf_prefixes, e.g. GPT-2's "transformer."). Empty when the role does not exist there.
  static std::string GgufTensorName(TensorRole role, int32_t layer);
  static std::string HfTensorName(ModelArch arch, const std::string& hf_prefix, TensorRole role, int32_t layer);
  /// Whether Hugging Face GPT-2 stores this role as a Conv1D [in, out] matrix.
  static bool IsHfConv1D(ModelArch arch, TensorRole role);
  /// Whether a GPT-2 Conv1D-style [in, out] layout is used for this role.
  bool IsTransposed(TensorRole role) const;
  /// Looks a role up; NotFound names the tensor and file, and a present but
  /// unusable tensor (quantized dtype) reports why.
  absl::StatusOr<const formats::TensorInfo*> Find(TensorRole role, int32_t layer) const;
  /// Same, but nullptr (not an error) when the checkpoint does not have it.
  absl::StatusOr<const formats::TensorInfo*> FindOptional(TensorRole role, int32_t layer) const;

 private:
  Checkpoint() = default;

  std::string path_;
  Format format_ = Format::kHuggingFace;
  ModelConfig config_;
  std::unique_ptr<formats::TensorSource> tensors_;
  std::string hf_prefix_;  // one of the family's ModelFamily::hf_prefixes

 public:
  /// Where the family's tensors live in a Hugging Face checkpoint (ModelFamily::hf_prefixes).
  const std::string& hf_prefix() const { return hf_prefix_; }
};

}  // namespace orca::engine
