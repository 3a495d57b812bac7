// Prompt text (any bytes, not only valid UTF-8) through real tokenizers — GPT-2's
// byte-level BPE and a SentencePiece Llama vocabulary from ../shared when present,
// else a synthetic byte-level one — then back through the incremental detokenizer,
// whose output must equal a full decode (its documented guarantee).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/mapped_file.h"
#include "core/text/hf_tokenizer_loader.h"
#include "core/text/incremental_detokenizer.h"
#include "core/text/synthetic_tokenizer.h"

namespace {
std::vector<std::unique_ptr<orca::text::Tokenizer>> LoadTokenizers() {
  std::vector<std::unique_ptr<orca::text::Tokenizer>> out;
  const std::string shared = ORCA_SHARED_DIR;
  if (auto json = orca::ReadFileToString(shared + "/models/tiny-gpt2/tokenizer.json"); json.ok()) {
    if (auto t = orca::text::LoadHfTokenizer(*json, "", ""); t.ok()) out.push_back(std::move(*t));
  }
  if (auto t = orca::text::LoadGgufTokenizer(shared + "/models/stories260K.gguf"); t.ok()) out.push_back(std::move(*t));
  if (auto files = orca::text::MakeSyntheticByteLevelTokenizer(512); files.ok()) {
    if (auto t = orca::text::LoadHfTokenizer(files->tokenizer_json, "", ""); t.ok()) out.push_back(std::move(*t));
  }
  if (out.empty()) std::abort();
  return out;
}
const std::vector<std::unique_ptr<orca::text::Tokenizer>>* tokenizers = nullptr;
}  // namespace

// Loads the tokenizers once, outside any input's -timeout: parsing GPT-2's 3.5 MB
// tokenizer.json under ASan and coverage instrumentation took over 10 s on a loaded
// machine, which made the first input (the empty one) a false "timeout".
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tokenizers = new std::vector<std::unique_ptr<orca::text::Tokenizer>>(LoadTokenizers());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& tokenizer : *tokenizers) {
    const std::vector<int32_t> ids = tokenizer->Encode(text);
    auto full = tokenizer->Decode(ids);
    if (!full.ok()) std::abort();  // ids from Encode are always in the vocabulary
    orca::text::IncrementalDetokenizer detok(*tokenizer, {});
    std::string streamed;
    for (int32_t id : ids) streamed += detok.Add(id);
    streamed += detok.Flush();
    if (streamed != *full) std::abort();
  }
  return 0;
}
