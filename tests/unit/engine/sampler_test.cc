#include "core/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace orca::engine {
namespace {

std::vector<float> Logits() { return {1.0f, 3.0f, 2.0f, -1.0f, 0.5f, 2.9f}; }

int32_t SampleOnce(const SamplingParams& p, uint64_t id = 1, std::vector<float> logits = Logits()) {
  Sampler s(p, id, {});
  return s.Sample(logits.data(), static_cast<int32_t>(logits.size())).token_id;
}

TEST(SamplerTest, GreedyPicksTheArgmax) { EXPECT_EQ(SampleOnce({}), 1); }

TEST(SamplerTest, TopKOfOneAndTinyTopPAreGreedy) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 1;
  for (uint64_t id = 0; id < 20; ++id) EXPECT_EQ(SampleOnce(p, id), 1);
  p.top_k = 0;
  p.top_p = 0.01f;
  for (uint64_t id = 0; id < 20; ++id) EXPECT_EQ(SampleOnce(p, id), 1);
}

TEST(SamplerTest, SeedMakesSamplingReproducible) {
  SamplingParams p;
  p.temperature = 1.5f;
  p.seed = 42;
  std::vector<int32_t> a, b;
  Sampler s1(p, 1, {}), s2(p, 999, {});
  for (int i = 0; i < 50; ++i) {
    auto l1 = Logits(), l2 = Logits();
    a.push_back(s1.Sample(l1.data(), 6).token_id);
    b.push_back(s2.Sample(l2.data(), 6).token_id);
  }
  EXPECT_EQ(a, b);
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 1u);
}

TEST(SamplerTest, UnseededDrawsArePinnedPerRequestId) {
  // Without a seed the generator is seeded from the request id (a SplitMix64 hash of it):
  // the same request id always samples the same tokens.
  SamplingParams p;
  p.temperature = 1.0f;
  std::vector<int32_t> tokens;
  Sampler s(p, 12345, {});
  for (int i = 0; i < 12; ++i) {
    auto l = Logits();
    tokens.push_back(s.Sample(l.data(), 6).token_id);
  }
  EXPECT_EQ(tokens, (std::vector<int32_t>{5, 5, 2, 1, 5, 1, 3, 2, 4, 2, 5, 2}));
}

TEST(SamplerTest, FrequenciesFollowTheDistribution) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  Sampler s(p, 1, {});
  std::map<int32_t, int> counts;
  const int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) {
    auto l = Logits();
    ++counts[s.Sample(l.data(), 6).token_id];
  }
  auto l = Logits();
  double z = 0;
  for (float v : l) z += std::exp(v);
  for (int t = 0; t < 6; ++t) EXPECT_NEAR(counts[t] / double(kDraws), std::exp(l[t]) / z, 0.015) << t;
}

TEST(SamplerTest, MinPDropsUnlikelyTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.5f;  // keeps tokens with p >= 0.5 * p(token 1): tokens 1 and 5 (e^-0.1)
  for (uint64_t id = 0; id < 200; ++id) {
    const int32_t t = SampleOnce(p, id);
    EXPECT_TRUE(t == 1 || t == 5) << t;
  }
}

TEST(SamplerTest, PenaltiesDiscourageRepeats) {
  SamplingParams p;
  p.frequency_penalty = 2.0f;
  Sampler s(p, 1, {});
  auto l = Logits();
  EXPECT_EQ(s.Sample(l.data(), 6).token_id, 1);
  l = Logits();
  EXPECT_EQ(s.Sample(l.data(), 6).token_id, 5);  // 3.0 - 2 = 1.0 < 2.9
  SamplingParams r;
  r.repetition_penalty = 2.0f;
  std::vector<int32_t> prompt = {1};
  Sampler s2(r, 1, prompt);
  l = Logits();
  EXPECT_EQ(s2.Sample(l.data(), 6).token_id, 5);  // 3.0 / 2 = 1.5 < 2.9
}

