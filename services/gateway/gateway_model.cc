#include "services/gateway/gateway_model.h"

#include <ctime>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "core/common/mapped_file.h"
#include "core/common/model_name.h"
#include "core/common/status_macros.h"
#include "core/formats/context_length.h"

namespace orca::gateway {
namespace {

namespace fs = std::filesystem;

// The --chat-template file or built-in, else the model's own; null when neither exists (chat then gets a 400
// naming --chat-template, as in vLLM: no template is guessed for a model that ships none).
absl::StatusOr<std::unique_ptr<text::ChatTemplate>> LoadChatTemplate(const std::string& model_path,
                                                                     const std::string& override_name) {
  if (!override_name.empty()) {
    std::error_code ec;
    if (fs::is_regular_file(override_name, ec)) {
      ORCA_ASSIGN_OR_RETURN(std::string source, ReadFileToString(override_name));
      auto parsed = text::ChatTemplate::FromSource(std::move(source));
      if (!parsed.ok()) return Annotate(parsed.status(), "--chat-template " + override_name);
      return parsed;
    }
    auto builtin = text::ChatTemplate::Builtin(override_name);
    if (!builtin.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--chat-template '", override_name,
                                                     "' is neither a file nor a built-in (chatml, llama2, llama3)"));
    }
    return builtin;
  }
  auto from_model = text::ChatTemplate::FromModel(model_path);
  if (from_model.ok()) return from_model;
  if (!absl::IsNotFound(from_model.status())) {
    return Annotate(from_model.status(), "chat template of " + model_path);
  }
  ORCA_LOG(WARNING) << "the model ships no chat template: chat requests get a 400 until one is given with "
                       "--chat-template (a file, or chatml, llama2, llama3); completions work without";
  return std::unique_ptr<text::ChatTemplate>();
}

}  // namespace

absl::StatusOr<std::unique_ptr<GatewayModel>> GatewayModel::Load(const Options& options) {
  if (options.model_path.empty()) return absl::InvalidArgumentError("--model is required");
  if (options.max_model_len < 0) return absl::InvalidArgumentError("--max-model-len must be >= 0");
  std::unique_ptr<GatewayModel> model(new GatewayModel());
  model->name_ = options.served_model_name;
  if (model->name_.empty()) model->name_ = ServedModelNameFromPath(options.model_path);
  ORCA_ASSIGN_OR_RETURN(model->tokenizer_, text::Tokenizer::Load(options.model_path));
  ORCA_ASSIGN_OR_RETURN(model->chat_template_, LoadChatTemplate(options.model_path, options.chat_template));
  ORCA_ASSIGN_OR_RETURN(std::optional<ToolCallFormat> format, ParseToolCallParserFlag(options.tool_call_parser));
  model->tool_call_format_ =
      format ? *format : DetectToolCallFormat(model->chat_template_ ? model->chat_template_->source() : "");
  ORCA_LOG(INFO) << "tool calls are parsed as " << ToolCallFormatName(model->tool_call_format_)
                 << (format ? " (--tool-call-parser)" : " (detected from the chat template)");
  model->max_model_len_ = options.max_model_len;
  absl::StatusOr<int32_t> declared = formats::ReadModelContextLength(options.model_path);
  if (declared.ok()) {
    if (model->max_model_len_ == 0 || model->max_model_len_ > *declared) {
      if (model->max_model_len_ > *declared) {
        ORCA_LOG(WARNING) << "--max-model-len " << model->max_model_len_ << " exceeds the model's context " << *declared
                          << "; using " << *declared;
      }
      model->max_model_len_ = *declared;
    }
  } else if (model->max_model_len_ == 0) {
    ORCA_LOG(WARNING) << "context length unknown (" << declared.status().message()
                      << "); using the schedulers' max_context";
  }
  model->created_ = static_cast<int64_t>(std::time(nullptr));
  return model;
}

std::unique_ptr<GatewayModel> GatewayModel::FromParts(std::string name, std::unique_ptr<text::Tokenizer> tokenizer,
                                                      std::unique_ptr<text::ChatTemplate> chat_template,
                                                      int32_t max_model_len) {
  std::unique_ptr<GatewayModel> model(new GatewayModel());
  model->name_ = std::move(name);
  model->tokenizer_ = std::move(tokenizer);
  model->chat_template_ = std::move(chat_template);
  model->tool_call_format_ = DetectToolCallFormat(model->chat_template_ ? model->chat_template_->source() : "");
  model->max_model_len_ = max_model_len;
  model->created_ = static_cast<int64_t>(std::time(nullptr));
  return model;
}

}  // namespace orca::gateway
