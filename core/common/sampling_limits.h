#pragma once
/// The accepted range of every sampling and generation parameter a request
/// can carry, stated once and used by every entry point: the gateway's HTTP
/// API (services/gateway/openai_request.cc), its gRPC Generation API
/// (grpc_generation_service.cc), the scheduler's gRPC Generate
/// (scheduler_service.cc) and SamplingParams::Validate (the core scheduler
/// and the engine). The same value is refused with the same message at every
/// surface, naming the field as the OpenAI API spells it and the limit:
///
///   'temperature' must be in [0, 2], got 3
///   'n' must be at most 128, got 129
///   'stop' may hold at most 16 sequences, got 17
///
/// The anchor is vLLM's SamplingParams._verify_args; where OpenAI documents a
/// range, OpenAI's is taken (temperature [0, 2] — vLLM accepts any
/// temperature >= 0 — penalties [-2, 2], logit_bias [-100, 100] and 300
/// entries, logprobs 5, top_logprobs 20, n 128). Every entry, and where it comes from:
///
///   field                 range                 note
///   temperature           [0, 2]                OpenAI; 0 = greedy
///   top_p                 (0, 1]                OpenAI, vLLM; 1 = off
///   top_k                 -1, 0 or >= 1         vLLM; -1 and 0 = off
///   min_p                 [0, 1]                vLLM; 0 = off
///   presence_penalty      [-2, 2]               OpenAI
///   frequency_penalty     [-2, 2]               OpenAI
///   repetition_penalty    (0, 10]               vLLM requires > 0; above 10 every seen
///                                               token is banned in effect, so 10 caps it
///   logit_bias            [-100, 100], <= 300   OpenAI; ids in the vocabulary
///   n                     [1, 128]              OpenAI (× prompts <= 128)
///   best_of               [1, 128], == n        Orca returns every candidate
///   logprobs (completions) [0, 5]               OpenAI
///   top_logprobs (chat)   [0, 20]               OpenAI
///   prompt_logprobs       [0, 20]               vLLM's default max_logprobs
///   max_tokens            >= 1                  and prompt + max_tokens within the context
///                                               (max_new_tokens in C++ and on gRPC)
///   min_tokens            [0, max_tokens]       vLLM
///   seed                  any 64-bit integer
///   priority              [-1e6, 1e6]           vLLM has no bound; keeps aging arithmetic safe
///   stop                  <= 16 strings, each 1..4096 bytes   OpenAI allows 4, vLLM any
///   stop_token_ids        <= 64 ids in the vocabulary
///   guided_choice         at most 1024 choices
///   max_calls             [0, 1024]             a tool-call constraint's calls; 0 = unbounded
///
/// Structured-output sizes (schema and regex bytes, nesting, grammar size)
/// are core/structured/limits.h, enforced by the compilers that every entry
/// point runs before a request is admitted (the gateway compiles each spec,
/// the scheduler compiles it again, the worker a third time).
///
/// Only the gRPC APIs, whose proto3 scalars cannot be unset, read 0 as "not
/// given" where 0 is out of range: top_p 0 and repetition_penalty 0 are 1,
/// max_new_tokens 0 is the gateway's default (the rest of the context), n 0 is 1.

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/string_view.h"
#include "core/common/structured_output.h"

namespace orca {

/// A real-valued parameter's range: [min, max], or (min, max] when min_exclusive.
struct RealLimit {
  absl::string_view field;  ///< as the OpenAI API spells it
  double min = 0;
  double max = 0;
  bool min_exclusive = false;

  /// False for NaN.
  bool Contains(double v) const { return (min_exclusive ? v > min : v >= min) && v <= max; }
  /// "'temperature' must be in [0, 2], got 3" (the value as written, shortest form).
  std::string Error(double v) const;
  /// The same for a value stored as float ("got 2.1", not "got 2.0999999").
  std::string Error(float v) const;
  /// "" when `v` is in range, else Error(v).
  std::string Check(float v) const { return Contains(v) ? "" : Error(v); }
};

/// An integer parameter's range [min, max].
struct IntLimit {
  absl::string_view field;
  int64_t min = 0;
  int64_t max = 0;

  bool Contains(int64_t v) const { return v >= min && v <= max; }
  /// "'n' must be at least 1, got 0" or "'n' must be at most 128, got 129".
  std::string Error(int64_t v) const;
  std::string Check(int64_t v) const { return Contains(v) ? "" : Error(v); }
};

/// How many entries a list parameter may hold.
struct CountLimit {
  absl::string_view field;
  int64_t max = 0;
  absl::string_view unit;  ///< what is counted, plural: "sequences", "entries", "choices"

  /// "'stop' may hold at most 16 sequences, got 17"; "" when `count` <= max.
  std::string Check(int64_t count) const;
};

/// How many bytes one string of a parameter may hold.
struct LengthLimit {
  absl::string_view field;
  int64_t max = 0;