TEST(SamplerTest, LogprobsAreTheRawLogSoftmax) {
  SamplingParams p;
  p.logprobs = true;
  p.top_logprobs = 3;
  p.frequency_penalty = 1.0f;  // penalties must not change reported logprobs
  Sampler s(p, 1, {});
  auto l = Logits();
  const SampleResult r = s.Sample(l.data(), 6);
  auto raw = Logits();
  double z = 0;
  for (float v : raw) z += std::exp(v);
  EXPECT_NEAR(r.logprob, raw[1] - std::log(z), 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 3u);
  EXPECT_EQ(r.top_logprobs[0].token_id, 1);
  EXPECT_EQ(r.top_logprobs[1].token_id, 5);
  EXPECT_EQ(r.top_logprobs[2].token_id, 2);
  EXPECT_NEAR(r.top_logprobs[2].logprob, raw[2] - std::log(z), 1e-5);
}

TEST(SamplerTest, LogitBiasForcesAndBansTokensGreedy) {
  SamplingParams p;
  p.logit_bias = {{3, 100.0f}};  // the least likely token (-1.0) becomes the argmax
  EXPECT_EQ(SampleOnce(p), 3);
  p.logit_bias = {{1, -100.0f}};  // the argmax is banned: the next best (2.9) wins
  EXPECT_EQ(SampleOnce(p), 5);
  p.logit_bias = {{1, -100.0f}, {5, -100.0f}, {2, -0.5f}};  // 2.0 - 0.5 = 1.5 still beats 1.0
  EXPECT_EQ(SampleOnce(p), 2);
  p.logit_bias = {{1, -100.0f}, {5, -100.0f}, {2, -1.5f}};  // 0.5 < 1.0: token 0
  EXPECT_EQ(SampleOnce(p), 0);
}

TEST(SamplerTest, LogitBiasBansTokensWhenSampling) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.logit_bias = {{1, -100.0f}, {5, -100.0f}};
  std::map<int32_t, int> counts;
  for (uint64_t id = 0; id < 2000; ++id) ++counts[SampleOnce(p, id)];
  EXPECT_EQ(counts.count(1), 0u);
  EXPECT_EQ(counts.count(5), 0u);
  EXPECT_GT(counts[2], 0);  // the others are still drawn
  p.logit_bias = {{4, 100.0f}};
  for (uint64_t id = 0; id < 200; ++id) EXPECT_EQ(SampleOnce(p, id), 4);
}

TEST(SamplerTest, LogitBiasComesBeforePenaltiesAndLeavesLogprobsRaw) {
  SamplingParams p;
  p.logprobs = true;
  p.top_logprobs = 1;
  p.repetition_penalty = 2.0f;
  // Tokens 1 and 5 banned; token 3 (-1.0, in the prompt) biased by +4.5. Bias first: (-1 + 4.5) / 2 = 1.75 < 2.0, so
  // token 2 wins; had the penalty come first, -1 * 2 + 4.5 = 2.5 would have made it token 3.
  p.logit_bias = {{1, -100.0f}, {3, 4.5f}, {5, -100.0f}};
  std::vector<int32_t> prompt = {3};
  Sampler s(p, 1, prompt);
  auto l = Logits();
  const SampleResult r = s.Sample(l.data(), 6);
  EXPECT_EQ(r.token_id, 2);
  auto raw = Logits();
  double z = 0;
  for (float v : raw) z += std::exp(v);
  EXPECT_NEAR(r.logprob, raw[2] - std::log(z), 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 1u);
  EXPECT_EQ(r.top_logprobs[0].token_id, 1);  // the raw distribution's best, although it is banned

  SamplingParams q;
  q.logprobs = true;
  q.logit_bias = {{3, 100.0f}};
  Sampler forced(q, 1, {});
  l = Logits();
  const SampleResult f = forced.Sample(l.data(), 6);
  EXPECT_EQ(f.token_id, 3);
  EXPECT_NEAR(f.logprob, raw[3] - std::log(z), 1e-5);  // the raw logprob of the forced token
}

