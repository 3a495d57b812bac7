#include "core/engine/prompt_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/sampling_kernels.h"

namespace orca::engine {

SampleResult TokenLogprobs(const float* logits, int32_t vocab, int32_t token, int32_t top_k,
                           std::vector<std::pair<float, int32_t>>* scratch) {
  const float lse = kernels::sampling::LogSumExp(logits, vocab);
  SampleResult out;
  out.token_id = token;
  out.logprob = logits[token] - lse;
  out.rank = 1;
  for (int32_t i = 0; i < vocab; ++i) out.rank += logits[i] > logits[token] ? 1 : 0;
  const size_t k = static_cast<size_t>(std::clamp(top_k, 0, vocab));
  if (k > 0) {
    // One pass keeping the k best seen, in order: a token enters only if it beats the k-th,
    // which few do once the list is full (an equal value never does: the lower id wins).
    auto better = [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    scratch->clear();
    float enter = -std::numeric_limits<float>::infinity();  // NaN never enters
    for (int32_t i = 0; i < vocab; ++i) {
      if (!(logits[i] >= enter)) continue;
      const std::pair<float, int32_t> c{logits[i], i};
      scratch->insert(std::upper_bound(scratch->begin(), scratch->end(), c, better), c);
      if (scratch->size() > k) scratch->pop_back();
      if (scratch->size() == k) enter = std::nextafter(scratch->back().first, std::numeric_limits<float>::infinity());
    }
    for (const auto& [v, id] : *scratch) out.top_logprobs.push_back({id, v - lse});
  }
  return out;
}

PromptLogprobs ComputePromptLogprobs(uint64_t request_id, absl::Span<const int32_t> prompt, int32_t start,
                                     int32_t num_tokens, const float* logits, int32_t vocab, int32_t top_k,
                                     std::vector<std::pair<float, int32_t>>* scratch) {
  PromptLogprobs out;
  out.request_id = request_id;
  out.first_position = start + 1;
  const int32_t prompt_len = static_cast<int32_t>(prompt.size());
  for (int32_t t = 0; t < num_tokens; ++t) {
    const int32_t next = start + t + 1;  // the prompt position row t predicts
    if (next >= prompt_len) break;
    out.tokens.push_back(TokenLogprobs(logits + static_cast<size_t>(t) * vocab, vocab, prompt[next], top_k, scratch));
  }
  return out;
}

}  // namespace orca::engine
