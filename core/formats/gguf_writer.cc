#include "core/formats/gguf_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/common/dtype.h"

namespace orca::formats {
namespace {

constexpr uint64_t kAlignment = 32;  // GGUF's default (no general.alignment key written)
enum : uint32_t { kU8 = 0, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64 };

template <typename T>
void Pod(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}
void Str(std::string* out, const std::string& s) {
  Pod(out, static_cast<uint64_t>(s.size()));
  out->append(s);
}

// One scalar of GGUF type `type` from a GgufValue's stored kind.
void EncodeScalar(std::string* out, uint32_t type, int64_t i, double f, bool b) {
  switch (type) {
    case kU8:
      return Pod(out, static_cast<uint8_t>(i));
    case kI8:
      return Pod(out, static_cast<int8_t>(i));
    case kU16:
      return Pod(out, static_cast<uint16_t>(i));
    case kI16:
      return Pod(out, static_cast<int16_t>(i));
    case kU32:
      return Pod(out, static_cast<uint32_t>(i));
    case kI32:
      return Pod(out, static_cast<int32_t>(i));
    case kU64:
      return Pod(out, static_cast<uint64_t>(i));
    case kI64:
      return Pod(out, static_cast<int64_t>(i));
    case kF32:
      return Pod(out, static_cast<float>(f));
    case kF64:
      return Pod(out, f);
    case kBool:
      return Pod(out, static_cast<uint8_t>(b ? 1 : 0));
    default:
      return;
  }
}

}  // namespace

void GgufWriter::Put(const std::string& key, std::string encoded) {
  for (Entry& e : entries_)
    if (e.key == key) {
      e.encoded = std::move(encoded);
      return;
    }
  entries_.push_back({key, std::move(encoded)});
}

void GgufWriter::SetString(const std::string& key, const std::string& value) {
  std::string e;
  Pod(&e, kString);
  Str(&e, value);
  Put(key, std::move(e));
}
void GgufWriter::SetU32(const std::string& key, uint32_t value) {
  std::string e;
  Pod(&e, kU32);
  Pod(&e, value);
  Put(key, std::move(e));
}
void GgufWriter::SetI32(const std::string& key, int32_t value) {
  std::string e;
  Pod(&e, kI32);
  Pod(&e, value);
  Put(key, std::move(e));
}
void GgufWriter::SetF32(const std::string& key, float value) {
  std::string e;
  Pod(&e, kF32);
  Pod(&e, value);
  Put(key, std::move(e));
}
void GgufWriter::SetBool(const std::string& key, bool value) {
  std::string e;
  Pod(&e, kBool);
  Pod(&e, static_cast<uint8_t>(value ? 1 : 0));
  Put(key, std::move(e));
}
void GgufWriter::SetStringArray(const std::string& key, const std::vector<std::string>& values) {
  std::string e;
  Pod(&e, kArray);
  Pod(&e, kString);
  Pod(&e, static_cast<uint64_t>(values.size()));
  for (const auto& v : values) Str(&e, v);
  Put(key, std::move(e));
}
void GgufWriter::SetI32Array(const std::string& key, const std::vector<int32_t>& values) {
  std::string e;
  Pod(&e, kArray);
  Pod(&e, kI32);
  Pod(&e, static_cast<uint64_t>(values.size()));
  for (int32_t v : values) Pod(&e, v);
  Put(key, std::move(e));
}
void GgufWriter::SetF32Array(const std::string& key, const std::vector<float>& values) {
  std::string e;
  Pod(&e, kArray);
  Pod(&e, kF32);
  Pod(&e, static_cast<uint64_t>(values.size()));
  for (float v : values) Pod(&e, v);
  Put(key, std::move(e));
}

void GgufWriter::Copy(const std::string& key, const GgufValue& value) {
  std::string e;
  Pod(&e, value.type);
  if (value.type == kString) {
    Str(&e, std::get<std::string>(value.value));
  } else if (value.type == kArray) {
    Pod(&e, value.array_type);
    const auto& array = std::get<GgufValue::Array>(value.value);
    std::visit(
        [&](const auto& v) {
          Pod(&e, static_cast<uint64_t>(v.size()));
          using V = std::decay_t<decltype(v)>;
          for (const auto& x : v) {
            if constexpr (std::is_same_v<V, std::vector<std::string>>)
              Str(&e, x);
            else if constexpr (std::is_same_v<V, std::vector<double>>)
              EncodeScalar(&e, value.array_type, 0, x, false);
            else if constexpr (std::is_same_v<V, std::vector<bool>>)
              EncodeScalar(&e, value.array_type, 0, 0, x);
            else
              EncodeScalar(&e, value.array_type, x, 0, false);
          }
        },
        array);
  } else {
    int64_t i = 0;
    double f = 0;
    bool b = false;
    if (auto* v = std::get_if<int64_t>(&value.value)) i = *v;
    if (auto* v = std::get_if<uint64_t>(&value.value)) i = static_cast<int64_t>(*v);
    if (auto* v = std::get_if<double>(&value.value)) f = *v;
    if (auto* v = std::get_if<bool>(&value.value)) b = *v;
    EncodeScalar(&e, value.type, i, f, b);
  }
  Put(key, std::move(e));
}

void GgufWriter::Remove(const std::string& key) {
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; }),
                 entries_.end());
}

