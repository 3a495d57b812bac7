#include "core/text/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

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
  v.s_ = std::move(s);
  return v;
}
Value Value::MakeList() { return MakeList(List()); }
Value Value::MakeDict() { return MakeDict(Dict()); }
Value Value::MakeList(List items) {
  Value v;
  v.type_ = Type::kList;
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::MakeDict(Dict d) {
  Value v;
  v.type_ = Type::kDict;
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}
Value Value::MakeFunction(Function f) {
  Value v;
  v.type_ = Type::kFunction;
  v.fn_ = std::make_shared<Function>(std::move(f));
  return v;
}

int64_t Value::AsInt() const {
  switch (type_) {
    case Type::kInt:
      return i_;
    case Type::kFloat:
      return static_cast<int64_t>(f_);
    case Type::kBool:
      return b_ ? 1 : 0;
    default:
      return 0;
  }
}

double Value::AsFloat() const { return type_ == Type::kFloat ? f_ : static_cast<double>(AsInt()); }

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
      return !s_.empty();
    case Type::kList:
      return !list_->empty();
    case Type::kDict:
      return !dict_->items.empty();
    case Type::kFunction:
      return true;
  }
  return false;
}

namespace {

std::string FloatRepr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), f);
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string PyQuote(const std::string& s) {
  const char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out + q;
}

void JsonString(const std::string& s, std::string* out) {
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

}  // namespace

std::string Value::ToString() const {
  switch (type_) {
    case Type::kUndefined:
      return "";
    case Type::kString:
      return s_;
    default:
      return Repr();
  }
}

std::string Value::Repr() const {
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
      return PyQuote(s_);
    case Type::kList: {
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].Repr();
      return out + "]";
    }
    case Type::kDict: {
      std::string out = "{";
      for (size_t i = 0; i < dict_->items.size(); ++i) {
        out += (i ? ", " : "") + PyQuote(dict_->items[i].first) + ": " + dict_->items[i].second.Repr();
      }
      return out + "}";
    }
    case Type::kFunction:
      return "<function>";
  }
  return "";
}

std::string Value::ToJson(int indent, int depth) const {
  std::string out;
  const std::string pad = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * (depth + 1)), ' ') : "";
  const std::string end_pad = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * depth), ' ') : "";
  const char* sep = indent >= 0 ? "," : ", ";
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone:
      return "null";
    case Type::kBool:
      return b_ ? "true" : "false";
    case Type::kInt:
      return std::to_string(i_);
    case Type::kFloat:
      return FloatRepr(f_);
    case Type::kString:
      JsonString(s_, &out);
      return out;
    case Type::kList:
      if (list_->empty()) return "[]";
      out = "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? sep : "") + pad + (*list_)[i].ToJson(indent, depth + 1);
      return out + end_pad + "]";
    case Type::kDict:
      if (dict_->items.empty()) return "{}";
      out = "{";
      for (size_t i = 0; i < dict_->items.size(); ++i) {
        out += (i ? sep : "") + pad;
        JsonString(dict_->items[i].first, &out);
        out += ": " + dict_->items[i].second.ToJson(indent, depth + 1);
      }
      return out + end_pad + "}";
    case Type::kFunction:
      return "null";
  }
  return "null";
}

bool Value::Equals(const Value& o) const {
  if (IsNumber() && o.IsNumber()) {
    if (type_ == Type::kFloat || o.type_ == Type::kFloat) return AsFloat() == o.AsFloat();
    return AsInt() == o.AsInt();
  }
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone:
      return true;
    case Type::kString:
      return s_ == o.s_;
    case Type::kList:
      if (list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i) {
        if (!(*list_)[i].Equals((*o.list_)[i])) return false;
      }
      return true;
    case Type::kDict:
      if (dict_->items.size() != o.dict_->items.size()) return false;
      for (const auto& [k, v] : dict_->items) {
        const Value* ov = o.dict_->Find(k);
        if (ov == nullptr || !v.Equals(*ov)) return false;
      }
      return true;
    case Type::kFunction:
      return fn_ == o.fn_;
    default:
      return false;
  }
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
      return dict_->is_namespace ? "namespace" : "dict";
    case Type::kFunction:
      return "function";
  }
  return "?";
}

namespace {
// Ordered: objects keep the text's key order, as Python dicts do (templates `tojson` them back).
Value FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value::Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float:
      return Value::Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::String(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Value::List items;
      for (const auto& x : j) items.push_back(FromJson(x));
      return Value::MakeList(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value::Dict d;
      for (const auto& [k, v] : j.items()) d.items.emplace_back(k, FromJson(v));
      return Value::MakeDict(std::move(d));
    }
    default:
      return Value();
  }
}
}  // namespace

Value ValueFromJsonText(std::string_view text, bool* ok) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr, false);
  *ok = !j.is_discarded();
  return *ok ? FromJson(j) : Value();
}

}  // namespace orca::text::jinja
