#include "core/text/synthetic_tokenizer.h"

#include <map>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/text/chat_template.h"
#include "core/text/components.h"
#include "core/text/regex.h"
#include "core/text/unicode.h"

namespace orca::text {
namespace {

// Training text for the merges: plain English prose, chat-like turns and a
// little code, written for this purpose.
constexpr const char* kTrainingText[] = {
    "Once upon a time, in a small town by the sea, there lived a curious girl who loved to read. Every morning "
    "she walked to the library, picked a new book, and read it under the old oak tree in the park. ",
    "The weather today is sunny with a light breeze. Tomorrow there will be some clouds in the afternoon, and the "
    "temperature will drop a little in the evening. Remember to bring a jacket if you go out at night. ",
    "User: Can you explain what a language model is? Assistant: A language model predicts the next token of a "
    "text from the tokens before it. It is trained on a large amount of text, and it can be used to answer "
    "questions, write stories, translate between languages, and summarize documents. ",
    "User: What is the capital of France? Assistant: The capital of France is Paris. It is known for the Eiffel "
    "Tower, its museums, and its cafes. User: Thank you! Assistant: You are welcome. Is there anything else? ",
    "The scheduler picks the requests for the next iteration, the engine runs one step of the model for all of "
    "them together, and the results are streamed back to the clients as soon as each token is ready. ",
    "def add(a, b):\n    return a + b\n\n\nclass Counter:\n    def __init__(self):\n        self.count = 0\n\n"
    "    def increment(self, step=1):\n        self.count += step\n        return self.count\n\n",
    "for i in range(10):\n    if i % 2 == 0:\n        print(f\"{i} is even\")\n    else:\n        print(f\"{i} is "
    "odd\")\n",
    "#include <stdio.h>\n\nint main(int argc, char** argv) {\n  for (int i = 0; i < argc; ++i) {\n"
    "    printf(\"%d: %s\\n\", i, argv[i]);\n  }\n  return 0;\n}\n",
    "const items = [1, 2, 3, 4, 5];\nconst total = items.map((x) => x * 2).reduce((a, b) => a + b, 0);\n"
    "console.log(`total: ${total}`);\n",
    "The numbers one, two, three, four and five are small. The numbers 100, 2024, and 3.14159 appear in many "
    "texts. Lists, tables, and JSON objects such as {\"name\": \"value\", \"count\": 42} are common too. ",
    "It was the best of times, it was the worst of times; it was the age of wisdom, it was the age of "
    "foolishness. The people in the story did not know what the next day would bring, but they kept going. ",
};

using Pair = std::pair<std::string, std::string>;

struct Word {
  std::vector<std::string> symbols;
  int64_t count = 0;
};

// Learns up to `max_merges` merges; returns them in rank order.
std::vector<Pair> LearnMerges(size_t max_merges) {
  std::unique_ptr<Regex> re = *Regex::Compile(kGpt2Pattern);
  std::map<std::string, int64_t> word_counts;  // ordered: deterministic
  for (const char* text : kTrainingText) {
    for (const std::string& w : SplitWithPattern(text, *re, SplitBehavior::kIsolated, false)) {
      ++word_counts[BytesToUnicodeString(w)];
    }
  }
  std::vector<Word> words;
  for (const auto& [w, count] : word_counts) {
    Word word;
    word.count = count;
    for (char32_t c : DecodeUtf8(w)) word.symbols.push_back(EncodeUtf8(c));
    words.push_back(std::move(word));
  }
  std::vector<Pair> merges;
  while (merges.size() < max_merges) {
    std::map<Pair, int64_t> pair_counts;
    for (const Word& w : words) {
      for (size_t i = 0; i + 1 < w.symbols.size(); ++i) pair_counts[{w.symbols[i], w.symbols[i + 1]}] += w.count;
    }
    if (pair_counts.empty()) break;
    // Most frequent pair; ties go to the lexicographically smallest.
    auto best = pair_counts.begin();
    for (auto it = pair_counts.begin(); it != pair_counts.end(); ++it) {
      if (it->second > best->second) best = it;
    }
    const Pair pair = best->first;
    merges.push_back(pair);
    const std::string merged = pair.first + pair.second;
    for (Word& w : words) {
      std::vector<std::string> next;
      next.reserve(w.symbols.size());
      for (size_t i = 0; i < w.symbols.size(); ++i) {
        if (i + 1 < w.symbols.size() && w.symbols[i] == pair.first && w.symbols[i + 1] == pair.second) {
          next.push_back(merged);
          ++i;
        } else {
          next.push_back(w.symbols[i]);
        }
      }
      w.symbols = std::move(next);
    }
  }
  return merges;
}

}  // namespace

int32_t SyntheticNaturalVocabSize() {
  static const int32_t size = [] {
    absl::flat_hash_set<std::string> tokens;
    for (const Pair& m : LearnMerges(static_cast<size_t>(kMaxSyntheticVocabSize))) tokens.insert(m.first + m.second);
    for (int b = 0; b < 256; ++b) tokens.erase(EncodeUtf8(ByteToUnicode(static_cast<uint8_t>(b))));
    return static_cast<int32_t>(256 + tokens.size() + 3);
  }();
  return size;
}

std::string ByteLevelBpeTokenizerJson(const ByteLevelBpeVocab& vocab, const std::vector<SpecialToken>& specials) {
  using nlohmann::json;
  json tokens = json::object();
  for (const auto& [token, id] : vocab.tokens) tokens[token] = id;
  json merges = json::array();
  for (const auto& [left, right] : vocab.merges) merges.push_back(json::array({left, right}));
  json added = json::array();
  for (const SpecialToken& special : specials) {
    added.push_back({{"id", special.id},
                     {"content", special.content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  const json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  const json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", std::move(added)},
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
        {"ignore_merges", false},
        {"vocab", std::move(tokens)},
        {"merges", std::move(merges)}}},
  };
  return tokenizer.dump(1, ' ', false, json::error_handler_t::strict);
}

namespace {

// The special tokens, after the regular ones: end of text (also bos and pad), ChatML's turn start and end (eos).
const char* const kSpecials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

// A byte-level BPE vocabulary of exactly `num_regular` tokens (the 256 byte tokens, then the
// merges' results, then unused fillers), merges learnt from the built-in corpus.
ByteLevelBpeVocab LearnByteLevelBpe(int32_t num_regular) {
  ByteLevelBpeVocab bpe;
  absl::flat_hash_set<std::string> tokens;
  auto add = [&](const std::string& token) {
    bpe.tokens.emplace_back(token, static_cast<int32_t>(tokens.size()));
    tokens.insert(token);
  };
  for (int b = 0; b < 256; ++b) add(EncodeUtf8(ByteToUnicode(static_cast<uint8_t>(b))));
  // A merge whose result already exists adds no token; learn a few spare.
  for (const Pair& m : LearnMerges(static_cast<size_t>(num_regular - 256))) {
    const std::string merged = m.first + m.second;
    if (!tokens.contains(merged)) {
      if (static_cast<int32_t>(tokens.size()) >= num_regular) break;
      add(merged);
    }
    bpe.merges.push_back(m);
  }
  for (int32_t n = 0; static_cast<int32_t>(tokens.size()) < num_regular; ++n) add(absl::StrCat("<|unused_", n, "|>"));
  return bpe;
}

}  // namespace

absl::StatusOr<SyntheticTokenizerFiles> MakeSyntheticByteLevelTokenizer(int32_t vocab_size) {
  if (vocab_size < kMinSyntheticVocabSize || vocab_size > kMaxSyntheticVocabSize) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic tokenizer vocab_size must be in [",
                                                   kMinSyntheticVocabSize, ", ", kMaxSyntheticVocabSize, "], got ",
                                                   vocab_size));
  }
  using nlohmann::json;
  const int32_t num_regular = vocab_size - 3;
  std::vector<SpecialToken> specials;
  for (int32_t k = 0; k < 3; ++k) specials.push_back({num_regular + k, kSpecials[k]});
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<ChatTemplate> chatml, ChatTemplate::Builtin("chatml"));
  json config = {
      {"tokenizer_class", "PreTrainedTokenizerFast"},
      {"bos_token", kSpecials[0]},
      {"eos_token", kSpecials[2]},
      {"pad_token", kSpecials[0]},
      {"add_bos_token", false},
      {"add_eos_token", false},
      {"clean_up_tokenization_spaces", false},
      {"model_max_length", 1 << 20},
      {"chat_template", chatml->source()},
  };
  json generation = {{"bos_token_id", num_regular}, {"eos_token_id", json::array({num_regular + 2, num_regular})}};
  SyntheticTokenizerFiles files;
  files.tokenizer_json = ByteLevelBpeTokenizerJson(LearnByteLevelBpe(num_regular), specials);
  files.tokenizer_config_json = config.dump(2);
  files.generation_config_json = generation.dump(2);
  return files;
}

}  // namespace orca::text
