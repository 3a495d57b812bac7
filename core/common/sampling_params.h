#pragma once
/// Per-request sampling parameters, shared by the scheduler, the engine and the
/// gateway (plain data; the wire form is orca.v1.SamplingParams).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/common/sampling_limits.h"
#include "core/common/structured_output.h"

namespace orca {

/// OpenAI's bound on a logit_bias value and on the number of biased tokens
/// (limits::kLogitBias, limits::kLogitBiasEntries).
inline constexpr float kMaxLogitBias = static_cast<float>(limits::kLogitBias.max);
inline constexpr int32_t kMaxLogitBiasEntries = static_cast<int32_t>(limits::kLogitBiasEntries.max);

struct SamplingParams {
  /// 0 = greedy (argmax). Must be >= 0.
  float temperature = 0.0f;
  /// 0 or -1 = disabled; otherwise keep the k most likely tokens.
  int32_t top_k = 0;
  /// 1 = disabled; otherwise nucleus sampling in (0, 1].
  float top_p = 1.0f;
  /// 0 = disabled; keep tokens with p >= min_p * p_max.
  float min_p = 0.0f;
  /// Unset: derived from the request id, so every run differs by request but is reproducible.
  std::optional<uint64_t> seed;
  /// 1 = disabled. HF-style multiplicative penalty on tokens seen in prompt or output.
  float repetition_penalty = 1.0f;
  /// OpenAI-style additive penalties on generated tokens, in [-2, 2].
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  /// Report the chosen token's logprob.
  bool logprobs = false;
  /// Number of most likely alternatives to report per position (0..20).
  int32_t top_logprobs = 0;
  /// OpenAI's logit_bias: (token id, bias in [-100, 100]) pairs, sorted by id,
  /// no duplicates, at most kMaxLogitBiasEntries. Added to the logits before
  /// penalties and sampling; reported logprobs stay those of the raw model
  /// distribution (before the bias), like vLLM's default. Ids are checked
  /// against the vocabulary where it is known (gateway, engine).
  std::vector<std::pair<int32_t, float>> logit_bias;
  /// vLLM's prompt_logprobs: -1 = none; k >= 0 = the logprob of every prompt
  /// token after the first (under the raw model distribution given the tokens
  /// before it) with the k most likely alternatives (0..20). Computed on the
  /// last stage during the prefill of the requests that ask.
  int32_t prompt_logprobs = -1;
  /// Structured output (constrained decoding); kind kNone = unconstrained.
  StructuredOutputSpec structured;

  bool WantsPromptLogprobs() const { return prompt_logprobs >= 0; }
  bool IsGreedy() const { return temperature <= 0.0f; }
  bool HasPenalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
  /// Returns an empty string when valid, else the first field out of the range
  /// core/common/sampling_limits.h gives it, in that table's words ("'temperature'
  /// must be in [0, 2], got 3"). The structured-output spec is checked by compiling
  /// it (core/structured), not here; token ids against a vocabulary where it is known.
  std::string Validate() const;
  /// The logit_bias part of Validate().
  std::string ValidateLogitBias() const;
};

}  // namespace orca
