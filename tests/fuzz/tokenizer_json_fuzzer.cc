// tokenizer.json as shipped with a model: load it, then encode and decode with it.
#include <cstdint>
#include <string_view>

#include "core/text/hf_tokenizer_loader.h"
#include "core/text/incremental_detokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tokenizer = orca::text::LoadHfTokenizer(std::string_view(reinterpret_cast<const char*>(data), size), "", "");
  if (!tokenizer.ok()) return 0;
  const auto ids = (*tokenizer)->Encode("Hello, world!\n  ünïcödé 日本語 🙂 <|endoftext|> 12345");
  (void)(*tokenizer)->Decode(ids, /*skip_special_tokens=*/false);
  orca::text::IncrementalDetokenizer detok(**tokenizer, {});
  for (int32_t id : ids) detok.Add(id);
  detok.Flush();
  return 0;
}
