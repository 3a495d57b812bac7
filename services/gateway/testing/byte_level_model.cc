#include "services/gateway/testing/byte_level_model.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "core/text/components.h"
#include "core/text/synthetic_tokenizer.h"
#include "core/text/unicode.h"

namespace orca::gateway::testing {

std::string ByteLevelTokenizerJson() {
  text::ByteLevelBpeVocab vocab;
  for (int b = 0; b < 256; ++b) {
    vocab.tokens.emplace_back(text::EncodeUtf8(text::ByteToUnicode(static_cast<uint8_t>(b))), b);
  }
  return text::ByteLevelBpeTokenizerJson(vocab, {{kByteLevelEosId, "<|endoftext|>"}});
}

std::string ByteLevelTokenizerConfigJson() {
  return nlohmann::json({{"add_bos_token", false},
                         {"bos_token", "<|endoftext|>"},
                         {"eos_token", "<|endoftext|>"},
                         {"model_max_length", 1024},
                         {"tokenizer_class", "GPT2Tokenizer"}})
      .dump();
}

absl::Status WriteByteLevelModel(const std::string& dir, int32_t max_context) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError("cannot create " + dir + ": " + ec.message());
  const std::filesystem::path base(dir);
  ORCA_RETURN_IF_ERROR(WriteStringToFile((base / "tokenizer.json").string(), ByteLevelTokenizerJson()));
  ORCA_RETURN_IF_ERROR(WriteStringToFile((base / "tokenizer_config.json").string(), ByteLevelTokenizerConfigJson()));
  const std::string config = nlohmann::json({{"model_type", "byte-level-test"},
                                             {"vocab_size", kByteLevelVocabSize},
                                             {"max_position_embeddings", max_context},
                                             {"eos_token_id", kByteLevelEosId},
                                             {"bos_token_id", kByteLevelEosId}})
                                 .dump(2);
  return WriteStringToFile((base / "config.json").string(), config);
}

}  // namespace orca::gateway::testing
