#include "core/text/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/common/json_parse.h"

namespace orca::text::jinja {

const Value* CallArgs::Get(size_t index, std::string_view name) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return index < positional.size() ? &positional[index] : nullptr;
}

const Value* Value::Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Value::Dict::Set(const std::string& key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

Value Value::None() {
  Value v;
  v.type_ = Type::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.type_ = Type::kBool;
  v.b_ = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.type_ = Type::kInt;
  v.i_ = i;
  return v;
}
Value Value::Float(double f) {
  Value v;
  v.type_ = Type::kFloat;
  v.f_ = f;
  return v;
}
Value Value::String(std::string s) {
  Value v;
  v.type_ = Type::kString;
  v.ptr_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::MakeList() { return MakeList(List()); }
Value Value::MakeDict() { return MakeDict(Dict()); }
Value Value::MakeList(List items) {
  Value v;
  v.type_ = Type::kList;
  int32_t deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, item.depth_);
  v.depth_ = deepest + 1;
  v.ptr_ = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::MakeDict(Dict d) {
  Value v;
  v.type_ = Type::kDict;
  int32_t deepest = 0;
  for (const auto& [k, item] : d.items) deepest = std::max(deepest, item.depth_);
  v.depth_ = deepest + 1;
  v.ptr_ = std::make_shared<Dict>(std::move(d));
  return v;
}
Value Value::MakeFunction(Function f) {
  Value v;
  v.type_ = Type::kFunction;
  v.ptr_ = std::make_shared<Function>(std::move(f));
  return v;
}

int64_t Value::AsInt() const {
  switch (type_) {
    case Type::kInt:
      return i_;
    case Type::kFloat:
      // Saturating: a cast of an out-of-range double is undefined behaviour.
      if (std::isnan(f_)) return 0;
      if (f_ >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
      if (f_ <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
      return static_cast<int64_t>(f_);
    case Type::kBool:
      return b_ ? 1 : 0;
    default:
      return 0;
  }
}

double Value::AsFloat() const { return type_ == Type::kFloat ? f_ : static_cast<double>(AsInt()); }

const std::string& Value::str() const {
  static const std::string* const kEmpty = new std::string();
  return type_ == Type::kString ? *static_cast<const std::string*>(ptr_.get()) : *kEmpty;
}

bool Value::Truthy() const {
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone:
      return false;
    case Type::kBool:
      return b_;
    case Type::kInt:
      return i_ != 0;
    case Type::kFloat:
      return f_ != 0;
    case Type::kString:
      return !str().empty();
    case Type::kList:
      return !list().empty();
    case Type::kDict:
      return !dict().items.empty();
    case Type::kFunction:
      return true;
  }
  return false;
}

std::string FloatRepr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), f);
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

void AppendPyQuoted(const std::string& s, std::string* out) {
  const char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  *out += q;
  for (char c : s) {
    if (c == q || c == '\\') {
      *out += '\\';
      *out += c;
    } else if (c == '\n') {
      *out += "\\n";
    } else if (c == '\t') {
      *out += "\\t";
    } else if (c == '\r') {
      *out += "\\r";
    } else {
      *out += c;
    }
  }
  *out += q;
}

void AppendJsonString(const std::string& s, std::string* out) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

std::string Value::ScalarString() const {
  switch (type_) {
    case Type::kUndefined:
      return "";
    case Type::kNone:
      return "None";
    case Type::kBool:
      return b_ ? "True" : "False";
    case Type::kInt:
      return std::to_string(i_);
    case Type::kFloat:
      return FloatRepr(f_);
    case Type::kString:
      return str();
    case Type::kFunction:
      return "<function>";
    case Type::kList:
    case Type::kDict:
      break;
  }
  return "";
}

const char* Value::TypeName() const {
  switch (type_) {
    case Type::kUndefined:
      return "undefined";
    case Type::kNone:
      return "none";
    case Type::kBool:
      return "bool";
    case Type::kInt:
      return "int";
    case Type::kFloat:
      return "float";
    case Type::kString:
      return "string";
    case Type::kList:
      return "list";
    case Type::kDict:
      return dict().is_namespace ? "namespace" : "dict";
    case Type::kFunction:
      return "function";
  }
  return "?";
}

namespace {

using Json = nlohmann::ordered_json;

// Ordered: objects keep the text's key order, as Python dicts do (templates
// `tojson` them back). Recursion is bounded by `max_depth`.
absl::StatusOr<Value> FromJson(const Json& j, int depth, int max_depth) {
  switch (j.type()) {
    case Json::value_t::null:
      return Value::None();
    case Json::value_t::boolean:
      return Value::Bool(j.get<bool>());
    case Json::value_t::number_integer:
      return Value::Int(j.get<int64_t>());
    case Json::value_t::number_unsigned: {
      // Above INT64_MAX: a float, as JavaScript (and @huggingface/jinja) reads it.
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return Value::Float(static_cast<double>(u));
      return Value::Int(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return Value::Float(j.get<double>());
    case Json::value_t::string:
      return Value::String(j.get<std::string>());
    case Json::value_t::array:
    case Json::value_t::object:
      break;
    default:
      return Value();
  }
  if (depth >= max_depth) {
    return absl::InvalidArgumentError(absl::StrCat("value nested deeper than max_value_depth (", max_depth, ")"));
  }
  if (j.is_array()) {
    Value::List items;
    items.reserve(j.size());
    for (const auto& x : j) {
      absl::StatusOr<Value> item = FromJson(x, depth + 1, max_depth);
      if (!item.ok()) return item.status();
      items.push_back(*std::move(item));
    }
    return Value::MakeList(std::move(items));
  }
  Value::Dict d;
  d.items.reserve(j.size());
  for (const auto& [k, v] : j.items()) {
    absl::StatusOr<Value> item = FromJson(v, depth + 1, max_depth);
    if (!item.ok()) return item.status();
    d.items.emplace_back(k, *std::move(item));
  }
  return Value::MakeDict(std::move(d));
}

}  // namespace

absl::StatusOr<std::optional<Value>> ValueFromJsonText(std::string_view text, int max_depth) {
  // The request-safe parser (core/common/json_parse.h): depth-limited while it reads, and
  // linear in the number of keys (nlohmann's ordered_json scans every key per insert: 8.6 s
  // for 50,000). One level more than `max_depth` parses, so FromJson names the limit.
  absl::StatusOr<Json> j = ParseOrderedJson(text, max_depth + 1);
  if (!j.ok()) {
    if (absl::StrContains(j.status().message(), "nesting deeper than"))
      return absl::InvalidArgumentError(absl::StrCat("value nested deeper than max_value_depth (", max_depth, ")"));
    return std::optional<Value>();  // not JSON: the caller keeps the text as a string
  }
  absl::StatusOr<Value> v = FromJson(*j, 0, max_depth);
  if (!v.ok()) return v.status();
  return std::optional<Value>(*std::move(v));
}

}  // namespace orca::text::jinja
