// A chat template as a model file ships it (tokenizer_config.json or GGUF metadata):
// parse, then render a conversation with it. Templates are untrusted input, so
// neither may crash, hang or exhaust memory.
#include <cstdint>
#include <string>

#include "core/text/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tmpl = orca::text::ChatTemplate::FromSource(std::string(reinterpret_cast<const char*>(data), size));
  if (!tmpl.ok()) return 0;
  orca::text::ChatTemplateInputs inputs;
  inputs.messages = {{"system", "Be brief."}, {"user", "Hi <b>there</b>"}, {"assistant", "Hello"}, {"user", "Bye"}};
  inputs.bos_token = "<s>";
  inputs.eos_token = "</s>";
  inputs.extra = {{"enable_thinking", "false"}};
  (void)(*tmpl)->Render(inputs);
  return 0;
}
