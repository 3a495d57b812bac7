#include "core/formats/gguf_file.h"

#include <cstring>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "core/common/dtype.h"
#include "core/common/status_macros.h"

namespace orca::formats {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kMaxStringBytes = 1ull << 30;
constexpr uint64_t kMaxArrayElements = 1ull << 28;

enum GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// Bounds-checked little-endian cursor over the mapped file.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& path) : data_(data), size_(size), path_(path) {}
  size_t offset() const { return pos_; }
  size_t remaining() const { return pos_ <= size_ ? size_ - pos_ : 0; }
  void Seek(size_t pos) { pos_ = pos; }

  template <typename T>
  absl::Status Read(T* out, const char* what) {
    if (size_ - pos_ < sizeof(T) || pos_ > size_) return Truncated(what);
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }
  absl::Status ReadString(std::string* out, const char* what) {
    uint64_t len = 0;
    ORCA_RETURN_IF_ERROR(Read(&len, what));
    if (len > kMaxStringBytes || len > size_ - pos_) return Truncated(what);
    out->assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return absl::OkStatus();
  }
  absl::Status Truncated(const char* what) const {
    return absl::DataLossError(
        absl::StrCat(path_, ": truncated or corrupt GGUF file while reading ", what, " at byte ", pos_));
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

absl::Status ReadScalar(Cursor& c, uint32_t type, GgufValue* out, const char* what) {
  switch (type) {
    case kU8: {
      uint8_t v = 0;
      ORCA_RETURN_IF_ERROR(c.Read(&v, what));
      out->value = int64_t{v};
      return absl::OkStatus();
    }
    case kI8: {
      int8_t v = 0;
      ORCA_RETURN_IF_ERROR(c.Read(&v, what));
      out->value = int64_t{v};
      return absl::OkStatus();
    }
    case kU16: {
      uint16_t v = 0;
      ORCA_RETURN_IF_ERROR(c.Read(&v, what));
      out->value = int64_t{v};
      return absl::OkStatus();
    }
    case kI16: {
      int16_t v = 0;
      ORCA_RETURN_IF_ERROR(c.Read(&v, what));
      out->value = int64_t{v};
      return absl::OkStatus();
    }
    case kU32: {
      uint32_t v = 0;
      ORCA_RETURN_IF_ERROR(c.Read(&v, what));
      out->value = int64_t{v};
      return absl::OkStatus();
    }
    case kI32: {
      int32_t v = 0;
      ORCA_RETURN_IF_ERROR(c.Read(&v, what));
      out->value = int64_t{v};
      return absl::OkStatus();
    }
    case kU64: {
      uint64_t v = 0;
      ORCA_RETURN_IF_ERROR(c.Read(&v, what));
      out->value = v;
      return absl::OkStatus();
    }
    case kI64: {
      int64_t v = 0;
      ORCA_RETURN_IF_ERROR(c.Read(&v, what));
      out->value = v;
      return absl::OkStatus();
    }
    case kF32: {
      float v = 0;
      ORCA_RETURN_IF_ERROR(c.Read(&v, what));
      out->value = double{v};
      return absl::OkStatus();
    }
    case kF64: {
      double v = 0;
      ORCA_RETURN_IF_ERROR(c.Read(&v, what));
      out->value = v;
      return absl::OkStatus();
    }
    case kBool: {
      uint8_t v = 0;
      ORCA_RETURN_IF_ERROR(c.Read(&v, what));
      out->value = v != 0;
      return absl::OkStatus();
    }
    case kString: {
      std::string s;
      ORCA_RETURN_IF_ERROR(c.ReadString(&s, what));
      out->value = std::move(s);
      return absl::OkStatus();
    }
    default:
      return absl::DataLossError(absl::StrCat("unknown GGUF value type ", type, " for ", what));
  }
}

absl::Status ReadValue(Cursor& c, uint32_t type, GgufValue* out, const char* what) {
  out->type = type;
  if (type != kArray) return ReadScalar(c, type, out, what);
  uint32_t elem_type = 0;
  uint64_t count = 0;
  ORCA_RETURN_IF_ERROR(c.Read(&elem_type, what));
  out->array_type = elem_type;
  ORCA_RETURN_IF_ERROR(c.Read(&count, what));
  if (count > kMaxArrayElements) return c.Truncated(what);
  // Every element takes at least this many bytes of the file (a string its length), so a
  // count the rest of the file cannot hold is refused before anything is allocated for it.
  const size_t min_element_bytes = elem_type == kString                                          ? 8
                                   : elem_type == kU8 || elem_type == kI8 || elem_type == kBool  ? 1
                                   : elem_type == kU16 || elem_type == kI16                      ? 2
                                   : elem_type == kU32 || elem_type == kI32 || elem_type == kF32 ? 4
                                                                                                 : 8;
  if (count > c.remaining() / min_element_bytes) return c.Truncated(what);
  GgufValue::Array array;
  switch (elem_type) {
    case kString: {
      std::vector<std::string> v(count);
      for (auto& s : v) ORCA_RETURN_IF_ERROR(c.ReadString(&s, what));
      array = std::move(v);
      break;
    }
    case kF32:
    case kF64: {
      std::vector<double> v;
      v.reserve(count);
      for (uint64_t i = 0; i < count; ++i) {
        GgufValue e;
        ORCA_RETURN_IF_ERROR(ReadScalar(c, elem_type, &e, what));
        v.push_back(std::get<double>(e.value));
      }
      array = std::move(v);
      break;
    }
    case kBool: {
      std::vector<bool> v;
      v.reserve(count);
      for (uint64_t i = 0; i < count; ++i) {
        uint8_t b = 0;
        ORCA_RETURN_IF_ERROR(c.Read(&b, what));
        v.push_back(b != 0);
      }
      array = std::move(v);
      break;
    }
    case kU8:
    case kI8:
    case kU16:
    case kI16:
    case kU32:
    case kI32:
    case kU64:
    case kI64: {
      std::vector<int64_t> v;
      v.reserve(count);
      for (uint64_t i = 0; i < count; ++i) {
        GgufValue e;
        ORCA_RETURN_IF_ERROR(ReadScalar(c, elem_type, &e, what));
        if (auto* u = std::get_if<uint64_t>(&e.value))
          v.push_back(static_cast<int64_t>(*u));
        else
          v.push_back(std::get<int64_t>(e.value));
      }
      array = std::move(v);
      break;
    }
    default:
      return absl::DataLossError(absl::StrCat("unsupported GGUF array element type ", elem_type, " for ", what));
  }
  out->value = std::move(array);
  return absl::OkStatus();
}

// Every ggml type a GGUF file may hold, by id: its name and the values and bytes of one
// block as the format defines them (GgufFileTest checks them against Orca's own for the
// types it loads). 0 for the ids ggml retired: Q4_2, Q4_3, and the repacked Q4_0_4_4 ..
// Q4_0_8_8 and IQ4_NL_4_4 .. IQ4_NL_8_8 layouts that GGUF files no longer carry.
struct GgmlTypeTraits {
  const char* name;
  int64_t block_values;
  int64_t block_bytes;
};
constexpr GgmlTypeTraits kGgmlTypes[] = {
    {"F32", 1, 4},      {"F16", 1, 2},        {"Q4_0", 32, 18},     {"Q4_1", 32, 20},     {"Q4_2", 0, 0},
    {"Q4_3", 0, 0},     {"Q5_0", 32, 22},     {"Q5_1", 32, 24},     {"Q8_0", 32, 34},     {"Q8_1", 32, 36},
    {"Q2_K", 256, 84},  {"Q3_K", 256, 110},   {"Q4_K", 256, 144},   {"Q5_K", 256, 176},   {"Q6_K", 256, 210},
    {"Q8_K", 256, 292}, {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74},  {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50},
    {"IQ4_NL", 32, 18}, {"IQ3_S", 256, 110},  {"IQ2_S", 256, 82},   {"IQ4_XS", 256, 136}, {"I8", 1, 1},
    {"I16", 1, 2},      {"I32", 1, 4},        {"I64", 1, 8},        {"F64", 1, 8},        {"IQ1_M", 256, 56},
    {"BF16", 1, 2},     {"Q4_0_4_4", 0, 0},   {"Q4_0_4_8", 0, 0},   {"Q4_0_8_8", 0, 0},   {"TQ1_0", 256, 54},
    {"TQ2_0", 256, 66}, {"IQ4_NL_4_4", 0, 0}, {"IQ4_NL_4_8", 0, 0}, {"IQ4_NL_8_8", 0, 0}, {"MXFP4", 32, 17},
};

}  // namespace

std::string GgufFile::GgmlTypeName(uint32_t type) {
  if (type < std::size(kGgmlTypes)) return kGgmlTypes[type].name;
  return absl::StrCat("type#", type);
}

bool GgufFile::GgmlBlockSize(uint32_t type, int64_t* values, int64_t* bytes) {
  if (type >= std::size(kGgmlTypes) || kGgmlTypes[type].block_values == 0) return false;
  *values = kGgmlTypes[type].block_values;
  *bytes = kGgmlTypes[type].block_bytes;
  return true;
}

std::string GgufFile::LoadableTypes() {
  std::string out;
  for (const DTypeTraits& row : kDTypeTraits)
    absl::StrAppend(&out, out.empty() ? "" : ", ", GgmlTypeName(row.ggml_type));
  return out;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  ORCA_ASSIGN_OR_RETURN(auto mapped, MappedFile::Open(path));
  std::unique_ptr<GgufFile> file(new GgufFile(std::move(mapped)));
  ORCA_RETURN_IF_ERROR(file->Parse());
  return file;
}

absl::Status GgufFile::Parse() {
  const std::string& path = file_->path();
  Cursor c(file_->data(), file_->size(), path);
  uint32_t magic = 0;
  ORCA_RETURN_IF_ERROR(c.Read(&magic, "magic"));
  if (magic != kGgufMagic) return absl::InvalidArgumentError(absl::StrCat(path, ": not a GGUF file (bad magic)"));
  ORCA_RETURN_IF_ERROR(c.Read(&version_, "version"));
  if (version_ < 2 || version_ > 3)
    return absl::InvalidArgumentError(absl::StrCat(path, ": unsupported GGUF version ", version_, " (2 and 3 are)"));
  uint64_t tensor_count = 0, kv_count = 0;
  ORCA_RETURN_IF_ERROR(c.Read(&tensor_count, "tensor count"));
  ORCA_RETURN_IF_ERROR(c.Read(&kv_count, "metadata count"));
  if (tensor_count > (1u << 20) || kv_count > (1u << 20)) return c.Truncated("header counts");
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key;
    ORCA_RETURN_IF_ERROR(c.ReadString(&key, "metadata key"));
    uint32_t type = 0;
    ORCA_RETURN_IF_ERROR(c.Read(&type, "metadata type"));
    GgufValue value;
    ORCA_RETURN_IF_ERROR(
        Annotate(ReadValue(c, type, &value, "metadata value"), absl::StrCat(path, ": key '", key, "'")));
    metadata_[key] = std::move(value);
  }
  struct Pending {
    std::string name;
    std::vector<int64_t> shape;
    uint32_t type = 0;
    uint64_t offset;
  };
  std::vector<Pending> pending;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    Pending t;
    ORCA_RETURN_IF_ERROR(c.ReadString(&t.name, "tensor name"));
    uint32_t n_dims = 0;
    ORCA_RETURN_IF_ERROR(c.Read(&n_dims, "tensor rank"));
    if (n_dims == 0 || n_dims > 4)
      return absl::DataLossError(absl::StrCat(path, ": tensor '", t.name, "' has invalid rank ", n_dims));
    std::vector<int64_t> ne(n_dims);
    for (auto& d : ne) {
      uint64_t v = 0;
      ORCA_RETURN_IF_ERROR(c.Read(&v, "tensor dims"));
      if (v == 0 || v > (1ull << 40))
        return absl::DataLossError(absl::StrCat(path, ": tensor '", t.name, "' has invalid dimension ", v));
      d = static_cast<int64_t>(v);
    }
    t.shape.assign(ne.rbegin(), ne.rend());  // ggml ne[0] is innermost
    double elements = 1;
    for (int64_t d : ne) elements *= static_cast<double>(d);
    if (elements > 1e15)
      return absl::DataLossError(absl::StrCat(path, ": tensor '", t.name, "' has ", elements, " elements"));
    ORCA_RETURN_IF_ERROR(c.Read(&t.type, "tensor type"));
    ORCA_RETURN_IF_ERROR(c.Read(&t.offset, "tensor offset"));
    pending.push_back(std::move(t));
  }
  uint64_t alignment = 32;
  if (auto it = metadata_.find("general.alignment"); it != metadata_.end()) {
    auto* v = std::get_if<int64_t>(&it->second.value);
    if (v == nullptr || *v <= 0 || (*v & (*v - 1)) != 0 || *v > (1 << 20))
      return absl::DataLossError(absl::StrCat(path, ": general.alignment must be a power of two up to 1 MiB"));
    alignment = static_cast<uint64_t>(*v);
  }
  size_t data_start = (c.offset() + alignment - 1) / alignment * alignment;
  for (auto& t : pending) {
    TensorInfo info;
    info.name = t.name;
    info.shape = t.shape;
    info.file = path;
    ggml_types_[t.name] = t.type;
    if (DTypeFromGgml(t.type, &info.dtype)) {
      ORCA_RETURN_IF_ERROR(PlaceTensor(t.offset, data_start, alignment, &info));
    } else {
      info.unsupported = absl::StrCat(path, ": tensor '", t.name, "' has GGML type ", GgmlTypeName(t.type),
                                      "; supported: ", LoadableTypes());
      info.unsupported_type = GgmlTypeName(t.type);
      // Its size, for listings, when the type defines whole blocks of the row and the data fits.
      int64_t block_values = 0, block_bytes = 0;
      if (GgmlBlockSize(t.type, &block_values, &block_bytes) && !info.shape.empty() &&
          info.shape.back() % block_values == 0) {
        const uint64_t bytes =
            static_cast<uint64_t>(info.NumElements() / block_values) * static_cast<uint64_t>(block_bytes);
        const uint64_t size = file_->size();
        if (data_start <= size && t.offset <= size - data_start && bytes <= size - data_start - t.offset)
          info.nbytes = static_cast<size_t>(bytes);
      }
    }
    order_.push_back(t.name);
    tensors_[t.name] = std::move(info);
  }
  return absl::OkStatus();
}

