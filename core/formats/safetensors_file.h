#pragma once
/// Reader for Hugging Face safetensors checkpoints: one `model.safetensors` or
/// several shards listed by `model.safetensors.index.json`. Files are
/// memory-mapped; F32, F16 and BF16 tensors are exposed in place.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/common/mapped_file.h"
#include "core/formats/tensor_source.h"

namespace orca::formats {

class SafetensorsSource : public TensorSource {
 public:
  /// Opens a model directory (index or single file) or a single .safetensors file.
  static absl::StatusOr<std::unique_ptr<SafetensorsSource>> Open(const std::string& path);

  const TensorInfo* Find(const std::string& name) const override;
  std::vector<std::string> Names() const override;
  std::string Describe() const override { return describe_; }

 private:
  absl::Status AddFile(const std::string& path);

  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, TensorInfo> tensors_;
  std::string describe_;
};

}  // namespace orca::formats
