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

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;
  size_t read_offset_ = 0;
  std::string emitted_;
};

}  // namespace orca::text
