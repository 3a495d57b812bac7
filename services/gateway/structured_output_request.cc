#include "services/gateway/structured_output_request.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/json_parse.h"
#include "core/common/sampling_limits.h"
#include "core/common/status_macros.h"
#include "core/structured/compile.h"
#include "services/gateway/api_error.h"
#include "services/gateway/json_fields.h"

namespace orca::gateway {
namespace {

using json = RequestJson;  // schemas keep their keys in the client's order
using Kind = StructuredOutputSpec::Kind;

structured::GrammarCache& Cache() {
  static auto* cache = new structured::GrammarCache(256);
  return *cache;
}

absl::Status ParseResponseFormat(const json& fmt, StructuredOutputSpec* spec) {
  const char* kParam = "response_format";
  if (!fmt.is_object())
    return InvalidFieldError(kParam, absl::StrCat("'response_format' must be an object, got ", DescribeJsonValue(fmt)));
  JsonFieldReader r(fmt, "response_format.");
  std::string type;
  ORCA_RETURN_IF_ERROR(WithParam(r.String("type", &type), kParam));
  if (type == "text") return absl::OkStatus();
  if (type == "json_object") {
    spec->kind = Kind::kJsonObject;
    return absl::OkStatus();
  }
  if (type != "json_schema") {
    return InvalidFieldError(kParam, type.empty() ? "'response_format.type' is required"
                                                  : absl::StrCat("'response_format.type' must be 'text', "
                                                                 "'json_object' or 'json_schema', got '",
                                                                 type, "'"));
  }
  const json* js = r.Find("json_schema");
  if (js == nullptr)
    return InvalidFieldError(kParam, "'response_format.json_schema' is required for type 'json_schema'");
  if (!js->is_object()) {
    return InvalidFieldError(
        kParam, absl::StrCat("'response_format.json_schema' must be an object, got ", DescribeJsonValue(*js)));
  }
  JsonFieldReader jr(*js, "response_format.json_schema.");
  std::string name;
  ORCA_RETURN_IF_ERROR(WithParam(jr.String("name", &name), kParam));
  std::string description;
  ORCA_RETURN_IF_ERROR(WithParam(jr.String("description", &description), kParam));
  bool strict = false;  // enforced either way: the output always follows the schema
  ORCA_RETURN_IF_ERROR(WithParam(jr.Bool("strict", &strict), kParam));
  const json* schema = jr.Find("schema");
  if (schema == nullptr) return InvalidFieldError(kParam, "'response_format.json_schema.schema' is required");
  if (!schema->is_object() && !schema->is_boolean()) {
    return InvalidFieldError(kParam, absl::StrCat("'response_format.json_schema.schema' must be an object, got ",
                                                  DescribeJsonValue(*schema)));
  }
  spec->kind = Kind::kJsonSchema;
  spec->schema = schema->dump();
  return absl::OkStatus();
}

absl::Status ParseGuidedJson(const json& value, StructuredOutputSpec* spec) {
  if (value.is_string()) {
    // JSON inside a string escapes the body's nesting limit: parse it with the same limit.
    absl::StatusOr<json> parsed = ParseOrderedJson(value.get_ref<const std::string&>());
    if (!parsed.ok()) {
      return InvalidFieldError("guided_json",
                               absl::StrCat("'guided_json' is a string but not JSON: ", parsed.status().message()));
    }
    if (!parsed->is_object() && !parsed->is_boolean())
      return InvalidFieldError("guided_json", "'guided_json' must be a JSON Schema (an object)");
    spec->schema = parsed->dump();
  } else if (value.is_object() || value.is_boolean()) {
    spec->schema = value.dump();
  } else {
    return InvalidFieldError("guided_json", absl::StrCat("'guided_json' must be a JSON Schema object or its text, got ",
                                                         DescribeJsonValue(value)));
  }
  spec->kind = Kind::kJsonSchema;
  return absl::OkStatus();
}

absl::Status ParseGuidedChoice(const json& value, StructuredOutputSpec* spec) {
  if (!value.is_array() || value.empty())
    return InvalidFieldError("guided_choice", absl::StrCat("'guided_choice' must be a non-empty array of strings, got ",
                                                           DescribeJsonValue(value)));
  if (std::string error = limits::kGuidedChoices.Check(static_cast<int64_t>(value.size())); !error.empty())
    return InvalidFieldError("guided_choice", error);
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string() || value[i].get_ref<const std::string&>().empty())
      return InvalidFieldError(
          "guided_choice",
          absl::StrCat("'guided_choice[", i, "]' must be a non-empty string, got ", DescribeJsonValue(value[i])));
    spec->choices.push_back(value[i].get<std::string>());
  }
  spec->kind = Kind::kChoice;
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseStructuredOutput(const json& body, StructuredOutputSpec* spec) {
  JsonFieldReader r(body);
  for (const char* unsupported : {"guided_grammar", "guided_whitespace_pattern", "structural_tag"}) {
    if (r.Find(unsupported) != nullptr)
      return InvalidFieldError(unsupported, absl::StrCat("'", unsupported, "' is not supported by this server"));
  }
  std::string backend;  // vLLM's choice of backend: there is one here
  ORCA_RETURN_IF_ERROR(r.String("guided_decoding_backend", &backend));
  std::vector<std::string> given;  // the fields that constrain the output
  if (const json* fmt = r.Find("response_format")) {
    ORCA_RETURN_IF_ERROR(ParseResponseFormat(*fmt, spec));
    if (spec->enabled()) given.push_back("response_format");
  }
  StructuredOutputSpec guided;
  if (const json* v = r.Find("guided_json")) {
    ORCA_RETURN_IF_ERROR(ParseGuidedJson(*v, &guided));
    given.push_back("guided_json");
  }
  if (const json* v = r.Find("guided_regex")) {
    if (!v->is_string() || v->get_ref<const std::string&>().empty())
      return InvalidFieldError("guided_regex",
                               absl::StrCat("'guided_regex' must be a non-empty string, got ", DescribeJsonValue(*v)));
    guided.kind = Kind::kRegex;
    guided.regex = v->get<std::string>();
    given.push_back("guided_regex");
  }
  if (const json* v = r.Find("guided_choice")) {
    ORCA_RETURN_IF_ERROR(ParseGuidedChoice(*v, &guided));
    given.push_back("guided_choice");
  }
  if (given.size() > 1) {
    return InvalidFieldError(given[1],
                             absl::StrCat("'", given[0], "' and '", given[1],
                                          "' both constrain the output; give at most one of "
                                          "response_format (json), guided_json, guided_regex, guided_choice"));
  }
  if (guided.enabled()) *spec = std::move(guided);
  if (!spec->enabled()) return absl::OkStatus();
  return ValidateStructuredOutput(*spec, given[0]);
}

absl::Status ValidateStructuredOutput(const StructuredOutputSpec& spec, const std::string& param) {
  if (!spec.enabled()) return absl::OkStatus();
  // The table's own limits first (core/common/sampling_limits.h), then the compiler's.
  if (std::string error = CheckStructuredOutputLimits(spec); !error.empty()) return InvalidFieldError(param, error);
  if (absl::StatusOr<std::shared_ptr<const structured::Grammar>> g = Cache().Get(spec); !g.ok())
    return InvalidFieldError(param, absl::StrCat("'", param, "' cannot be enforced: ", g.status().message()));
  return absl::OkStatus();
}

}  // namespace orca::gateway
