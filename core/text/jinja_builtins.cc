// Jinja filters, tests and the Python methods of str / list / dict that chat
// templates call, with Python's semantics.

#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/text/jinja_interpreter.h"
#include "core/text/unicode.h"

namespace orca::text::jinja {
namespace {

absl::Status TypeError(std::string_view what, const Value& v) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(what), " (got ", v.TypeName(), ")"));
}

std::string CaseMap(const std::string& s, bool upper) {
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(s);
  if (upper) {
    u.toUpper();
  } else {
    u.toLower();
  }
  std::string out;
  u.toUTF8String(out);
  return out;
}

// Python str.title(): uppercase a cased character after an uncased one.
std::string Title(const std::string& s, bool first_only) {
  std::string out;
  bool prev_cased = false;
  bool seen_first = false;
  for (char32_t c : DecodeUtf8(s)) {
    const bool cased = u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED) != 0;
    std::string one = EncodeUtf8(c);
    if (first_only) {
      out += CaseMap(one, !seen_first);
      seen_first = true;
      continue;
    }
    out += cased ? (prev_cased ? CaseMap(one, false)
                               : EncodeUtf8(static_cast<char32_t>(u_totitle(static_cast<UChar32>(c)))))
                 : one;
    prev_cased = cased;
  }
  return out;
}

bool IsPySpace(char32_t c) { return IsWhiteSpace(c) || (c >= 0x1C && c <= 0x1F); }

std::string Indent(const std::string& s, const std::string& pad, bool first, bool blank) {
  std::string out;
  size_t start = 0;
  bool is_first = true;
  while (start <= s.size()) {
    size_t nl = s.find('\n', start);
    std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if ((!is_first || first) && (blank || !line.empty())) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
    is_first = false;
  }
  return out;
}

std::vector<std::string> Split(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep == nullptr || sep->IsNone()) {
    std::vector<size_t> offsets;
    std::vector<char32_t> cps = DecodeUtf8(s, &offsets);
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && IsPySpace(cps[i])) ++i;
      if (i >= cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = cps.size();
        while (e > i && IsPySpace(cps[e - 1])) --e;
        parts.push_back(s.substr(offsets[i], offsets[e] - offsets[i]));
        break;
      }
      size_t j = i;
      while (j < cps.size() && !IsPySpace(cps[j])) ++j;
      parts.push_back(s.substr(offsets[i], offsets[j] - offsets[i]));
      i = j;
    }
    return parts;
  }
  const std::string& d = sep->str();
  size_t start = 0;
  while (true) {
    size_t pos =
        (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) ? std::string::npos : s.find(d, start);
    if (pos == std::string::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, pos - start));
    start = pos + d.size();
  }
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;
  std::string out;
  size_t start = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    size_t pos = s.find(from, start);
    if (pos == std::string::npos) break;
    out.append(s, start, pos - start);
    out += to;
    start = pos + from.size();
  }
  out.append(s, start, std::string::npos);
  return out;
}

bool AffixMatch(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const std::string& a) {
    return a.size() <= s.size() && s.compare(prefix ? 0 : s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.IsList()) {
    for (const Value& v : affix.list()) {
      if (v.IsString() && one(v.str())) return true;
    }
    return false;
  }
  return affix.IsString() && one(affix.str());
}

