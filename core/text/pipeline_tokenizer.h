#pragma once
/// The Tokenizer implementation shared by tokenizer.json and GGUF vocabularies:
///
///   text ─▶ split out added tokens (raw) ─▶ normalizer ─▶ split out added
///   tokens (normalized) ─▶ pre-tokenizer ─▶ model (BPE / SentencePiece)
///   ─▶ post-processor prefix/suffix (BOS, ...)
///
/// Decoding follows Tokenizer::DecodeRules: per-id byte pieces computed once
/// at load time from the decoder description, joined, UTF-8-sanitized,
/// leading-space stripped and optionally cleaned up.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/text/components.h"
#include "core/text/token_model.h"
#include "core/text/tokenizer.h"

namespace orca::text {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

/// Everything a loader collects; consumed by PipelineTokenizer::Create.
struct TokenizerSpec {
  /// Token text per id ("" with `present[id] == false` for holes).
  std::vector<std::string> id_to_token;
  std::vector<bool> present;
  std::vector<AddedToken> added_tokens;
  /// Ids that skip_special_tokens drops.
  std::vector<bool> special;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<TokenModel> model;
  /// Ids the post-processor puts around a single sequence.
  std::vector<int32_t> prefix_ids;
  std::vector<int32_t> suffix_ids;
  /// Decode piece per id, and the rules applied to the joined text.
  std::vector<std::string> pieces;
  Tokenizer::DecodeRules decode_rules;
  std::optional<int32_t> bos_id;
  std::vector<int32_t> eos_ids;
  std::string bos_token;
  std::string eos_token;
};

class PipelineTokenizer : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<PipelineTokenizer>> Create(TokenizerSpec spec);

  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens = true) const override;
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids, bool skip_special_tokens = true) const override;
  std::string TokenBytes(int32_t id) const override;
  std::string IdToToken(int32_t id) const override;
  std::optional<int32_t> TokenToId(std::string_view token) const override;
  bool IsSpecial(int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(spec_.id_to_token.size()); }
  std::optional<int32_t> bos_id() const override { return spec_.bos_id; }
  std::vector<int32_t> eos_ids() const override { return spec_.eos_ids; }
  std::string bos_token() const override { return spec_.bos_token; }
  std::string eos_token() const override { return spec_.eos_token; }
  DecodeRules decode_rules() const override { return spec_.decode_rules; }

 private:
  struct Section {
    std::string text;
    int added = -1;  // index into added_tokens, or -1 for plain text
  };
  explicit PipelineTokenizer(TokenizerSpec spec) : spec_(std::move(spec)) {}
  /// Splits `text` around the added tokens of `matcher_index` (0: raw, 1: normalized).
  std::vector<Section> SplitAdded(std::string_view text, int matcher_index) const;
  void EncodePlain(std::string_view text, int section_index, std::vector<int32_t>* ids) const;

  TokenizerSpec spec_;
  absl::flat_hash_map<std::string, int32_t> token_to_id_;
  /// Per matcher: first byte -> candidate added tokens, longest first.
  std::vector<std::vector<int>> by_first_byte_[2];
  std::vector<std::string> match_text_;  // per added token: text matched (normalized if flagged)
};

}  // namespace orca::text
