#pragma once
// Helpers for the structured-output tests: full-text matching through a
// one-byte-per-token vocabulary.

#include <memory>
#include <string>
#include <vector>

#include "core/structured/compile.h"
#include "core/structured/grammar_matcher.h"
#include "core/structured/token_vocabulary.h"

namespace orca::structured::testing {

/// 256 tokens, token b = byte b; EOS = 256.
inline std::shared_ptr<const TokenVocabulary> ByteVocab() {
  static const std::shared_ptr<const TokenVocabulary> v = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
    bytes.emplace_back();  // EOS
    return TokenVocabulary::FromBytes(std::move(bytes), {256});
  }();
  return v;
}

/// Whether the grammar accepts exactly `text`.
inline bool FullMatch(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarRuntime rt(g, ByteVocab());
  GrammarRuntime::StateSet s = rt.AdvanceBytes(rt.Initial(), text);
  return GrammarRuntime::CanEnd(s);
}

inline StructuredOutputSpec SchemaSpec(const std::string& schema) {
  StructuredOutputSpec s;
  s.kind = StructuredOutputSpec::Kind::kJsonSchema;
  s.schema = schema;
  return s;
}

inline StructuredOutputSpec RegexSpec(const std::string& regex) {
  StructuredOutputSpec s;
  s.kind = StructuredOutputSpec::Kind::kRegex;
  s.regex = regex;
  return s;
}

}  // namespace orca::structured::testing
