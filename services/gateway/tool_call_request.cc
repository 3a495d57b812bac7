#include "services/gateway/tool_call_request.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/structured/json_schema_compiler.h"
#include "services/gateway/api_error.h"
#include "services/gateway/json_fields.h"
#include "services/gateway/structured_output_request.h"

namespace orca::gateway {
namespace {

using json = RequestJson;
using Choice = ToolsRequest::Choice;

constexpr size_t kMaxToolNameLength = 64;

// OpenAI's rule for function names: a-z, A-Z, 0-9, underscores and dashes, at most 64 characters.
bool ValidToolName(const std::string& name) {
  return !name.empty() && name.size() <= kMaxToolNameLength && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

absl::Status ParseTool(const json& tool, size_t i, ToolDefinition* out) {
  const std::string field = absl::StrCat("tools[", i, "]");
  if (!tool.is_object()) {
    return InvalidFieldError("tools", absl::StrCat("'", field, "' must be an object, got ", DescribeJsonValue(tool)));
  }
  JsonFieldReader r(tool, field + ".");
  std::string type;
  ORCA_RETURN_IF_ERROR(WithParam(r.String("type", &type), "tools"));
  if (type != "function") {
    return InvalidFieldError("tools", type.empty()
                                          ? absl::StrCat("'", field, ".type' is required")
                                          : absl::StrCat("'", field, ".type' must be 'function', got '", type, "'"));
  }
  const json* function = r.Find("function");
  if (function == nullptr || !function->is_object()) {
    return InvalidFieldError("tools", absl::StrCat("'", field, ".function' must be an object, got ",
                                                   function ? DescribeJsonValue(*function) : "nothing"));
  }
  JsonFieldReader fr(*function, field + ".function.");
  ORCA_RETURN_IF_ERROR(WithParam(fr.String("name", &out->name), "tools"));
  if (!ValidToolName(out->name)) {
    return InvalidFieldError("tools", absl::StrCat("'", field,
                                                   ".function.name' must be 1 to 64 characters of a-z, A-Z, 0-9, "
                                                   "underscores and dashes, got '",
                                                   out->name, "'"));
  }
  ORCA_RETURN_IF_ERROR(WithParam(fr.String("description", &out->description), "tools"));
  bool strict = false;  // "required" and named calls are enforced either way
  ORCA_RETURN_IF_ERROR(WithParam(fr.Bool("strict", &strict), "tools"));
  if (const json* params = fr.Find("parameters")) {
    if (!params->is_object()) {
      return InvalidFieldError("tools", absl::StrCat("'", field,
                                                     ".function.parameters' must be a JSON Schema object, "
                                                     "got ",
                                                     DescribeJsonValue(*params)));
    }
    out->parameters = *params;
  } else {
    out->parameters = {{"type", "object"}, {"properties", json::object()}};
  }
  return absl::OkStatus();
}

absl::Status ParseToolChoice(const json& choice, ToolsRequest* out) {
  if (choice.is_string()) {
    const std::string& s = choice.get_ref<const std::string&>();
    if (s == "none") {
      out->choice = Choice::kNone;
    } else if (s == "auto") {
      out->choice = Choice::kAuto;
    } else if (s == "required") {
      out->choice = Choice::kRequired;
    } else {
      return InvalidFieldError("tool_choice", absl::StrCat("'tool_choice' must be 'none', 'auto', 'required' or "
                                                           "{\"type\": \"function\", \"function\": {\"name\": ...}}, "
                                                           "got '",
                                                           s, "'"));
    }
    return absl::OkStatus();
  }
  if (!choice.is_object()) {
    return InvalidFieldError(
        "tool_choice", absl::StrCat("'tool_choice' must be a string or an object, got ", DescribeJsonValue(choice)));
  }
  JsonFieldReader r(choice, "tool_choice.");
  std::string type;
  ORCA_RETURN_IF_ERROR(WithParam(r.String("type", &type), "tool_choice"));
  if (type != "function") {
    return InvalidFieldError("tool_choice", absl::StrCat("'tool_choice.type' must be 'function', got ",
                                                         type.empty() ? "nothing" : "'" + type + "'"));
  }
  const json* function = r.Find("function");
  if (function == nullptr || !function->is_object()) {
    return InvalidFieldError("tool_choice", "'tool_choice.function' must be an object with a 'name'");
  }
  ORCA_RETURN_IF_ERROR(
      WithParam(JsonFieldReader(*function, "tool_choice.function.").String("name", &out->named), "tool_choice"));
  if (out->named.empty()) return InvalidFieldError("tool_choice", "'tool_choice.function.name' is required");
  out->choice = Choice::kNamed;
  return absl::OkStatus();
}

// {"name": <const>, "<args key>": <parameters>} with the keys in that order (the output follows `properties`'
// order, hence an ordered object) and nothing else.
nlohmann::ordered_json CallSchema(const ToolDefinition& tool, const char* args_key) {
  using ordered = nlohmann::ordered_json;
  ordered properties = ordered::object();
  properties["name"] = {{"const", tool.name}};
  properties[args_key] = tool.parameters;
  ordered schema = ordered::object();
  schema["type"] = "object";
  schema["properties"] = std::move(properties);
  schema["required"] = ordered::array({"name", args_key});
  schema["additionalProperties"] = false;
  return schema;
}

}  // namespace

const char* ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kLlama3Json:
      return "llama3_json";
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kMistral:
      return "mistral";
  }
  return "hermes";
}

