#pragma once
/// Chat templates: renders a conversation into a prompt with the model's own
/// Jinja template (from tokenizer_config.json or GGUF `tokenizer.chat_template`),
/// or a named built-in (`chatml`, `llama2`, `llama3`) when the model has none.
/// Implements the Jinja subset that real model families' templates use.

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace orca::text {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool", ...
  std::string content;  // text content (array-of-parts content is joined by the caller)
};

struct ChatTemplateInputs {
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  /// Extra template variables (string values), e.g. from `chat_template_kwargs`.
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
  /// Renders the prompt. Errors raised by the template (`raise_exception`) and
  /// runtime type errors come back as InvalidArgument with the message.
  virtual absl::StatusOr<std::string> Render(const ChatTemplateInputs& inputs) const = 0;
  virtual const std::string& source() const = 0;
};

}  // namespace orca::text