absl::Status GgufFile::PlaceTensor(uint64_t offset, size_t data_start, uint64_t alignment, TensorInfo* info) const {
  const std::string& path = file_->path();
  const int64_t row = info->shape.back(), block = DTypeBlockElems(info->dtype);
  const std::string what =
      absl::StrCat("tensor '", info->name, "' (", info->ShapeString(), " ", DTypeName(info->dtype), ")");
  if (row % block != 0)
    return absl::DataLossError(absl::StrCat(path, ": ", what, " has rows of ", row, " values, not a multiple of the ",
                                            block, "-value ", DTypeName(info->dtype), " block"));
  if (offset % alignment != 0)
    return absl::DataLossError(absl::StrCat(path, ": ", what, " starts at data offset ", offset,
                                            ", not a multiple of the alignment ", alignment));
  info->nbytes = static_cast<size_t>(info->NumElements() / row) * DTypeRowBytes(info->dtype, row);
  const size_t size = file_->size();
  if (data_start > size || offset > size - data_start || info->nbytes > size - data_start - offset) {
    // Said without wrapping: an offset near 2^64 has no meaningful end.
    const bool wraps = offset > UINT64_MAX - data_start || info->nbytes > UINT64_MAX - data_start - offset;
    const uint64_t end = wraps ? 0 : data_start + offset + info->nbytes;
    const std::string needs =
        wraps ? "an offset out of range" : absl::StrCat("bytes [", data_start + offset, ", ", end, ")");
    return absl::DataLossError(absl::StrCat(
        path, ": ", what, " at data offset ", offset, " extends past the end of the file: it needs ", needs,
        " but the file has ", size, " bytes", wraps ? "" : absl::StrCat(" (truncated by ", end - size, ")")));
  }
  info->data = file_->data() + data_start + offset;
  return absl::OkStatus();
}

