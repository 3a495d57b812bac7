// The engine's core invariant (paper §4.2, selective batching): one batched
// iteration over any mix of phases, prompt lengths and positions gives the
// same logits as running each request alone, and as a naive full-recompute
// reference; greedy tokens are identical.

#include <cstring>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/convert/gguf_export.h"
#include "core/engine/engine.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/test_models.h"

namespace orca::engine {
namespace {

using testing::ReferenceModel;

struct Case {
  const char* name;
  ModelArch arch;  // kLlama cases named "mistral_*" have Mistral's sliding window
  DType dtype;
  // Allowed |diff| as a fraction of the reference logits' standard deviation.
  double tolerance;
  // Quantized: the f32 model written as GGUF in this mix (the reference then
  // computes with the dequantized weights; the engine with int8 activations).
  const char* mix = nullptr;
  // A model wide enough for 256-value K-quant blocks.
  bool wide = false;
};

class EngineEquivalenceTest : public ::testing::TestWithParam<Case> {
 protected:
  SyntheticModelOptions Options() const {
    const DType dtype = GetParam().dtype;
    SyntheticModelOptions o = GetParam().arch == ModelArch::kGpt2                     ? testing::SmallGpt2(dtype)
                              : GetParam().arch == ModelArch::kQwen3                  ? testing::SmallQwen3(dtype)
                              : GetParam().arch == ModelArch::kGemma2                 ? testing::SmallGemma2(dtype)
                              : GetParam().arch == ModelArch::kGemma3                 ? testing::SmallGemma3(dtype)
                              : GetParam().arch == ModelArch::kGranite                ? testing::SmallGranite(dtype)
                              : GetParam().arch == ModelArch::kOlmo2                  ? testing::SmallOlmo2(dtype)
                              : GetParam().arch == ModelArch::kStarcoder2             ? testing::SmallStarcoder2(dtype)
                              : GetParam().arch == ModelArch::kPhi3                   ? testing::SmallPhi3(dtype)
                              : GetParam().arch == ModelArch::kMistral3               ? testing::SmallMistral3(dtype)
                              : std::string(GetParam().name).rfind("mistral", 0) == 0 ? testing::SmallMistral(dtype)
                                                                                      : testing::SmallLlama(dtype);
    if (GetParam().wide) {
      o.hidden_size = 256, o.intermediate_size = 512, o.num_layers = 2, o.num_heads = 4, o.num_kv_heads = 2;
      if (o.head_dim > 0) o.head_dim = 128;  // heads × head_dim (512) ≠ hidden still
    }
    return o;
  }
  // Tensor-parallel sizes the case runs with.
  std::vector<int> TpSizes() const { return {1, 2}; }
  // The checkpoint under test: the synthetic model, or its GGUF export in the case's mix.
  std::string ModelPath() const {
    const std::string hf = testing::SyntheticModel(Options());
    if (GetParam().mix == nullptr) return hf;
    return testing::QuantizedModel(hf, GetParam().mix);
  }
  std::unique_ptr<Engine> MakeEngine(const std::string& path, int tp = 1, bool vocab_parallel_head = true,
                                     int stage = 0, int num_stages = 1, bool swa_full = false) {
    Engine::Options o;
    o.model_path = path;
    o.n_slots = 4096;
    o.kv_block_size = 16;
    o.keep_logits = true;
    o.tp_size = tp;
    o.vocab_parallel_head = vocab_parallel_head;
    o.stage = stage;
    o.num_stages = num_stages;
    o.swa_full = swa_full;
    auto e = Engine::Create(o);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(*e);
  }
};

double StdDev(const std::vector<double>& v) {
  double m = 0, s = 0;
  for (double x : v) m += x;
  m /= v.size();
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / v.size());
}

// Compares engine logits with reference logits; checks greedy agreement when the
// reference has a clear winner.
void ExpectClose(const float* got, const std::vector<double>& want, double tol_frac, const std::string& what) {
  const double tol = tol_frac * StdDev(want);
  double worst = 0;
  size_t best = 0, second = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]));
    if (want[i] > want[best]) {
      second = best;
      best = i;
    } else if (i != best && want[i] > want[second]) {
      second = i;
    }
  }
  EXPECT_LE(worst, tol) << what << ": max |logit diff| " << worst << " > " << tol;
  if (want[best] - want[second] > 2 * tol) {
    const size_t got_best = std::max_element(got, got + want.size()) - got;
    EXPECT_EQ(got_best, best) << what << ": greedy token differs";
  }
}

