#pragma once
/// Tool calling on the chat API: the request side. Parses OpenAI's `tools`
/// ([{"type": "function", "function": {"name", "description", "parameters"}}]),
/// `tool_choice` ("none" | "auto" | "required" | {"type": "function",
/// "function": {"name"}}) and `parallel_tool_calls`; names the tool-call
/// format the model writes (ToolCallFormat, chosen by --tool-call-parser or
/// detected from the chat template's text); and turns "required" and a named
/// choice into a structured-output constraint in that format, so the output is
/// guaranteed to be a well-formed call of a declared tool with arguments valid
/// against its `parameters` schema. The output side is tool_call_parser.h.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/common/structured_output.h"
#include "services/gateway/json_fields.h"

namespace orca::gateway {

inline constexpr size_t kMaxTools = 128;

/// How a model family writes tool calls into its output text.
enum class ToolCallFormat {
  /// Llama 3.1+ JSON tool calling: `{"name": "f", "parameters": {...}}` as the whole
  /// output (optionally after `<|python_tag|>`); several calls separated by "; ".
  kLlama3Json,
  /// Hermes / Qwen2.5: `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`, one block per call.
  kHermes,
  /// Mistral: `[TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]`.
  kMistral,
};

/// "llama3_json", "hermes", "mistral".
const char* ToolCallFormatName(ToolCallFormat format);
/// The --tool-call-parser flag: one of the names above, or "auto" (nullopt: detect).
absl::StatusOr<std::optional<ToolCallFormat>> ParseToolCallParserFlag(std::string_view name);
/// The format a chat template's text implies: "[TOOL_CALLS]" → Mistral,
/// "<tool_call>" → Hermes, "<|python_tag|>" or Llama 3 headers (`<|start_header_id|>`)
/// → Llama 3 JSON; anything else → Hermes (the format of Orca's built-in chatml).
ToolCallFormat DetectToolCallFormat(std::string_view template_source);

struct ToolDefinition {
  std::string name;
  std::string description;
  /// The JSON Schema of the arguments (an object schema; {"type": "object"} when absent),
  /// its keys in the client's order: the chat template shows it as sent (tojson does not
  /// sort), and the constrained output follows its `properties` order.
  RequestJson parameters;
};

/// The tool-calling fields of one chat request.
struct ToolsRequest {
  enum class Choice { kNone, kAuto, kRequired, kNamed };
  std::vector<ToolDefinition> tools;
  /// Default: "auto" with tools, "none" without (OpenAI's).
  Choice choice = Choice::kNone;
  std::string named;  ///< kNamed: the function's name (one of `tools`)
  bool parallel_tool_calls = true;

  /// Whether the template renders the tools and the output is parsed for calls.
  bool active() const { return !tools.empty() && choice != Choice::kNone; }
  /// The tools as the chat template sees them (HF convention): a JSON list of
  /// {"type": "function", "function": {"name", "description"?, "parameters"}}.
  std::string TemplateJson() const;
  std::vector<std::string> names() const;
};

/// Reads `tools`, `tool_choice`, `parallel_tool_calls` (and refuses the legacy
/// `functions` / `function_call`). InvalidArgument naming the field on a malformed
/// tool, a duplicate name, an unknown named function, or a choice needing tools.
absl::Status ParseToolsRequest(const RequestJson& body, ToolsRequest* out);

/// The constraint enforcing "required" or a named choice in `format`
/// (StructuredOutputSpec::kToolCalls): one call of a declared tool (the named one),
/// or with `parallel_tool_calls` one or more. InvalidArgument (param "tools") when
/// a tool's `parameters` uses a JSON Schema keyword the engine cannot enforce.
/// Returns a spec of kind kNone for "none" and "auto".
absl::StatusOr<StructuredOutputSpec> ToolCallConstraint(const ToolsRequest& tools, ToolCallFormat format);

}  // namespace orca::gateway
