#include "core/engine/prompt_logprobs.h"

#include "core/engine/sampler.h"
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
  if (top_k > 0) {
    TopK(logits, vocab, top_k, scratch);
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
