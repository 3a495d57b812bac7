#include "core/text/incremental_detokenizer.h"

namespace orca::text {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, absl::Span<const int32_t> prompt_ids,
                                               bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens), rules_(tokenizer.decode_rules()) {
  strip_remaining_ = rules_.strip_char.empty() ? 0 : rules_.strip_leading;
  // The prompt is decoded for its effect on the state (leading-space strip,
  // a UTF-8 sequence it leaves open); its text is not emitted. The clean-up
  // stage starts afresh at the prompt boundary.
  for (int32_t id : prompt_ids) Add(id);
  pending_.clear();
}

std::string IncrementalDetokenizer::Add(int32_t id) {
  ++num_tokens_;
  if (skip_special_tokens_ && tokenizer_.IsSpecial(id)) return "";
  return Process(utf8_.Feed(tokenizer_.TokenBytes(id)), /*final=*/false);
}

std::string IncrementalDetokenizer::Flush() { return Process(utf8_.Finish(), /*final=*/true); }

std::string IncrementalDetokenizer::Process(std::string text, bool final) {
  if (strip_remaining_ > 0 && !text.empty()) {
    const std::string& c = rules_.strip_char;
    size_t cut = 0;
    while (strip_remaining_ > 0 && text.compare(cut, c.size(), c) == 0) {
      cut += c.size();
      --strip_remaining_;
    }
    text.erase(0, cut);
    if (!text.empty()) strip_remaining_ = 0;
  }
  if (!rules_.clean_up_tokenization_spaces) return text;
  pending_ += text;
  const size_t split = final ? pending_.size() : SafeCleanupSplit(pending_);
  std::string out = Tokenizer::CleanUpTokenizationSpaces(std::string_view(pending_).substr(0, split));
  pending_.erase(0, split);
  return out;
}

// Every clean-up rule is a short ASCII pattern that starts with a space and
// only ever deletes spaces. Cleaning s[0, p) and s[p, n) separately equals
// cleaning s when no rule match can straddle p, which holds when either
//  (a) s[p-4, p) has no space: a match starting before p-4 spans at most four
//      characters, and the non-space characters before p are never deleted; or
//  (b) s[p] is a space and s[p-1] is a character no rule has at a non-final
//      position (anything but ' ', '\'', 'n', 'v', 'r').
size_t IncrementalDetokenizer::SafeCleanupSplit(const std::string& s) {
  for (size_t p = s.size(); p > 0; --p) {
    bool a = true;
    for (size_t i = p >= 4 ? p - 4 : 0; i < p; ++i) {
      if (s[i] == ' ') {
        a = false;
        break;
      }
    }
    if (a) return p;
    if (p < s.size() && s[p] == ' ') {
      char c = s[p - 1];
      if (c != ' ' && c != '\'' && c != 'n' && c != 'v' && c != 'r') return p;
    }
  }
  return 0;
}

}  // namespace orca::text
