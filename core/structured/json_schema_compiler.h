#pragma once
/// JSON Schema (a practical subset, draft 2020-12 spelling plus draft-07's
/// `definitions`) compiled into a byte-level grammar of the JSON texts valid
/// against it.
///
/// Supported: type (a name or an array of names), enum, const, minimum,
/// maximum, exclusiveMinimum, exclusiveMaximum (integers: any bounds; numbers:
/// inclusive integer bounds, generated within [max(minimum, 0), maximum]), properties,
/// required, additionalProperties (false, true or a schema; extra keys are
/// then limited to [A-Za-z0-9_-]+ and never a declared name), items (schema or
/// false), prefixItems, minItems, maxItems, minLength, maxLength (strings;
/// counted in code points), pattern (core/structured/regex_compiler.h; matched
/// against the whole string), format (date, time, date-time, uuid, email,
/// ipv4), anyOf, oneOf (treated as anyOf: the output matches at least one
/// branch, which satisfies oneOf only when the branches are disjoint),
/// single-element allOf, $ref to "#", "#/$defs/NAME" or "#/definitions/NAME"
/// (recursion allowed), boolean schemas (true), and the annotations title,
/// description, examples, default, $schema, $id, $comment, deprecated,
/// readOnly, writeOnly (ignored). Every other keyword is refused with an
/// InvalidArgument naming the keyword and its JSON pointer, e.g.
/// "unsupported JSON Schema keyword 'minimum' at /properties/age".
///
/// Generation policy (sound, not complete): properties are emitted in the
/// order `properties` lists them, optional ones may be skipped; without
/// `additionalProperties` only declared properties are generated (they are
/// always valid); numbers have at most 16 integer and 16 fraction digits and a
/// 2-digit exponent; arrays without `maxItems` are unbounded, and `maxItems`
/// above 256 is generated as at most max(minItems, 256) items.
///
/// Limits (core/structured/limits.h): the schema text is at most
/// kMaxSchemaBytes and nests at most orca::kMaxJsonDepth levels (checked while
/// it is parsed), subschemas nest at most kMaxSchemaDepth deep, the grammar has
/// at most kMaxGrammarStates states, and a `$ref` cycle that no finite value
/// satisfies ({"$ref": "#"}, a required property referring back to its own
/// object) is refused naming the `$ref` and where it is used; recursion that
/// may stop (an optional child, an array of children) compiles.
///
/// Whitespace: between JSON tokens at most one run, which is either a single
/// space or one newline followed by up to 20 spaces; none before the first or
/// after the last token. A small model therefore cannot loop on whitespace.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/structured/grammar.h"
#include "nlohmann/json.hpp"

namespace orca::structured {

/// Compiles schemas into one GrammarBuilder. Reusable as a building block
/// (e.g. a later tool-calling grammar: a literal wrapper around anyOf the
/// tools' argument schemas, each compiled with Value()).
class JsonSchemaCompiler {
 public:
  using Json = nlohmann::ordered_json;
  /// `root` is the document "$ref": "#..." pointers resolve against; it must outlive the compiler.
  JsonSchemaCompiler(GrammarBuilder* builder, const Json* root) : b_(builder), root_(root) {}

  /// A fragment matching the JSON texts valid against `schema`; `path` is its JSON pointer (for errors).
  /// Bounded whatever `schema` is: subschemas nest at most kMaxSchemaDepth deep (core/structured/limits.h;
  /// `$ref` targets are compiled from a worklist, not by recursion), and compiling stops with an error
  /// naming the pointer once the builder is out of states. The `$ref` rules are labelled with their
  /// pointer, so that GrammarBuilder::Finish names a `$ref` cycle that can never end.
  absl::StatusOr<Fragment> Value(const Json& schema, const std::string& path);
  /// Any JSON value / any JSON object (shared recursive rules).
  Fragment AnyValue();
  Fragment AnyObject();

 private:
  // A `$ref` target whose rule is declared and whose body is still to compile.
  struct PendingRef {
    Rule rule;
    const Json* target;
    std::string pointer;
  };
  // Value() without draining the $ref worklist; counts the nesting depth.
  absl::StatusOr<Fragment> Subschema(const Json& schema, const std::string& path);
  absl::StatusOr<Fragment> Body(const Json& schema, const std::string& path);
  absl::Status CompilePendingRefs();
  // `object`'s member `name`, nullptr if none. ordered_json finds members by a linear scan, so large
  // objects (a $defs of thousands of schemas, each named by a $ref) are indexed once.
  const Json* Member(const Json& object, const std::string& name);
  absl::StatusOr<Fragment> Typed(const Json& schema, const std::string& type, const std::string& path);
  absl::StatusOr<Fragment> Object(const Json& schema, const std::string& path);
  absl::StatusOr<Fragment> Array(const Json& schema, const std::string& path);
  absl::StatusOr<Fragment> String(const Json& schema, const std::string& path);
  absl::StatusOr<Fragment> Ref(const std::string& ref, const std::string& path);
  absl::StatusOr<Fragment> Alternatives(const Json& list, const std::string& keyword, const std::string& path);
  absl::StatusOr<Fragment> Enum(const Json& values, const Json& schema, const std::string& path);
  // A call of the rule compiled from `schema` (property values and items appear more than once).
  absl::StatusOr<Fragment> CallValue(const Json& schema, const std::string& path);
  Fragment Ws();
  Fragment Token(std::string_view text) { return b_->Literal(text); }
  Fragment StringChar();
  Fragment JsonString();
  Fragment Number(bool integer);
  // number / integer with minimum, maximum, exclusiveMinimum, exclusiveMaximum.
  absl::StatusOr<Fragment> BoundedNumber(const Json& schema, bool integer, const std::string& path);
  // Decimal integers in [lo, hi] (no leading zeros, no "-0").
  Fragment IntRange(int64_t lo, int64_t hi);
  Fragment NonNegativeRange(int64_t lo, int64_t hi);
  Fragment SameLengthRange(const std::string& lo, const std::string& hi);
  Fragment ExtraKey(const std::vector<std::string>& declared);
  void EnsureAnyRules();

  GrammarBuilder* b_;
  const Json* root_;
  absl::flat_hash_map<std::string, Rule> refs_;
  std::vector<PendingRef> pending_;
  absl::flat_hash_map<const Json*, absl::flat_hash_map<std::string, const Json*>> member_index_;
  int depth_ = 0;
  bool any_rules_ = false;
  Rule any_value_, any_object_, any_array_;
};

/// The grammar of JSON texts valid against `schema_text` (a JSON Schema as text).
absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(std::string_view schema_text);
/// `begin` V (`separator` V)* `end`: one to `max_items` (0 = unbounded) JSON values, each valid
/// against `schema_text`, framed by literals (tool calls: StructuredOutputSpec::kToolCalls).
absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSequence(std::string_view schema_text, std::string_view begin,
                                                                   std::string_view separator, std::string_view end,
                                                                   int32_t max_items);
/// The grammar of JSON objects (OpenAI's JSON mode).
absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonObject();

}  // namespace orca::structured