// Randomized mixes: requests join with prompts of different lengths while
// others are mid-generation; every iteration's logits are checked against the
// naive reference over the request's full history and against the same
// request run alone in its own engine.
TEST_P(EngineEquivalenceTest, BatchedIterationMatchesAloneAndReference) {
  const std::string path = ModelPath();
  auto ckpt = Checkpoint::Open(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ReferenceModel ref(**ckpt);
  auto batched = MakeEngine(path);
  auto alone = MakeEngine(path);
  const int32_t vocab = (*ckpt)->config().vocab_size;

  std::mt19937 rng(1234);
  constexpr int kRequests = 7;
  std::vector<std::vector<int32_t>> history(kRequests);
  std::vector<int32_t> prompt_len(kRequests);
  for (int r = 0; r < kRequests; ++r) {
    prompt_len[r] = std::uniform_int_distribution<int>(1, 40)(rng);
    for (int i = 0; i < prompt_len[r]; ++i) history[r].push_back(std::uniform_int_distribution<int>(0, vocab - 1)(rng));
  }
  std::vector<int32_t> cached(kRequests, 0);  // tokens already in the KV cache
  for (int round = 0; round < 6; ++round) {
    StepInput in;
    in.iteration_id = round;
    for (int r = 0; r < kRequests; ++r) {
      if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) continue;  // not scheduled this round
      StepSequence s;
      s.request_id = 100 + r;
      s.start_position = cached[r];
      if (cached[r] == 0) {  // initiation phase: the whole prompt
        s.token_ids = history[r];
        s.new_request = SequenceSetup{prompt_len[r] + 16, {}, history[r]};
      } else {  // increment phase: one new token at its own position
        const int32_t next = std::uniform_int_distribution<int>(0, vocab - 1)(rng);
        history[r].push_back(next);
        s.token_ids = {next};
      }
      in.seqs.push_back(s);
    }
    if (in.seqs.empty()) continue;
    StepOutput out;
    ASSERT_TRUE(batched->Step(in, nullptr, &out).ok());
    ASSERT_EQ(out.samples.size(), in.seqs.size());
    for (size_t i = 0; i < in.seqs.size(); ++i) {
      const StepSequence& s = in.seqs[i];
      const int r = static_cast<int>(s.request_id - 100);
      cached[r] = s.start_position + static_cast<int32_t>(s.token_ids.size());
      const auto want = ref.Logits(std::vector<int32_t>(history[r].begin(), history[r].begin() + cached[r])).back();
      const float* got = out.logits.data() + i * vocab;
      const std::string what = absl::StrCat(GetParam().name, " round ", round, " request ", r, " pos ", cached[r] - 1);
      ExpectClose(got, want, GetParam().tolerance, what + " vs reference");

      StepInput solo;
      solo.seqs = {s};
      StepOutput solo_out;
      ASSERT_TRUE(alone->Step(solo, nullptr, &solo_out).ok());
      std::vector<double> solo_logits(solo_out.logits.begin(), solo_out.logits.end());
      ExpectClose(got, solo_logits, GetParam().tolerance, what + " vs alone");
      EXPECT_EQ(out.samples[i].sample.token_id, solo_out.samples[0].sample.token_id) << what;
    }
  }
}

// Sampled requests in one batch draw the tokens each draws alone: a step's samples are drawn
// on the engine's threads in parallel (Engine::DrawSamples), each from its own row with its
// own seeded generator, and reach the output in batch order. Every request decodes its own
// draws for several steps; the mixes cover the top-p, top-k and min-p paths and greedy.
TEST_P(EngineEquivalenceTest, SampledRequestsInABatchDrawWhatEachDrawsAlone) {
  const std::string path = ModelPath();
  auto batched = MakeEngine(path);
  auto alone = MakeEngine(path);
  const int32_t vocab = batched->config().vocab_size;
  constexpr int kRequests = 6;
  std::mt19937 rng(99);
  std::vector<std::vector<int32_t>> prompt(kRequests);
  std::vector<SamplingParams> sampling(kRequests);
  for (int r = 0; r < kRequests; ++r) {
    for (int i = std::uniform_int_distribution<int>(1, 20)(rng); i > 0; --i)
      prompt[r].push_back(std::uniform_int_distribution<int>(0, vocab - 1)(rng));
    SamplingParams& p = sampling[r];
    if (r == 0) continue;  // greedy
    p.temperature = r % 2 ? 1.0f : 0.7f;
    p.top_p = r == 1 ? 1.0f : 0.9f;
    p.top_k = r == 3 ? 20 : 0;
    p.min_p = r == 4 ? 0.05f : 0.0f;
    p.seed = 1000 + r;
  }
  std::vector<int32_t> next(kRequests, -1), cached(kRequests, 0);
  std::vector<std::vector<int32_t>> drawn(kRequests), drawn_alone(kRequests);
  for (int round = 0; round < 8; ++round) {
    StepInput in;
    in.iteration_id = round;
    for (int r = 0; r < kRequests; ++r) {
      StepSequence s;
      s.request_id = 200 + r;
      s.start_position = cached[r];
      if (round == 0) {
        s.token_ids = prompt[r];
        s.new_request = SequenceSetup{static_cast<int32_t>(prompt[r].size()) + 16, sampling[r], prompt[r]};
      } else {
        s.token_ids = {next[r]};
      }
      in.seqs.push_back(s);
    }
    StepOutput out;
    ASSERT_TRUE(batched->Step(in, nullptr, &out).ok());
    ASSERT_EQ(out.samples.size(), in.seqs.size());
    for (int r = 0; r < kRequests; ++r) {
      ASSERT_EQ(out.samples[r].request_id, in.seqs[r].request_id);
      StepInput solo;
      solo.seqs = {in.seqs[r]};
      StepOutput solo_out;
      ASSERT_TRUE(alone->Step(solo, nullptr, &solo_out).ok());
      ASSERT_EQ(std::memcmp(out.logits.data() + r * vocab, solo_out.logits.data(), vocab * sizeof(float)), 0)
          << GetParam().name << " round " << round << " request " << r << ": batched logits differ from alone";
      drawn[r].push_back(out.samples[r].sample.token_id);
      drawn_alone[r].push_back(solo_out.samples[0].sample.token_id);
      cached[r] += static_cast<int32_t>(in.seqs[r].token_ids.size());
      next[r] = out.samples[r].sample.token_id;
    }
  }
  EXPECT_EQ(drawn, drawn_alone) << GetParam().name;
  // The sampled requests did sample: not every one of them repeats one token.
  int varied = 0;
  for (int r = 1; r < kRequests; ++r) varied += std::set<int32_t>(drawn[r].begin(), drawn[r].end()).size() > 1;
  EXPECT_GT(varied, 0) << GetParam().name;
}