TEST(SamplerTest, LogitBiasValidation) {
  SamplingParams p;
  p.logit_bias = {{1, 100.0f}, {2, -100.0f}};
  EXPECT_EQ(p.Validate(), "");
  p.logit_bias = {{1, 100.5f}};
  EXPECT_NE(p.Validate().find("'logit_bias[\"1\"]' must be in [-100, 100], got 100.5"), std::string::npos);
  p.logit_bias = {{1, std::nanf("")}};
  EXPECT_NE(p.Validate().find("logit_bias"), std::string::npos);
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_NE(p.Validate().find("negative"), std::string::npos);
  p.logit_bias = {{2, 1.0f}, {2, 1.0f}};
  EXPECT_NE(p.Validate().find("sorted and unique"), std::string::npos);
  p.logit_bias.clear();
  for (int i = 0; i <= kMaxLogitBiasEntries; ++i) p.logit_bias.emplace_back(i, 1.0f);
  EXPECT_NE(p.Validate().find("at most 300"), std::string::npos);
}

TEST(SamplerTest, ValidateNamesTheBadField) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_NE(p.Validate().find("top_p"), std::string::npos);
  p = {};
  p.temperature = -1;
  EXPECT_NE(p.Validate().find("temperature"), std::string::npos);
  EXPECT_EQ(SamplingParams{}.Validate(), "");
}

// A preempted request is recomputed and its sampler rebuilt from the tokens it
// had generated: penalties count them and a seeded generator continues where
// it was, so the tokens after the preemption are the ones it would have drawn.
TEST(SamplerTest, ResumedSamplerContinuesTheSameSequence) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.3f;
  p.seed = 1234;
  std::mt19937 rng(5);
  std::vector<float> base(64);
  for (float& x : base) x = std::uniform_real_distribution<float>(-2, 2)(rng);
  const std::vector<int32_t> prompt = {1, 2, 3};
  Sampler whole(p, 9, prompt);
  std::vector<int32_t> drawn;
  for (int i = 0; i < 12; ++i) {
    std::vector<float> logits = base;
    drawn.push_back(whole.Sample(logits.data(), 64).token_id);
  }
  for (size_t cut : {size_t{0}, size_t{1}, size_t{5}, size_t{11}}) {
    Sampler resumed(p, 9, prompt, std::vector<int32_t>(drawn.begin(), drawn.begin() + cut));
    for (size_t i = cut; i < drawn.size(); ++i) {
      std::vector<float> logits = base;
      EXPECT_EQ(resumed.Sample(logits.data(), 64).token_id, drawn[i]) << "resumed after " << cut << ", token " << i;
    }
  }
}