absl::StatusOr<std::optional<ToolCallFormat>> ParseToolCallParserFlag(std::string_view name) {
  if (name.empty() || name == "auto") return std::optional<ToolCallFormat>();
  for (ToolCallFormat f : {ToolCallFormat::kLlama3Json, ToolCallFormat::kHermes, ToolCallFormat::kMistral}) {
    if (name == ToolCallFormatName(f)) return std::optional<ToolCallFormat>(f);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--tool-call-parser must be auto, llama3_json, hermes or mistral, got '", std::string(name), "'"));
}

ToolCallFormat DetectToolCallFormat(std::string_view source) {
  if (source.find("[TOOL_CALLS]") != std::string_view::npos) return ToolCallFormat::kMistral;
  if (source.find("<tool_call>") != std::string_view::npos) return ToolCallFormat::kHermes;
  if (source.find("<|python_tag|>") != std::string_view::npos ||
      source.find("<|start_header_id|>") != std::string_view::npos) {
    return ToolCallFormat::kLlama3Json;
  }
  return ToolCallFormat::kHermes;
}

std::string ToolsRequest::TemplateJson() const {
  using ordered = nlohmann::ordered_json;  // {"type", "function": {"name", "description", "parameters"}}, as HF
  ordered list = ordered::array();
  for (const ToolDefinition& t : tools) {
    ordered function = ordered::object();
    function["name"] = t.name;
    if (!t.description.empty()) function["description"] = t.description;
    function["parameters"] = t.parameters;
    ordered tool = ordered::object();
    tool["type"] = "function";
    tool["function"] = std::move(function);
    list.push_back(std::move(tool));
  }
  return list.dump();
}

std::vector<std::string> ToolsRequest::names() const {
  std::vector<std::string> out;
  out.reserve(tools.size());
  for (const ToolDefinition& t : tools) out.push_back(t.name);
  return out;
}

absl::Status ParseToolsRequest(const json& body, ToolsRequest* out) {
  JsonFieldReader r(body);
  for (const char* legacy : {"functions", "function_call"}) {
    if (r.Find(legacy) != nullptr) {
      return InvalidFieldError(legacy, absl::StrCat("'", legacy,
                                                    "' (the deprecated function-calling API) is not supported by this "
                                                    "server; use 'tools' and 'tool_choice'"));
    }
  }
  if (const json* tools = r.Find("tools")) {
    if (!tools->is_array()) {
      return InvalidFieldError("tools", absl::StrCat("'tools' must be an array, got ", DescribeJsonValue(*tools)));
    }
    if (tools->size() > kMaxTools) {
      return InvalidFieldError("tools",
                               absl::StrCat("'tools' may hold at most ", kMaxTools, " tools, got ", tools->size()));
    }
    absl::flat_hash_set<std::string> seen;
    for (size_t i = 0; i < tools->size(); ++i) {
      ToolDefinition tool;
      ORCA_RETURN_IF_ERROR(ParseTool((*tools)[i], i, &tool));
      if (!seen.insert(tool.name).second) {
        return InvalidFieldError("tools",
                                 absl::StrCat("'tools[", i, "].function.name' '", tool.name, "' is declared twice"));
      }
      out->tools.push_back(std::move(tool));
    }
  }
  out->choice = out->tools.empty() ? Choice::kNone : Choice::kAuto;
  if (const json* choice = r.Find("tool_choice")) {
    ORCA_RETURN_IF_ERROR(ParseToolChoice(*choice, out));
    if (out->tools.empty() && out->choice != Choice::kNone) {
      return InvalidFieldError("tool_choice", "'tool_choice' is only allowed when 'tools' are specified");
    }
  }
  if (out->choice == Choice::kNamed) {
    const std::vector<std::string> names = out->names();
    if (std::find(names.begin(), names.end(), out->named) == names.end()) {
      return InvalidFieldError("tool_choice", absl::StrCat("'tool_choice.function.name' '", out->named,
                                                           "' is not one of the functions in 'tools'"));
    }
  }
  ORCA_RETURN_IF_ERROR(r.Bool("parallel_tool_calls", &out->parallel_tool_calls));
  return absl::OkStatus();
}

absl::StatusOr<StructuredOutputSpec> ToolCallConstraint(const ToolsRequest& tools, ToolCallFormat format) {
  StructuredOutputSpec spec;
  if (tools.choice != Choice::kRequired && tools.choice != Choice::kNamed) return spec;
  const char* args_key = format == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
  nlohmann::ordered_json any_of = nlohmann::ordered_json::array();
  std::vector<size_t> indices;  // of the tools in the constraint
  for (size_t i = 0; i < tools.tools.size(); ++i) {
    if (tools.choice == Choice::kNamed && tools.tools[i].name != tools.named) continue;
    any_of.push_back(CallSchema(tools.tools[i], args_key));
    indices.push_back(i);
  }
  spec.kind = StructuredOutputSpec::Kind::kToolCalls;
  spec.schema = any_of.size() == 1 ? any_of[0].dump() : nlohmann::ordered_json{{"anyOf", std::move(any_of)}}.dump();
  spec.max_calls = (tools.choice == Choice::kNamed || !tools.parallel_tool_calls) ? 1 : 0;
  switch (format) {
    case ToolCallFormat::kLlama3Json:
      spec.calls_separator = "; ";
      break;
    case ToolCallFormat::kHermes:
      spec.calls_begin = "<tool_call>\n";
      spec.calls_separator = "\n</tool_call>\n<tool_call>\n";
      spec.calls_end = "\n</tool_call>";
      break;
    case ToolCallFormat::kMistral:
      spec.calls_begin = "[TOOL_CALLS][";
      spec.calls_separator = ", ";
      spec.calls_end = "]";
      break;
  }
  // Compiled (and cached) once per distinct tool set; on failure, find the tool whose schema is refused so that
  // the error names it and its own JSON pointer.
  if (absl::Status status = ValidateStructuredOutput(spec, "tools"); !status.ok()) {
    for (size_t i : indices) {
      absl::StatusOr<std::shared_ptr<const structured::Grammar>> own =
          structured::CompileJsonSchema(tools.tools[i].parameters.dump());
      if (!own.ok()) {
        return InvalidFieldError("tools", absl::StrCat("'tools[", i, "].function.parameters' cannot be enforced by ",
                                                       tools.choice == Choice::kNamed ? "a named 'tool_choice'"
                                                                                      : "'tool_choice': 'required'",
                                                       ": ", own.status().message()));
      }
    }
    return status;
  }
  return spec;
}

}  // namespace orca::gateway
