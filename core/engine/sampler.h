#pragma once
/// Per-request token sampling on the last pipeline stage: penalties
/// (repetition, presence, frequency), temperature, top-k, top-p, min-p, a
/// per-request seeded generator (reproducible), and log-probabilities of the
/// chosen token and the top alternatives. Logprobs are those of the raw model
/// distribution (log-softmax of the logits before logit_bias, penalties or
/// any sampling transform), like vLLM's default. logit_bias is added first, then
/// the penalties apply to the biased logits. A request with a structured-output
/// constraint carries a GrammarMatcher: every step it masks the (biased,
/// penalized) logits to the tokens its grammar allows before drawing, and
/// advances on the drawn token.

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "core/common/sampling_params.h"
#include "core/engine/step_records.h"
#include "core/structured/grammar_matcher.h"

namespace orca::engine {

/// The top-p cut: moves to the front of `c` (probability, token id) the shortest prefix of the
/// order "more likely first, ties by lower id" whose probabilities sum to at least `need`, and
/// returns its length (all of `c` if they never do). Linear time on average, without sorting
/// all of `c`. (In the header for its tests.)
size_t TopPPrefix(std::vector<std::pair<float, int32_t>>& c, double need);

/// The k largest of x[0, n) as (value, index), in that same order (ties: the lower index
/// first), into *out; NaN values are never taken, so fewer than k come back only when fewer
/// than k values are not NaN.
void TopK(const float* x, int32_t n, int32_t k, std::vector<std::pair<float, int32_t>>* out);

class Sampler {
 public:
  /// `prompt` feeds the repetition penalty (HF applies it to prompt tokens too).
  /// `resumed_output`: tokens this request generated before (it was preempted
  /// and is recomputed): their penalty counts are restored and a non-greedy
  /// generator skips the draws that produced them, so sampling continues as if
  /// nothing had happened. `matcher` (may be null) constrains the output; it
  /// is replayed over `resumed_output`.
  Sampler(const SamplingParams& params, uint64_t request_id, absl::Span<const int32_t> prompt,
          absl::Span<const int32_t> resumed_output = {}, std::unique_ptr<structured::GrammarMatcher> matcher = nullptr);

  /// Samples the next token from `logits` (modified in place) and records it.
  SampleResult Sample(float* logits, int32_t vocab_size);

  const SamplingParams& params() const { return params_; }
  const structured::GrammarMatcher* matcher() const { return matcher_.get(); }

 private:
  void ApplyLogitBias(float* logits, int32_t vocab_size) const;
  void ApplyPenalties(float* logits, int32_t vocab_size) const;
  int32_t Draw(float* logits, int32_t vocab_size);
  /// candidates_ = (p[i], i) for every i with p[i] > 0 and p[i] >= at_least, in order.
  void Gather(const float* p, int32_t vocab_size, float at_least);

  SamplingParams params_;
  std::mt19937_64 rng_;
  absl::flat_hash_map<int32_t, int32_t> output_counts_;
  absl::flat_hash_map<int32_t, bool> prompt_tokens_;
  std::vector<std::pair<float, int32_t>> candidates_;  // reused scratch
  std::vector<double> block_mass_;                     // reused scratch
  std::vector<float> raw_logits_;                      // kept only when logprobs are asked
  std::unique_ptr<structured::GrammarMatcher> matcher_;
};

}  // namespace orca::engine
