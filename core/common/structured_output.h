#pragma once
/// What a request asks its output to conform to (structured outputs, a.k.a.
/// constrained or guided decoding). Plain data carried inside SamplingParams
/// from the gateway to the last pipeline stage; core/structured compiles it
/// into a byte-level grammar and masks the logits with it. The wire form is
/// orca.v1.StructuredOutput.
///
/// Limits: the number of choices, the end token ids and max_calls are in the
/// table of core/common/sampling_limits.h (CheckStructuredOutputLimits); text
/// sizes, nesting and grammar size are the compilers' (core/structured/limits.h).
/// Every entry point compiles a spec before the request is admitted.

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
    /// Tool calls: `calls_begin` V (`calls_separator` V)* `calls_end`, each V a JSON value
    /// valid against `schema` (the calls' anyOf), at most `max_calls` of them (0 = unbounded).
    kToolCalls = 5,
  };
  Kind kind = Kind::kNone;
  std::string schema;                ///< kJsonSchema: the schema as JSON text
  std::string regex;                 ///< kRegex
  std::vector<std::string> choices;  ///< kChoice: at least one, each non-empty
  /// Extra token ids allowed (besides the model's EOS) where the grammar may
  /// end: the request's stop_token_ids.
  std::vector<int32_t> end_token_ids;
  /// kToolCalls: the literal framing around and between the calls (format-specific, e.g.
  /// Hermes' "<tool_call>\n" … "\n</tool_call>"), and the most calls (0 = unbounded).
  std::string calls_begin;
  std::string calls_separator;
  std::string calls_end;
  int32_t max_calls = 0;

  bool enabled() const { return kind != Kind::kNone; }
  /// A key identifying the grammar (kind + text; end_token_ids excluded):
  /// requests with equal keys share one compiled grammar and its mask cache.
  std::string GrammarKey() const {
    std::string key(1, static_cast<char>('0' + static_cast<int>(kind)));
    key += '\x1f';
    key += schema;
    key += '\x1f';
    key += regex;
    if (kind == Kind::kToolCalls) {
      for (const std::string* part : {&calls_begin, &calls_separator, &calls_end}) {
        key += '\x1f';
        key += std::to_string(part->size());
        key += ':';
        key += *part;
      }
      key += '\x1f';
      key += std::to_string(max_calls);
    }
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
