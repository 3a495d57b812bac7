// Jinja filters, tests and the Python methods of str / list / dict that chat
// templates call, with Python's semantics. Whatever builds a string or a list
// checks its size against the render budget before (or while) building it.

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

absl::Status StringTooLong(std::string_view what, const Sandbox& sb) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(what), " would exceed max_string_bytes (",
                                                 sb.budget().max_string_bytes, ")"));
}

// A new string: charged against the budget.
absl::StatusOr<Value> NewString(Sandbox& sb, std::string s) {
  ORCA_RETURN_IF_ERROR(sb.ChargeString(s.size()));
  return Value::String(std::move(s));
}

absl::StatusOr<Value> NewList(Sandbox& sb, Value::List items) {
  ORCA_RETURN_IF_ERROR(sb.ChargeItems(items.size()));
  Value v = Value::MakeList(std::move(items));
  ORCA_RETURN_IF_ERROR(sb.CheckDepth(v));
  return v;
}

// str() of an optional argument; `def` when it is absent.
absl::StatusOr<std::string> StrArg(Sandbox& sb, const Value* v, std::string def = "") {
  if (v == nullptr) return def;
  return sb.Str(*v);
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

// A case mapping, title-casing or capitalization (ICU may grow the text 3x).
absl::StatusOr<Value> CaseFilter(std::string_view name, const std::string& s, Sandbox& sb) {
  // Title-casing maps one character at a time through ICU: about a step's
  // worth of work per byte.
  ORCA_RETURN_IF_ERROR(sb.Scan(s.size(), name == "upper" || name == "lower" ? 16 : 1));
  if (name == "upper") return NewString(sb, CaseMap(s, true));
  if (name == "lower") return NewString(sb, CaseMap(s, false));
  if (name == "title") return NewString(sb, Title(s, false));
  return NewString(sb, Title(CaseMap(s, false), true));  // capitalize
}

bool IsPySpace(char32_t c) { return IsWhiteSpace(c) || (c >= 0x1C && c <= 0x1F); }

// Length of the UTF-8 sequence a lead byte starts (valid text only).
size_t LeadLength(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return u < 0x80 ? 1 : u < 0xE0 ? 2 : u < 0xF0 ? 3 : 4;
}

absl::StatusOr<Value> Indent(const std::string& s, const Value* width, bool first, bool blank, Sandbox& sb) {
  std::string pad(4, ' ');
  if (width != nullptr && width->IsString()) {
    pad = width->str();
  } else if (width != nullptr) {
    const int64_t w = std::max<int64_t>(0, width->AsInt());
    if (w > sb.budget().max_string_bytes) return StringTooLong(absl::StrCat("indent width ", w), sb);
    pad.assign(static_cast<size_t>(w), ' ');
  }
  // Bound the result before building it: one pad per line.
  const uint64_t lines = static_cast<uint64_t>(std::count(s.begin(), s.end(), '\n')) + 1;
  if (!pad.empty() && lines > static_cast<uint64_t>(sb.budget().max_string_bytes) / pad.size()) {
    return StringTooLong("indent", sb);
  }
  ORCA_RETURN_IF_ERROR(sb.ChargeString(s.size() + lines * pad.size()));
  std::string out;
  size_t start = 0;
  bool is_first = true;
  while (start <= s.size()) {
    size_t nl = s.find('\n', start);
    std::string_view line(s.data() + start, (nl == std::string::npos ? s.size() : nl) - start);
    if ((!is_first || first) && (blank || !line.empty())) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
    is_first = false;
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Escape(const std::string& s, Sandbox& sb) {
  size_t size = 0;
  for (char c : s) size += c == '&' ? 5 : (c == '<' || c == '>') ? 4 : (c == '"' || c == '\'') ? 5 : 1;
  ORCA_RETURN_IF_ERROR(sb.ChargeString(size));
  std::string out;
  out.reserve(size);
  for (char c : s) {
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

absl::StatusOr<Value> Split(const std::string& s, const Value* sep, int64_t maxsplit, Sandbox& sb) {
  const size_t max_items = static_cast<size_t>(sb.budget().max_items);
  Value::List parts;
  auto add = [&](std::string_view part) -> absl::Status {
    if (parts.size() >= max_items) return sb.ChargeItems(parts.size() + 1);  // the max_items error
    parts.push_back(Value::String(std::string(part)));
    return absl::OkStatus();
  };
  ORCA_RETURN_IF_ERROR(sb.Scan(s.size()));
  if (sep == nullptr || sep->IsNone()) {
    std::vector<size_t> offsets;
    std::vector<char32_t> cps = DecodeUtf8(s, &offsets);
    offsets.push_back(s.size());
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && IsPySpace(cps[i])) ++i;
      if (i >= cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = cps.size();
        while (e > i && IsPySpace(cps[e - 1])) --e;
        ORCA_RETURN_IF_ERROR(add(std::string_view(s).substr(offsets[i], offsets[e] - offsets[i])));
        break;
      }
      size_t j = i;
      while (j < cps.size() && !IsPySpace(cps[j])) ++j;
      ORCA_RETURN_IF_ERROR(add(std::string_view(s).substr(offsets[i], offsets[j] - offsets[i])));
      i = j;
    }
  } else {
    ORCA_ASSIGN_OR_RETURN(std::string d, sb.Str(*sep));
    if (d.empty()) return absl::InvalidArgumentError("split(): empty separator");
    size_t start = 0;
    while (true) {
      const bool last = maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit;
      const size_t pos = last ? std::string::npos : s.find(d, start);
      if (pos == std::string::npos) {
        ORCA_RETURN_IF_ERROR(add(std::string_view(s).substr(start)));
        break;
      }
      ORCA_RETURN_IF_ERROR(add(std::string_view(s).substr(start, pos - start)));
      start = pos + d.size();
    }
  }
  ORCA_RETURN_IF_ERROR(sb.ChargeString(s.size()));
  return NewList(sb, std::move(parts));
}

absl::StatusOr<Value> Replace(const std::string& s, const Value* from_v, const Value* to_v, const Value* count_v,
                              Sandbox& sb) {
  if (from_v == nullptr || to_v == nullptr) return absl::InvalidArgumentError("replace() needs 2 arguments");
  ORCA_ASSIGN_OR_RETURN(std::string from, sb.Str(*from_v));
  ORCA_ASSIGN_OR_RETURN(std::string to, sb.Str(*to_v));
  const int64_t count = count_v != nullptr ? count_v->AsInt() : -1;
  ORCA_RETURN_IF_ERROR(sb.Scan(s.size()));
  if (from.empty()) return Value::String(s);
  const size_t limit = static_cast<size_t>(sb.budget().max_string_bytes);
  std::string out;
  size_t start = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    size_t pos = s.find(from, start);
    if (pos == std::string::npos) break;
    out.append(s, start, pos - start);
    out += to;
    start = pos + from.size();
    if (out.size() > limit) return StringTooLong("replace()", sb);
  }
  out.append(s, start, std::string::npos);
  return NewString(sb, std::move(out));
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

// `sep.join(items)` and `items | join(sep, attribute)`.
absl::StatusOr<Value> Join(const Value& items_v, const std::string& sep, const Value* attr, Sandbox& sb) {
  ORCA_ASSIGN_OR_RETURN(std::vector<Value> items, sb.Iterate(items_v));
  std::string attr_name;
  if (attr != nullptr) {
    ORCA_ASSIGN_OR_RETURN(attr_name, sb.Str(*attr));
  }
  const size_t limit = static_cast<size_t>(sb.budget().max_string_bytes);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    ORCA_ASSIGN_OR_RETURN(std::string text, sb.Str(attr != nullptr ? GetAttr(items[i], attr_name) : items[i]));
    out += text;
    if (out.size() > limit) return StringTooLong("join()", sb);
  }
  return NewString(sb, std::move(out));
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

absl::StatusOr<Value> Strip(const std::string& s, const Value* chars, int mode, Sandbox& sb) {
  ORCA_RETURN_IF_ERROR(sb.Scan(s.size()));
  if (chars == nullptr || chars->IsNone() || chars->IsUndefined()) return NewString(sb, PyStrip(s, nullptr, mode));
  ORCA_ASSIGN_OR_RETURN(std::string set, sb.Str(*chars));
  return NewString(sb, PyStrip(s, &set, mode));
}

absl::StatusOr<Value> StringMethod(const Value& target, std::string_view name, const CallArgs& a, Sandbox& sb) {
  const std::string& s = target.str();
  if (name == "strip") return Strip(s, a.Get(0, "chars"), 0, sb);
  if (name == "lstrip") return Strip(s, a.Get(0, "chars"), 1, sb);
  if (name == "rstrip") return Strip(s, a.Get(0, "chars"), 2, sb);
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") return CaseFilter(name, s, sb);
  if (name == "startswith" || name == "endswith") {
    const Value* affix = a.Get(0, "prefix");
    if (affix == nullptr) return absl::InvalidArgumentError(std::string(name) + "() needs an argument");
    return Value::Bool(AffixMatch(s, *affix, name == "startswith"));
  }
  if (name == "split") {
    const Value* maxsplit = a.Get(1, "maxsplit");
    return Split(s, a.Get(0, "sep"), maxsplit ? maxsplit->AsInt() : -1, sb);
  }
  if (name == "replace") return Replace(s, a.Get(0, "old"), a.Get(1, "new"), a.Get(2, "count"), sb);
  if (name == "find" || name == "count") {
    const Value* sub = a.Get(0, "sub");
    if (sub == nullptr || !sub->IsString()) return absl::InvalidArgumentError(std::string(name) + "() needs a string");
    ORCA_RETURN_IF_ERROR(sb.Scan(s.size()));
    if (name == "find") {
      size_t pos = s.find(sub->str());
      return Value::Int(pos == std::string::npos ? -1
                                                 : static_cast<int64_t>(CountCodePoints(std::string_view(s).substr(0, pos))));
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
    return Join(*items, s, nullptr, sb);
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha") {
    ORCA_RETURN_IF_ERROR(sb.Scan(s.size()));
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

absl::StatusOr<Value> ItemsOf(const Value& v, Sandbox& sb) {
  if (!v.IsDict()) return TypeError("items() needs a mapping", v);
  ORCA_RETURN_IF_ERROR(sb.ChargeItems(v.dict().items.size() * 3));
  Value::List items;
  items.reserve(v.dict().items.size());
  for (const auto& [k, val] : v.dict().items) items.push_back(Value::MakeList({Value::String(k), val}));
  return NewList(sb, std::move(items));
}

absl::StatusOr<Value> SelectAttr(const Value& target, const CallArgs& a, bool reject, Sandbox& sb) {
  ORCA_ASSIGN_OR_RETURN(std::vector<Value> items, sb.Iterate(target));
  if (a.positional.empty() || !a.positional[0].IsString()) {
    return absl::InvalidArgumentError("selectattr/rejectattr need an attribute name");
  }
  std::string test;
  if (a.positional.size() >= 2) {
    ORCA_ASSIGN_OR_RETURN(test, sb.Str(a.positional[1]));
  }
  CallArgs test_args;
  for (size_t i = 2; i < a.positional.size(); ++i) test_args.positional.push_back(a.positional[i]);
  Value::List out;
  for (const Value& item : items) {
    ORCA_RETURN_IF_ERROR(sb.Step());
    Value v = GetAttr(item, a.positional[0].str());
    bool ok = v.Truthy();
    if (a.positional.size() >= 2) {
      ORCA_ASSIGN_OR_RETURN(ok, ApplyTest(test, v, test_args, sb));
    }
    if (ok != reject) out.push_back(item);
  }
  return NewList(sb, std::move(out));
}

absl::StatusOr<Value> Map(const Value& target, const CallArgs& a, Sandbox& sb) {
  ORCA_ASSIGN_OR_RETURN(std::vector<Value> items, sb.Iterate(target));
  Value::List out;
  if (const Value* attr = a.Get(99, "attribute"); attr != nullptr) {
    const Value* def = a.Get(99, "default");
    ORCA_ASSIGN_OR_RETURN(std::string name, sb.Str(*attr));
    for (const Value& item : items) {
      ORCA_RETURN_IF_ERROR(sb.Step());
      Value v = GetAttr(item, name);
      out.push_back(v.IsUndefined() && def != nullptr ? *def : v);
    }
    return NewList(sb, std::move(out));
  }
  if (a.positional.empty()) return absl::InvalidArgumentError("map() needs a filter name or attribute=");
  ORCA_ASSIGN_OR_RETURN(std::string filter, sb.Str(a.positional[0]));
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  for (const Value& item : items) {
    ORCA_RETURN_IF_ERROR(sb.Step());
    ORCA_ASSIGN_OR_RETURN(Value v, ApplyFilter(filter, item, rest, sb));
    out.push_back(std::move(v));
  }
  return NewList(sb, std::move(out));
}

// The `int` and `float` filters: Python's int()/float() with Jinja's default
// on a value that is not a number; a number outside int64 is an error.
absl::StatusOr<Value> ToNumber(const Value& v, bool to_float, const Value* def) {
  const Value fallback = def != nullptr ? *def : (to_float ? Value::Float(0) : Value::Int(0));
  if (v.IsNumber()) {
    if (to_float) return Value::Float(v.AsFloat());
    if (v.type() != Value::Type::kFloat) return Value::Int(v.AsInt());
    if (std::isnan(v.AsFloat())) return fallback;
    ORCA_ASSIGN_OR_RETURN(int64_t i, CheckedToInt(v.AsFloat()));
    return Value::Int(i);
  }
  if (v.IsString()) {
    std::string s = PyStrip(v.str(), nullptr, 0);
    char* end = nullptr;
    if (!to_float) {
      errno = 0;
      long long i = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && *end == '\0') {
        if (errno == ERANGE) return absl::InvalidArgumentError("integer overflow: '" + s + "' does not fit in 64 bits");
        return Value::Int(i);
      }
    }
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') {
      if (to_float) return Value::Float(d);
      if (std::isnan(d)) return fallback;
      ORCA_ASSIGN_OR_RETURN(int64_t i, CheckedToInt(d));
      return Value::Int(i);
    }
  }
  return fallback;
}

}  // namespace

std::string PyStrip(const std::string& s, const std::string* chars, int mode) {
  auto strip_ascii = [&](unsigned char c) {
    return chars == nullptr ? IsPySpace(c) : chars->find(static_cast<char>(c)) != std::string::npos;
  };
  // Fast path: ASCII at both ends (an ASCII byte is always a code point of its own).
  size_t b = 0, e = s.size();
  bool slow = false;
  if (mode != 2) {
    while (b < e && static_cast<unsigned char>(s[b]) < 0x80 && strip_ascii(s[b])) ++b;
    slow = slow || (b < e && static_cast<unsigned char>(s[b]) >= 0x80);
  }
  if (mode != 1) {
    while (e > b && static_cast<unsigned char>(s[e - 1]) < 0x80 && strip_ascii(s[e - 1])) --e;
    slow = slow || (e > b && static_cast<unsigned char>(s[e - 1]) >= 0x80);
  }
  if (!slow) return s.substr(b, e - b);
  std::vector<char32_t> set;
  if (chars != nullptr) set = DecodeUtf8(*chars);
  auto strip = [&](char32_t c) {
    return chars == nullptr ? IsPySpace(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  if (IsValidUtf8(s)) {
    // Decode only the ends: one code point at a time, from the lead bytes.
    auto decode_at = [&](size_t i) { return DecodeUtf8(std::string_view(s).substr(i, LeadLength(s[i])))[0]; };
    b = 0;
    e = s.size();
    if (mode != 2) {
      while (b < e && strip(decode_at(b))) b += LeadLength(s[b]);
    }
    if (mode != 1) {
      while (e > b) {
        size_t lead = e - 1;
        while (lead > b && (static_cast<unsigned char>(s[lead]) & 0xC0) == 0x80) --lead;
        if (!strip(decode_at(lead))) break;
        e = lead;
      }
    }
    return s.substr(b, e - b);
  }
  std::vector<size_t> offsets;
  std::vector<char32_t> cps = DecodeUtf8(s, &offsets);
  offsets.push_back(s.size());
  size_t cb = 0, ce = cps.size();
  if (mode != 2)
    while (cb < ce && strip(cps[cb])) ++cb;
  if (mode != 1)
    while (ce > cb && strip(cps[ce - 1])) --ce;
  return s.substr(offsets[cb], offsets[ce] - offsets[cb]);
}

absl::StatusOr<int> Compare(const Value& a, const Value& b, Sandbox& sb) {
  if (a.IsNumber() && b.IsNumber()) {
    double x = a.AsFloat(), y = b.AsFloat();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.IsString() && b.IsString()) {
    ORCA_RETURN_IF_ERROR(sb.Scan(std::min(a.str().size(), b.str().size())));
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  return absl::InvalidArgumentError(absl::StrCat("cannot compare ", a.TypeName(), " with ", b.TypeName()));
}

absl::StatusOr<Value> CallMethod(const Value& target, std::string_view name, const CallArgs& a, Sandbox& sb) {
  if (target.IsString()) return StringMethod(target, name, a, sb);
  if (target.IsDict() && !target.dict().is_namespace) {
    if (name == "items") return ItemsOf(target, sb);
    if (name == "keys" || name == "values") {
      Value::List out;
      for (const auto& [k, v] : target.dict().items) out.push_back(name == "keys" ? Value::String(k) : v);
      return NewList(sb, std::move(out));
    }
    if (name == "get") {
      const Value* key = a.Get(0, "key");
      if (key == nullptr) return absl::InvalidArgumentError("get() needs a key");
      ORCA_ASSIGN_OR_RETURN(std::string k, sb.Str(*key));
      const Value* v = target.dict().Find(k);
      if (v != nullptr) return *v;
      const Value* def = a.Get(1, "default");
      return def != nullptr ? *def : Value::None();
    }
  }
  if (target.IsList()) {
    if (name == "append") {
      if (a.positional.size() != 1) return absl::InvalidArgumentError("append() takes one argument");
      if (target.list().size() >= static_cast<size_t>(sb.budget().max_items)) {
        return sb.ChargeItems(target.list().size() + 1);  // the max_items error
      }
      ORCA_RETURN_IF_ERROR(sb.ChargeItems(1));
      if (a.positional[0].depth() + 1 > sb.budget().max_value_depth) return sb.DepthError();
      sb.NoteMutated(target);
      target.list().push_back(a.positional[0]);
      return Value::None();
    }
    if (name == "index") {
      for (size_t i = 0; i < target.list().size() && !a.positional.empty(); ++i) {
        ORCA_ASSIGN_OR_RETURN(bool same, sb.Equal(target.list()[i], a.positional[0]));
        if (same) return Value::Int(static_cast<int64_t>(i));
      }
      return absl::InvalidArgumentError("list.index(x): x not in list");
    }
  }
  return absl::NotFoundError("no such method");
}

absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& v, const CallArgs& a, Sandbox& sb) {
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
  if (name == "lower" || name == "upper") {
    if (!v.IsString()) return false;
    ORCA_RETURN_IF_ERROR(sb.Scan(v.str().size(), 16));
    return CaseMap(v.str(), name == "upper") == v.str();
  }
  if (name == "even" || name == "odd") {
    if (v.type() != T::kInt) return TypeError(std::string(name) + " test needs an integer", v);
    return (v.AsInt() % 2 == 0) == (name == "even");
  }
  if (name == "divisibleby") {
    if (arg == nullptr || arg->AsInt() == 0) return absl::InvalidArgumentError("divisibleby needs a non-zero number");
    ORCA_ASSIGN_OR_RETURN(int64_t rem, CheckedFloorMod(v.AsInt(), arg->AsInt()));
    return rem == 0;
  }
  if (arg == nullptr && (name == "eq" || name == "equalto" || name == "==" || name == "ne" || name == "!=" ||
                         name == "in" || name == "lt" || name == "gt" || name == "le" || name == "ge")) {
    return absl::InvalidArgumentError("test '" + std::string(name) + "' needs an argument");
  }
  if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") return sb.Equal(v, *arg);
  if (name == "ne" || name == "!=") {
    ORCA_ASSIGN_OR_RETURN(bool same, sb.Equal(v, *arg));
    return !same;
  }
  if (name == "in") {
    if (arg->IsString()) {
      ORCA_RETURN_IF_ERROR(sb.Scan(arg->str().size()));
      return v.IsString() && arg->str().find(v.str()) != std::string::npos;
    }
    ORCA_ASSIGN_OR_RETURN(std::vector<Value> items, sb.Iterate(*arg));
    for (const Value& x : items) {
      ORCA_ASSIGN_OR_RETURN(bool same, sb.Equal(x, v));
      if (same) return true;
    }
    return false;
  }
  if (name == "lt" || name == "gt" || name == "le" || name == "ge") {
    ORCA_ASSIGN_OR_RETURN(int c, Compare(v, *arg, sb));
    return name == "lt" ? c < 0 : name == "gt" ? c > 0 : name == "le" ? c <= 0 : c >= 0;
  }
  return absl::NotFoundError("unknown test");
}

namespace {

// Filters on the text of a value.
absl::StatusOr<Value> StringFilter(std::string_view name, const Value& v, const CallArgs& a, Sandbox& sb) {
  static constexpr std::string_view kNames[] = {"trim",   "upper", "lower",  "capitalize", "title",
                                                "string", "safe",  "replace", "indent",     "escape", "e"};
  if (std::find(std::begin(kNames), std::end(kNames), name) == std::end(kNames)) {
    return absl::NotFoundError("unknown filter");
  }
  if (name == "safe") return v;
  if (name == "string" && v.IsString()) return v;
  ORCA_ASSIGN_OR_RETURN(std::string text, sb.Str(v));
  if (name == "string") return NewString(sb, std::move(text));
  if (name == "trim") return Strip(text, a.Get(0, "chars"), 0, sb);
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") return CaseFilter(name, text, sb);
  if (name == "replace") return Replace(text, a.Get(0, "old"), a.Get(1, "new"), a.Get(2, "count"), sb);
  if (name == "indent") {
    const Value* first = a.Get(1, "first");
    const Value* blank = a.Get(2, "blank");
    return Indent(text, a.Get(0, "width"), first && first->Truthy(), blank && blank->Truthy(), sb);
  }
  return Escape(text, sb);  // escape, e
}

// Filters on numbers.
absl::StatusOr<Value> NumberFilter(std::string_view name, const Value& v, const CallArgs& a) {
  if (name == "int") return ToNumber(v, false, a.Get(0, "default"));
  if (name == "float") return ToNumber(v, true, a.Get(0, "default"));
  if (name == "abs") {
    if (!v.IsNumber()) return TypeError("abs needs a number", v);
    if (v.type() == Value::Type::kFloat) return Value::Float(std::fabs(v.AsFloat()));
    if (v.AsInt() >= 0) return Value::Int(v.AsInt());
    ORCA_ASSIGN_OR_RETURN(int64_t negated, CheckedNeg(v.AsInt()));
    return Value::Int(negated);
  }
  if (name == "round") {
    const Value* precision = a.Get(0, "precision");
    double scale = std::pow(10.0, precision ? static_cast<double>(precision->AsInt()) : 0.0);
    return Value::Float(std::round(v.AsFloat() * scale) / scale);
  }
  return absl::NotFoundError("unknown filter");
}

absl::StatusOr<Value> SelectOrReject(const Value& v, const CallArgs& a, bool select, Sandbox& sb) {
  ORCA_ASSIGN_OR_RETURN(std::vector<Value> items, sb.Iterate(v));
  std::string test;
  if (!a.positional.empty()) {
    ORCA_ASSIGN_OR_RETURN(test, sb.Str(a.positional[0]));
  }
  CallArgs test_args;
  for (size_t i = 1; i < a.positional.size(); ++i) test_args.positional.push_back(a.positional[i]);
  Value::List out;
  for (const Value& item : items) {
    ORCA_RETURN_IF_ERROR(sb.Step());
    bool ok = item.Truthy();
    if (!a.positional.empty()) {
      ORCA_ASSIGN_OR_RETURN(ok, ApplyTest(test, item, test_args, sb));
    }
    if (ok == select) out.push_back(item);
  }
  return NewList(sb, std::move(out));
}

// Filters on sequences and mappings.
absl::StatusOr<Value> SequenceFilter(std::string_view name, const Value& v, const CallArgs& a, Sandbox& sb) {
  if (name == "length" || name == "count") {
    if (v.IsString()) {
      ORCA_RETURN_IF_ERROR(sb.Scan(v.str().size()));
      return Value::Int(static_cast<int64_t>(CountCodePoints(v.str())));
    }
    if (v.IsList()) return Value::Int(static_cast<int64_t>(v.list().size()));
    if (v.IsDict()) return Value::Int(static_cast<int64_t>(v.dict().items.size()));
    if (v.IsUndefined()) return Value::Int(0);
    return TypeError("length of a value without one", v);
  }
  if (name == "join") {
    ORCA_ASSIGN_OR_RETURN(std::string sep, StrArg(sb, a.Get(0, "d")));
    return Join(v, sep, a.Get(1, "attribute"), sb);
  }
  if (name == "first" || name == "last" || name == "list" || name == "reverse") {
    ORCA_ASSIGN_OR_RETURN(std::vector<Value> items, sb.Iterate(v));
    if (name == "first" || name == "last") {
      if (items.empty()) return Value();
      return name == "first" ? items.front() : items.back();
    }
    if (name == "reverse") std::reverse(items.begin(), items.end());
    if (name == "reverse" && v.IsString()) {
      std::string s;
      for (const Value& c : items) s += c.str();
      return NewString(sb, std::move(s));
    }
    return NewList(sb, std::move(items));
  }
  if (name == "items") return v.IsUndefined() ? Value::MakeList() : ItemsOf(v, sb);
  if (name == "selectattr" || name == "rejectattr") return SelectAttr(v, a, name == "rejectattr", sb);
  if (name == "select" || name == "reject") return SelectOrReject(v, a, name == "select", sb);
  if (name == "map") return Map(v, a, sb);
  return absl::NotFoundError("unknown filter");
}

}  // namespace

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& v, const CallArgs& a, Sandbox& sb) {
  ORCA_RETURN_IF_ERROR(sb.Step());
  if (name == "tojson") {
    const Value* indent = a.Get(0, "indent");
    ORCA_ASSIGN_OR_RETURN(std::string json,
                          sb.ToJson(v, indent != nullptr && indent->IsNumber() ? indent->AsInt() : -1));
    return Value::String(std::move(json));
  }
  if (name == "default" || name == "d") {
    const Value* def = a.Get(0, "default_value");
    const Value* boolean = a.Get(1, "boolean");
    const bool use_default = v.IsUndefined() || (boolean != nullptr && boolean->Truthy() && !v.Truthy());
    if (use_default) return def != nullptr ? *def : Value::String("");
    return v;
  }
  absl::StatusOr<Value> r = StringFilter(name, v, a, sb);
  if (!absl::IsNotFound(r.status())) return r;
  r = NumberFilter(name, v, a);
  if (!absl::IsNotFound(r.status())) return r;
  return SequenceFilter(name, v, a, sb);
}

}  // namespace orca::text::jinja
