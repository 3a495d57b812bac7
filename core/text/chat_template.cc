#include "core/text/chat_template.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "core/formats/gguf_file.h"
#include "core/text/jinja_ast.h"
#include "core/text/jinja_interpreter.h"

namespace orca::text {
namespace internal {
struct BuiltinTemplate {
  const char* name;
  const char* source;
};
extern const BuiltinTemplate kBuiltinChatTemplates[];
extern const int kNumBuiltinChatTemplates;
}  // namespace internal

namespace {

// A JSON input of the template: nullopt when `text` is not JSON; an error naming
// `what` when it nests deeper than the budget allows.
absl::StatusOr<std::optional<jinja::Value>> JsonInput(const std::string& text, std::string_view what,
                                                      const RenderBudget& budget) {
  absl::StatusOr<std::optional<jinja::Value>> v = jinja::ValueFromJsonText(text, budget.max_value_depth);
  if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": ", v.status().message()));
  return v;
}

// The template's variables: the conversation, tools, special tokens and extra kwargs.
absl::StatusOr<jinja::Value::Dict> Globals(const ChatTemplateInputs& inputs, const RenderBudget& budget) {
  jinja::Value::Dict globals;
  for (const auto& [key, text] : inputs.extra) {
    // Extra variables given as JSON literals (true, 3, {"a": 1}) keep their
    // type, so `enable_thinking is false` works; anything else is a string.
    ORCA_ASSIGN_OR_RETURN(std::optional<jinja::Value> v, JsonInput(text, "chat_template_kwargs '" + key + "'", budget));
    globals.Set(key, v.has_value() ? *std::move(v) : jinja::Value::String(text));
  }
  jinja::Value::List messages;
  messages.reserve(inputs.messages.size());
  for (size_t i = 0; i < inputs.messages.size(); ++i) {
    const ChatMessage& m = inputs.messages[i];
    jinja::Value::Dict d;
    d.Set("role", jinja::Value::String(m.role));
    d.Set("content", m.content_is_null ? jinja::Value::None() : jinja::Value::String(m.content));
    if (!m.tool_calls_json.empty()) {
      ORCA_ASSIGN_OR_RETURN(std::optional<jinja::Value> calls,
                            JsonInput(m.tool_calls_json, absl::StrCat("messages[", i, "].tool_calls"), budget));
      if (!calls.has_value()) return absl::InvalidArgumentError("a message's tool_calls are not valid JSON");
      d.Set("tool_calls", *std::move(calls));
    }
    if (!m.tool_call_id.empty()) d.Set("tool_call_id", jinja::Value::String(m.tool_call_id));
    if (!m.name.empty()) d.Set("name", jinja::Value::String(m.name));
    messages.push_back(jinja::Value::MakeDict(std::move(d)));
  }
  if (!inputs.tools_json.empty()) {
    ORCA_ASSIGN_OR_RETURN(std::optional<jinja::Value> tools, JsonInput(inputs.tools_json, "tools", budget));
    if (!tools.has_value()) return absl::InvalidArgumentError("the tools are not valid JSON");
    globals.Set("tools", *std::move(tools));
  }
  globals.Set("messages", jinja::Value::MakeList(std::move(messages)));
  globals.Set("add_generation_prompt", jinja::Value::Bool(inputs.add_generation_prompt));
  globals.Set("bos_token", jinja::Value::String(inputs.bos_token));
  globals.Set("eos_token", jinja::Value::String(inputs.eos_token));
  return globals;
}

class JinjaChatTemplate : public ChatTemplate {
 public:
  JinjaChatTemplate(std::string source, jinja::Program program)
      : source_(std::move(source)), program_(std::move(program)) {}

  absl::StatusOr<std::string> Render(const ChatTemplateInputs& inputs, const RenderBudget& budget) const override {
    absl::StatusOr<jinja::Value::Dict> globals = Globals(inputs, budget);
    if (!globals.ok()) return absl::InvalidArgumentError("chat template: " + std::string(globals.status().message()));
    absl::StatusOr<std::string> out = jinja::Render(program_, *globals, budget);
    if (!out.ok()) return absl::InvalidArgumentError("chat template: " + std::string(out.status().message()));
    return out;
  }
  const std::string& source() const override { return source_; }

 private:
  std::string source_;
  jinja::Program program_;
};

// tokenizer_config.json `chat_template`: a string, or a list of {name, template}.
absl::StatusOr<std::string> TemplateFromConfig(const std::string& text, const std::string& where) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(where + " is not a JSON object");
  auto it = j.find("chat_template");
  if (it == j.end() || it->is_null()) return absl::NotFoundError(where + " has no chat_template");
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const auto& entry : *it) {
      if (entry.is_object() && entry.value("name", std::string()) == "default" && entry.contains("template") &&
          entry.at("template").is_string()) {
        return entry.at("template").get<std::string>();
      }
    }
    return absl::NotFoundError(where + " chat_template list has no entry named \"default\"");
  }
  return absl::InvalidArgumentError(where + " chat_template must be a string or a list of {name, template}");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::FromSource(std::string source) {
  absl::StatusOr<jinja::Program> program = jinja::Parse(source);
  if (!program.ok()) return absl::InvalidArgumentError("chat template: " + std::string(program.status().message()));
  return std::unique_ptr<ChatTemplate>(new JinjaChatTemplate(std::move(source), std::move(*program)));
}

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::FromModel(const std::string& model_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path path(model_path);
  if (fs::is_regular_file(path, ec) && path.extension() == ".gguf") {
    ORCA_ASSIGN_OR_RETURN(std::unique_ptr<formats::GgufFile> gguf, formats::GgufFile::Open(model_path));
    if (!gguf->Has("tokenizer.chat_template"))
      return absl::NotFoundError(model_path + " has no tokenizer.chat_template");
    ORCA_ASSIGN_OR_RETURN(std::string source, gguf->GetString("tokenizer.chat_template"));
    return FromSource(std::move(source));
  }
  if (!fs::is_directory(path, ec)) return absl::NotFoundError("model path " + model_path + " does not exist");
  const fs::path config = path / "tokenizer_config.json";
  if (fs::exists(config, ec)) {
    ORCA_ASSIGN_OR_RETURN(std::string text, ReadFileToString(config.string()));
    absl::StatusOr<std::string> source = TemplateFromConfig(text, config.string());
    if (source.ok()) return FromSource(std::move(*source));
    if (!absl::IsNotFound(source.status())) return source.status();
  }
  // Newer transformers versions save the template beside the config.
  if (fs::exists(path / "chat_template.jinja", ec)) {
    ORCA_ASSIGN_OR_RETURN(std::string source, ReadFileToString((path / "chat_template.jinja").string()));
    return FromSource(std::move(source));
  }
  return absl::NotFoundError(model_path + " ships no chat template");
}

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::Builtin(std::string_view name) {
  std::string names;
  for (int i = 0; i < internal::kNumBuiltinChatTemplates; ++i) {
    if (name == internal::kBuiltinChatTemplates[i].name) return FromSource(internal::kBuiltinChatTemplates[i].source);
    names += (i ? ", " : "") + std::string(internal::kBuiltinChatTemplates[i].name);
  }
  return absl::NotFoundError(absl::StrCat("no built-in chat template '", std::string(name), "' (have: ", names, ")"));
}

}  // namespace orca::text
