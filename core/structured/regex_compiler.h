#pragma once
/// A regular-expression subset compiled into a GrammarBuilder fragment, for
/// `guided_regex` and JSON Schema `pattern` / `format`.
///
/// Supported: literals (UTF-8), `.` (any character but line terminators),
/// classes `[...]` / `[^...]` with ranges, escapes \d \D \w \W \s \S \n \r \t
/// \f \v \0 \xHH \uHHHH and escaped punctuation, groups `(...)`, `(?:...)`,
/// `(?<name>...)`, alternation `|`, quantifiers `?` `*` `+` `{m}` `{m,}`
/// `{m,n}` (counts up to 1000; a lazy `?` suffix is accepted: same language).
/// The whole text must match: anchors are implicit; a leading `^` and a
/// trailing `$` are accepted and ignored. Refused with InvalidArgument naming
/// the construct and its offset: backreferences (\1, \k<..>), lookaround
/// ((?=, (?!, (?<=, (?<!), word boundaries (\b, \B), `^`/`$` elsewhere,
/// inline flags ((?i) ...), possessive quantifiers and \p{...} classes.
/// \s and \S follow JavaScript's definition (so JSON Schema validators agree).
///
/// Limits (core/structured/limits.h), each an InvalidArgument naming it and the
/// offset: at most kMaxRegexBytes of pattern; groups and quantifiers nested at
/// most kMaxRegexDepth deep (checked before the parser recurses into a group);
/// and a pattern whose repetitions would need more automaton states than the
/// builder has left is refused from an estimate, before anything is built.

#include <string_view>

#include "absl/status/statusor.h"
#include "core/structured/grammar.h"

namespace orca::structured {

struct RegexOptions {
  /// The match is emitted inside a JSON string: characters that would need an
  /// escape (", \, controls below U+0020) are removed from every class so the
  /// raw text is the string's value.
  bool json_string = false;
};

/// Compiles `pattern` into `builder`. Errors name the construct and its byte offset.
absl::StatusOr<Fragment> CompileRegex(std::string_view pattern, const RegexOptions& options, GrammarBuilder* builder);

}  // namespace orca::structured
