#pragma once
/// Reader for GGUF (llama.cpp's single-file format, versions 2 and 3).
/// Parses the metadata key/values and the tensor directory; tensor data stays
/// in the memory mapping, never copied. The types of core/common/dtype.h's
/// traits table are supported (F32, F16, BF16 and the block-quantized Q8_0,
/// Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K); other types are reported with a
/// clear error when a tensor of that type is used. Structural damage (rows that are not whole blocks,
/// misaligned or truncated tensor data) fails Open with the tensor named;
/// corrupt block contents are found by FindCorruptBlock when weights load.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "core/common/mapped_file.h"
#include "core/formats/tensor_source.h"

namespace orca::formats {

/// One metadata value. Arrays of scalars are stored flattened by kind; `type`
/// (and `array_type` for arrays) keep the GGUF value type as written, so that
/// a value can be written back unchanged (GgufWriter::Copy).
struct GgufValue {
  using Array = std::variant<std::vector<int64_t>, std::vector<double>, std::vector<std::string>, std::vector<bool>>;
  std::variant<int64_t, uint64_t, double, bool, std::string, Array> value;
  uint32_t type = 0;
  uint32_t array_type = 0;
};

class GgufFile : public TensorSource {
 public:
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);

  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  bool Has(const std::string& key) const { return metadata_.count(key) > 0; }

  /// Typed accessors: NotFound when absent, InvalidArgument on a type mismatch.
  absl::StatusOr<std::string> GetString(const std::string& key) const;
  absl::StatusOr<int64_t> GetInt(const std::string& key) const;
  absl::StatusOr<double> GetFloat(const std::string& key) const;
  absl::StatusOr<bool> GetBool(const std::string& key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(const std::string& key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(const std::string& key) const;
  absl::StatusOr<std::vector<double>> GetFloatArray(const std::string& key) const;

  // TensorSource:
  const TensorInfo* Find(const std::string& name) const override;
  std::vector<std::string> Names() const override;
  std::string Describe() const override { return file_->path(); }

  /// ggml type id of a tensor (for tensors whose type Orca cannot use, dtype is
  /// meaningless and `Find` still reports them so errors can name the type).
  std::optional<uint32_t> GgmlType(const std::string& name) const;
  static std::string GgmlTypeName(uint32_t type);
  /// Values and bytes of one block of a ggml type, as the format defines it; false for ids
  /// that name no type a GGUF file holds.
  static bool GgmlBlockSize(uint32_t type, int64_t* values, int64_t* bytes);
  /// The ggml types Orca loads (the rows of core/common/dtype.h's traits table), for
  /// messages: "F32, F16, BF16, Q8_0, ...".
  static std::string LoadableTypes();

 private:
  explicit GgufFile(std::unique_ptr<MappedFile> file) : file_(std::move(file)) {}
  absl::Status Parse();
  // Checks a tensor's row length, alignment and extent, and sets its data and size.
  absl::Status PlaceTensor(uint64_t offset, size_t data_start, uint64_t alignment, TensorInfo* info) const;

  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, uint32_t> ggml_types_;
  std::vector<std::string> order_;
};

}  // namespace orca::formats
