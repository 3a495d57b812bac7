#include "services/gateway/testing/byte_level_model.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"

namespace orca::gateway::testing {
namespace {

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to
// U+0100 and up, so every byte has a visible vocabulary entry.
std::string ByteToUnicode(int b) {
  const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  int cp = b;
  if (!printable) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      const bool p = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255);
      if (!p) ++n;
    }
    cp = 256 + n;
  }
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

}  // namespace

std::string ByteLevelTokenizerJson() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteToUnicode(b)] = b;
  nlohmann::json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  nlohmann::json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {{{"id", kByteLevelEosId},
         {"content", "<|endoftext|>"},
         {"single_word", false},
         {"lstrip", false},
         {"rstrip", false},
         {"normalized", false},
         {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", nlohmann::json::array()}}},
  };
  return tokenizer.dump();
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