// Pipeline and tensor partitions of the same model give the same logits as
// the whole model in one shard.
TEST_P(EngineEquivalenceTest, PipelineAndTensorPartitionsMatchWholeModel) {
  const std::string path = ModelPath();
  auto whole = MakeEngine(path);
  // tp=2 halves attn_output's and ffn_down's rows (heads × head_dim / 2, ffn/2 values): where that
  // would split a block (32 values, 256 for K-quants) it must be refused, by name.
  const ModelConfig m = Options().ToConfig();
  const int64_t block = GetParam().wide ? 256 : 32, q_width = static_cast<int64_t>(m.num_heads) * m.head_dim;
  const bool tp_splits_block = GetParam().mix != nullptr && GetParam().mix != std::string("bf16") &&
                               ((q_width / 2) % block != 0 || (m.intermediate_size / 2) % block != 0);
  if (tp_splits_block) {
    Engine::Options o;
    o.model_path = path;
    o.n_slots = 1024;
    o.tp_size = 2;
    auto refused = Engine::Create(o);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("would split a block"), std::string::npos) << refused.status();
  }
  // OLMo 2's q/k norms span every head: its shards all-reduce each row's sum of squares.
  std::unique_ptr<Engine> tp2 = tp_splits_block ? nullptr : MakeEngine(path, 2);
  std::vector<std::unique_ptr<Engine>> stages;
  for (int s = 0; s < 2; ++s) {
    Engine::Options o;
    o.model_path = path;
    o.n_slots = 1024;
    o.stage = s;
    o.num_stages = 2;
    o.keep_logits = true;
    auto e = Engine::Create(o);
    ASSERT_TRUE(e.ok()) << e.status();
    stages.push_back(std::move(*e));
  }
  EXPECT_EQ(stages[0]->partition().layer_end, stages[1]->partition().layer_begin);
  StepInput in;
  in.seqs.push_back({1, {5, 6, 7, 8, 9}, 0, true, SequenceSetup{32, {}, {}}});
  in.seqs.push_back({2, {42}, 0, true, SequenceSetup{32, {}, {}}});
  for (int step = 0; step < 3; ++step) {
    StepOutput a, b, s0, s1;
    ASSERT_TRUE(whole->Step(in, nullptr, &a).ok());
    if (tp2 != nullptr) {
      ASSERT_TRUE(tp2->Step(in, nullptr, &b).ok());
    }
    ASSERT_TRUE(stages[0]->Step(in, nullptr, &s0).ok());
    ASSERT_TRUE(stages[1]->Step(in, s0.hidden.data(), &s1).ok());
    std::vector<double> want(a.logits.begin(), a.logits.end());
    if (tp2 != nullptr) {
      ASSERT_EQ(a.logits.size(), b.logits.size());
      ExpectClose(b.logits.data(), want, GetParam().tolerance, "tp=2");
      for (size_t i = 0; i < a.samples.size(); ++i)
        EXPECT_EQ(a.samples[i].sample.token_id, b.samples[i].sample.token_id);
    }
    ExpectClose(s1.logits.data(), want, GetParam().tolerance, "pp=2");
    for (size_t i = 0; i < a.samples.size(); ++i)
      EXPECT_EQ(a.samples[i].sample.token_id, s1.samples[i].sample.token_id);
    // Next iteration: both requests in the increment phase with their greedy tokens.
    StepInput next;
    for (size_t i = 0; i < in.seqs.size(); ++i) {
      const auto& s = in.seqs[i];
      next.seqs.push_back({s.request_id,
                           {a.samples[i].sample.token_id},
                           s.start_position + static_cast<int32_t>(s.token_ids.size()),
                           true,
                           std::nullopt});
    }
    in = next;
  }
}

