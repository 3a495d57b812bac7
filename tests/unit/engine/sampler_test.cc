#include "core/engine/sampler.h"

#include <cmath>
#include <map>

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

TEST(SamplerTest, ValidateNamesTheBadField) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_NE(p.Validate().find("top_p"), std::string::npos);
  p = {};
  p.temperature = -1;
  EXPECT_NE(p.Validate().find("temperature"), std::string::npos);
  EXPECT_EQ(SamplingParams{}.Validate(), "");
}

}  // namespace
}  // namespace orca::engine
