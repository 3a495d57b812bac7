#pragma once
/// A small backtracking regular-expression engine over Unicode code points,
/// covering the Oniguruma syntax that tokenizer.json Split/Replace patterns use:
/// alternation, (non-)capturing groups, `(?i:...)`, look-ahead `(?=` `(?!`,
/// greedy/lazy/possessive quantifiers (`* + ? {m,n}`), character classes with
/// ranges and negation, `.`, `\s \S \d \D \w \W`, `\p{L}`/`\P{N}`-style general
/// categories (one- and two-letter), `\p{Alphabetic}`, `\p{White_Space}`,
/// escapes (`\r \n \t \f \v \xHH \x{H..} \uHHHH`), and anchors `^ $ \A \z`.
/// Semantics are leftmost-first (Perl/Oniguruma). Anything else is rejected at
/// compile time with the offending position.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace orca::text {

namespace regex_internal {
struct Node;
}

class Regex {
 public:
  struct Match {
    size_t begin = 0;  // code point index
    size_t end = 0;    // one past the last code point
  };

  /// Compiles `pattern` (UTF-8). InvalidArgument names the position and the
  /// construct on error.
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(std::string_view pattern);
  /// A pattern matching `literal` exactly.
  static std::unique_ptr<Regex> Literal(std::string_view literal);

  ~Regex();

  /// All non-overlapping, non-empty matches, left to right.
  std::vector<Match> FindAll(const std::vector<char32_t>& text) const;
  /// Leftmost match starting at or after `from`; false when none.
  bool Search(const std::vector<char32_t>& text, size_t from, Match* match) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  std::vector<std::unique_ptr<regex_internal::Node>> nodes_;  // owns every node
  const regex_internal::Node* root_ = nullptr;
  friend class RegexCompiler;
};

}  // namespace orca::text
