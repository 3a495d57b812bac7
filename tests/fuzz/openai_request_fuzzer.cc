// OpenAI request bodies as a client sends them: JSON parse, then every endpoint's
// validation, then the chat template the gateway renders the parsed messages with.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/text/chat_template.h"
#include "services/gateway/openai_request.h"

namespace {
const orca::text::ChatTemplate& Template() {
  static const auto* t = orca::text::ChatTemplate::Builtin("llama3")->release();
  return *t;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orca::gateway;
  auto body = ParseJsonObject(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!body.ok()) return 0;
  (void)ParseCompletionRequest(*body);
  (void)ParseTokenizeRequest(*body);
  (void)ParseDetokenizeRequest(*body);
  auto chat = ParseChatRequest(*body);
  if (chat.ok()) {
    orca::text::ChatTemplateInputs inputs;
    inputs.messages = chat->messages;
    inputs.add_generation_prompt = chat->add_generation_prompt;
    inputs.extra = chat->chat_template_kwargs;
    (void)Template().Render(inputs);
  }
  return 0;
}