// The vocabulary-parallel LM head (tp=2): each shard computes the logits of
// its rows of the vocabulary — 301 tokens here, so 151 and 150 rows — and
// shard 0 gathers them for the sampler. Its logits match the whole model's and
// those of the head kept whole on shard 0, tied or not, with the embedding on
// the same stage or (pp=2 × tp=2) on another one, whose last stage then holds
// only a slice of the tied embedding. Quantized heads are sliced by rows, so
// their blocks stay whole.
TEST_P(EngineEquivalenceTest, VocabularyParallelHeadMatchesWholeModelWithUnevenVocabulary) {
  SyntheticModelOptions m = Options();
  m.vocab_size = 301;
  if (GetParam().mix != nullptr && GetParam().mix != std::string("bf16")) {
    // tp=2 must keep the layers' row-parallel shards whole blocks (hidden/2 and ffn/2).
    if (GetParam().wide) {
      m.hidden_size = 512, m.intermediate_size = 1024, m.num_heads = 8, m.num_kv_heads = 4;
    } else {
      m.intermediate_size = 128;
    }
  }
  for (const bool tied : {true, false}) {
    m.tie_word_embeddings = tied;
    const std::string hf = testing::SyntheticModel(m);
    const std::string path = GetParam().mix == nullptr ? hf : testing::QuantizedModel(hf, GetParam().mix);
    const std::string name = absl::StrCat(GetParam().name, tied ? " tied" : " untied");
    auto whole = MakeEngine(path);
    auto vocab_parallel = MakeEngine(path, 2);
    auto head_on_rank0 = MakeEngine(path, 2, /*vocab_parallel_head=*/false);
    auto stage0 = MakeEngine(path, 2, true, 0, 2);
    auto stage1 = MakeEngine(path, 2, true, 1, 2);
    ASSERT_TRUE(whole && vocab_parallel && head_on_rank0 && stage0 && stage1) << name;
    ASSERT_EQ(whole->config().vocab_size, 301);
    // A quantized export keeps the embedding (the tied head) in blocks: the slices are block rows.
    if (GetParam().mix != nullptr) {
      EXPECT_TRUE(IsQuantized(vocab_parallel->weight_dtype())) << name;
    }

    StepInput in;
    in.seqs.push_back({1, {5, 6, 7, 8, 9}, 0, true, SequenceSetup{32, {}, {}}});
    in.seqs.push_back({2, {42}, 0, true, SequenceSetup{32, {}, {}}});
    in.seqs.push_back({3, {300, 299, 150, 151}, 0, true, SequenceSetup{32, {}, {}}});
    for (int step = 0; step < 3; ++step) {
      StepOutput a, vp, r0, s0, s1;
      ASSERT_TRUE(whole->Step(in, nullptr, &a).ok());
      ASSERT_TRUE(vocab_parallel->Step(in, nullptr, &vp).ok());
      ASSERT_TRUE(head_on_rank0->Step(in, nullptr, &r0).ok());
      ASSERT_TRUE(stage0->Step(in, nullptr, &s0).ok());
      ASSERT_TRUE(stage1->Step(in, s0.hidden.data(), &s1).ok());
      ASSERT_EQ(a.logits.size(), in.seqs.size() * 301u);
      const std::vector<double> want(a.logits.begin(), a.logits.end());
      for (const auto& [got, what] : {std::pair{&vp, "tp=2 vocabulary-parallel head"},
                                      std::pair{&r0, "tp=2 head on rank 0"}, std::pair{&s1, "pp=2 x tp=2"}}) {
        const std::string label = absl::StrCat(name, " step ", step, " ", what);
        ASSERT_EQ(got->logits.size(), a.logits.size()) << label;
        for (size_t i = 0; i < in.seqs.size(); ++i) {
          const std::vector<double> row(want.begin() + i * 301, want.begin() + (i + 1) * 301);
          ExpectClose(got->logits.data() + i * 301, row, GetParam().tolerance,
                      absl::StrCat(label, " request ", in.seqs[i].request_id));
        }
      }
      StepInput next;
      for (size_t i = 0; i < in.seqs.size(); ++i) {
        const auto& s = in.seqs[i];
        next.seqs.push_back({s.request_id,
                             {a.samples[i].sample.token_id},
                             s.start_position + static_cast<int32_t>(s.token_ids.size()),
                             true,
                             std::nullopt});
      }
      in = next;
    }
  }
}

