#include "services/gateway/json_fields.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "services/gateway/api_error.h"

namespace orca::gateway {
namespace {

constexpr size_t kMaxQuotedChars = 40;

std::string FormatNumber(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    return std::to_string(static_cast<int64_t>(v));
  }
  return nlohmann::json(v).dump();
}

}  // namespace

std::string DescribeJsonValue(const RequestJson& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return value.get<bool>() ? "a boolean (true)" : "a boolean (false)";
    case nlohmann::json::value_t::string: {
      std::string s = value.get<std::string>();
      if (s.size() > kMaxQuotedChars) s = s.substr(0, kMaxQuotedChars) + "...";
      return "a string (" + nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + ")";
    }
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
      return "a number (" + value.dump() + ")";
    default:
      return "an unsupported value";
  }
}

absl::Status ReadInteger(const RequestJson& value, const std::string& field, int64_t min, int64_t max,
                         int64_t* out) {
  int64_t v = 0;
  if (value.is_number_integer() && !value.is_number_unsigned()) {
    v = value.get<int64_t>();
  } else if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidFieldError(field, absl::StrCat("'", field, "' must be at most ", max, ", got ", u));
    }
    v = static_cast<int64_t>(u);
  } else if (value.is_number_float()) {
    double d = value.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) {
      return InvalidFieldError(field, absl::StrCat("'", field, "' must be an integer, got ", DescribeJsonValue(value)));
    }
    if (d > static_cast<double>(max)) {
      return InvalidFieldError(field, absl::StrCat("'", field, "' must be at most ", max, ", got ", FormatNumber(d)));
    }
    if (d < static_cast<double>(min)) {
      return InvalidFieldError(field, absl::StrCat("'", field, "' must be at least ", min, ", got ", FormatNumber(d)));
    }
    v = static_cast<int64_t>(d);
  } else {
    return InvalidFieldError(field, absl::StrCat("'", field, "' must be an integer, got ", DescribeJsonValue(value)));
  }
  if (v < min) return InvalidFieldError(field, absl::StrCat("'", field, "' must be at least ", min, ", got ", v));
  if (v > max) return InvalidFieldError(field, absl::StrCat("'", field, "' must be at most ", max, ", got ", v));
  *out = v;
  return absl::OkStatus();
}

JsonFieldReader::JsonFieldReader(const RequestJson& object, std::string prefix)
    : object_(object), prefix_(std::move(prefix)) {}

const RequestJson* JsonFieldReader::Find(const char* name) const {
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string JsonFieldReader::FieldName(const char* name) const { return prefix_ + name; }

absl::Status JsonFieldReader::Int(const char* name, int64_t min, int64_t max, std::optional<int64_t>* out) const {
  const RequestJson* value = Find(name);
  if (value == nullptr) return absl::OkStatus();
  int64_t v = 0;
  absl::Status status = ReadInteger(*value, FieldName(name), min, max, &v);
  if (!status.ok()) return status;
  *out = v;
  return absl::OkStatus();
}

absl::Status JsonFieldReader::Int32(const char* name, int32_t min, int32_t max, int32_t* out) const {
  std::optional<int64_t> v;
  absl::Status status = Int(name, min, max, &v);
  if (status.ok() && v) *out = static_cast<int32_t>(*v);
  return status;
}

absl::Status JsonFieldReader::OptionalInt32(const char* name, int32_t min, int32_t max,
                                            std::optional<int32_t>* out) const {
  std::optional<int64_t> v;
  absl::Status status = Int(name, min, max, &v);
  if (status.ok() && v) *out = static_cast<int32_t>(*v);
  return status;
}

absl::Status JsonFieldReader::Float(const char* name, double min, double max, float* out) const {
  const RequestJson* value = Find(name);
  if (value == nullptr) return absl::OkStatus();
  const std::string field = FieldName(name);
  if (!value->is_number()) {
    return InvalidFieldError(field, absl::StrCat("'", field, "' must be a number, got ", DescribeJsonValue(*value)));
  }
  const double v = value->get<double>();
  if (!(v >= min && v <= max)) {
    return InvalidFieldError(field, absl::StrCat("'", field, "' must be in [", FormatNumber(min), ", ",
                                                 FormatNumber(max), "], got ", FormatNumber(v)));
  }
  *out = static_cast<float>(v);
  return absl::OkStatus();
}

absl::Status JsonFieldReader::Bool(const char* name, bool* out) const {
  const RequestJson* value = Find(name);
  if (value == nullptr) return absl::OkStatus();
  if (!value->is_boolean()) {
    const std::string field = FieldName(name);
    return InvalidFieldError(field, absl::StrCat("'", field, "' must be a boolean, got ", DescribeJsonValue(*value)));
  }
  *out = value->get<bool>();
  return absl::OkStatus();
}

absl::Status JsonFieldReader::String(const char* name, std::string* out) const {
  const RequestJson* value = Find(name);
  if (value == nullptr) return absl::OkStatus();
  if (!value->is_string()) {
    const std::string field = FieldName(name);
    return InvalidFieldError(field, absl::StrCat("'", field, "' must be a string, got ", DescribeJsonValue(*value)));
  }
  *out = value->get<std::string>();
  return absl::OkStatus();
}

}  // namespace orca::gateway
