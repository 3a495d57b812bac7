#pragma once
/// Per-request sampling parameters, shared by the scheduler, the engine and the
/// gateway (plain data; the wire form is orca.v1.SamplingParams).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/common/structured_output.h"

namespace orca {

/// OpenAI's bound on a logit_bias value and on the number of biased tokens.
inline constexpr float kMaxLogitBias = 100.0f;
inline constexpr int32_t kMaxLogitBiasEntries = 300;

struct SamplingParams {
  /// 0 = greedy (argmax). Must be >= 0.
  float temperature = 0.0f;
  /// 0 = disabled; otherwise keep the k most likely tokens.
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
  /// Returns an empty string when valid, else which field is out of range and why.
  std::string Validate() const {
    if (!(temperature >= 0.0f) || temperature > 100.0f) return "temperature must be in [0, 100]";
    if (top_k < 0) return "top_k must be >= 0 (0 disables it)";
    if (!(top_p > 0.0f && top_p <= 1.0f)) return "top_p must be in (0, 1]";
    if (!(min_p >= 0.0f && min_p <= 1.0f)) return "min_p must be in [0, 1]";
    if (!(repetition_penalty > 0.0f) || repetition_penalty > 10.0f) return "repetition_penalty must be in (0, 10]";
    if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) return "presence_penalty must be in [-2, 2]";
    if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) return "frequency_penalty must be in [-2, 2]";
    if (top_logprobs < 0 || top_logprobs > 20) return "top_logprobs must be in [0, 20]";
    if (prompt_logprobs < -1 || prompt_logprobs > 20) return "prompt_logprobs must be in [0, 20] (or -1: none)";
    return ValidateLogitBias();
  }
  /// The logit_bias part of Validate().
  std::string ValidateLogitBias() const {
    if (logit_bias.size() > static_cast<size_t>(kMaxLogitBiasEntries))
      return "logit_bias may hold at most " + std::to_string(kMaxLogitBiasEntries) + " entries, got " +
             std::to_string(logit_bias.size());
    for (size_t i = 0; i < logit_bias.size(); ++i) {
      const auto& [id, bias] = logit_bias[i];
      if (id < 0) return "logit_bias token id " + std::to_string(id) + " is negative";
      if (i > 0 && id <= logit_bias[i - 1].first) return "logit_bias token ids must be sorted and unique";
      if (!(bias >= -kMaxLogitBias && bias <= kMaxLogitBias))
        return "logit_bias for token " + std::to_string(id) + " must be in [-100, 100]";
    }
    return "";
  }
};

}  // namespace orca
