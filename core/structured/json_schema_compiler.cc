#include "core/structured/json_schema_compiler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/json_parse.h"
#include "core/common/status_macros.h"
#include "core/structured/limits.h"
#include "core/structured/regex_compiler.h"

namespace orca::structured {
namespace {

using Json = JsonSchemaCompiler::Json;

constexpr int kMaxIndent = 20;
constexpr int64_t kMaxUnrolledItems = 256;
constexpr int64_t kMaxStringLength = 4096;
constexpr int64_t kMaxMagnitude = 9'999'999'999'999'999;               // 16 digits: what Number() generates
constexpr double kMaxMagnitudeF = static_cast<double>(kMaxMagnitude);  // 1e16: the same bound, as doubles compare

const std::set<std::string>& Annotations() {
  static const auto* k =
      new std::set<std::string>{"title",    "description", "examples", "default",   "$schema", "$id",
                                "$comment", "deprecated",  "readOnly", "writeOnly", "$defs",   "definitions"};
  return *k;
}
const std::set<std::string>& ObjectKeywords() {
  static const auto* k = new std::set<std::string>{"properties", "required", "additionalProperties"};
  return *k;
}
const std::set<std::string>& ArrayKeywords() {
  static const auto* k = new std::set<std::string>{"items", "prefixItems", "minItems", "maxItems"};
  return *k;
}
const std::set<std::string>& StringKeywords() {
  static const auto* k = new std::set<std::string>{"minLength", "maxLength", "pattern", "format"};
  return *k;
}
const std::set<std::string>& NumberKeywords() {
  static const auto* k = new std::set<std::string>{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  return *k;
}
const std::set<std::string>& GeneralKeywords() {
  static const auto* k = new std::set<std::string>{"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref"};
  return *k;
}

// Regexes (JSON-string mode) for the supported formats; each a subset of what validators accept.
const std::map<std::string, std::string>& Formats() {
  static const std::string kDate =
      "[0-9]{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)";
  static const std::string kTime =
      "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
  static const std::string kOctet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
  static const auto* k = new std::map<std::string, std::string>{
      {"date", kDate},
      {"time", kTime},
      {"date-time", kDate + "T" + kTime},
      {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
      {"email", "[a-z0-9]{1,20}(?:[._+-][a-z0-9]{1,20}){0,3}@(?:[a-z0-9]{1,20}\\.){1,3}[a-z]{2,6}"},
      {"ipv4", absl::StrCat("(?:", kOctet, "\\.){3}", kOctet)},
  };
  return *k;
}

// Long texts in messages (a JSON pointer through 128 levels, a $ref of a megabyte): their two ends.
std::string Shorten(const std::string& text) { return ShortenForMessage(text); }

std::string Where(const std::string& path) { return path.empty() ? "the schema root" : Shorten(path); }

std::string PointerToken(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

absl::Status KeywordError(const std::string& keyword, const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("JSON Schema keyword '", keyword, "' at ", Where(path), ": ", why));
}

// JSON Schema's type name of a value.
std::string TypeOf(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return d == static_cast<double>(static_cast<int64_t>(d)) ? "integer" : "number";
  }
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

absl::StatusOr<std::vector<std::string>> Types(const Json& schema, const std::string& path) {
  static const std::set<std::string> kKnown = {"object", "array", "string", "number", "integer", "boolean", "null"};
  std::vector<std::string> types;
  const Json& t = schema["type"];
  if (t.is_string()) {
    types.push_back(t.get<std::string>());
  } else if (t.is_array() && !t.empty()) {
    for (const Json& e : t) {
      if (!e.is_string()) return KeywordError("type", path, "must be a type name or an array of type names");
      types.push_back(e.get<std::string>());
    }
  } else {
    return KeywordError("type", path, "must be a type name or a non-empty array of type names");
  }
  for (const std::string& name : types)
    if (!kKnown.contains(name)) return KeywordError("type", path, absl::StrCat("unknown type '", Shorten(name), "'"));
  return types;
}

bool TypeMatches(const std::string& value_type, const std::vector<std::string>& types) {
  for (const std::string& t : types)
    if (t == value_type || (t == "number" && value_type == "integer")) return true;
  return false;
}

absl::StatusOr<int64_t> NonNegative(const Json& schema, const std::string& keyword, const std::string& path,
                                    int64_t fallback) {
  if (!schema.contains(keyword)) return fallback;
  const Json& v = schema[keyword];
  if (!v.is_number_integer() && !v.is_number_unsigned()) return KeywordError(keyword, path, "must be an integer");
  if (v.get<int64_t>() < 0) return KeywordError(keyword, path, "must be >= 0");
  return v.get<int64_t>();
}

}  // namespace

Fragment JsonSchemaCompiler::Ws() {
  Fragment newline = b_->Seq(b_->Literal("\n"), b_->Repeat([&] { return b_->Literal(" "); }, 0, kMaxIndent));
  return b_->Optional(b_->Alt({b_->Literal(" "), newline}));
}

Fragment JsonSchemaCompiler::StringChar() {
  // Unescaped: U+0020.. except '"' and '\'. Escapes: the short ones and \uXXXX outside the surrogates.
  Fragment plain = b_->Codepoints({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}});
  auto hex = [&] { return b_->Codepoints({{'0', '9'}, {'A', 'F'}, {'a', 'f'}}); };
  Fragment short_escape = b_->Codepoints(
      {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'}, {'f', 'f'}, {'n', 'n'}, {'r', 'r'}, {'t', 't'}});
  Fragment non_surrogate =
      b_->Seq({b_->Codepoints({{'0', '9'}, {'A', 'C'}, {'a', 'c'}, {'E', 'F'}, {'e', 'f'}}), hex(), hex(), hex()});
  Fragment low_d = b_->Seq({b_->Codepoints({{'D', 'D'}, {'d', 'd'}}), b_->Codepoints({{'0', '7'}}), hex(), hex()});
  Fragment unicode = b_->Seq(b_->Literal("u"), b_->Alt({non_surrogate, low_d}));
  Fragment escape = b_->Seq(b_->Literal("\\"), b_->Alt({short_escape, unicode}));
  return b_->Alt({plain, escape});
}

Fragment JsonSchemaCompiler::JsonString() {
  return b_->Seq({b_->Literal("\""), b_->Star(StringChar()), b_->Literal("\"")});
}

Fragment JsonSchemaCompiler::Number(bool integer) {
  Fragment int_part = b_->Seq(
      b_->Optional(b_->Literal("-")),
      b_->Alt({b_->Literal("0"), b_->Seq(b_->Codepoints({{'1', '9'}}), b_->Repeat(
                                                                           [&] {
                                                                             return b_->Codepoints({{'0', '9'}});
                                                                           },
                                                                           0, 15))}));
  if (integer) return int_part;
  Fragment frac = b_->Seq(b_->Literal("."), b_->Repeat([&] { return b_->Codepoints({{'0', '9'}}); }, 1, 16));
  Fragment exp =
      b_->Seq({b_->Codepoints({{'E', 'E'}, {'e', 'e'}}), b_->Optional(b_->Codepoints({{'+', '+'}, {'-', '-'}})),
               b_->Repeat(
                   [&] {
                     return b_->Codepoints({{'0', '9'}});
                   },
                   1, 2)});
  return b_->Seq({int_part, b_->Optional(frac), b_->Optional(exp)});
}

Fragment JsonSchemaCompiler::SameLengthRange(const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  auto digits = [&](size_t count) { return b_->Repeat([&] { return b_->Codepoints({{'0', '9'}}); }, count, count); };
  auto range = [&](char a, char z) { return b_->Codepoints({{static_cast<uint32_t>(a), static_cast<uint32_t>(z)}}); };
  if (n == 1) return range(lo[0], hi[0]);
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) return b_->Seq(range(lo[0], lo[0]), SameLengthRange(lo_rest, hi_rest));
  if (lo_rest == std::string(n - 1, '0') && hi_rest == std::string(n - 1, '9'))
    return b_->Seq(range(lo[0], hi[0]), digits(n - 1));
  std::vector<Fragment> alternatives = {
      b_->Seq(range(lo[0], lo[0]), SameLengthRange(lo_rest, std::string(n - 1, '9')))};
  if (lo[0] + 1 <= hi[0] - 1) alternatives.push_back(b_->Seq(range(lo[0] + 1, hi[0] - 1), digits(n - 1)));
  alternatives.push_back(b_->Seq(range(hi[0], hi[0]), SameLengthRange(std::string(n - 1, '0'), hi_rest)));
  return b_->Alt(alternatives);
}

Fragment JsonSchemaCompiler::NonNegativeRange(int64_t lo, int64_t hi) {
  std::vector<Fragment> alternatives;
  int64_t first = 0, last = 9;  // the numbers of one digit count
  for (int digits = 1; digits <= 16; ++digits) {
    const int64_t a = std::max(lo, first), z = std::min(hi, last);
    if (a <= z) alternatives.push_back(SameLengthRange(std::to_string(a), std::to_string(z)));
    first = last + 1;
    if (digits < 16) last = last * 10 + 9;
  }
  return b_->Alt(alternatives);
}

Fragment JsonSchemaCompiler::IntRange(int64_t lo, int64_t hi) {
  std::vector<Fragment> alternatives;
  if (lo < 0) alternatives.push_back(b_->Seq(b_->Literal("-"), NonNegativeRange(-std::min<int64_t>(hi, -1), -lo)));
  if (hi >= 0) alternatives.push_back(NonNegativeRange(std::max<int64_t>(lo, 0), hi));
  return b_->Alt(alternatives);
}

absl::StatusOr<Fragment> JsonSchemaCompiler::BoundedNumber(const Json& schema, bool integer, const std::string& path) {
  std::optional<double> bound[4];
  const char* names[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
  bool any = false;
  for (int i = 0; i < 4; ++i) {
    if (!schema.contains(names[i])) continue;
    if (!schema[names[i]].is_number()) return KeywordError(names[i], path, "must be a number");
    bound[i] = schema[names[i]].get<double>();
    any = true;
  }
  if (!any) return Number(integer);
  auto clamp = [](double v) { return std::max(-kMaxMagnitudeF, std::min(kMaxMagnitudeF, v)); };
  if (integer) {
    double lo = -kMaxMagnitudeF, hi = kMaxMagnitudeF;
    if (bound[0]) lo = std::max(lo, std::ceil(clamp(*bound[0])));
    if (bound[1]) lo = std::max(lo, std::floor(clamp(*bound[1])) + 1);
    if (bound[2]) hi = std::min(hi, std::floor(clamp(*bound[2])));
    if (bound[3]) hi = std::min(hi, std::ceil(clamp(*bound[3])) - 1);
    if (lo > hi)
      return KeywordError(bound[2] ? "maximum" : "exclusiveMaximum", path, "no integer lies within the bounds");
    return IntRange(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
  }
  for (int i : {1, 3})
    if (bound[i])
      return KeywordError(names[i], path, "is supported on 'integer' only (use inclusive bounds on 'number')");
  for (int i : {0, 2})
    if (bound[i] && (*bound[i] != std::floor(*bound[i]) || std::abs(*bound[i]) > kMaxMagnitudeF))
      return KeywordError(names[i], path, "on 'number' must be an integer of at most 16 digits");
  const int64_t lo = bound[0] ? static_cast<int64_t>(*bound[0]) : 0;
  const int64_t hi = bound[2] ? static_cast<int64_t>(*bound[2]) : kMaxMagnitude;
  if (lo < 0) return KeywordError("minimum", path, "on 'number' must be >= 0 (negative ranges: use 'integer')");
  if (hi < lo) return KeywordError("maximum", path, "no number of the generated form lies within the bounds");
  // [lo, hi): an integer part in [lo, hi - 1] and any fraction; or hi exactly.
  Fragment frac = b_->Seq(b_->Literal("."), b_->Repeat([&] { return b_->Codepoints({{'0', '9'}}); }, 1, 16));
  if (hi == lo) return IntRange(lo, hi);
  return b_->Alt({b_->Seq(IntRange(lo, hi - 1), b_->Optional(frac)), IntRange(hi, hi)});
}

void JsonSchemaCompiler::EnsureAnyRules() {
  if (any_rules_) return;
  any_rules_ = true;
  any_value_ = b_->NewRule();
  any_object_ = b_->NewRule();
  any_array_ = b_->NewRule();
  b_->DefineRule(any_value_, b_->Alt({b_->Call(any_object_), b_->Call(any_array_), JsonString(), Number(false),
                                      b_->Literal("true"), b_->Literal("false"), b_->Literal("null")}));
  auto member = [&] { return b_->Seq({JsonString(), Ws(), b_->Literal(":"), Ws(), b_->Call(any_value_)}); };
  Fragment members = b_->Seq(member(), b_->Star(b_->Seq({Ws(), b_->Literal(","), Ws(), member()})));
  b_->DefineRule(any_object_,
                 b_->Seq({b_->Literal("{"), Ws(), b_->Optional(b_->Seq(members, Ws())), b_->Literal("}")}));
  Fragment items =
      b_->Seq(b_->Call(any_value_), b_->Star(b_->Seq({Ws(), b_->Literal(","), Ws(), b_->Call(any_value_)})));
  b_->DefineRule(any_array_, b_->Seq({b_->Literal("["), Ws(), b_->Optional(b_->Seq(items, Ws())), b_->Literal("]")}));
}

Fragment JsonSchemaCompiler::AnyValue() {
  EnsureAnyRules();
  return b_->Call(any_value_);
}

Fragment JsonSchemaCompiler::AnyObject() {
  EnsureAnyRules();
  return b_->Call(any_object_);
}

absl::StatusOr<Fragment> JsonSchemaCompiler::Body(const Json& schema, const std::string& path) {
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return AnyValue();
    return absl::InvalidArgumentError(absl::StrCat("the schema at ", Where(path), " is 'false' and matches nothing"));
  }
  if (!schema.is_object())
    return absl::InvalidArgumentError(absl::StrCat("the schema at ", Where(path), " must be an object or a boolean"));
  std::vector<std::string> constraints;  // non-annotation keywords present
  for (const auto& [key, value] : schema.items()) {
    if (Annotations().contains(key)) continue;
    if (!GeneralKeywords().contains(key) && !ObjectKeywords().contains(key) && !ArrayKeywords().contains(key) &&
        !StringKeywords().contains(key) && !NumberKeywords().contains(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported JSON Schema keyword '", Shorten(key), "' at ", Where(path)));
    }
    constraints.push_back(key);
  }
  auto only = [&](const std::string& keyword) -> absl::Status {
    for (const std::string& k : constraints)
      if (k != keyword)
        return KeywordError(keyword, path,
                            absl::StrCat("combining it with '", k, "' is not supported (move '", k,
                                         "' into the alternatives or drop it)"));
    return absl::OkStatus();
  };
  if (schema.contains("$ref")) {
    ORCA_RETURN_IF_ERROR(only("$ref"));
    if (!schema["$ref"].is_string()) return KeywordError("$ref", path, "must be a string");
    return Ref(schema["$ref"].get<std::string>(), path);
  }
  if (schema.contains("allOf")) {
    ORCA_RETURN_IF_ERROR(only("allOf"));
    const Json& all = schema["allOf"];
    if (!all.is_array() || all.size() != 1)
      return KeywordError("allOf", path, "only a single-schema allOf is supported");
    return Subschema(all[0], absl::StrCat(path, "/allOf/0"));
  }
  for (const char* keyword : {"anyOf", "oneOf"}) {
    if (!schema.contains(keyword)) continue;
    ORCA_RETURN_IF_ERROR(only(keyword));
    return Alternatives(schema[keyword], keyword, path);
  }
  std::vector<std::string> types;
  if (schema.contains("type")) {
    ORCA_ASSIGN_OR_RETURN(types, Types(schema, path));
  }
  if (schema.contains("const")) {
    const Json& c = schema["const"];
    if (!types.empty() && !TypeMatches(TypeOf(c), types))
      return KeywordError("const", path, "the value does not match 'type'");
    return b_->Literal(c.dump());
  }
  if (schema.contains("enum")) return Enum(schema["enum"], schema, path);
  if (types.empty()) {
    auto has_any = [&](const std::set<std::string>& keywords) {
      for (const std::string& k : constraints)
        if (keywords.contains(k)) return true;
      return false;
    };
    if (has_any(ObjectKeywords())) types.push_back("object");
    if (has_any(ArrayKeywords())) types.push_back("array");
    if (has_any(StringKeywords())) types.push_back("string");
    if (has_any(NumberKeywords())) types.push_back("number");
    if (types.empty()) return AnyValue();
  }
  std::vector<Fragment> alternatives;
  for (const std::string& t : types) {
    ORCA_ASSIGN_OR_RETURN(Fragment f, Typed(schema, t, path));
    alternatives.push_back(f);
  }
  return b_->Alt(alternatives);
}

absl::StatusOr<Fragment> JsonSchemaCompiler::Typed(const Json& schema, const std::string& type,
                                                   const std::string& path) {
  if (type == "object") return Object(schema, path);
  if (type == "array") return Array(schema, path);
  if (type == "string") return String(schema, path);
  if (type == "number") return BoundedNumber(schema, false, path);
  if (type == "integer") return BoundedNumber(schema, true, path);
  if (type == "boolean") return b_->Alt({b_->Literal("true"), b_->Literal("false")});
  return b_->Literal("null");
}

absl::StatusOr<Fragment> JsonSchemaCompiler::Alternatives(const Json& list, const std::string& keyword,
                                                          const std::string& path) {
  if (!list.is_array() || list.empty()) return KeywordError(keyword, path, "must be a non-empty array of schemas");
  std::vector<Fragment> alternatives;
  for (size_t i = 0; i < list.size(); ++i) {
    ORCA_ASSIGN_OR_RETURN(Fragment f, Subschema(list[i], absl::StrCat(path, "/", keyword, "/", i)));
    alternatives.push_back(f);
  }
  return b_->Alt(alternatives);
}

absl::StatusOr<Fragment> JsonSchemaCompiler::Enum(const Json& values, const Json& schema, const std::string& path) {
  if (!values.is_array() || values.empty()) return KeywordError("enum", path, "must be a non-empty array");
  std::vector<std::string> types;
  if (schema.contains("type")) {
    ORCA_ASSIGN_OR_RETURN(types, Types(schema, path));
  }
  std::vector<Fragment> alternatives;
  for (const Json& v : values)
    if (types.empty() || TypeMatches(TypeOf(v), types)) alternatives.push_back(b_->Literal(v.dump()));
  if (alternatives.empty()) return KeywordError("enum", path, "no value matches 'type'");
  return b_->Alt(alternatives);
}

absl::StatusOr<Fragment> JsonSchemaCompiler::Ref(const std::string& ref, const std::string& path) {
  if (auto it = refs_.find(ref); it != refs_.end()) return b_->Call(it->second);
  if (ref.empty() || ref[0] != '#' || (ref.size() > 1 && ref[1] != '/'))
    return KeywordError(
        "$ref", path,
        absl::StrCat("'", Shorten(ref), "': only local JSON pointers ('#', '#/$defs/...') are supported"));
  const Json* target = root_;
  std::string pointer = ref.substr(1);
  size_t pos = 1;
  while (pos <= pointer.size() && pointer.size() > 0) {
    size_t next = pointer.find('/', pos);
    if (next == std::string::npos) next = pointer.size();
    std::string token = pointer.substr(pos, next - pos);
    std::string name;
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '~' && i + 1 < token.size()) {
        name += token[i + 1] == '1' ? '/' : '~';
        ++i;
      } else {
        name += token[i];
      }
    }
    // Array indices: at most 9 digits, so that the conversion cannot overflow.
    const bool index = !name.empty() && name.size() <= 9 && name.find_first_not_of("0123456789") == std::string::npos;
    if (const Json* member = target->is_object() ? Member(*target, name) : nullptr) {
      target = member;
    } else if (target->is_array() && index && std::stoul(name) < target->size()) {
      target = &(*target)[std::stoul(name)];
    } else {
      return KeywordError("$ref", path, absl::StrCat("'", Shorten(ref), "' does not resolve"));
    }
    pos = next + 1;
  }
  // The target is compiled later, from the worklist (CompilePendingRefs): a chain of $refs, however long,
  // adds no recursion, and a rule referring to itself finds its rule here.
  const Rule rule = b_->NewRule();
  refs_[ref] = rule;
  b_->LabelRule(rule, absl::StrCat("JSON Schema $ref '", Shorten(ref), "' at ", Where(path)));
  pending_.push_back(PendingRef{rule, target, std::move(pointer)});
  return b_->Call(rule);
}

absl::Status JsonSchemaCompiler::CompilePendingRefs() {
  while (!pending_.empty()) {
    PendingRef ref = std::move(pending_.back());
    pending_.pop_back();
    ORCA_ASSIGN_OR_RETURN(Fragment body, Subschema(*ref.target, ref.pointer));
    b_->DefineRule(ref.rule, body);
  }
  return absl::OkStatus();
}

absl::StatusOr<Fragment> JsonSchemaCompiler::Value(const Json& schema, const std::string& path) {
  ORCA_ASSIGN_OR_RETURN(Fragment fragment, Subschema(schema, path));
  ORCA_RETURN_IF_ERROR(CompilePendingRefs());
  return fragment;
}

absl::StatusOr<Fragment> JsonSchemaCompiler::Subschema(const Json& schema, const std::string& path) {
  if (depth_ >= kMaxSchemaDepth) {
    return absl::InvalidArgumentError(absl::StrCat("the schema at ", Where(path), " nests subschemas deeper than ",
                                                   kMaxSchemaDepth, " levels (the limit)"));
  }
  if (b_->exhausted()) {
    return absl::InvalidArgumentError(absl::StrCat("the schema at ", Where(path), " needs more than ", b_->max_states(),
                                                   " automaton states (the limit); simplify the schema"));
  }
  ++depth_;
  absl::StatusOr<Fragment> out = Body(schema, path);
  --depth_;
  return out;
}

const JsonSchemaCompiler::Json* JsonSchemaCompiler::Member(const Json& object, const std::string& name) {
  constexpr size_t kLinearMembers = 16;
  if (object.size() < kLinearMembers) {
    auto it = object.find(name);
    return it == object.end() ? nullptr : &*it;
  }
  auto [index, inserted] = member_index_.try_emplace(&object);
  if (inserted)
    for (const auto& [key, value] : object.items()) index->second.try_emplace(key, &value);
  auto it = index->second.find(name);
  return it == index->second.end() ? nullptr : it->second;
}

absl::StatusOr<Fragment> JsonSchemaCompiler::CallValue(const Json& schema, const std::string& path) {
  const Rule rule = b_->NewRule();
  ORCA_ASSIGN_OR_RETURN(Fragment body, Subschema(schema, path));
  b_->DefineRule(rule, body);
  return b_->Call(rule);
}

Fragment JsonSchemaCompiler::ExtraKey(const std::vector<std::string>& declared) {
  // A trie of the declared names over the key alphabet [A-Za-z0-9_-]; leaving it reaches a free state.
  auto in_alphabet = [](unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  };
  struct Node {
    std::map<unsigned char, int> kids;
    bool terminal = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& name : declared) {
    bool ok = !name.empty();
    for (unsigned char c : name) ok = ok && in_alphabet(c);
    if (!ok) continue;
    int cur = 0;
    for (unsigned char c : name) {
      auto it = trie[cur].kids.find(c);
      if (it == trie[cur].kids.end()) {
        trie.emplace_back();
        it = trie[cur].kids.emplace(c, static_cast<int>(trie.size() - 1)).first;
      }
      cur = it->second;
    }
    trie[cur].terminal = true;
  }
  Fragment open = b_->Literal("\"");
  const int32_t free = b_->Empty().start, close = b_->Empty().start;
  std::vector<int32_t> state(trie.size());
  for (size_t i = 0; i < trie.size(); ++i) state[i] = i == 0 ? open.end : b_->Empty().start;
  for (size_t i = 0; i < trie.size(); ++i) {
    for (int c = 0; c < 128; ++c) {
      if (!in_alphabet(static_cast<unsigned char>(c))) continue;
      auto it = trie[i].kids.find(static_cast<unsigned char>(c));
      b_->AddEdge(state[i], c, c, it == trie[i].kids.end() ? free : state[it->second]);
    }
    if (i != 0 && !trie[i].terminal) b_->AddEdge(state[i], '"', '"', close);
  }
  for (int c = 0; c < 128; ++c)
    if (in_alphabet(static_cast<unsigned char>(c))) b_->AddEdge(free, c, c, free);
  b_->AddEdge(free, '"', '"', close);
  return {open.start, close};
}

absl::StatusOr<Fragment> JsonSchemaCompiler::Object(const Json& schema, const std::string& path) {
  static const Json kEmpty = Json::object();
  const Json& props = schema.contains("properties") ? schema["properties"] : kEmpty;
  if (!props.is_object()) return KeywordError("properties", path, "must be an object");
  std::set<std::string> required;
  if (schema.contains("required")) {
    const Json& req = schema["required"];
    if (!req.is_array()) return KeywordError("required", path, "must be an array of property names");
    std::set<std::string> declared;  // ordered_json's contains() scans every member
    for (const auto& [name, unused] : props.items()) declared.insert(name);
    for (const Json& r : req) {
      if (!r.is_string()) return KeywordError("required", path, "must be an array of property names");
      if (!declared.contains(r.get<std::string>()))
        return KeywordError("required", path,
                            absl::StrCat("'", r.get<std::string>(), "' is not declared in 'properties'"));
      required.insert(r.get<std::string>());
    }
  }
  // A_i: no member emitted yet before property i; B_i: some member emitted.
  const size_t n = props.size();
  std::vector<Fragment> a(n + 1), bb(n + 1);
  for (size_t i = 0; i <= n; ++i) a[i] = b_->Empty(), bb[i] = b_->Empty();
  std::vector<std::string> names;
  size_t i = 0;
  for (const auto& [name, sub] : props.items()) {
    names.push_back(name);
    ORCA_ASSIGN_OR_RETURN(Fragment value, Subschema(sub, absl::StrCat(path, "/properties/", PointerToken(name))));
    Fragment member = b_->Seq({b_->Literal(Json(name).dump()), Ws(), b_->Literal(":"), Ws(), value});
    b_->AddEps(a[i].start, member.start);
    Fragment sep = b_->Seq({Ws(), b_->Literal(","), Ws()});
    b_->AddEps(bb[i].start, sep.start);
    b_->AddEps(sep.end, member.start);
    b_->AddEps(member.end, bb[i + 1].start);
    if (!required.contains(name)) {
      b_->AddEps(a[i].start, a[i + 1].start);
      b_->AddEps(bb[i].start, bb[i + 1].start);
    }
    ++i;
  }
  if (schema.contains("additionalProperties")) {
    const Json& extra = schema["additionalProperties"];
    if (!extra.is_boolean() && !extra.is_object())
      return KeywordError("additionalProperties", path, "must be a boolean or a schema");
    if (!(extra.is_boolean() && !extra.get<bool>())) {
      ORCA_ASSIGN_OR_RETURN(Fragment value, CallValue(extra, absl::StrCat(path, "/additionalProperties")));
      Fragment member = b_->Seq({ExtraKey(names), Ws(), b_->Literal(":"), Ws(), value});
      Fragment sep = b_->Seq({Ws(), b_->Literal(","), Ws()});
      b_->AddEps(a[n].start, member.start);
      b_->AddEps(bb[n].start, sep.start);
      b_->AddEps(sep.end, member.start);
      b_->AddEps(member.end, bb[n].start);
    }
  }
  Fragment open = b_->Seq(b_->Literal("{"), Ws());
  b_->AddEps(open.end, a[0].start);
  Fragment close = b_->Literal("}");
  Fragment trailing = Ws();
  b_->AddEps(bb[n].start, trailing.start);
  b_->AddEps(trailing.end, close.start);
  b_->AddEps(a[n].start, close.start);  // reachable only when every property is optional
  return Fragment{open.start, close.end};
}

absl::StatusOr<Fragment> JsonSchemaCompiler::Array(const Json& schema, const std::string& path) {
  std::vector<Fragment> prefix;
  if (schema.contains("prefixItems")) {
    const Json& p = schema["prefixItems"];
    if (!p.is_array()) return KeywordError("prefixItems", path, "must be an array of schemas");
    for (size_t i = 0; i < p.size(); ++i) {
      ORCA_ASSIGN_OR_RETURN(Fragment f, CallValue(p[i], absl::StrCat(path, "/prefixItems/", i)));
      prefix.push_back(f);
    }
  }
  std::optional<Rule> item_rule;  // nullopt: no items beyond the prefix
  if (schema.contains("items")) {
    const Json& items = schema["items"];
    if (items.is_array())
      return KeywordError("items", path, "an array of schemas (draft-07 tuples) is not supported; use 'prefixItems'");
    if (!(items.is_boolean() && !items.get<bool>())) {
      item_rule = b_->NewRule();
      ORCA_ASSIGN_OR_RETURN(Fragment body, Subschema(items, absl::StrCat(path, "/items")));
      b_->DefineRule(*item_rule, body);
    }
  } else if (prefix.empty()) {
    EnsureAnyRules();
    item_rule = any_value_;
  }
  ORCA_ASSIGN_OR_RETURN(int64_t min, NonNegative(schema, "minItems", path, 0));
  ORCA_ASSIGN_OR_RETURN(int64_t max, NonNegative(schema, "maxItems", path, -1));
  if (max >= 0 && max < min) return KeywordError("maxItems", path, "is below minItems");
  const int64_t k = static_cast<int64_t>(prefix.size());
  if (!item_rule.has_value()) max = max < 0 ? k : std::min(max, k);
  if (min > max && max >= 0)
    return KeywordError("minItems", path, "needs more items than 'prefixItems' allows without 'items'");
  if (min > kMaxUnrolledItems)
    return KeywordError("minItems", path, absl::StrCat("values above ", kMaxUnrolledItems, " are not supported"));
  if (max > kMaxUnrolledItems) max = std::max(min, kMaxUnrolledItems);
  const bool unbounded = max < 0;
  const int64_t unrolled = unbounded ? std::max<int64_t>({min, k, 1}) : max;
  auto element = [&](int64_t j) {
    Fragment item = j < k ? prefix[j] : b_->Call(*item_rule);
    if (j == 0) return item;
    return b_->Seq({Ws(), b_->Literal(","), Ws(), item});
  };
  // Prefix fragments are used once each: positions j < k appear once in the unrolled chain.
  Fragment tail = unbounded ? b_->Star(b_->Seq({Ws(), b_->Literal(","), Ws(), b_->Call(*item_rule)})) : b_->Empty();
  for (int64_t j = unrolled - 1; j >= min; --j) tail = b_->Optional(b_->Seq(element(j), tail));
  for (int64_t j = min - 1; j >= 0; --j) tail = b_->Seq(element(j), tail);
  return b_->Seq({b_->Literal("["), Ws(), tail, Ws(), b_->Literal("]")});
}

absl::StatusOr<Fragment> JsonSchemaCompiler::String(const Json& schema, const std::string& path) {
  const bool has_length = schema.contains("minLength") || schema.contains("maxLength");
  ORCA_ASSIGN_OR_RETURN(int64_t min, NonNegative(schema, "minLength", path, 0));
  ORCA_ASSIGN_OR_RETURN(int64_t max, NonNegative(schema, "maxLength", path, -1));
  if (max >= 0 && max < min) return KeywordError("maxLength", path, "is below minLength");
  if (min > kMaxStringLength)
    return KeywordError("minLength", path, absl::StrCat("values above ", kMaxStringLength, " are not supported"));
  if (max > kMaxStringLength) max = std::max(min, kMaxStringLength);
  std::string regex;
  std::string regex_keyword;
  if (schema.contains("pattern")) {
    if (!schema["pattern"].is_string()) return KeywordError("pattern", path, "must be a string");
    regex = schema["pattern"].get<std::string>();
    regex_keyword = "pattern";
  }
  if (schema.contains("format")) {
    if (!schema["format"].is_string()) return KeywordError("format", path, "must be a string");
    const std::string format = schema["format"].get<std::string>();
    auto it = Formats().find(format);
    if (it == Formats().end()) {
      std::vector<std::string> known;
      for (const auto& [name, unused] : Formats()) known.push_back(name);
      return KeywordError(
          "format", path,
          absl::StrCat("'", format, "' is not supported (supported: ", absl::StrJoin(known, ", "), ")"));
    }
    if (!regex.empty()) return KeywordError("format", path, "combining it with 'pattern' is not supported");
    regex = it->second;
    regex_keyword = "format";
  }
  if (!regex_keyword.empty()) {
    if (has_length)
      return KeywordError(regex_keyword, path, "combining it with 'minLength'/'maxLength' is not supported");
    absl::StatusOr<Fragment> body = CompileRegex(regex, RegexOptions{.json_string = true}, b_);
    if (!body.ok()) return KeywordError(regex_keyword, path, std::string(body.status().message()));
    return b_->Seq({b_->Literal("\""), *body, b_->Literal("\"")});
  }
  Fragment body = b_->Repeat([&] { return StringChar(); }, min, max);
  return b_->Seq({b_->Literal("\""), body, b_->Literal("\"")});
}

namespace {

// The schema text, within kMaxSchemaBytes and parsed with the nesting limit (core/common/json_parse.h).
absl::StatusOr<JsonSchemaCompiler::Json> ParseSchema(std::string_view text, const std::string& what) {
  if (text.size() > kMaxSchemaBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", text.size(), " bytes; at most ", kMaxSchemaBytes, " are accepted (the limit)"));
  }
  absl::StatusOr<JsonSchemaCompiler::Json> schema = ParseOrderedJson(text);
  if (!schema.ok())
    return absl::InvalidArgumentError(absl::StrCat(what, " is not valid JSON: ", schema.status().message()));
  return schema;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(std::string_view schema_text) {
  ORCA_ASSIGN_OR_RETURN(JsonSchemaCompiler::Json schema, ParseSchema(schema_text, "the JSON schema"));
  GrammarBuilder builder;
  JsonSchemaCompiler compiler(&builder, &schema);
  const Rule root = builder.NewRule();
  ORCA_ASSIGN_OR_RETURN(Fragment body, compiler.Value(schema, ""));
  builder.DefineRule(root, body);
  return builder.Finish(root);
}

absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSequence(std::string_view schema_text, std::string_view begin,
                                                                   std::string_view separator, std::string_view end,
                                                                   int32_t max_items) {
  if (max_items < 0 || max_items > 256)
    return absl::InvalidArgumentError(absl::StrCat("max_calls must be in [0, 256], got ", max_items));
  ORCA_ASSIGN_OR_RETURN(JsonSchemaCompiler::Json schema, ParseSchema(schema_text, "the tool-call schema"));
  GrammarBuilder builder;
  JsonSchemaCompiler compiler(&builder, &schema);
  // One rule for a value, called once per item: the schema is compiled once however many items there are.
  const Rule item = builder.NewRule();
  ORCA_ASSIGN_OR_RETURN(Fragment value, compiler.Value(schema, ""));
  builder.DefineRule(item, value);
  const int64_t more = max_items == 0 ? -1 : max_items - 1;
  Fragment rest = builder.Repeat([&] { return builder.Seq(builder.Literal(separator), builder.Call(item)); }, 0, more);
  const Rule root = builder.NewRule();
  builder.DefineRule(root, builder.Seq({builder.Literal(begin), builder.Call(item), rest, builder.Literal(end)}));
  return builder.Finish(root);
}

absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonObject() {
  GrammarBuilder builder;
  JsonSchemaCompiler::Json none = JsonSchemaCompiler::Json::object();
  JsonSchemaCompiler compiler(&builder, &none);
  const Rule root = builder.NewRule();
  builder.DefineRule(root, compiler.AnyObject());
  return builder.Finish(root);
}

}  // namespace orca::structured
