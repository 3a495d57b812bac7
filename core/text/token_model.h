#pragma once
/// Subword models that turn one pre-tokenized word into ids:
///  - BpeModel: merges applied by rank (Hugging Face `"type": "BPE"`), with
///    byte fallback, unk fusing, `ignore_merges`, subword prefix/suffix.
///  - SentencePieceModel: merges chosen by vocabulary score, as SentencePiece
///    and llama.cpp do for GGUF "llama" vocabularies, with `<0xNN>` byte fallback.
/// Both use a linked list of symbols and a priority queue of candidate merges:
/// O(n log n) in the word length.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace orca::text {

class TokenModel {
 public:
  virtual ~TokenModel() = default;
  /// Appends the ids of `word` (already normalized and pre-tokenized).
  virtual void Encode(std::string_view word, std::vector<int32_t>* ids) const = 0;
};

using Vocab = absl::flat_hash_map<std::string, int32_t>;

/// Debian's Abseil does not alias absl::string_view to std::string_view;
/// heterogeneous lookups need the absl type.
inline absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

/// The ids of the 256 `<0xNN>` byte tokens; nullopt when any is missing.
std::optional<std::array<int32_t, 256>> FindByteTokens(const Vocab& vocab);

struct BpeOptions {
  std::optional<int32_t> unk_id;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
};

class BpeModel : public TokenModel {
 public:
  /// `merges` in rank order. InvalidArgument names a merge whose parts or
  /// result are missing from `vocab`.
  static absl::StatusOr<std::unique_ptr<BpeModel>> Create(
      Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options);
  void Encode(std::string_view word, std::vector<int32_t>* ids) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  BpeModel() = default;
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  Vocab vocab_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  BpeOptions options_;
  std::optional<std::array<int32_t, 256>> byte_tokens_;
};

class SentencePieceModel : public TokenModel {
 public:
  /// `tokens[i]`/`scores[i]` describe id i. Byte tokens (`<0xNN>`) are used
  /// for characters missing from the vocabulary; `unk_id` when those are absent.
  static absl::StatusOr<std::unique_ptr<SentencePieceModel>> Create(const std::vector<std::string>& tokens,
                                                                    std::vector<float> scores,
                                                                    std::optional<int32_t> unk_id);
  void Encode(std::string_view word, std::vector<int32_t>* ids) const override;

 private:
  SentencePieceModel() = default;
  Vocab vocab_;
  std::vector<float> scores_;
  std::optional<int32_t> unk_id_;
  std::optional<std::array<int32_t, 256>> byte_tokens_;
};

}  // namespace orca::text
