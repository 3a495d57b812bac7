#pragma once
/// Chat templates: renders a conversation into a prompt with the model's own
/// Jinja template (from tokenizer_config.json or GGUF `tokenizer.chat_template`),
/// or a named built-in (`chatml`, `llama2`, `llama3`) when the model has none.
/// Implements the Jinja subset that real model families' templates use, in a
/// sandbox: every render runs within a RenderBudget (render_budget.h), so a
/// hostile template or input ends with an error instead of hanging, crashing
/// or exhausting memory.

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/text/render_budget.h"

namespace orca::text {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool", ...
  std::string content;  // text content (array-of-parts content is joined by the caller)
  /// Assistant messages that called tools: a JSON array of {"id", "type": "function",
  /// "function": {"name", "arguments"}} (arguments as an object when they parse, as HF
  /// templates expect); empty when none. The template sees it as `message.tool_calls`,
  /// and `message.content` is None when the message had no content.
  std::string tool_calls_json;
  bool content_is_null = false;
  /// Tool results (role "tool"): the call they answer and, optionally, the function's name.
  std::string tool_call_id;
  std::string name;
};

struct ChatTemplateInputs {
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  /// The request's tools as a JSON array (HF convention: {"type": "function", "function":
  /// {...}}), the template's `tools`; empty: `tools` is undefined (None in `is none` tests).
  std::string tools_json;
  /// Extra template variables, e.g. from `chat_template_kwargs`: a value that is
  /// JSON (true, 3, {"a": 1}) keeps its type, anything else is a string.
  std::map<std::string, std::string> extra;
};

class ChatTemplate {
 public:
  /// Parses a Jinja template. InvalidArgument with line/column on a syntax error.
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> FromSource(std::string source);
  /// The model's template: tokenizer_config.json `chat_template` (string, or the
  /// entry named "default" in a list) in a model directory, or GGUF metadata
  /// `tokenizer.chat_template`. NotFound when the model ships none.
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> FromModel(const std::string& model_path);
  /// Built-ins: "chatml", "llama2", "llama3". NotFound otherwise.
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> Builtin(std::string_view name);

  virtual ~ChatTemplate() = default;
  /// Renders the prompt within the default RenderBudget.
  absl::StatusOr<std::string> Render(const ChatTemplateInputs& inputs) const { return Render(inputs, RenderBudget()); }
  /// Renders the prompt within `budget` (e.g. with a deadline). Errors raised
  /// by the template (`raise_exception`), runtime type errors, exceeded limits
  /// and JSON inputs (tools, tool calls, kwargs) nested deeper than
  /// `budget.max_value_depth` come back as InvalidArgument "chat template: ...".
  /// Thread-safe: renders share nothing but the parsed template.
  virtual absl::StatusOr<std::string> Render(const ChatTemplateInputs& inputs, const RenderBudget& budget) const = 0;
  virtual const std::string& source() const = 0;
};

}  // namespace orca::text
