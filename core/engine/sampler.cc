#include "core/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/common/logging.h"

namespace orca::engine {
namespace {

constexpr size_t kTopPPrefilter = 1024;

float LogSumExp(const float* x, int32_t n, float* max_out) {
  float m = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  double s = 0;
  for (int32_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i] - m));
  *max_out = m;
  return m + static_cast<float>(std::log(s));
}

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, uint64_t request_id, absl::Span<const int32_t> prompt,
                 absl::Span<const int32_t> resumed_output, std::unique_ptr<structured::GrammarMatcher> matcher)
    : params_(params),
      rng_(params.seed.has_value() ? *params.seed : SplitMix(request_id)),
      matcher_(std::move(matcher)) {
  if (matcher_ != nullptr) {
    for (int32_t t : resumed_output) {
      if (absl::Status s = matcher_->Accept(t); !s.ok()) {
        ORCA_LOG(WARNING) << "request " << request_id << ": replaying its output through its grammar: " << s.ToString();
        break;
      }
    }
  }
  if (params_.repetition_penalty != 1.0f)
    for (int32_t t : prompt) prompt_tokens_[t] = true;
  for (int32_t t : resumed_output) ++output_counts_[t];
  // Draw() consumes exactly one 64-bit output per non-greedy sample
  // (uniform_real_distribution<double> over mt19937_64).
  if (!params_.IsGreedy()) rng_.discard(resumed_output.size());
}

void Sampler::ApplyLogitBias(float* logits, int32_t vocab) const {
  // Ids past the vocabulary were refused upstream (gateway, Engine::Step); skip rather than write out of bounds.
  for (const auto& [t, bias] : params_.logit_bias)
    if (t >= 0 && t < vocab) logits[t] += bias;
}

void Sampler::ApplyPenalties(float* logits, int32_t vocab) const {
  if (!params_.HasPenalties()) return;
  auto penalize_rep = [&](int32_t t) {
    if (t < 0 || t >= vocab) return;
    float& l = logits[t];
    l = l > 0 ? l / params_.repetition_penalty : l * params_.repetition_penalty;
  };
  if (params_.repetition_penalty != 1.0f) {
    for (const auto& [t, unused] : prompt_tokens_) penalize_rep(t);
    for (const auto& [t, count] : output_counts_)
      if (!prompt_tokens_.contains(t)) penalize_rep(t);
  }
  for (const auto& [t, count] : output_counts_) {
    if (t < 0 || t >= vocab) continue;
    logits[t] -= params_.frequency_penalty * static_cast<float>(count) + params_.presence_penalty;
  }
}

SampleResult Sampler::Sample(float* logits, int32_t vocab) {
  SampleResult result;
  const bool want_logprobs = params_.logprobs || params_.top_logprobs > 0;
  float raw_max = 0, raw_lse = 0;
  if (want_logprobs) {
    raw_logits_.assign(logits, logits + vocab);
    raw_lse = LogSumExp(logits, vocab, &raw_max);
    if (params_.top_logprobs > 0) {
      const int32_t k = std::min(params_.top_logprobs, vocab);
      candidates_.clear();
      for (int32_t i = 0; i < vocab; ++i) candidates_.emplace_back(logits[i], i);
      std::partial_sort(candidates_.begin(), candidates_.begin() + k, candidates_.end(),
                        [](const auto& a, const auto& b) {
                          return a.first > b.first || (a.first == b.first && a.second < b.second);
                        });
      for (int32_t i = 0; i < k; ++i)
        result.top_logprobs.push_back({candidates_[i].second, candidates_[i].first - raw_lse});
    }
  }
  ApplyLogitBias(logits, vocab);
  ApplyPenalties(logits, vocab);
  if (matcher_ != nullptr) matcher_->ApplyToLogits(logits, vocab);
  const int32_t chosen = Draw(logits, vocab);
  if (matcher_ != nullptr) {
    // Cannot fail: the draw only sees tokens the mask allowed.
    if (absl::Status s = matcher_->Accept(chosen); !s.ok()) ORCA_LOG(ERROR) << "structured output: " << s.ToString();
  }
  result.token_id = chosen;
  if (want_logprobs) result.logprob = raw_logits_[chosen] - raw_lse;
  ++output_counts_[chosen];
  return result;
}

int32_t Sampler::Draw(float* logits, int32_t vocab) {
  if (params_.IsGreedy()) {
    return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  }
  const float inv_t = 1.0f / params_.temperature;
  float m = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < vocab; ++i) m = std::max(m, logits[i]);
  if (!std::isfinite(m)) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  // Candidates sorted by probability, pruned by top-k / top-p / min-p.
  candidates_.clear();
  double total = 0;
  for (int32_t i = 0; i < vocab; ++i) {
    const float p = std::exp((logits[i] - m) * inv_t);
    total += p;
    candidates_.emplace_back(p, i);
  }
  auto by_prob = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = static_cast<size_t>(params_.top_k);
    std::nth_element(candidates_.begin(), candidates_.begin() + keep - 1, candidates_.end(), by_prob);
    candidates_.resize(keep);
    total = 0;
    for (const auto& c : candidates_) total += c.first;
  }
  if (params_.min_p > 0.0f) {
    // Relative to the most likely token: p_max is exp(0) = 1 after the shift.
    const float threshold = params_.min_p;
    candidates_.erase(
        std::remove_if(candidates_.begin(), candidates_.end(), [&](const auto& c) { return c.first < threshold; }),
        candidates_.end());
    total = 0;
    for (const auto& c : candidates_) total += c.first;
  }
  if (params_.top_p < 1.0f) {
    // Sort only the head of the distribution when it already holds top_p of the mass.
    size_t head = std::min(kTopPPrefilter, candidates_.size());
    std::partial_sort(candidates_.begin(), candidates_.begin() + head, candidates_.end(), by_prob);
    double head_mass = 0;
    for (size_t i = 0; i < head; ++i) head_mass += candidates_[i].first;
    if (head_mass < params_.top_p * total) std::sort(candidates_.begin(), candidates_.end(), by_prob);
    double cum = 0;
    size_t cut = candidates_.size();
    for (size_t i = 0; i < candidates_.size(); ++i) {
      cum += candidates_[i].first;
      if (cum >= params_.top_p * total) {
        cut = i + 1;
        break;
      }
    }
    candidates_.resize(cut);
    total = cum;
  }
  std::uniform_real_distribution<double> uni(0.0, total);
  double r = uni(rng_);
  for (const auto& c : candidates_) {
    r -= c.first;
    if (r <= 0) return c.second;
  }
  return candidates_.back().second;
}

}  // namespace orca::engine