  /// "'stop[3]' must be at most 4096 bytes long, got 5000", naming the string as `name`
  /// (the field with its index); "" when `bytes` <= max.
  std::string Check(absl::string_view name, int64_t bytes) const;
};

namespace limits {

inline constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

inline constexpr RealLimit kTemperature{"temperature", 0.0, 2.0};
inline constexpr RealLimit kTopP{"top_p", 0.0, 1.0, /*min_exclusive=*/true};
inline constexpr RealLimit kMinP{"min_p", 0.0, 1.0};
inline constexpr RealLimit kPresencePenalty{"presence_penalty", -2.0, 2.0};
inline constexpr RealLimit kFrequencyPenalty{"frequency_penalty", -2.0, 2.0};
inline constexpr RealLimit kRepetitionPenalty{"repetition_penalty", 0.0, 10.0, /*min_exclusive=*/true};
/// One logit_bias value; its messages name the token: 'logit_bias["50256"]'.
inline constexpr RealLimit kLogitBias{"logit_bias", -100.0, 100.0};

inline constexpr IntLimit kTopK{"top_k", -1, kInt32Max};
inline constexpr IntLimit kN{"n", 1, 128};
inline constexpr IntLimit kBestOf{"best_of", 1, 128};
/// The completions API's `logprobs` (alternatives per token).
inline constexpr IntLimit kLogprobs{"logprobs", 0, 5};
/// The chat API's `top_logprobs`, and SamplingParams::top_logprobs on every surface.
inline constexpr IntLimit kTopLogprobs{"top_logprobs", 0, 20};
inline constexpr IntLimit kPromptLogprobs{"prompt_logprobs", 0, 20};
/// A request's max_new_tokens (the client's new-token limit), named in messages as the
/// OpenAI API spells it, `max_tokens`, on every surface (gRPC's max_new_tokens too).
inline constexpr IntLimit kMaxNewTokens{"max_tokens", 1, kInt32Max};
/// The chat API's newer name for max_tokens.
inline constexpr IntLimit kMaxCompletionTokens{"max_completion_tokens", 1, kInt32Max};
/// At most max_tokens as well (MinTokensError).
inline constexpr IntLimit kMinTokens{"min_tokens", 0, kInt32Max};
inline constexpr IntLimit kSeed{"seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
inline constexpr IntLimit kPriority{"priority", -1'000'000, 1'000'000};

inline constexpr CountLimit kStopStrings{"stop", 16, "sequences"};
inline constexpr LengthLimit kStopStringBytes{"stop", 4096};
inline constexpr CountLimit kStopTokenIds{"stop_token_ids", 64, "entries"};
inline constexpr CountLimit kLogitBiasEntries{"logit_bias", 300, "entries"};
/// Choices × prompts of one request (`n` times the number of prompts).
inline constexpr int32_t kMaxChoicesPerRequest = static_cast<int32_t>(kN.max);
inline constexpr CountLimit kGuidedChoices{"guided_choice", 1024, "choices"};
/// A tool-call constraint's most calls (StructuredOutputSpec::max_calls; 0 = unbounded).
inline constexpr IntLimit kMaxToolCalls{"max_calls", 0, 1024};

}  // namespace limits

/// "'min_tokens' (3) must not exceed 'max_tokens' (2)".
std::string MinTokensError(int64_t min_tokens, int64_t max_new_tokens);
/// `'logit_bias["7"]' must be in [-100, 100], got 1000`.
std::string LogitBiasValueError(int64_t token_id, double bias);
std::string LogitBiasValueError(int64_t token_id, float bias);
/// A token id: "'stop_token_ids[1]' must be at least 0, got -2"; where the
/// vocabulary is known (vocab_size > 0: the gateway's tokenizer, the scheduler's
/// engine) "Token id 300 at 'stop_token_ids[1]' is outside the vocabulary
/// [0, 257)"; "" when valid.
std::string TokenIdError(absl::string_view field, size_t index, int64_t id, int64_t vocab_size);
/// "'logit_bias' key '300' is not a token id of this model: the vocabulary is
/// [0, 257)"; "" when in range or vocab_size <= 0.
std::string LogitBiasTokenError(int64_t id, int64_t vocab_size);

/// How messages name a structured-output spec by its kind, whichever request
/// field it came from: "json_schema" (response_format's json_schema, guided_json),
/// "guided_regex", "guided_choice", "tools" (a tool-call constraint),
/// "response_format" (JSON mode).
absl::string_view StructuredOutputField(StructuredOutputSpec::Kind kind);
/// The table's limits on a structured-output spec itself, before it is compiled
/// (the compiler's own are core/structured/limits.h): the number of choices, the
/// end token ids (the request's stop_token_ids: their count, and each in
/// [0, vocab_size) when vocab_size > 0), max_calls. "" when within them.
std::string CheckStructuredOutputLimits(const StructuredOutputSpec& spec, int64_t vocab_size = 0);

/// The shortest decimal text that reads back as `v` ("2.5", "1e+30", "nan").
std::string ShortestDecimal(double v);
std::string ShortestDecimal(float v);

}  // namespace orca
