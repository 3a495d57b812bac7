#pragma once
/// Streaming detokenization: turns tokens into text as they are generated,
/// never emitting a partial UTF-8 sequence, and keeping the result identical
/// to decoding the whole sequence at once (SentencePiece leading-space rules
/// included).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "core/text/tokenizer.h"
#include "core/text/unicode.h"

namespace orca::text {

class IncrementalDetokenizer {
 public:
  /// `prompt_ids` give context (e.g. so a leading "▁" is handled as the full
  /// decode would); they are not emitted. `tokenizer` must outlive this object.
  IncrementalDetokenizer(const Tokenizer& tokenizer, absl::Span<const int32_t> prompt_ids,
                         bool skip_special_tokens = true);

  /// Adds one generated token; returns the text that became final (possibly empty).
  std::string Add(int32_t id);
  /// At the end of generation: returns anything still held back (an
  /// incomplete UTF-8 tail is rendered as U+FFFD, as a full decode would).
  std::string Flush();

  /// Guarantee: with no prompt, the concatenation of every Add() and Flush()
  /// equals tokenizer.Decode(ids, skip_special_tokens). With a prompt it equals
  /// the text Decode(prompt + ids) has after Decode(prompt), except that the
  /// optional clean-up stage (Tokenizer::DecodeRules) restarts at the prompt
  /// boundary. Works for any Tokenizer honouring DecodeRules, in O(1) per token.
  size_t num_tokens() const { return num_tokens_; }

 private:
  std::string Process(std::string text, bool final);
  static size_t SafeCleanupSplit(const std::string& s);

  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  Tokenizer::DecodeRules rules_;
  Utf8StreamDecoder utf8_;
  int strip_remaining_ = 0;  // leading strip_chars still to drop
  std::string pending_;      // text held back by the clean-up stage
  size_t num_tokens_ = 0;
};

}  // namespace orca::text