// The top-p cut against its definition: sort everything (more likely first, ties by id) and
// keep the shortest prefix that reaches the mass. Probabilities are multiples of 1/1024, so
// every sum is exact in both and the two must agree exactly, ties and boundaries included.
TEST(SamplerTest, TopPPrefixIsTheShortestSortedPrefixThatReachesTheMass) {
  std::mt19937 rng(11);
  auto by_prob = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  for (int trial = 0; trial < 400; ++trial) {
    const int n = trial < 40 ? trial : std::uniform_int_distribution<int>(1, trial % 3 == 0 ? 5000 : 300)(rng);
    const int levels = trial % 4 == 0 ? 3 : 1024;  // few distinct values: long runs of ties
    std::vector<std::pair<float, int32_t>> c(n);
    for (int i = 0; i < n; ++i)
      c[i] = {static_cast<float>(std::uniform_int_distribution<int>(1, levels)(rng)) / 1024.0f, i};
    std::shuffle(c.begin(), c.end(), rng);
    std::vector<std::pair<float, int32_t>> sorted = c;
    std::sort(sorted.begin(), sorted.end(), by_prob);
    std::vector<double> cum(n + 1, 0.0);
    for (int i = 0; i < n; ++i) cum[i + 1] = cum[i] + sorted[i].first;
    for (int q = 0; q < 6; ++q) {
      // Needs inside the mass, exactly at a prefix's sum (the >= boundary), and past all of it.
      double need = q == 0            ? cum[n] + 1
                    : q == 1 && n > 0 ? cum[std::uniform_int_distribution<int>(1, n)(rng)]
                                      : std::uniform_real_distribution<double>(0, cum[n])(rng);
      if (!(need > 0)) need = 1.0 / 2048;
      size_t want = 0;
      while (want < static_cast<size_t>(n) && cum[want] < need) ++want;
      if (want == 0 && n > 0) want = 1;
      std::vector<std::pair<float, int32_t>> got = c;
      const size_t len = TopPPrefix(got, need);
      ASSERT_EQ(len, q == 0 ? static_cast<size_t>(n) : want) << "n " << n << " need " << need;
      std::vector<std::pair<float, int32_t>> kept(got.begin(), got.begin() + len);
      std::sort(kept.begin(), kept.end(), by_prob);
      ASSERT_TRUE(std::equal(kept.begin(), kept.end(), sorted.begin())) << "n " << n << " need " << need;
      std::sort(got.begin(), got.end(), by_prob);
      ASSERT_EQ(got, sorted) << "the candidates were lost or duplicated";
    }
  }
}

