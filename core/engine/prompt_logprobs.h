#pragma once
/// Prompt logprobs (vLLM's `prompt_logprobs`, OpenAI's `echo` with `logprobs`)
/// on the last pipeline stage. For a request that asks, the model runner
/// produces logits at every position of its prefill (SeqSpec::all_logits);
/// the logits at position p give the log-probability of prompt token p + 1.
/// Per-position math only: no state across steps, so chunked prefill (each
/// chunk contributes its positions) and recompute after a preemption (the same
/// positions again, deduplicated by the scheduler) need nothing special.

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "core/engine/step_records.h"

namespace orca::engine {

/// The log-softmax of `logits` [vocab] at `token`, its rank (1 + the number of
/// strictly more likely tokens), and the `top_k` most likely tokens (ties: the
/// lower id first) with theirs. Raw distribution: no bias,
/// penalty or temperature. `scratch` is reused between calls.
SampleResult TokenLogprobs(const float* logits, int32_t vocab, int32_t token, int32_t top_k,
                           std::vector<std::pair<float, int32_t>>* scratch);

/// Whether a sequence whose step covers positions [start, start + num_tokens)
/// of a request with a prompt of `prompt_len` tokens has any prompt token to
/// score this step (rows start .. prompt_len − 2 predict tokens 1 .. prompt_len − 1).
inline bool StepHasPromptPositions(int32_t start, int32_t num_tokens, int32_t prompt_len) {
  return num_tokens > 0 && start < prompt_len - 1;
}

/// The prompt logprobs of one sequence's step: `logits` holds its rows
/// [num_tokens, vocab] for positions start .. start + num_tokens − 1.
PromptLogprobs ComputePromptLogprobs(uint64_t request_id, absl::Span<const int32_t> prompt, int32_t start,
                                     int32_t num_tokens, const float* logits, int32_t vocab, int32_t top_k,
                                     std::vector<std::pair<float, int32_t>>* scratch);

}  // namespace orca::engine
