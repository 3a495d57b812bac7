#pragma once
/// What the gateway knows about the model it serves: the tokenizer, the chat
/// template, the context length and the name clients use.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/text/chat_template.h"
#include "core/text/tokenizer.h"
#include "services/gateway/tool_call_request.h"

namespace orca::gateway {

class GatewayModel {
 public:
  struct Options {
    /// HF checkpoint directory or .gguf file (tokenizer, template, context length).
    std::string model_path;
    /// Name clients send as `model`; empty: the basename of model_path.
    std::string served_model_name;
    /// A template file or a built-in name (chatml, llama2, llama3) overriding
    /// the model's; empty: the model's own, else none (chat requests then get a
    /// 400 naming --chat-template, as vLLM answers; completions still work).
    std::string chat_template;
    /// Context limit; 0: the model's (config.json / GGUF metadata).
    int32_t max_model_len = 0;
    /// --tool-call-parser: llama3_json, hermes, mistral, or auto (empty too): detected
    /// from the chat template's text (DetectToolCallFormat).
    std::string tool_call_parser = "auto";
  };

  static absl::StatusOr<std::unique_ptr<GatewayModel>> Load(const Options& options);
  /// From parts (tests, tools). `chat_template` may be null (chat then fails
  /// with a 400). `max_model_len` 0 means "ask the schedulers".
  static std::unique_ptr<GatewayModel> FromParts(std::string name, std::unique_ptr<text::Tokenizer> tokenizer,
                                                 std::unique_ptr<text::ChatTemplate> chat_template,
                                                 int32_t max_model_len);

  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  /// Null when there is none (neither --chat-template nor the model's).
  const text::ChatTemplate* chat_template() const { return chat_template_.get(); }
  const std::string& name() const { return name_; }
  /// How this model writes tool calls (--tool-call-parser, or detected from the template).
  ToolCallFormat tool_call_format() const { return tool_call_format_; }
  /// 0 when unknown (then the schedulers' reported max_context applies).
  int32_t max_model_len() const { return max_model_len_; }
  /// Unix seconds at load, for /v1/models.
  int64_t created() const { return created_; }

 private:
  GatewayModel() = default;

  std::string name_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<text::ChatTemplate> chat_template_;
  int32_t max_model_len_ = 0;
  int64_t created_ = 0;
  ToolCallFormat tool_call_format_ = ToolCallFormat::kHermes;
};

}  // namespace orca::gateway
