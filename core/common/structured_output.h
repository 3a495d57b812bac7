#pragma once
/// What a request asks its output to conform to (structured outputs, a.k.a.
/// constrained or guided decoding). Plain data carried inside SamplingParams
/// from the gateway to the last pipeline stage; core/structured compiles it
/// into a byte-level grammar and masks the logits with it. The wire form is
/// orca.v1.StructuredOutput.

#include <cstdint>
#include <string>
#include <vector>

namespace orca {

struct StructuredOutputSpec {
  enum class Kind {
    kNone = 0,        ///< unconstrained
    kJsonObject = 1,  ///< any JSON value whose top level is an object (OpenAI JSON mode)
    kJsonSchema = 2,  ///< a JSON value valid against `schema` (JSON Schema text)
    kRegex = 3,       ///< text fully matching `regex` (see core/structured/regex_compiler.h)
    kChoice = 4,      ///< exactly one of `choices`
  };
  Kind kind = Kind::kNone;
  std::string schema;                ///< kJsonSchema: the schema as JSON text
  std::string regex;                 ///< kRegex
  std::vector<std::string> choices;  ///< kChoice: at least one, each non-empty
  /// Extra token ids allowed (besides the model's EOS) where the grammar may
  /// end: the request's stop_token_ids.
  std::vector<int32_t> end_token_ids;

  bool enabled() const { return kind != Kind::kNone; }
  /// A key identifying the grammar (kind + text; end_token_ids excluded):
  /// requests with equal keys share one compiled grammar and its mask cache.
  std::string GrammarKey() const {
    std::string key(1, static_cast<char>('0' + static_cast<int>(kind)));
    key += '\x1f';
    key += schema;
    key += '\x1f';
    key += regex;
    for (const std::string& c : choices) {
      key += '\x1f';
      key += std::to_string(c.size());
      key += ':';
      key += c;
    }
    return key;
  }
  bool operator==(const StructuredOutputSpec&) const = default;
};

}  // namespace orca
