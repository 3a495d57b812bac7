// Prompt logprobs (SamplingParams::prompt_logprobs) computed by the engine's
// last stage during the prefill: equal to a naive reference computing the
// log-softmax at every position, whether the prompt is computed whole, in
// chunks, over pipeline stages or tensor-parallel shards; the requests that do
// not ask are untouched, and a recomputed request reports the prompt again.

#include "core/engine/prompt_logprobs.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/test_models.h"

namespace orca::engine {
namespace {

using testing::ReferenceModel;

constexpr double kTol = 2e-3;  // f32 engine vs float64 reference, in nats

std::vector<double> LogSoftmax(const std::vector<double>& logits) {
  double m = *std::max_element(logits.begin(), logits.end()), s = 0;
  for (double x : logits) s += std::exp(x - m);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - m - std::log(s);
  return out;
}

SamplingParams WithPromptLogprobs(int32_t k) {
  SamplingParams p;
  p.prompt_logprobs = k;
  return p;
}

// Concatenates one request's records, checking that they cover consecutive positions.
std::vector<SampleResult> Collect(const std::vector<PromptLogprobs>& records, uint64_t id, int32_t* first) {
  std::vector<SampleResult> out;
  for (const PromptLogprobs& r : records) {
    if (r.request_id != id) continue;
    if (out.empty()) *first = r.first_position;
    EXPECT_EQ(r.first_position, *first + static_cast<int32_t>(out.size())) << "a gap or an overlap";
    out.insert(out.end(), r.tokens.begin(), r.tokens.end());
  }
  return out;
}

class PromptLogprobsTest : public ::testing::TestWithParam<ModelArch> {
 protected:
  void SetUp() override {
    path_ = testing::SyntheticModel(GetParam() == ModelArch::kGpt2 ? testing::SmallGpt2() : testing::SmallLlama());
    auto ckpt = Checkpoint::Open(path_);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    ckpt_ = std::move(*ckpt);
    vocab_ = ckpt_->config().vocab_size;
    std::mt19937 rng(GetParam() == ModelArch::kGpt2 ? 5 : 6);
    prompt_.resize(37);
    for (int32_t& t : prompt_) t = std::uniform_int_distribution<int>(0, vocab_ - 1)(rng);
  }
  std::unique_ptr<Engine> MakeEngine(int tp = 1, int stage = 0, int num_stages = 1) const {
    Engine::Options o;
    o.model_path = path_;
    o.n_slots = 1024;
    o.tp_size = tp;
    o.stage = stage;
    o.num_stages = num_stages;
    auto e = Engine::Create(o);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? std::move(*e) : nullptr;
  }
  // Checks entries for positions 1 .. prompt_len - 1 against the reference, with k alternatives each.
  // `first` is read after `got` is built (Collect sets it; argument evaluation order is unspecified).
  void ExpectMatchesReference(const std::vector<SampleResult>& got, const int32_t* first, int32_t k,
                              const std::string& what) const {
    ReferenceModel ref(*ckpt_);
    const auto logits = ref.Logits(prompt_);
    ASSERT_EQ(*first, 1) << what;
    ASSERT_EQ(got.size(), prompt_.size() - 1) << what;
    for (size_t p = 1; p < prompt_.size(); ++p) {
      const std::vector<double> want = LogSoftmax(logits[p - 1]);
      const SampleResult& g = got[p - 1];
      EXPECT_EQ(g.token_id, prompt_[p]) << what << " position " << p;
      EXPECT_NEAR(g.logprob, want[prompt_[p]], kTol) << what << " position " << p;
      int32_t rank = 1;
      bool near_tie = false;
      for (int32_t i = 0; i < vocab_; ++i) {
        rank += want[i] > want[prompt_[p]] ? 1 : 0;
        near_tie |= i != prompt_[p] && std::abs(want[i] - want[prompt_[p]]) < 2 * kTol;
      }
      if (!near_tie) {
        EXPECT_EQ(g.rank, rank) << what << " position " << p;
      }
      ASSERT_EQ(g.top_logprobs.size(), static_cast<size_t>(k)) << what;
      std::vector<double> sorted = want;
      std::sort(sorted.rbegin(), sorted.rend());
      for (int32_t i = 0; i < k; ++i) {
        EXPECT_NEAR(g.top_logprobs[i].logprob, sorted[i], kTol) << what << " position " << p << " rank " << i;
        EXPECT_NEAR(want[g.top_logprobs[i].token_id], sorted[i], 2 * kTol) << what << " rank " << i;
      }
    }
  }

