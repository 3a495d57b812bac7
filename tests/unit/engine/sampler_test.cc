#include "core/engine/sampler.h"

#include <cmath>
#include <map>
#include <random>
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
  EXPECT_NE(p.Validate().find("logit_bias for token 1 must be in [-100, 100]"), std::string::npos);
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

}  // namespace
}  // namespace orca::engine
