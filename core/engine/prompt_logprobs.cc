#include "core/engine/prompt_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace orca::engine {

SampleResult TokenLogprobs(const float* logits, int32_t vocab, int32_t token, int32_t top_k,
                           std::vector<std::pair<float, int32_t>>* scratch) {
  float m = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < vocab; ++i) m = std::max(m, logits[i]);
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - m));
  const float lse = m + static_cast<float>(std::log(sum));
  SampleResult out;
  out.token_id = token;
  out.logprob = logits[token] - lse;
  out.rank = 1;
  for (int32_t i = 0; i < vocab; ++i) out.rank += logits[i] > logits[token] ? 1 : 0;
  const int32_t k = std::min(top_k, vocab);
  if (k > 0) {
    scratch->clear();
    for (int32_t i = 0; i < vocab; ++i) scratch->emplace_back(logits[i], i);
    std::partial_sort(scratch->begin(), scratch->begin() + k, scratch->end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    for (int32_t i = 0; i < k; ++i) out.top_logprobs.push_back({(*scratch)[i].second, (*scratch)[i].first - lse});
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
