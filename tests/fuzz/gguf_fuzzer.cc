// GGUF files as found on disk: header, metadata, tensor table; every tensor's
// bytes are touched (ASan catches a directory that points outside the file), and
// the readers that take a GGUF path (tokenizer, chat template, context length) run.
#include <cstdint>

#include "core/formats/context_length.h"
#include "core/formats/gguf_file.h"
#include "core/text/chat_template.h"
#include "core/text/hf_tokenizer_loader.h"
#include "tests/fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const orca::fuzz::InputFile file(data, size);
  auto gguf = orca::formats::GgufFile::Open(file.path());
  if (!gguf.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const std::string& name : (*gguf)->Names()) {
    const orca::formats::TensorInfo* t = (*gguf)->Find(name);
    if (t == nullptr || t->data == nullptr || t->nbytes == 0) continue;
    sink = sink + t->data[0] + t->data[t->nbytes - 1];
    (void)(*gguf)->GgmlType(name);
  }
  (void)orca::formats::ReadModelContextLength(file.path());
  auto tokenizer = orca::text::LoadGgufTokenizer(file.path());
  if (tokenizer.ok()) {
    const auto ids = (*tokenizer)->Encode("Hello, world! <s> ünïcödé 123");
    (void)(*tokenizer)->Decode(ids);
  }
  auto tmpl = orca::text::ChatTemplate::FromModel(file.path());
  if (tmpl.ok()) {
    orca::text::ChatTemplateInputs inputs;
    inputs.messages = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}};
    (void)(*tmpl)->Render(inputs);
  }
  return 0;
}
