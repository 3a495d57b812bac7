// A chat template as a model file ships it (tokenizer_config.json or GGUF metadata):
// parse, then render a conversation with it. Templates are untrusted input, so
// neither may crash, hang or exhaust memory.
#include <cstdint>
#include <string>

#include "core/text/chat_template.h"
#include "core/text/render_budget.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tmpl = orca::text::ChatTemplate::FromSource(std::string(reinterpret_cast<const char*>(data), size));
  if (!tmpl.ok()) return 0;
  orca::text::ChatTemplateInputs inputs;
  inputs.messages = {{"system", "Be brief."}, {"user", "Hi <b>there</b>"}, {"assistant", "Hello"}, {"user", "Bye"}};
  inputs.bos_token = "<s>";
  inputs.eos_token = "</s>";
  inputs.extra = {{"enable_thinking", "false"}};
  // A smaller budget than the gateway's: the fuzzer looks for crashes and budget escapes, not
  // for the default's sizes, and a loop bomb that spends the default 5M steps takes seconds
  // under ASan (libFuzzer calls an input over 10 s a hang).
  orca::text::RenderBudget budget;
  budget.max_steps = 300'000;
  budget.max_alloc_bytes = int64_t{32} << 20;
  budget.max_output_bytes = budget.max_string_bytes = int64_t{4} << 20;
  (void)(*tmpl)->Render(inputs, budget);
  return 0;
}