  std::string path_;
  std::unique_ptr<Checkpoint> ckpt_;
  int32_t vocab_ = 0;
  std::vector<int32_t> prompt_;
};

TEST_P(PromptLogprobsTest, WholePrefillMatchesNaiveReference) {
  auto engine = MakeEngine();
  StepInput in;
  in.seqs.push_back({1, prompt_, 0, true, SequenceSetup{64, WithPromptLogprobs(3), prompt_}});
  StepOutput out;
  ASSERT_TRUE(engine->Step(in, nullptr, &out).ok());
  ASSERT_EQ(out.prompt_logprobs.size(), 1u);
  int32_t first = 0;
  ExpectMatchesReference(Collect(out.prompt_logprobs, 1, &first), &first, 3, "whole");
  ASSERT_EQ(out.samples.size(), 1u);

  // Decoding steps report nothing more.
  StepInput next;
  next.seqs.push_back({1, {out.samples[0].sample.token_id}, static_cast<int32_t>(prompt_.size()), true, std::nullopt});
  ASSERT_TRUE(engine->Step(next, nullptr, &out).ok());
  EXPECT_TRUE(out.prompt_logprobs.empty());
  EXPECT_EQ(out.samples.size(), 1u);
}

// Each chunk of a chunked prefill contributes its positions (the last row of a chunk scores the next chunk's first
// token); a request decoding next to it asked for nothing and gets nothing, with the same tokens as without.
TEST_P(PromptLogprobsTest, ChunkedPrefillMatchesWholeAndReference) {
  const std::vector<std::vector<int32_t>> chunkings = {{1, 36}, {16, 16, 5}, {36, 1}, {5, 9, 2, 21}};
  for (const std::vector<int32_t>& chunks : chunkings) {
    auto engine = MakeEngine();
    auto plain = MakeEngine();
    StepInput warm;
    warm.seqs.push_back({2, {9, 8, 7}, 0, true, SequenceSetup{64, {}, {9, 8, 7}}});
    StepOutput out, plain_out;
    ASSERT_TRUE(engine->Step(warm, nullptr, &out).ok());
    ASSERT_TRUE(plain->Step(warm, nullptr, &plain_out).ok());
    int32_t other_token = out.samples[0].sample.token_id, other_pos = 3, start = 0;
    std::vector<PromptLogprobs> records;
    for (size_t c = 0; c < chunks.size(); ++c) {
      StepInput in;
      in.seqs.push_back({2, {other_token}, other_pos, true, std::nullopt});
      StepSequence chunk{1, std::vector<int32_t>(prompt_.begin() + start, prompt_.begin() + start + chunks[c]), start,
                         c + 1 == chunks.size(), std::nullopt};
      StepSequence plain_chunk = chunk;
      if (c == 0) {
        chunk.new_request = SequenceSetup{64, WithPromptLogprobs(2), prompt_};
        plain_chunk.new_request = SequenceSetup{64, {}, prompt_};
      }
      in.seqs.push_back(chunk);
      StepInput plain_in = in;
      plain_in.seqs[1] = plain_chunk;
      ASSERT_TRUE(engine->Step(in, nullptr, &out).ok());
      ASSERT_TRUE(plain->Step(plain_in, nullptr, &plain_out).ok());
      for (const PromptLogprobs& r : out.prompt_logprobs) EXPECT_EQ(r.request_id, 1u) << "the other request asked none";
      records.insert(records.end(), out.prompt_logprobs.begin(), out.prompt_logprobs.end());
      ASSERT_EQ(out.samples.size(), plain_out.samples.size());
      for (size_t i = 0; i < out.samples.size(); ++i)
        EXPECT_EQ(out.samples[i].sample.token_id, plain_out.samples[i].sample.token_id) << "chunk " << c;
      other_token = out.samples[0].sample.token_id;
      ++other_pos;
      start += chunks[c];
    }
    int32_t first = 0;
    ExpectMatchesReference(Collect(records, 1, &first), &first, 2,
                           absl::StrCat("chunks ", chunks.size(), " first ", chunks[0]));
  }
}

// Pipeline stages (only the last computes logprobs) and tensor-parallel shards match one whole shard.
TEST_P(PromptLogprobsTest, PipelineAndTensorPartitionsMatch) {
  StepInput in;
  in.seqs.push_back({1, prompt_, 0, true, SequenceSetup{64, WithPromptLogprobs(1), prompt_}});
  in.seqs.push_back({2, {4, 5}, 0, true, SequenceSetup{64, {}, {4, 5}}});
  auto s0 = MakeEngine(1, 0, 2), s1 = MakeEngine(1, 1, 2), tp2 = MakeEngine(2);
  StepOutput o0, o1, otp;
  ASSERT_TRUE(s0->Step(in, nullptr, &o0).ok());
  EXPECT_TRUE(o0.prompt_logprobs.empty()) << "only the last stage has logits";
  ASSERT_TRUE(s1->Step(in, o0.hidden.data(), &o1).ok());
  ASSERT_TRUE(tp2->Step(in, nullptr, &otp).ok());
  int32_t first = 0;
  ExpectMatchesReference(Collect(o1.prompt_logprobs, 1, &first), &first, 1, "pp=2");
  ExpectMatchesReference(Collect(otp.prompt_logprobs, 1, &first), &first, 1, "tp=2");
  ASSERT_EQ(o1.samples.size(), 2u);
  ASSERT_EQ(otp.samples.size(), 2u);
  EXPECT_EQ(o1.samples[0].sample.token_id, otp.samples[0].sample.token_id);
  EXPECT_EQ(o1.samples[1].sample.token_id, otp.samples[1].sample.token_id);
}

// A preempted request is recomputed over its prompt and the tokens it had generated: the engine scores the prompt
// positions again (the scheduler drops what it already reported) and nothing past the prompt.
TEST_P(PromptLogprobsTest, RecomputeScoresOnlyThePromptAgain) {
  auto engine = MakeEngine();
  StepInput in;
  in.seqs.push_back({1, prompt_, 0, true, SequenceSetup{64, WithPromptLogprobs(0), prompt_}});
  StepOutput out;
  ASSERT_TRUE(engine->Step(in, nullptr, &out).ok());
  const int32_t t0 = out.samples[0].sample.token_id;
  StepInput redo;
  redo.released_ids = {1};
  std::vector<int32_t> all = prompt_;
  all.push_back(t0);
  redo.seqs.push_back({1, all, 0, true, SequenceSetup{64, WithPromptLogprobs(0), prompt_, {t0}}});
  StepOutput again;
  ASSERT_TRUE(engine->Step(redo, nullptr, &again).ok());
  int32_t first = 0;
  ExpectMatchesReference(Collect(again.prompt_logprobs, 1, &first), &first, 0, "recomputed");
  EXPECT_EQ(engine->num_requests(), 1);
}

TEST_P(PromptLogprobsTest, OneTokenPromptHasNothingToScore) {
  auto engine = MakeEngine();
  StepInput in;
  in.seqs.push_back({1, {prompt_[0]}, 0, true, SequenceSetup{8, WithPromptLogprobs(5), {prompt_[0]}}});
  StepOutput out;
  ASSERT_TRUE(engine->Step(in, nullptr, &out).ok());
  EXPECT_TRUE(out.prompt_logprobs.empty());
  EXPECT_EQ(out.samples.size(), 1u);
}

TEST_P(PromptLogprobsTest, BadSetupIsRejectedWithoutSideEffects) {
  auto engine = MakeEngine();
  StepInput in;
  in.seqs.push_back({1, {1, 2}, 0, true, SequenceSetup{8, WithPromptLogprobs(1), {1, vocab_}}});
  StepOutput out;
  absl::Status s = engine->Step(in, nullptr, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prompt token id"), std::string::npos) << s;
  EXPECT_EQ(engine->num_requests(), 0);
  SamplingParams bias;
  bias.logit_bias = {{vocab_, 1.0f}};
  in.seqs[0].new_request = SequenceSetup{8, bias, {1, 2}};
  s = engine->Step(in, nullptr, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("logit_bias token id"), std::string::npos) << s;
  EXPECT_EQ(engine->num_requests(), 0);
}

// logit_bias reaches the engine's sampler: +100 forces a token, -100 bans the one greedy would pick.
TEST_P(PromptLogprobsTest, LogitBiasForcesAndBansInTheEngine) {
  auto run = [&](const SamplingParams& p) {
    auto engine = MakeEngine();
    StepInput in;
    in.seqs.push_back({1, prompt_, 0, true, SequenceSetup{64, p, prompt_}});
    StepOutput out;
    EXPECT_TRUE(engine->Step(in, nullptr, &out).ok());
    return out.samples.at(0).sample.token_id;
  };
  const int32_t greedy = run({});
  SamplingParams ban;
  ban.logit_bias = {{greedy, -100.0f}};
  EXPECT_NE(run(ban), greedy);
  SamplingParams force;
  const int32_t target = (greedy + 1) % vocab_;
  force.logit_bias = {{target, 100.0f}};
  EXPECT_EQ(run(force), target);
}

TEST(TokenLogprobsTest, IsTheLogSoftmaxWithTiesByLowerId) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -2.0f};
  std::vector<std::pair<float, int32_t>> scratch;
  const SampleResult r = TokenLogprobs(logits.data(), 4, 3, 3, &scratch);
  double z = 0;
  for (float x : logits) z += std::exp(x);
  EXPECT_NEAR(r.logprob, -2.0 - std::log(z), 1e-6);
  EXPECT_EQ(r.rank, 4);
  EXPECT_EQ(TokenLogprobs(logits.data(), 4, 2, 0, &scratch).rank, 1);  // tied for first: nothing strictly above
  ASSERT_EQ(r.top_logprobs.size(), 3u);
  EXPECT_EQ(r.top_logprobs[0].token_id, 1);
  EXPECT_EQ(r.top_logprobs[1].token_id, 2);
  EXPECT_EQ(r.top_logprobs[2].token_id, 0);
  EXPECT_TRUE(TokenLogprobs(logits.data(), 4, 0, 0, &scratch).top_logprobs.empty());
  EXPECT_TRUE(StepHasPromptPositions(0, 2, 3));
  EXPECT_TRUE(StepHasPromptPositions(1, 1, 3));
  EXPECT_FALSE(StepHasPromptPositions(2, 1, 3));  // the last prompt row predicts the first generated token
  EXPECT_FALSE(StepHasPromptPositions(0, 5, 1));
}

// The top tokens (engine::TopK) against sorting the whole vocabulary: sizes up to a Llama 3
// vocabulary, few distinct values (long runs of ties: the lower id first), k from 1 to past the
// vocabulary, NaN logits (never listed); and every logprob against an f64 log-softmax.
TEST(TokenLogprobsTest, TopTokensAreTheSortedVocabularysFirstK) {
  std::mt19937 rng(4);
  std::vector<std::pair<float, int32_t>> scratch;
  for (int trial = 0; trial < 300; ++trial) {
    const int32_t vocab = trial == 0 ? 128256 : std::uniform_int_distribution<int32_t>(1, 3000)(rng);
    const int levels = trial % 2 ? 4 : 100000;
    std::vector<float> logits(vocab);
    for (float& x : logits)
      x = 16.0f * static_cast<float>(std::uniform_int_distribution<int>(0, levels)(rng)) / levels - 8;
    if (trial % 5 == 0) logits[std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng)] = NAN;
    std::vector<std::pair<float, int32_t>> sorted;
    double z = 0;
    for (int32_t i = 0; i < vocab; ++i)
      if (!std::isnan(logits[i])) sorted.emplace_back(logits[i], i), z += std::exp(static_cast<double>(logits[i]));
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    // Both ways TopK selects: a sorted list kept while reading (k <= 256), a selection among all.
    const int32_t k = std::uniform_int_distribution<int32_t>(1, trial % 3 == 2 ? 4000 : 25)(rng);
    const int32_t token = std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng);
    const SampleResult r = TokenLogprobs(logits.data(), vocab, token, k, &scratch);
    ASSERT_EQ(r.top_logprobs.size(), std::min<size_t>(k, sorted.size())) << "trial " << trial;
    for (size_t i = 0; i < r.top_logprobs.size(); ++i) {
      ASSERT_EQ(r.top_logprobs[i].token_id, sorted[i].second) << "trial " << trial << " rank " << i;
      if (trial % 5 != 0) {
        ASSERT_NEAR(r.top_logprobs[i].logprob, sorted[i].first - std::log(z), 1e-5) << "trial " << trial;
      }
    }
    if (trial % 5 != 0) {
      ASSERT_NEAR(r.logprob, logits[token] - std::log(z), 1e-5) << "trial " << trial;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, PromptLogprobsTest, ::testing::Values(ModelArch::kLlama, ModelArch::kGpt2),
                         [](const auto& info) { return std::string(ModelArchName(info.param)); });

}  // namespace
}  // namespace orca::engine