absl::StatusOr<Value> StringMethod(const Value& target, std::string_view name, const CallArgs& a) {
  const std::string& s = target.str();
  if (name == "strip") return Value::String(PyStrip(s, a.Get(0, "chars"), 0));
  if (name == "lstrip") return Value::String(PyStrip(s, a.Get(0, "chars"), 1));
  if (name == "rstrip") return Value::String(PyStrip(s, a.Get(0, "chars"), 2));
  if (name == "upper") return Value::String(CaseMap(s, true));
  if (name == "lower") return Value::String(CaseMap(s, false));
  if (name == "title") return Value::String(Title(s, false));
  if (name == "capitalize") return Value::String(Title(CaseMap(s, false), true));
  if (name == "startswith" || name == "endswith") {
    const Value* affix = a.Get(0, "prefix");
    if (affix == nullptr) return absl::InvalidArgumentError(std::string(name) + "() needs an argument");
    return Value::Bool(AffixMatch(s, *affix, name == "startswith"));
  }
  if (name == "split") {
    const Value* maxsplit = a.Get(1, "maxsplit");
    Value::List items;
    for (std::string& p : Split(s, a.Get(0, "sep"), maxsplit ? maxsplit->AsInt() : -1)) {
      items.push_back(Value::String(std::move(p)));
    }
    return Value::MakeList(std::move(items));
  }
  if (name == "replace") {
    const Value* from = a.Get(0, "old");
    const Value* to = a.Get(1, "new");
    const Value* count = a.Get(2, "count");
    if (from == nullptr || to == nullptr) return absl::InvalidArgumentError("replace() needs 2 arguments");
    return Value::String(Replace(s, from->ToString(), to->ToString(), count ? count->AsInt() : -1));
  }
  if (name == "find" || name == "count") {
    const Value* sub = a.Get(0, "sub");
    if (sub == nullptr || !sub->IsString()) return absl::InvalidArgumentError(std::string(name) + "() needs a string");
    if (name == "find") {
      size_t pos = s.find(sub->str());
      return Value::Int(pos == std::string::npos ? -1 : static_cast<int64_t>(DecodeUtf8(s.substr(0, pos)).size()));
    }
    int64_t n = 0;
    for (size_t pos = s.find(sub->str()); pos != std::string::npos && !sub->str().empty();
         pos = s.find(sub->str(), pos + sub->str().size())) {
      ++n;
    }
    return Value::Int(n);
  }
  if (name == "join") {
    const Value* items = a.Get(0, "iterable");
    if (items == nullptr) return absl::InvalidArgumentError("join() needs an iterable");
    ORCA_ASSIGN_OR_RETURN(std::vector<Value> parts, Iterate(*items));
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) out += (i ? s : "") + parts[i].ToString();
    return Value::String(std::move(out));
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha") {
    std::vector<char32_t> cps = DecodeUtf8(s);
    bool all = !cps.empty();
    for (char32_t c : cps) {
      if (name == "isdigit") all = all && (GeneralCategoryMask(c) & U_GC_ND_MASK);
      if (name == "isspace") all = all && IsPySpace(c);
      if (name == "isalpha") all = all && IsLetter(c);
    }
    return Value::Bool(all);
  }
  return absl::NotFoundError("no such method");
}

absl::StatusOr<Value> ItemsOf(const Value& v) {
  if (!v.IsDict()) return TypeError("items() needs a mapping", v);
  Value::List items;
  for (const auto& [k, val] : v.dict().items) items.push_back(Value::MakeList({Value::String(k), val}));
  return Value::MakeList(std::move(items));
}

