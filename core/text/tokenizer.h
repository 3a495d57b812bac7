#pragma once
/// Text <-> token ids for a model: Hugging Face `tokenizer.json` (byte-level
/// BPE as in GPT-2 / Llama-3 / Qwen; SentencePiece-style BPE with byte
/// fallback as in Llama-2 / TinyLlama) and the vocabulary embedded in GGUF
/// files. Thread-safe after construction (all methods are const).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace orca::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// Loads from a model path: a directory holding `tokenizer.json` (plus
  /// `tokenizer_config.json` / `generation_config.json` when present, for BOS/EOS
  /// handling), or a `.gguf` file with an embedded vocabulary.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& model_path);
  /// Loads from the text of a tokenizer.json (and optional tokenizer_config.json text).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(std::string_view tokenizer_json,
                                                             std::string_view tokenizer_config_json = "");

  /// Encodes text. Added/special tokens written literally in `text` are
  /// recognised. With `add_special_tokens`, BOS (etc.) is added as the
  /// tokenizer's post-processor / config says.
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens = true) const = 0;
  /// Decodes ids to text. InvalidArgument names the first id outside the vocabulary.
  virtual absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids, bool skip_special_tokens = true) const = 0;
  /// The raw bytes token `id` stands for when decoded after other tokens
  /// (may be an incomplete UTF-8 sequence). For special tokens this is their
  /// text; callers that skip special tokens drop them (see IsSpecial).
  virtual std::string TokenBytes(int32_t id) const = 0;
  /// The vocabulary entry as written in the tokenizer (e.g. "Ġthe", "▁the", "<0x0A>").
  virtual std::string IdToToken(int32_t id) const = 0;
  virtual std::optional<int32_t> TokenToId(std::string_view token) const = 0;
  virtual bool IsSpecial(int32_t id) const = 0;

  /// Number of ids (including added tokens).
  virtual int32_t vocab_size() const = 0;
  virtual std::optional<int32_t> bos_id() const = 0;
  /// All ids that end generation (e.g. Llama-3's <|end_of_text|> and <|eot_id|>).
  virtual std::vector<int32_t> eos_ids() const = 0;
  /// Token strings for chat templates ("" when the model has none).
  virtual std::string bos_token() const = 0;
  virtual std::string eos_token() const = 0;

  /// How Decode() assembles text, so that streaming decoders can reproduce it
  /// exactly. Decode(ids, skip) equals, in order:
  ///   1. the concatenation of TokenBytes(id) over `ids` (minus special ids
  ///      when `skip`), read as UTF-8 with each ill-formed subpart -> U+FFFD;
  ///   2. with up to `strip_leading` leading `strip_char`s removed;
  ///   3. passed through CleanUpTokenizationSpaces when
  ///      `clean_up_tokenization_spaces`.
  struct DecodeRules {
    int strip_leading = 0;
    std::string strip_char = " ";
    bool clean_up_tokenization_spaces = false;
  };
  virtual DecodeRules decode_rules() const { return {}; }

  /// transformers' `clean_up_tokenization`: " ." -> ".", " ?" -> "?", " !" -> "!",
  /// " ," -> ",", " ' " -> "'", " n't" -> "n't", " 'm" -> "'m", " 's" -> "'s",
  /// " 've" -> "'ve", " 're" -> "'re", applied in that order.
  static std::string CleanUpTokenizationSpaces(std::string_view text);
};

}  // namespace orca::text