// Chunked prefill (scheduler option --max-num-batched-tokens): a prompt computed
// in chunks — each a prefill at a start position > 0, only the last one
// sampling — gives the same logits as the whole prompt at once and as the
// reference, while another request decodes in the same iterations.
TEST_P(EngineEquivalenceTest, ChunkedPromptMatchesWholePromptAndReference) {
  const std::string path = testing::SyntheticModel(Options());
  auto ckpt = Checkpoint::Open(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ReferenceModel ref(**ckpt);
  const int32_t vocab = (*ckpt)->config().vocab_size;
  std::mt19937 rng(77);
  std::vector<int32_t> prompt(45);
  for (int32_t& t : prompt) t = std::uniform_int_distribution<int>(0, vocab - 1)(rng);
  const std::vector<double> want = ref.Logits(prompt).back();
  auto whole = MakeEngine(path);
  StepInput one;
  one.seqs.push_back({1, prompt, 0, true, SequenceSetup{64, {}, prompt}});
  StepOutput whole_out;
  ASSERT_TRUE(whole->Step(one, nullptr, &whole_out).ok());
  const std::vector<double> whole_logits(whole_out.logits.begin(), whole_out.logits.end());

  const std::vector<std::vector<int32_t>> chunkings = {
      {1, 44}, {16, 16, 13}, {7, 7, 7, 7, 7, 10}, {44, 1}, {3, 30, 12}};
  for (const std::vector<int32_t>& chunks : chunkings) {
    auto engine = MakeEngine(path);
    // A second request decodes next to every chunk (a mixed batch).
    StepInput warm;
    warm.seqs.push_back({2, {9, 8, 7}, 0, true, SequenceSetup{64, {}, {}}});
    StepOutput warm_out;
    ASSERT_TRUE(engine->Step(warm, nullptr, &warm_out).ok());
    int32_t other_pos = 3, other_token = warm_out.samples[0].sample.token_id;
    int32_t start = 0;
    StepOutput out;
    for (size_t c = 0; c < chunks.size(); ++c) {
      StepInput in;
      in.iteration_id = c + 1;
      in.seqs.push_back({2, {other_token}, other_pos, true, std::nullopt});
      StepSequence chunk{1, std::vector<int32_t>(prompt.begin() + start, prompt.begin() + start + chunks[c]), start,
                         c + 1 == chunks.size(), std::nullopt};
      if (c == 0) chunk.new_request = SequenceSetup{64, {}, prompt};
      in.seqs.push_back(chunk);
      ASSERT_TRUE(engine->Step(in, nullptr, &out).ok());
      ASSERT_EQ(out.samples.size(), c + 1 == chunks.size() ? 2u : 1u) << "a chunk that does not end the prompt samples";
      other_token = out.samples[0].sample.token_id;
      ++other_pos;
      start += chunks[c];
    }
    const std::string what = absl::StrCat(GetParam().name, " chunks ", chunks.size(), " first ", chunks[0]);
    const float* got = out.logits.data() + vocab;  // row 1: the prompt's last token
    ExpectClose(got, want, GetParam().tolerance, what + " vs reference");
    ExpectClose(got, whole_logits, GetParam().tolerance, what + " vs whole prompt");
    EXPECT_EQ(out.samples[1].sample.token_id, whole_out.samples[0].sample.token_id) << what;
  }
}

// Prefix caching (scheduler option --enable-prefix-caching): B's table starts
// with two of A's blocks (its first 32 tokens, already computed by A), so B
// computes only its last 12 prompt tokens — and gets the same logits as
// computing its whole prompt in a fresh engine, and as the reference; A keeps
// decoding in its own last block meanwhile. Tensor-parallel shards apply the
// same block ids to their own pools (tp = 2 runs the same check).
// Prefix hits need every position of the sliding-window layers too (a hit's window was never computed by the
// request that hits it): these engines keep them all (swa_full, as a scheduler with prefix caching asks); without
// it a hit is refused (kv_cache_test).
TEST_P(EngineEquivalenceTest, PrefixCacheHitMatchesComputingFromScratch) {
  const std::string path = testing::SyntheticModel(Options());
  auto ckpt = Checkpoint::Open(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ReferenceModel ref(**ckpt);
  const int32_t vocab = (*ckpt)->config().vocab_size;
  std::mt19937 rng(99);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = std::uniform_int_distribution<int>(0, vocab - 1)(rng);
    return t;
  };
  const std::vector<int32_t> a_prompt = random_tokens(40);
  std::vector<int32_t> b_prompt(a_prompt.begin(), a_prompt.begin() + 32);
  for (int32_t t : random_tokens(12)) b_prompt.push_back(t);

  for (int tp : TpSizes()) {
    auto cached = MakeEngine(path, tp, true, 0, 1, /*swa_full=*/true);
    auto fresh = MakeEngine(path, tp, true, 0, 1, /*swa_full=*/true);
    const std::string what = absl::StrCat(GetParam().name, " tp ", tp);
    // A on blocks 3, 7, 9 (positions 0-15, 16-31, 32-47).
    StepInput a_in;
    a_in.seqs.push_back({1, a_prompt, 0, true, SequenceSetup{64, {}, a_prompt, {}, 16}, {3, 7, 9}});
    StepOutput a_out;
    ASSERT_TRUE(cached->Step(a_in, nullptr, &a_out).ok());
    const int64_t used_by_a = cached->kv_slots_used();
    EXPECT_EQ(used_by_a, 48);
    // B: A's blocks 3 and 7 hold its first 32 tokens; its own block 12 gets the rest.
    // A decodes in the same iteration (position 40, its block 9).
    StepInput both;
    both.seqs.push_back({1, {a_out.samples[0].sample.token_id}, 40, true, std::nullopt});
    both.seqs.push_back({2,
                         std::vector<int32_t>(b_prompt.begin() + 32, b_prompt.end()),
                         32,
                         true,
                         SequenceSetup{64, {}, b_prompt, {}, 16},
                         {3, 7, 12}});
    StepOutput both_out;
    ASSERT_TRUE(cached->Step(both, nullptr, &both_out).ok());
    EXPECT_EQ(cached->kv_slots_used(), 64);  // blocks 3, 7, 9, 12: the shared two counted once
    StepInput b_alone;
    b_alone.seqs.push_back({2, b_prompt, 0, true, SequenceSetup{64, {}, b_prompt}});
    StepOutput b_out;
    ASSERT_TRUE(fresh->Step(b_alone, nullptr, &b_out).ok());
    const std::vector<double> from_scratch(b_out.logits.begin(), b_out.logits.end());
    ExpectClose(both_out.logits.data() + vocab, from_scratch, GetParam().tolerance, what + " hit vs from scratch");
    ExpectClose(both_out.logits.data() + vocab, ref.Logits(b_prompt).back(), GetParam().tolerance,
                what + " hit vs reference");
    std::vector<int32_t> a_history = a_prompt;
    a_history.push_back(a_out.samples[0].sample.token_id);
    ExpectClose(both_out.logits.data(), ref.Logits(a_history).back(), GetParam().tolerance, what + " A vs reference");
    // B decodes into a block it is handed when it crosses position 48.
    std::vector<int32_t> b_history = b_prompt;
    int32_t token = both_out.samples[1].sample.token_id;
    for (int32_t pos = 44; pos < 50; ++pos) {
      b_history.push_back(token);
      StepInput step;
      StepSequence s{2, {token}, pos, true, std::nullopt};
      if (pos == 48) s.block_ids = {5};
      step.seqs.push_back(s);
      StepOutput out;
      ASSERT_TRUE(cached->Step(step, nullptr, &out).ok()) << what << " pos " << pos;
      ExpectClose(out.logits.data(), ref.Logits(b_history).back(), GetParam().tolerance,
                  absl::StrCat(what, " B decode at ", pos));
      token = out.samples[0].sample.token_id;
    }
    // Releasing B keeps A's blocks (and their contents) in use.
    StepInput release;
    release.released_ids = {2};
    StepOutput unused;
    ASSERT_TRUE(cached->Step(release, nullptr, &unused).ok());
    EXPECT_EQ(cached->kv_slots_used(), used_by_a);
  }
}

// Decode-filled blocks in the prefix cache (the next chat turn): A's 10-token
// prompt fills part of block 3; its decodes write positions 10-31 (the K/V of
// each increment's input token), completing blocks 3 and 7. A finishes and is
// released; B is A's prompt + A's first 22 generated tokens + a new user turn,
// its table starts with A's blocks 3 and 7, and it computes only its 5 new
// tokens — with the same logits as computing its whole prompt in a fresh
// engine, and as the reference (the decoded K/V came from batch-of-one
// increments, the fresh engine's from one prefill). tp = 2 runs the same check.
TEST_P(EngineEquivalenceTest, DecodeFilledPrefixHitMatchesComputingFromScratch) {
  const std::string path = testing::SyntheticModel(Options());
  auto ckpt = Checkpoint::Open(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ReferenceModel ref(**ckpt);
  const int32_t vocab = (*ckpt)->config().vocab_size;
  std::mt19937 rng(123);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = std::uniform_int_distribution<int>(0, vocab - 1)(rng);
    return t;
  };
  const std::vector<int32_t> a_prompt = random_tokens(10);
  const std::vector<int32_t> user_turn = random_tokens(5);

  for (int tp : TpSizes()) {
    auto cached = MakeEngine(path, tp, true, 0, 1, /*swa_full=*/true);
    auto fresh = MakeEngine(path, tp, true, 0, 1, /*swa_full=*/true);
    const std::string what = absl::StrCat(GetParam().name, " tp ", tp);
    // A on blocks 3, 7, 9 (positions 0-15, 16-31, 32-47).
    StepInput a_in;
    a_in.seqs.push_back({1, a_prompt, 0, true, SequenceSetup{48, {}, a_prompt, {}, 16}, {3, 7, 9}});
    StepOutput out;
    ASSERT_TRUE(cached->Step(a_in, nullptr, &out).ok());
    std::vector<int32_t> generated = {out.samples[0].sample.token_id};
    // Increments at positions 10..31: the last one writes block 7's last slot.
    for (int32_t pos = 10; pos < 32; ++pos) {
      StepInput step;
      step.seqs.push_back({1, {generated.back()}, pos, true, std::nullopt});
      ASSERT_TRUE(cached->Step(step, nullptr, &out).ok()) << what << " pos " << pos;
      generated.push_back(out.samples[0].sample.token_id);
    }
    // A ends (its last sampled token never computed) and is released; its blocks' contents stay.
    StepInput release;
    release.released_ids = {1};
    ASSERT_TRUE(cached->Step(release, nullptr, &out).ok());
    EXPECT_EQ(cached->kv_slots_used(), 0);

    std::vector<int32_t> b_prompt = a_prompt;
    b_prompt.insert(b_prompt.end(), generated.begin(), generated.begin() + 22);  // positions 10-31
    b_prompt.insert(b_prompt.end(), user_turn.begin(), user_turn.end());
    ASSERT_EQ(b_prompt.size(), 37u);
    StepInput b_in;
    b_in.seqs.push_back({2,
                         std::vector<int32_t>(b_prompt.begin() + 32, b_prompt.end()),
                         32,
                         true,
                         SequenceSetup{48, {}, b_prompt, {}, 16},
                         {3, 7, 12}});
    StepOutput b_hit;
    ASSERT_TRUE(cached->Step(b_in, nullptr, &b_hit).ok());
    StepInput b_alone;
    b_alone.seqs.push_back({2, b_prompt, 0, true, SequenceSetup{48, {}, b_prompt}});
    StepOutput b_out;
    ASSERT_TRUE(fresh->Step(b_alone, nullptr, &b_out).ok());
    const std::vector<double> from_scratch(b_out.logits.begin(), b_out.logits.end());
    ExpectClose(b_hit.logits.data(), from_scratch, GetParam().tolerance, what + " decode-filled hit vs from scratch");
    ExpectClose(b_hit.logits.data(), ref.Logits(b_prompt).back(), GetParam().tolerance,
                what + " decode-filled hit vs reference");
    EXPECT_EQ(b_hit.samples[0].sample.token_id, b_out.samples[0].sample.token_id) << what;
  }
}

// Scheduler-owned tables are checked like reservations: a block size other than
// the stage's, ids outside the pool or repeated, appends to a request without a
// table, or positions the table does not cover are errors that change nothing.
TEST_P(EngineEquivalenceTest, MalformedBlockTablesAreRejectedWithoutSideEffects) {
  const std::string path = testing::SyntheticModel(Options());
  auto engine = MakeEngine(path);
  auto step = [&](StepSequence s) {
    StepInput in;
    in.seqs.push_back(std::move(s));
    StepOutput out;
    return engine->Step(in, nullptr, &out);
  };
  absl::Status st = step({1, {1, 2, 3}, 0, true, SequenceSetup{16, {}, {}, {}, 32}, {0}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--kv-block-size"), std::string::npos) << st;
  EXPECT_EQ(step({1, {1, 2, 3}, 0, true, SequenceSetup{16, {}, {}, {}, 16}, {100000}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(step({1, {1, 2, 3}, 0, true, SequenceSetup{64, {}, {}, {}, 16}, {4, 4}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(step({1, std::vector<int32_t>(20, 1), 0, true, SequenceSetup{64, {}, {}, {}, 16}, {4}}).code(),
            absl::StatusCode::kOutOfRange);  // 20 positions, one block of 16
  EXPECT_EQ(step({1, {1}, 0, true, std::nullopt, {4}}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine->kv_slots_used(), 0);
  EXPECT_EQ(engine->num_requests(), 0);
  // A valid one, then a self-reserving request in the same pool: the two never mix.
  ASSERT_TRUE(step({1, {1, 2, 3}, 0, true, SequenceSetup{16, {}, {}, {}, 16}, {4}}).ok());
  EXPECT_EQ(step({2, {1, 2, 3}, 0, true, SequenceSetup{16, {}, {}}}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine->num_requests(), 1);
}

// Quantized weights: the reference computes with the dequantized weights in
// f64; the engine rounds activations to int8 per 32 values (step absmax/127,
// about twice bf16's relative step) and keeps KV in bf16. Measured worst
// 0.075 of the logits' deviation on these models (bf16: 0.03).
constexpr double kQuantTol = 0.1;

// The fused kernel pairs (RoPE + KV write; tensor parallel: the all-reduce's residual add +
// the next RMSNorm) only change how ops are grouped: on the CPU, whose backend runs each
// pair as its two ops, the logits are bit-identical with and without them, alone and at
// tp = 2 (which defers every residual add into the next norm or the end of the stage).
TEST(EngineFusedKernelsTest, SameLogitsWithAndWithoutFusedKernels) {
  const std::string path = testing::SyntheticModel(testing::SmallLlama(DType::kF32));
  for (int tp : {1, 2}) {
    std::vector<std::unique_ptr<Engine>> engines;
    for (bool fused : {true, false}) {
      Engine::Options o;
      o.model_path = path;
      o.n_slots = 1024;
      o.tp_size = tp;
      o.keep_logits = true;
      o.fused_kernels = fused;
      auto e = Engine::Create(o);
      ASSERT_TRUE(e.ok()) << e.status();
      engines.push_back(std::move(*e));
    }
    StepInput in;
    in.seqs.push_back({1, {5, 6, 7, 8, 9}, 0, true, SequenceSetup{32, {}, {}}});
    in.seqs.push_back({2, {42}, 0, true, SequenceSetup{32, {}, {}}});
    for (int step = 0; step < 3; ++step) {
      StepOutput fused, separate;
      ASSERT_TRUE(engines[0]->Step(in, nullptr, &fused).ok());
      ASSERT_TRUE(engines[1]->Step(in, nullptr, &separate).ok());
      ASSERT_EQ(fused.logits, separate.logits) << "tp " << tp << " step " << step;
      StepInput next;
      for (size_t i = 0; i < in.seqs.size(); ++i) {
        const auto& s = in.seqs[i];
        next.seqs.push_back({s.request_id,
                             {fused.samples[i].sample.token_id},
                             s.start_position + static_cast<int32_t>(s.token_ids.size()),
                             true,
                             std::nullopt});
      }
      in = next;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, EngineEquivalenceTest,
    ::testing::Values(Case{"llama_f32", ModelArch::kLlama, DType::kF32, 1e-3},
                      Case{"llama_bf16", ModelArch::kLlama, DType::kBF16, 3e-2},
                      Case{"gpt2_f32", ModelArch::kGpt2, DType::kF32, 1e-3},
                      Case{"gpt2_bf16", ModelArch::kGpt2, DType::kBF16, 3e-2},
                      Case{"llama_q8_0", ModelArch::kLlama, DType::kF32, kQuantTol, "q8_0"},
                      Case{"llama_q4_0", ModelArch::kLlama, DType::kF32, kQuantTol, "q4_0"},
                      Case{"llama_q5_1", ModelArch::kLlama, DType::kF32, kQuantTol, "q5_1"},
                      Case{"llama_q4_k_m", ModelArch::kLlama, DType::kF32, kQuantTol, "q4_k_m", true},
                      Case{"llama_q5_k_m", ModelArch::kLlama, DType::kF32, kQuantTol, "q5_k_m", true},
                      Case{"gpt2_q8_0", ModelArch::kGpt2, DType::kF32, kQuantTol, "q8_0"},
                      Case{"qwen3_f32", ModelArch::kQwen3, DType::kF32, 1e-3},
                      // Normed q and k give sharper attention logits, which carry bf16's rounding further.
                      Case{"qwen3_bf16", ModelArch::kQwen3, DType::kBF16, 4e-2},
                      Case{"qwen3_q8_0", ModelArch::kQwen3, DType::kF32, kQuantTol, "q8_0"},
                      Case{"qwen3_q4_k_m", ModelArch::kQwen3, DType::kF32, kQuantTol, "q4_k_m", true},
                      Case{"gemma2_f32", ModelArch::kGemma2, DType::kF32, 1e-3},
                      Case{"gemma3_f32", ModelArch::kGemma3, DType::kF32, 1e-3},
                      Case{"gemma3_bf16", ModelArch::kGemma3, DType::kBF16, 4e-2},
                      Case{"gemma3_q8_0", ModelArch::kGemma3, DType::kF32, kQuantTol, "q8_0"},
                      Case{"granite_f32", ModelArch::kGranite, DType::kF32, 1e-3},
                      Case{"granite_q8_0", ModelArch::kGranite, DType::kF32, kQuantTol, "q8_0"},
                      Case{"olmo2_f32", ModelArch::kOlmo2, DType::kF32, 1e-3},
                      Case{"olmo2_bf16", ModelArch::kOlmo2, DType::kBF16, 4e-2},  // like qwen3's: normed q and k
                      Case{"starcoder2_f32", ModelArch::kStarcoder2, DType::kF32, 1e-3},
                      Case{"starcoder2_q8_0", ModelArch::kStarcoder2, DType::kF32, kQuantTol, "q8_0"},
                      Case{"phi3_f32", ModelArch::kPhi3, DType::kF32, 1e-3},
                      Case{"phi3_q8_0", ModelArch::kPhi3, DType::kF32, kQuantTol, "q8_0"},
                      Case{"mistral3_f32", ModelArch::kMistral3, DType::kF32, 1e-3},
                      Case{"mistral3_q8_0", ModelArch::kMistral3, DType::kF32, kQuantTol, "q8_0"},
                      Case{"mistral_f32", ModelArch::kLlama, DType::kF32, 1e-3}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace orca::engine
