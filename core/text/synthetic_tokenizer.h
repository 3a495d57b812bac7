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

#include "absl/status/statusor.h"

namespace orca::text {

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