bool GgufWriter::Has(const std::string& key) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
}

absl::Status GgufWriter::AddTensor(const std::string& name, const std::vector<int64_t>& shape, DType dtype) {
  if (shape.empty() || shape.size() > 4)
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': rank ", shape.size(), " (1 to 4 allowed)"));
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d <= 0) return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': dimension ", d));
    elements *= d;
  }
  const int64_t row = shape.back();
  if (row % DTypeBlockElems(dtype) != 0)
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': rows of ", row, " values are not whole ",
                                                   DTypeName(dtype), " blocks of ", DTypeBlockElems(dtype)));
  Tensor t{name, shape, dtype, static_cast<size_t>(elements / row) * DTypeRowBytes(dtype, row), data_size_};
  data_size_ += (t.nbytes + kAlignment - 1) / kAlignment * kAlignment;
  tensors_.push_back(std::move(t));
  return absl::OkStatus();
}

absl::Status GgufWriter::Write(const std::string& path, const TensorFiller& fill) const {
  std::string header;
  Pod(&header, uint32_t{0x46554747});
  Pod(&header, uint32_t{3});
  Pod(&header, static_cast<uint64_t>(tensors_.size()));
  Pod(&header, static_cast<uint64_t>(entries_.size()));
  for (const Entry& e : entries_) {
    Str(&header, e.key);
    header += e.encoded;
  }
  for (const Tensor& t : tensors_) {
    Str(&header, t.name);
    Pod(&header, static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) Pod(&header, static_cast<uint64_t>(*it));
    Pod(&header, GgmlTypeOf(t.dtype));
    Pod(&header, t.offset);
  }
  header.resize((header.size() + kAlignment - 1) / kAlignment * kAlignment, '\0');

  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return absl::FailedPreconditionError(absl::StrCat(tmp, ": cannot create: ", std::strerror(errno)));
  auto fail = [&](absl::Status s) {
    std::fclose(f);
    std::remove(tmp.c_str());
    return s;
  };
  auto write = [&](const void* p, size_t n) { return n == 0 || std::fwrite(p, 1, n, f) == n; };
  if (!write(header.data(), header.size()))
    return fail(absl::DataLossError(absl::StrCat(tmp, ": write failed: ", std::strerror(errno))));
  std::string bytes;
  const std::string zeros(kAlignment, '\0');
  for (size_t i = 0; i < tensors_.size(); ++i) {
    bytes.clear();
    if (absl::Status s = fill(i, &bytes); !s.ok()) return fail(s);
    if (bytes.size() != tensors_[i].nbytes)
      return fail(absl::InternalError(absl::StrCat("tensor '", tensors_[i].name, "': got ", bytes.size(),
                                                   " bytes, its shape and type need ", tensors_[i].nbytes)));
    const size_t pad = (kAlignment - bytes.size() % kAlignment) % kAlignment;
    if (!write(bytes.data(), bytes.size()) || !write(zeros.data(), pad))
      return fail(absl::DataLossError(absl::StrCat(tmp, ": write failed: ", std::strerror(errno))));
  }
  if (std::fclose(f) != 0) {
    std::remove(tmp.c_str());
    return absl::DataLossError(absl::StrCat(tmp, ": close failed: ", std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::FailedPreconditionError(absl::StrCat(path, ": rename failed: ", std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace orca::formats
