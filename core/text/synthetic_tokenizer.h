#pragma once
/// A deterministic, self-contained tokenizer for synthetic checkpoints
/// (`orca model synth`): byte-level BPE in Hugging Face tokenizer.json form.
///
/// Layout of the vocabulary (V = vocab_size):
///   [0, 256)        one token per byte (GPT-2 byte-to-unicode alphabet)
///   [256, V - 3)    merges learned by BPE from a small embedded English/code
///                   text; once the text is exhausted, unused filler tokens
///                   `<|unused_N|>` that the model never produces
///   V - 3           <|endoftext|>   (special; BOS token, also ends generation)
///   V - 2           <|im_start|>    (special)
///   V - 1           <|im_end|>      (special; EOS)
/// The same vocab_size always gives byte-identical files.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace orca::text {

/// A special token of a tokenizer.json (`added_tokens`: never split, never normalized).
struct SpecialToken {
  int32_t id = 0;
  std::string content;
};

/// The vocabulary of a byte-level BPE tokenizer: its tokens (in GPT-2's byte-to-unicode
/// alphabet, see ByteToUnicode) with their ids, and its merges ([left, right]) in rank order.
struct ByteLevelBpeVocab {
  std::vector<std::pair<std::string, int32_t>> tokens;
  std::vector<std::pair<std::string, std::string>> merges;
};

/// The text of a Hugging Face tokenizer.json for byte-level BPE as GPT-2 has it: no
/// normalizer, ByteLevel pre-tokenizer, post-processor and decoder (no prefix space), a BPE
/// model without unk token or byte fallback over `vocab`, and `specials` as added_tokens.
/// The same arguments always give the same bytes. The synthetic tokenizer below and the
/// tests' byte-per-token model are both written by it.
std::string ByteLevelBpeTokenizerJson(const ByteLevelBpeVocab& vocab, const std::vector<SpecialToken>& specials);

struct SyntheticTokenizerFiles {
  std::string tokenizer_json;
  /// bos/eos tokens, add_bos_token false, a ChatML chat_template.
  std::string tokenizer_config_json;
  /// eos_token_id: [<|im_end|>, <|endoftext|>], bos_token_id.
  std::string generation_config_json;
};

inline constexpr int32_t kMinSyntheticVocabSize = 259;
inline constexpr int32_t kMaxSyntheticVocabSize = 1 << 20;

/// The vocabulary size with no `<|unused_N|>` filler: the 256 bytes, every
/// merge the embedded text yields, and the three special tokens. A model of
/// this vocabulary only ever produces real text.
int32_t SyntheticNaturalVocabSize();

/// InvalidArgument when vocab_size is outside [kMinSyntheticVocabSize, kMaxSyntheticVocabSize].
absl::StatusOr<SyntheticTokenizerFiles> MakeSyntheticByteLevelTokenizer(int32_t vocab_size);

}  // namespace orca::text