Value GetAttr(const Value& item, const std::string& attr) {
  Value cur = item;
  size_t start = 0;
  while (true) {  // dotted attributes: "function.name"
    size_t dot = attr.find('.', start);
    std::string part = attr.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur.IsDict()) return Value();
    const Value* v = cur.dict().Find(part);
    if (v == nullptr) return Value();
    cur = *v;
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

absl::StatusOr<Value> SelectAttr(const Value& target, const CallArgs& a, bool reject) {
  ORCA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(target));
  if (a.positional.empty() || !a.positional[0].IsString()) {
    return absl::InvalidArgumentError("selectattr/rejectattr need an attribute name");
  }
  CallArgs test_args;
  for (size_t i = 2; i < a.positional.size(); ++i) test_args.positional.push_back(a.positional[i]);
  Value::List out;
  for (const Value& item : items) {
    Value v = GetAttr(item, a.positional[0].str());
    bool ok = v.Truthy();
    if (a.positional.size() >= 2) {
      ORCA_ASSIGN_OR_RETURN(ok, ApplyTest(a.positional[1].ToString(), v, test_args));
    }
    if (ok != reject) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> Map(const Value& target, const CallArgs& a) {
  ORCA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(target));
  Value::List out;
  if (const Value* attr = a.Get(99, "attribute"); attr != nullptr) {
    const Value* def = a.Get(99, "default");
    for (const Value& item : items) {
      Value v = GetAttr(item, attr->ToString());
      out.push_back(v.IsUndefined() && def != nullptr ? *def : v);
    }
    return Value::MakeList(std::move(out));
  }
  if (a.positional.empty()) return absl::InvalidArgumentError("map() needs a filter name or attribute=");
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  for (const Value& item : items) {
    ORCA_ASSIGN_OR_RETURN(Value v, ApplyFilter(a.positional[0].ToString(), item, rest));
    out.push_back(std::move(v));
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> ToNumber(const Value& v, bool to_float, const Value* def) {
  if (v.IsNumber()) return to_float ? Value::Float(v.AsFloat()) : Value::Int(v.AsInt());
  if (v.IsString()) {
    std::string s = PyStrip(v.str(), nullptr, 0);
    char* end = nullptr;
    if (!to_float) {
      long long i = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && *end == '\0') return Value::Int(i);
    }
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return to_float ? Value::Float(d) : Value::Int(static_cast<int64_t>(d));
  }
  if (def != nullptr) return *def;
  return to_float ? Value::Float(0) : Value::Int(0);
}

}  // namespace

std::string PyStrip(const std::string& s, const Value* chars, int mode) {
  std::vector<size_t> offsets;
  std::vector<char32_t> cps = DecodeUtf8(s, &offsets);
  std::vector<char32_t> set;
  const bool whitespace = chars == nullptr || chars->IsNone() || chars->IsUndefined();
  if (!whitespace) set = DecodeUtf8(chars->ToString());
  auto strip = [&](char32_t c) {
    return whitespace ? IsPySpace(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (mode != 2)
    while (b < e && strip(cps[b])) ++b;
  if (mode != 1)
    while (e > b && strip(cps[e - 1])) --e;
  return s.substr(offsets[b], offsets[e] - offsets[b]);
}

absl::StatusOr<std::vector<Value>> Iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.type()) {
    case Value::Type::kList:
      return v.list();
    case Value::Type::kDict:
      for (const auto& [k, val] : v.dict().items) out.push_back(Value::String(k));
      return out;
    case Value::Type::kString:
      for (char32_t c : DecodeUtf8(v.str())) out.push_back(Value::String(EncodeUtf8(c)));
      return out;
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return out;
    default:
      return TypeError("value is not iterable", v);
  }
}

absl::StatusOr<int> Compare(const Value& a, const Value& b) {
  if (a.IsNumber() && b.IsNumber()) {
    double x = a.AsFloat(), y = b.AsFloat();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.IsString() && b.IsString()) return a.str() < b.str() ? -1 : (a.str() > b.str() ? 1 : 0);
  return absl::InvalidArgumentError(absl::StrCat("cannot compare ", a.TypeName(), " with ", b.TypeName()));
}

absl::StatusOr<Value> CallMethod(const Value& target, std::string_view name, const CallArgs& a) {
  if (target.IsString()) return StringMethod(target, name, a);
  if (target.IsDict() && !target.dict().is_namespace) {
    if (name == "items") return ItemsOf(target);
    if (name == "keys" || name == "values") {
      Value::List out;
      for (const auto& [k, v] : target.dict().items) out.push_back(name == "keys" ? Value::String(k) : v);
      return Value::MakeList(std::move(out));
    }
    if (name == "get") {
      const Value* key = a.Get(0, "key");
      if (key == nullptr) return absl::InvalidArgumentError("get() needs a key");
      const Value* v = target.dict().Find(key->ToString());
      if (v != nullptr) return *v;
      const Value* def = a.Get(1, "default");
      return def != nullptr ? *def : Value::None();
    }
  }
  if (target.IsList()) {
    if (name == "append") {
      if (a.positional.size() != 1) return absl::InvalidArgumentError("append() takes one argument");
      target.list().push_back(a.positional[0]);
      return Value::None();
    }
    if (name == "index") {
      for (size_t i = 0; i < target.list().size(); ++i) {
        if (!a.positional.empty() && target.list()[i].Equals(a.positional[0]))
          return Value::Int(static_cast<int64_t>(i));
      }
      return absl::InvalidArgumentError("list.index(x): x not in list");
    }
  }
  return absl::NotFoundError("no such method");
}

absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& v, const CallArgs& a) {
  const Value* arg = a.Get(0, "value");
  using T = Value::Type;
  if (name == "defined") return !v.IsUndefined();
  if (name == "undefined") return v.IsUndefined();
  if (name == "none") return v.IsNone();
  if (name == "string") return v.IsString();
  if (name == "number") return v.type() == T::kInt || v.type() == T::kFloat;
  if (name == "integer") return v.type() == T::kInt;
  if (name == "float") return v.type() == T::kFloat;
  if (name == "boolean") return v.type() == T::kBool;
  if (name == "true") return v.type() == T::kBool && v.AsBool();
  if (name == "false") return v.type() == T::kBool && !v.AsBool();
  if (name == "mapping") return v.IsDict();
  if (name == "iterable") return v.IsList() || v.IsDict() || v.IsString();
  if (name == "sequence") return v.IsList() || v.IsString() || v.IsDict();
  if (name == "callable") return v.type() == T::kFunction;
  if (name == "lower") return v.IsString() && CaseMap(v.str(), false) == v.str();
  if (name == "upper") return v.IsString() && CaseMap(v.str(), true) == v.str();
  if (name == "even" || name == "odd") {
    if (v.type() != T::kInt) return TypeError(std::string(name) + " test needs an integer", v);
    return (v.AsInt() % 2 == 0) == (name == "even");
  }
  if (name == "divisibleby") {
    if (arg == nullptr || arg->AsInt() == 0) return absl::InvalidArgumentError("divisibleby needs a non-zero number");
    return v.AsInt() % arg->AsInt() == 0;
  }
  if (arg == nullptr && (name == "eq" || name == "equalto" || name == "==" || name == "ne" || name == "!=" ||
                         name == "in" || name == "lt" || name == "gt" || name == "le" || name == "ge")) {
    return absl::InvalidArgumentError("test '" + std::string(name) + "' needs an argument");
  }
  if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") return v.Equals(*arg);
  if (name == "ne" || name == "!=") return !v.Equals(*arg);
  if (name == "in") {
    if (arg->IsString()) return v.IsString() && arg->str().find(v.str()) != std::string::npos;
    ORCA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(*arg));
    for (const Value& x : items) {
      if (x.Equals(v)) return true;
    }
    return false;
  }
  if (name == "lt" || name == "gt" || name == "le" || name == "ge") {
    ORCA_ASSIGN_OR_RETURN(int c, Compare(v, *arg));
    return name == "lt" ? c < 0 : name == "gt" ? c > 0 : name == "le" ? c <= 0 : c >= 0;
  }
  return absl::NotFoundError("unknown test");
}

