#pragma once
/// Read-only access to the tensors of a checkpoint, wherever they live
/// (safetensors files, a GGUF file). Data pointers point into memory-mapped
/// files and stay valid for the lifetime of the source.

#include <cstdint>
#include <string>
#include <vector>

#include "core/common/dtype.h"

namespace orca::formats {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  /// Row-major, outermost first (PyTorch order). A [out, in] Linear weight has shape {out, in}.
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  /// The file it came from, for error messages.
  std::string file;
  /// Non-empty when the tensor exists but Orca cannot use it (e.g. a quantized
  /// or integer dtype); `data` is then null and this says why.
  std::string unsupported;
  /// With `unsupported`: the file's own name of the type ("Q3_K", "IQ4_NL", "I64"), and
  /// `nbytes` its size where the format defines it (else 0), so listings can show it.
  std::string unsupported_type;

  int64_t NumElements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  std::string ShapeString() const;
};

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  /// nullptr when absent.
  virtual const TensorInfo* Find(const std::string& name) const = 0;
  virtual std::vector<std::string> Names() const = 0;
  /// A short description for errors ("model.safetensors", "x.gguf").
  virtual std::string Describe() const = 0;
};

/// What `orca model info` prints of a checkpoint's tensors: one line per tensor with
/// `list_tensors`, then the count and MiB of each type, types Orca cannot load named as the
/// file names them and marked, and a last line naming those types when there are any.
std::string TensorTypeSummary(const TensorSource& tensors, bool list_tensors);

}  // namespace orca::formats
