#include "core/formats/safetensors_file.h"

#include <sys/stat.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"

namespace orca::formats {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

absl::StatusOr<DType> ParseDtype(const std::string& s, const std::string& file, const std::string& tensor) {
  if (s == "F32") return DType::kF32;
  if (s == "F16") return DType::kF16;
  if (s == "BF16") return DType::kBF16;
  return absl::UnimplementedError(
      absl::StrCat(file, ": tensor '", tensor, "' has dtype ", s, "; only F32, F16 and BF16 are supported"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsSource>> SafetensorsSource::Open(const std::string& path) {
  auto src = std::unique_ptr<SafetensorsSource>(new SafetensorsSource());
  if (!IsDirectory(path)) {
    src->describe_ = path;
    ORCA_RETURN_IF_ERROR(src->AddFile(path));
    return src;
  }
  const std::string index = path + "/model.safetensors.index.json";
  const std::string single = path + "/model.safetensors";
  if (Exists(index)) {
    src->describe_ = index;
    ORCA_ASSIGN_OR_RETURN(std::string text, ReadFileToString(index));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      return absl::InvalidArgumentError(absl::StrCat(index, ": expected an object with a 'weight_map'"));
    std::set<std::string> shards;
    for (const auto& [tensor, file] : j["weight_map"].items()) {
      if (!file.is_string())
        return absl::InvalidArgumentError(absl::StrCat(index, ": weight_map['", tensor, "'] is not a file name"));
      std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
        return absl::InvalidArgumentError(absl::StrCat(index, ": shard name '", f, "' must be a plain file name"));
      shards.insert(f);
    }
    for (const auto& f : shards) ORCA_RETURN_IF_ERROR(src->AddFile(path + "/" + f));
    for (const auto& [tensor, file] : j["weight_map"].items())
      if (!src->tensors_.count(tensor))
        return absl::DataLossError(absl::StrCat(index, ": tensor '", tensor, "' is listed for ",
                                                file.get<std::string>(), " but not found there"));
    return src;
  }
  if (Exists(single)) {
    src->describe_ = single;
    ORCA_RETURN_IF_ERROR(src->AddFile(single));
    return src;
  }
  return absl::NotFoundError(absl::StrCat(path, ": no model.safetensors or model.safetensors.index.json"));
}

absl::Status SafetensorsSource::AddFile(const std::string& path) {
  ORCA_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  const uint8_t* base = file->data();
  const size_t size = file->size();
  if (size < 8) return absl::DataLossError(absl::StrCat(path, ": truncated safetensors file (", size, " bytes)"));
  uint64_t header_len;
  std::memcpy(&header_len, base, 8);
  if (header_len > size - 8 || header_len > (100u << 20))
    return absl::DataLossError(
        absl::StrCat(path, ": corrupt safetensors header length ", header_len, " (file is ", size, " bytes)"));
  std::string header(reinterpret_cast<const char*>(base + 8), header_len);
  nlohmann::json j = nlohmann::json::parse(header, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return absl::DataLossError(absl::StrCat(path, ": safetensors header is not a JSON object"));
  const size_t data_start = 8 + header_len;
  const size_t data_size = size - data_start;
  for (const auto& [name, entry] : j.items()) {
    if (name == "__metadata__") continue;
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets") ||
        !entry["dtype"].is_string() || !entry["shape"].is_array() || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2)
      return absl::DataLossError(absl::StrCat(path, ": tensor '", name, "' has a malformed header entry"));
    TensorInfo info;
    info.name = name;
    info.file = path;
    auto dtype = ParseDtype(entry["dtype"].get<std::string>(), path, name);
    if (!dtype.ok()) {
      // Kept with its reason: a model that needs it fails at load with this message.
      info.unsupported = std::string(dtype.status().message());
      info.unsupported_type = entry["dtype"].get<std::string>();
      // Its shape and size for listings, when sound (it is never read).
      for (const auto& d : entry["shape"]) {
        if (!d.is_number_unsigned()) {
          info.shape.clear();
          break;
        }
        info.shape.push_back(d.get<int64_t>());
      }
      const auto& off = entry["data_offsets"];
      if (off[0].is_number_unsigned() && off[1].is_number_unsigned() &&
          off[0].get<uint64_t>() <= off[1].get<uint64_t>() && off[1].get<uint64_t>() <= data_size)
        info.nbytes = off[1].get<uint64_t>() - off[0].get<uint64_t>();
      tensors_[name] = std::move(info);
      continue;
    }
    info.dtype = *dtype;
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned())
        return absl::DataLossError(absl::StrCat(path, ": tensor '", name, "' has a bad shape"));
      info.shape.push_back(d.get<int64_t>());
    }
    const auto& off = entry["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return absl::DataLossError(absl::StrCat(path, ": tensor '", name, "' has bad data_offsets"));
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    const uint64_t expected = static_cast<uint64_t>(info.NumElements()) * DTypeSize(info.dtype);
    if (end < begin || end - begin != expected)
      return absl::DataLossError(absl::StrCat(path, ": tensor '", name, "' ", info.ShapeString(), " ",
                                              DTypeName(info.dtype), " needs ", expected,
                                              " bytes but its data_offsets span ", end - begin));
    if (end > data_size)
      return absl::DataLossError(absl::StrCat(path, ": tensor '", name, "' ends at byte ", end,
                                              " past the end of the data (", data_size,
                                              " bytes): the file is truncated"));
    info.data = base + data_start + begin;
    info.nbytes = expected;
    tensors_[name] = std::move(info);
  }
  files_.push_back(std::move(file));
  return absl::OkStatus();
}

const TensorInfo* SafetensorsSource::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> SafetensorsSource::Names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : tensors_) out.push_back(k);
  return out;
}

}  // namespace orca::formats