namespace {

// Filters on the text of a value.
absl::StatusOr<Value> StringFilter(std::string_view name, const Value& v, const CallArgs& a) {
  if (name == "trim") return Value::String(PyStrip(v.ToString(), a.Get(0, "chars"), 0));
  if (name == "upper") return Value::String(CaseMap(v.ToString(), true));
  if (name == "lower") return Value::String(CaseMap(v.ToString(), false));
  if (name == "capitalize") return Value::String(Title(CaseMap(v.ToString(), false), true));
  if (name == "title") return Value::String(Title(v.ToString(), false));
  if (name == "string") return Value::String(v.ToString());
  if (name == "safe") return v;
  if (name == "replace") {
    const Value* from = a.Get(0, "old");
    const Value* to = a.Get(1, "new");
    const Value* count = a.Get(2, "count");
    if (from == nullptr || to == nullptr) return absl::InvalidArgumentError("replace needs 2 arguments");
    return Value::String(Replace(v.ToString(), from->ToString(), to->ToString(), count ? count->AsInt() : -1));
  }
  if (name == "indent") {
    const Value* width = a.Get(0, "width");
    const Value* first = a.Get(1, "first");
    const Value* blank = a.Get(2, "blank");
    std::string pad = width != nullptr && width->IsString()
                          ? width->str()
                          : std::string(width ? static_cast<size_t>(std::max<int64_t>(0, width->AsInt())) : 4, ' ');
    return Value::String(Indent(v.ToString(), pad, first && first->Truthy(), blank && blank->Truthy()));
  }
  if (name == "escape" || name == "e") {
    std::string out;
    for (char c : v.ToString()) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&#34;";
          break;
        case '\'':
          out += "&#39;";
          break;
        default:
          out += c;
      }
    }
    return Value::String(std::move(out));
  }
  return absl::NotFoundError("unknown filter");
}