const TensorInfo* GgufFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> GgufFile::Names() const { return order_; }

std::optional<uint32_t> GgufFile::GgmlType(const std::string& name) const {
  auto it = ggml_types_.find(name);
  if (it == ggml_types_.end()) return std::nullopt;
  return it->second;
}

namespace {
absl::Status Missing(const std::string& path, const std::string& key) {
  return absl::NotFoundError(absl::StrCat(path, ": metadata key '", key, "' is missing"));
}
absl::Status WrongType(const std::string& path, const std::string& key, const char* want) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": metadata key '", key, "' is not ", want));
}
}  // namespace

absl::StatusOr<std::string> GgufFile::GetString(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return Missing(file_->path(), key);
  if (auto* v = std::get_if<std::string>(&it->second.value)) return *v;
  return WrongType(file_->path(), key, "a string");
}

absl::StatusOr<int64_t> GgufFile::GetInt(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return Missing(file_->path(), key);
  if (auto* v = std::get_if<int64_t>(&it->second.value)) return *v;
  if (auto* v = std::get_if<uint64_t>(&it->second.value)) return static_cast<int64_t>(*v);
  return WrongType(file_->path(), key, "an integer");
}

absl::StatusOr<double> GgufFile::GetFloat(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return Missing(file_->path(), key);
  if (auto* v = std::get_if<double>(&it->second.value)) return *v;
  if (auto* v = std::get_if<int64_t>(&it->second.value)) return static_cast<double>(*v);
  return WrongType(file_->path(), key, "a number");
}

absl::StatusOr<bool> GgufFile::GetBool(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return Missing(file_->path(), key);
  if (auto* v = std::get_if<bool>(&it->second.value)) return *v;
  return WrongType(file_->path(), key, "a bool");
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return Missing(file_->path(), key);
  if (auto* a = std::get_if<GgufValue::Array>(&it->second.value))
    if (auto* v = std::get_if<std::vector<std::string>>(a)) return *v;
  return WrongType(file_->path(), key, "an array of strings");
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return Missing(file_->path(), key);
  if (auto* a = std::get_if<GgufValue::Array>(&it->second.value))
    if (auto* v = std::get_if<std::vector<int64_t>>(a)) return *v;
  return WrongType(file_->path(), key, "an array of integers");
}

absl::StatusOr<std::vector<double>> GgufFile::GetFloatArray(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return Missing(file_->path(), key);
  if (auto* a = std::get_if<GgufValue::Array>(&it->second.value))
    if (auto* v = std::get_if<std::vector<double>>(a)) return *v;
  return WrongType(file_->path(), key, "an array of numbers");
}

}  // namespace orca::formats
