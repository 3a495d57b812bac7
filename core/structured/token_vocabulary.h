#pragma once
/// The bytes every token id stands for, from a core/text tokenizer, and a
/// prefix trie over them: what grammar masks are computed against.
/// Byte-level BPE (GPT-2 "Ġ" spellings) and SentencePiece ("▁", <0xNN> byte
/// fallback) are both handled by Tokenizer::TokenBytes. Special tokens and
/// tokens with no bytes never enter the trie (a grammar cannot produce them);
/// the EOS ids are kept apart, allowed only where a grammar may end.
/// Immutable after construction; shared by every request on a model.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/text/tokenizer.h"

namespace orca::structured {

class TokenVocabulary {
 public:
  struct TrieNode {
    std::vector<std::pair<uint8_t, int32_t>> children;  ///< sorted by byte
    std::vector<int32_t> tokens;                        ///< ids whose bytes end here
  };

  /// `vocab_size`: the model's logit count (>= the tokenizer's; ids past the
  /// tokenizer's are never allowed). 0 = the tokenizer's.
  static absl::StatusOr<std::shared_ptr<const TokenVocabulary>> FromTokenizer(const text::Tokenizer& tokenizer,
                                                                              int32_t vocab_size = 0);
  /// From explicit token bytes (tests): ids with an empty string are excluded.
  static std::shared_ptr<const TokenVocabulary> FromBytes(std::vector<std::string> token_bytes,
                                                          std::vector<int32_t> eos_ids);

  int32_t vocab_size() const { return vocab_size_; }
  /// The bytes of `id`; empty for special, unknown and excluded ids.
  const std::string& bytes(int32_t id) const;
  bool in_trie(int32_t id) const { return id >= 0 && id < vocab_size_ && !bytes(id).empty(); }
  absl::Span<const int32_t> eos_ids() const { return eos_ids_; }
  const std::vector<TrieNode>& trie() const { return trie_; }  ///< node 0 is the root
  int32_t num_trie_tokens() const { return num_trie_tokens_; }

 private:
  void BuildTrie();

  int32_t vocab_size_ = 0;
  std::vector<std::string> bytes_;
  std::vector<int32_t> eos_ids_;
  std::vector<TrieNode> trie_;
  int32_t num_trie_tokens_ = 0;
};

}  // namespace orca::structured