// Filters on numbers.
absl::StatusOr<Value> NumberFilter(std::string_view name, const Value& v, const CallArgs& a) {
  if (name == "int") return ToNumber(v, false, a.Get(0, "default"));
  if (name == "float") return ToNumber(v, true, a.Get(0, "default"));
  if (name == "abs") {
    if (!v.IsNumber()) return TypeError("abs needs a number", v);
    return v.type() == Value::Type::kFloat ? Value::Float(std::fabs(v.AsFloat())) : Value::Int(std::llabs(v.AsInt()));
  }
  if (name == "round") {
    const Value* precision = a.Get(0, "precision");
    double scale = std::pow(10.0, precision ? static_cast<double>(precision->AsInt()) : 0.0);
    return Value::Float(std::round(v.AsFloat() * scale) / scale);
  }
  return absl::NotFoundError("unknown filter");
}

absl::StatusOr<Value> SelectOrReject(const Value& v, const CallArgs& a, bool select) {
  ORCA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  CallArgs test_args;
  for (size_t i = 1; i < a.positional.size(); ++i) test_args.positional.push_back(a.positional[i]);
  Value::List out;
  for (const Value& item : items) {
    bool ok = item.Truthy();
    if (!a.positional.empty()) {
      ORCA_ASSIGN_OR_RETURN(ok, ApplyTest(a.positional[0].ToString(), item, test_args));
    }
    if (ok == select) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

// Filters on sequences and mappings.
absl::StatusOr<Value> SequenceFilter(std::string_view name, const Value& v, const CallArgs& a) {
  if (name == "length" || name == "count") {
    if (v.IsString()) return Value::Int(static_cast<int64_t>(DecodeUtf8(v.str()).size()));
    if (v.IsList()) return Value::Int(static_cast<int64_t>(v.list().size()));
    if (v.IsDict()) return Value::Int(static_cast<int64_t>(v.dict().items.size()));
    if (v.IsUndefined()) return Value::Int(0);
    return TypeError("length of a value without one", v);
  }
  if (name == "join") {
    ORCA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    const Value* sep = a.Get(0, "d");
    const Value* attr = a.Get(1, "attribute");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      out += (i && sep ? sep->ToString() : "") + (attr ? GetAttr(items[i], attr->ToString()) : items[i]).ToString();
    }
    return Value::String(std::move(out));
  }
  if (name == "first" || name == "last" || name == "list" || name == "reverse") {
    ORCA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    if (name == "first" || name == "last") {
      if (items.empty()) return Value();
      return name == "first" ? items.front() : items.back();
    }
    if (name == "reverse") std::reverse(items.begin(), items.end());
    if (name == "reverse" && v.IsString()) {
      std::string s;
      for (const Value& c : items) s += c.str();
      return Value::String(std::move(s));
    }
    return Value::MakeList(std::move(items));
  }
  if (name == "items") return v.IsUndefined() ? Value::MakeList() : ItemsOf(v);
  if (name == "selectattr" || name == "rejectattr") return SelectAttr(v, a, name == "rejectattr");
  if (name == "select" || name == "reject") return SelectOrReject(v, a, name == "select");
  if (name == "map") return Map(v, a);
  return absl::NotFoundError("unknown filter");
}

}  // namespace

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& v, const CallArgs& a) {
  if (name == "tojson") {
    const Value* indent = a.Get(0, "indent");
    return Value::String(v.ToJson(indent != nullptr && indent->IsNumber() ? static_cast<int>(indent->AsInt()) : -1));
  }
  if (name == "default" || name == "d") {
    const Value* def = a.Get(0, "default_value");
    const Value* boolean = a.Get(1, "boolean");
    const bool use_default = v.IsUndefined() || (boolean != nullptr && boolean->Truthy() && !v.Truthy());
    if (use_default) return def != nullptr ? *def : Value::String("");
    return v;
  }
  for (auto* filter : {&StringFilter, &NumberFilter, &SequenceFilter}) {
    absl::StatusOr<Value> r = filter(name, v, a);
    if (!absl::IsNotFound(r.status())) return r;
  }
  return absl::NotFoundError("unknown filter");
}

}  // namespace orca::text::jinja
