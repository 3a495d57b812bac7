#pragma once
/// Writes GGUF version 3 files (what llama.cpp and GgufFile read): typed
/// metadata key/values, the tensor directory, then the tensor data, each
/// tensor 32-byte aligned. Tensor bytes are produced one tensor at a time by
/// a callback, so models larger than memory can be written; the file appears
/// under its name only once complete (written as NAME.tmp.PID, then renamed).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/common/dtype.h"
#include "core/formats/gguf_file.h"

namespace orca::formats {

class GgufWriter {
 public:
  void SetString(const std::string& key, const std::string& value);
  void SetU32(const std::string& key, uint32_t value);
  void SetI32(const std::string& key, int32_t value);
  void SetF32(const std::string& key, float value);
  void SetBool(const std::string& key, bool value);
  void SetStringArray(const std::string& key, const std::vector<std::string>& values);
  void SetI32Array(const std::string& key, const std::vector<int32_t>& values);
  void SetF32Array(const std::string& key, const std::vector<float>& values);
  /// Copies a value read by GgufFile with its original GGUF type.
  void Copy(const std::string& key, const GgufValue& value);
  void Remove(const std::string& key);
  bool Has(const std::string& key) const;

  /// Declares the next tensor: shape outermost first ([out, in] for a linear
  /// weight), its rows a whole number of `dtype` blocks (InvalidArgument otherwise).
  absl::Status AddTensor(const std::string& name, const std::vector<int64_t>& shape, DType dtype);
  /// Bytes tensor `index` must be given.
  size_t TensorBytes(size_t index) const { return tensors_[index].nbytes; }

  /// Produces tensor `index`'s bytes (exactly TensorBytes(index) of them) into `*out`.
  using TensorFiller = std::function<absl::Status(size_t index, std::string* out)>;
  /// Writes the file; `fill` is called once per tensor, in order.
  absl::Status Write(const std::string& path, const TensorFiller& fill) const;

 private:
  struct Entry {
    std::string key;
    std::string encoded;  // type id + value, as in the file
  };
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    DType dtype;
    size_t nbytes;
    uint64_t offset;
  };
  void Put(const std::string& key, std::string encoded);

  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;
};

}  // namespace orca::formats
