#include "core/engine/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "core/common/logging.h"
#include "core/common/split_mix64.h"
#include "core/engine/prompt_logprobs.h"
#include "kernels/cpu/sampling_kernels.h"

namespace orca::engine {
namespace {

// TopK keeps up to this many in a sorted list as it reads; more, and it selects among all.
constexpr size_t kTopKOnePassMax = 256;

// Tokens per block of the top-p = 1 draw's block masses.
constexpr int32_t kDrawBlock = 256;

// The sampling order: more likely first, ties by token id.
bool ByProb(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

std::pair<float, int32_t> MedianByProb(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b,
                                       const std::pair<float, int32_t>& c) {
  if (ByProb(a, b)) return ByProb(b, c) ? b : ByProb(a, c) ? c : a;
  return ByProb(a, c) ? a : ByProb(b, c) ? c : b;
}

// Whether a token of (unnormalized) probability v can be drawn: not underflowed to 0 or NaN,
// and at least min_p (relative to the most likely token's 1).
bool Kept(float v, float min_p) { return v > 0 && v >= min_p; }

// Σ p[i] over [begin, end) of the tokens Kept, in four interleaved partial sums.
double KeptMass(const float* p, int32_t begin, int32_t end, float min_p) {
  double part[4] = {0, 0, 0, 0};
  for (int32_t i = begin; i < end; ++i) part[i % 4] += Kept(p[i], min_p) ? p[i] : 0.0f;
  return (part[0] + part[1]) + (part[2] + part[3]);
}

}  // namespace

// A quickselect on mass: each round splits the range that holds the cut around a
// median-of-three pivot and keeps the side the cut falls in, so the work is linear on average;
// a range that stays large after 2·log2(n) rounds, and every small one, is sorted and walked.
size_t TopPPrefix(std::vector<std::pair<float, int32_t>>& c, double need) {
  size_t lo = 0, hi = c.size();  // c[0, lo) is kept; the cut lies in c[lo, hi)
  for (int rounds = 2 * static_cast<int>(std::bit_width(c.size())); hi - lo > 32 && rounds > 0; --rounds) {
    const auto pivot = MedianByProb(c[lo], c[lo + (hi - lo) / 2], c[hi - 1]);
    const auto split = std::partition(c.begin() + lo, c.begin() + hi, [&](const auto& x) { return ByProb(x, pivot); });
    std::iter_swap(split, std::find(split, c.begin() + hi, pivot));  // the pivot leads the rest
    const size_t k = static_cast<size_t>(split - c.begin());
    double mass = 0;
    for (size_t i = lo; i < k; ++i) mass += c[i].first;
    if (mass >= need) {
      hi = k;
      continue;
    }
    need -= mass;
    if (c[k].first >= need) return k + 1;
    need -= c[k].first;
    lo = k + 1;
  }
  std::sort(c.begin() + lo, c.begin() + hi, ByProb);
  for (size_t i = lo; i < hi; ++i) {
    if (c[i].first >= need) return i + 1;
    need -= c[i].first;
  }
  return hi;
}

void TopK(const float* x, int32_t n, int32_t k, std::vector<std::pair<float, int32_t>>* out) {
  out->clear();
  if (k <= 0) return;
  const size_t want = static_cast<size_t>(k);
  if (want > kTopKOnePassMax) {
    for (int32_t i = 0; i < n; ++i)
      if (!std::isnan(x[i])) out->emplace_back(x[i], i);
    if (out->size() > want) {
      std::nth_element(out->begin(), out->begin() + (want - 1), out->end(), ByProb);
      out->resize(want);
    }
    std::sort(out->begin(), out->end(), ByProb);
    return;
  }
  // One pass keeping the best k seen, in order: a value enters only if it beats the k-th,
  // which few do once the list is full (an equal one never does: the lower index wins).
  float enter = -std::numeric_limits<float>::infinity();  // NaN never enters
  for (int32_t i = 0; i < n; ++i) {
    if (!(x[i] >= enter)) continue;
    const std::pair<float, int32_t> c{x[i], i};
    out->insert(std::upper_bound(out->begin(), out->end(), c, ByProb), c);
    if (out->size() > want) out->pop_back();
    if (out->size() == want) enter = std::nextafter(out->back().first, std::numeric_limits<float>::infinity());
  }
}

Sampler::Sampler(const SamplingParams& params, uint64_t request_id, absl::Span<const int32_t> prompt,
                 absl::Span<const int32_t> resumed_output, std::unique_ptr<structured::GrammarMatcher> matcher)
    : params_(params),
      rng_(params.seed.has_value() ? *params.seed : SplitMix64Hash(request_id)),
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
  const bool want_logprobs = params_.logprobs || params_.top_logprobs > 0;
  if (want_logprobs) raw_logits_.assign(logits, logits + vocab);
  ApplyLogitBias(logits, vocab);
  ApplyPenalties(logits, vocab);
  if (matcher_ != nullptr) matcher_->ApplyToLogits(logits, vocab);
  const int32_t chosen = Draw(logits, vocab);
  if (matcher_ != nullptr) {
    // Cannot fail: the draw only sees tokens the mask allowed.
    if (absl::Status s = matcher_->Accept(chosen); !s.ok()) ORCA_LOG(ERROR) << "structured output: " << s.ToString();
  }
  SampleResult result;
  if (want_logprobs) {
    // Of the raw distribution, as prompt logprobs are; only those report the rank.
    result = TokenLogprobs(raw_logits_.data(), vocab, chosen, params_.top_logprobs, &candidates_);
    result.rank = 0;
  }
  result.token_id = chosen;
  ++output_counts_[chosen];
  return result;
}

void Sampler::Gather(const float* p, int32_t vocab, float at_least) {
  // Without a branch per token: each is written, and counted when it is kept.
  candidates_.resize(static_cast<size_t>(vocab));
  size_t n = 0;
  for (int32_t i = 0; i < vocab; ++i) {
    candidates_[n] = {p[i], i};
    n += Kept(p[i], at_least);
  }
  candidates_.resize(n);
}

int32_t Sampler::Draw(float* logits, int32_t vocab) {
  const int32_t best = kernels::sampling::ArgMax(logits, vocab);
  if (params_.IsGreedy() || !std::isfinite(logits[best])) return best;
  // Unnormalized probabilities in place, p = exp((logit - max) / T): the most likely token's
  // is 1, a NaN logit's stays NaN and fails every test below, so it is never drawn.
  const float m = logits[best], inv_t = 1.0f / params_.temperature;
  for (int32_t i = 0; i < vocab; ++i) logits[i] = (logits[i] - m) * inv_t;
  kernels::sampling::ExpSubtractSum(logits, vocab, 0.0f);
  const float* p = logits;
  const float min_p = params_.min_p;  // relative to the most likely token's 1
  const bool top_k = params_.top_k > 0 && params_.top_k < vocab;
  if (!top_k && params_.top_p >= 1.0f) {
    // Every token that passes min-p, drawn in vocabulary order: the draw skips whole blocks by
    // their mass, then walks the block it falls in.
    const int32_t blocks = (vocab + kDrawBlock - 1) / kDrawBlock;
    block_mass_.resize(blocks);
    double total = 0;
    for (int32_t b = 0; b < blocks; ++b)
      total += block_mass_[b] = KeptMass(p, b * kDrawBlock, std::min(vocab, (b + 1) * kDrawBlock), min_p);
    double r = std::uniform_real_distribution<double>(0.0, total)(rng_);
    int32_t b = 0;
    while (b + 1 < blocks && r > block_mass_[b]) r -= block_mass_[b++];
    int32_t last = best;
    for (int32_t i = b * kDrawBlock; i < vocab; ++i) {
      if (!Kept(p[i], min_p)) continue;
      last = i;
      r -= p[i];
      if (r <= 0) return i;
    }
    return last;
  }
  // Candidates pruned by top-k, then min-p, then top-p (of what the first two kept).
  candidates_.clear();
  double total = 0;
  if (top_k) {
    TopK(p, vocab, params_.top_k, &candidates_);
    std::erase_if(candidates_, [&](const auto& c) { return !Kept(c.first, min_p); });
    for (const auto& c : candidates_) total += c.first;
  } else {
    // Top-p without top-k: tokens below tau cannot be in the top-p set, so they are counted in
    // the mass but not kept as candidates. Together they hold less than vocab · tau, which is
    // under (1 - top_p) of the mass, as the mass is at least the most likely token's 1.
    const float tau = static_cast<float>(0.99 * (1.0 - params_.top_p) / vocab);
    total = KeptMass(p, 0, vocab, min_p);
    Gather(p, vocab, std::max(tau, min_p));
  }
  if (params_.top_p < 1.0f) {
    candidates_.resize(TopPPrefix(candidates_, params_.top_p * total));
    total = 0;
    for (const auto& c : candidates_) total += c.first;
  }
  double r = std::uniform_real_distribution<double>(0.0, total)(rng_);
  for (const auto& c : candidates_) {
    r -= c.first;
    if (r <= 0) return c.second;
  }
  return candidates_.back().second;
}

}  // namespace orca::engine