// A 3000-token vocabulary: a head of 12 tokens at scattered ids and a long tail holding a few
// percent of the mass, so top-p, top-k and min-p cut inside the head, well away from any tie.
// For each mix of parameters, 20000 draws take only tokens the definition keeps, each about
// as often as its renormalized probability (5 standard deviations), and the tail its share.
TEST(SamplerTest, EveryParameterMixDrawsTheKeptTokensInProportion) {
  constexpr int kVocab = 3000, kHead = 12, kDraws = 20000;
  std::mt19937 rng(3);
  std::vector<float> logits(kVocab);
  for (float& l : logits) l = std::uniform_real_distribution<float>(-8.0f, -3.0f)(rng);
  std::vector<int32_t> ids(kVocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  for (int h = 0; h < kHead; ++h) logits[ids[h]] = 5.0f - 0.37f * h;
  struct Mix {
    float temperature, top_p;
    int32_t top_k;
    float min_p;
  };
  for (const Mix& m :
       {Mix{1.0f, 1.0f, 0, 0.0f}, Mix{0.7f, 0.9f, 0, 0.0f}, Mix{1.0f, 0.8f, 0, 0.0f}, Mix{1.0f, 1.0f, 5, 0.0f},
        Mix{1.3f, 0.85f, 50, 0.0f}, Mix{1.3f, 1.0f, 0, 0.1f}, Mix{1.0f, 0.95f, 0, 0.05f}, Mix{1.6f, 0.5f, 8, 0.02f}}) {
    // The definition, in double: p = exp((l - max) / T); top-k, then min-p, then top-p.
    std::vector<std::pair<double, int32_t>> order;
    for (int32_t t = 0; t < kVocab; ++t) order.emplace_back(std::exp((logits[t] - 5.0) / m.temperature), t);
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    if (m.top_k > 0) order.resize(m.top_k);
    std::erase_if(order, [&](const auto& c) { return c.first < m.min_p; });
    double total = 0;
    for (const auto& c : order) total += c.first;
    if (m.top_p < 1.0f) {
      double cum = 0;
      size_t cut = 0;
      while (cum < m.top_p * total) cum += order[cut++].first;
      ASSERT_LE(cut, static_cast<size_t>(kHead)) << "the test's head should hold the cut";
      ASSERT_GT(cum - m.top_p * total, 1e-3 * total) << "the cut should be far from a boundary";
      order.resize(cut);
      total = cum;
    }
    std::map<int32_t, double> want;
    for (const auto& c : order) want[c.second] = c.first / total;
    SamplingParams p;
    p.temperature = m.temperature, p.top_p = m.top_p, p.top_k = m.top_k, p.min_p = m.min_p;
    Sampler s(p, 17, {});
    std::map<int32_t, int> counts;
    for (int i = 0; i < kDraws; ++i) {
      std::vector<float> l = logits;
      const int32_t t = s.Sample(l.data(), kVocab).token_id;
      ASSERT_TRUE(want.contains(t)) << "T " << m.temperature << " top_p " << m.top_p << " top_k " << m.top_k
                                    << " min_p " << m.min_p << ": drew token " << t << ", which is cut";
      ++counts[t];
    }
    double tail_want = 0, tail_got = 0;
    for (const auto& [t, q] : want) {
      const bool head = std::find(ids.begin(), ids.begin() + kHead, t) != ids.begin() + kHead;
      if (!head) {
        tail_want += q, tail_got += counts[t];
        continue;
      }
      EXPECT_NEAR(counts[t], q * kDraws, 5 * std::sqrt(q * (1 - q) * kDraws) + 1)
          << "token " << t << " T " << m.temperature << " top_p " << m.top_p << " top_k " << m.top_k;
    }
    EXPECT_NEAR(tail_got, tail_want * kDraws, 5 * std::sqrt(tail_want * (1 - tail_want) * kDraws) + 1)
        << "the tail, T " << m.temperature << " top_p " << m.top_p << " top_k " << m.top_k << " min_p " << m.min_p;
  }
}

// A top-p that reaches deep into a flat tail: one token holds ~96 % of the mass and 999 tokens
// share the rest equally, so top_p = 0.999 keeps ~980 of the tail. The sampler leaves tokens it
// proves cannot be kept out of its candidates (sampler.cc, tau); the tail must still be drawn
// in its share, ~4 % of the draws.
TEST(SamplerTest, TopPDeepInAFlatTailDrawsTheTailInItsShare) {
  constexpr int kVocab = 1000, kDraws = 20000;
  std::vector<float> base(kVocab, -10.0f);
  base[500] = 0.0f;
  const double tail_p = std::exp(-10.0), total = 1 + (kVocab - 1) * tail_p;
  const double kept_tail = std::ceil((0.999 * total - 1) / tail_p) * tail_p;  // the tail the cut keeps
  const double share = kept_tail / (1 + kept_tail);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.999f;
  Sampler s(p, 5, {});
  int tail = 0;
  for (int i = 0; i < kDraws; ++i) {
    std::vector<float> l = base;
    tail += s.Sample(l.data(), kVocab).token_id != 500;
  }
  EXPECT_NEAR(tail, share * kDraws, 5 * std::sqrt(share * (1 - share) * kDraws));
}

// A NaN logit (a broken model or weight file) is never the choice, greedy or sampled, even at
// index 0, and does not spoil the other tokens' draw.
TEST(SamplerTest, NaNLogitsAreNeverDrawn) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> base(100, 0.0f);
  base[0] = nan, base[37] = nan, base[99] = nan;
  base[41] = 2.0f, base[42] = 2.0f;  // a tie: the first wins greedy
  std::vector<float> l = base;
  EXPECT_EQ(Sampler({}, 1, {}).Sample(l.data(), 100).token_id, 41);
  SamplingParams p;
  p.temperature = 1.0f;
  for (float top_p : {1.0f, 0.5f}) {
    p.top_p = top_p;
    Sampler s(p, 2, {});
    std::set<int32_t> drawn;
    for (int i = 0; i < 2000; ++i) {
      l = base;
      drawn.insert(s.Sample(l.data(), 100).token_id);
    }
    EXPECT_FALSE(drawn.contains(0) || drawn.contains(37) || drawn.contains(99)) << "top_p " << top_p;
    EXPECT_TRUE(drawn.contains(41) && drawn.contains(42)) << "top_p " << top_p;
    if (top_p == 1.0f) {
      EXPECT_GT(drawn.size(), 50u);
    }
  }
}

}  // namespace
}  // namespace orca::engine
