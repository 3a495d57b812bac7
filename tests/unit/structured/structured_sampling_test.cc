// Constrained sampling with GPT-2's real 50k vocabulary (tiny-gpt2's
// tokenizer; skipped when ../shared is absent): random logits at temperature 1
// never yield a token outside the grammar (checked by an independent parser
// state), masks equal a brute force over the whole vocabulary, finished
// outputs parse as JSON, a preempted request resumes identically, and the
// engine constrains a batch mixing guided and free requests.

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "core/engine/sampler.h"
#include "core/engine/synthetic_checkpoint.h"
#include "core/structured/compile.h"
#include "core/text/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace orca::structured {
namespace {

std::string TinyGpt2Dir() {
  const char* s = std::getenv("ORCA_SHARED_DIR");
  return std::string(s ? s : "../shared") + "/models/tiny-gpt2";
}

bool HaveTinyGpt2() {
  struct stat st {};
  return ::stat((TinyGpt2Dir() + "/tokenizer.json").c_str(), &st) == 0;
}

class Gpt2VocabTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!HaveTinyGpt2()) return;
    auto tok = text::Tokenizer::Load(TinyGpt2Dir());
    ASSERT_TRUE(tok.ok()) << tok.status();
    auto v = TokenVocabulary::FromTokenizer(**tok);
    ASSERT_TRUE(v.ok()) << v.status();
    vocab_ = new std::shared_ptr<const TokenVocabulary>(*v);
  }
  void SetUp() override {
    if (!HaveTinyGpt2()) GTEST_SKIP() << "no ../shared/models/tiny-gpt2";
  }
  static const std::shared_ptr<const TokenVocabulary>& vocab() { return *vocab_; }
  static std::shared_ptr<const TokenVocabulary>* vocab_;
};
std::shared_ptr<const TokenVocabulary>* Gpt2VocabTest::vocab_ = nullptr;

const char* kPerson = R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},
  "age":{"type":"integer"},"tags":{"type":"array","items":{"enum":["a","b c"]},"maxItems":3},
  "when":{"type":"string","format":"date"}},"required":["name","age"],"additionalProperties":false})";

TEST_F(Gpt2VocabTest, VocabularyHasEveryByteAndNoSpecialToken) {
  EXPECT_EQ(vocab()->vocab_size(), 50257);
  ASSERT_EQ(vocab()->eos_ids().size(), 1u);
  EXPECT_EQ(vocab()->eos_ids()[0], 50256);
  EXPECT_FALSE(vocab()->in_trie(50256));
  EXPECT_EQ(vocab()->bytes(220), " ");  // "Ġ"
  std::vector<bool> single(256);
  for (int32_t id = 0; id < vocab()->vocab_size(); ++id)
    if (vocab()->bytes(id).size() == 1) single[static_cast<uint8_t>(vocab()->bytes(id)[0])] = true;
  for (int b = 0; b < 256; ++b) EXPECT_TRUE(single[b]) << "byte " << b;
}

TEST_F(Gpt2VocabTest, MaskEqualsBruteForceOverTheWholeVocabulary) {
  auto g = CompileSpec(StructuredOutputSpec{StructuredOutputSpec::Kind::kJsonSchema, kPerson});
  ASSERT_TRUE(g.ok()) << g.status();
  GrammarRuntime rt(*g, vocab());
  GrammarRuntime::StateSet states = rt.Initial();
  // Along a valid text, at a few positions (the brute force is 50k parses each).
  const std::string text = R"({"name": "Al Smith", "age": -42, "tags": ["b c"]})";
  for (size_t cut : {size_t{0}, size_t{1}, size_t{9}, size_t{12}, size_t{29}, size_t{38}, text.size()}) {
    GrammarRuntime::StateSet s = rt.AdvanceBytes(states, text.substr(0, cut));
    ASSERT_FALSE(s.empty()) << cut;
    std::shared_ptr<const TokenMask> mask = rt.Mask(s);
    int32_t count = 0;
    for (int32_t id = 0; id < vocab()->vocab_size(); ++id) {
      const bool want = vocab()->in_trie(id) && !rt.AdvanceBytes(s, vocab()->bytes(id)).empty();
      ASSERT_EQ(mask->Test(id), want) << "token " << id << " '" << vocab()->bytes(id) << "' at " << cut;
      count += want;
    }
    EXPECT_EQ(mask->allowed, count);
  }
}

// Samples until EOS or `max_steps` with random logits (temperature 1); checks each token independently.
std::string Generate(engine::Sampler& sampler, GrammarRuntime& independent, std::mt19937_64& rng, int max_steps,
                     std::vector<int32_t>* tokens, bool* finished) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const TokenVocabulary& v = independent.vocab();
  GrammarRuntime::StateSet check = independent.Initial();
  for (int32_t t : *tokens) check = independent.AdvanceBytes(check, v.bytes(t));
  std::string text;
  std::vector<float> logits(v.vocab_size());
  *finished = false;
  for (int step = 0; step < max_steps; ++step) {
    for (float& l : logits) l = normal(rng);
    const int32_t tok = sampler.Sample(logits.data(), v.vocab_size()).token_id;
    tokens->push_back(tok);
    if (tok == 50256) {
      EXPECT_TRUE(GrammarRuntime::CanEnd(check)) << "EOS before the grammar may end: " << text;
      *finished = true;
      break;
    }
    GrammarRuntime::StateSet next = independent.AdvanceBytes(check, v.bytes(tok));
    EXPECT_FALSE(next.empty()) << "token " << tok << " '" << v.bytes(tok) << "' outside the grammar after: " << text;
    if (next.empty()) break;
    check = std::move(next);
    text += v.bytes(tok);
  }
  return text;
}

TEST_F(Gpt2VocabTest, RandomSamplingNeverLeavesTheGrammarAndFinishedOutputsParse) {
  const std::vector<std::string> schemas = {
      kPerson,
      R"({"type":"array","items":{"anyOf":[{"type":"number"},{"type":"boolean"}]},"maxItems":4})",
      R"({"enum":["red","green","blue"]})",
  };
  MatcherFactory factory(vocab());
  std::mt19937_64 rng(1234);
  int finished_count = 0, total = 0;
  for (size_t si = 0; si < schemas.size(); ++si) {
    StructuredOutputSpec spec{StructuredOutputSpec::Kind::kJsonSchema, schemas[si]};
    auto grammar = CompileSpec(spec);
    ASSERT_TRUE(grammar.ok());
    GrammarRuntime independent(*grammar, vocab());
    for (int r = 0; r < 12; ++r) {
      SamplingParams params;
      params.temperature = 1.0f;
      params.structured = spec;
      auto m = factory.NewMatcher(spec);
      ASSERT_TRUE(m.ok());
      engine::Sampler sampler(params, 100 + r, {}, {}, *std::move(m));
      std::vector<int32_t> tokens;
      bool finished = false;
      const std::string text = Generate(sampler, independent, rng, 400, &tokens, &finished);
      ++total;
      if (!finished) continue;
      ++finished_count;
      const nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(parsed.is_discarded()) << text;
      if (si == 0) {
        EXPECT_TRUE(parsed.contains("name") && parsed["name"].is_string()) << text;
        EXPECT_TRUE(parsed.contains("age") && parsed["age"].is_number_integer()) << text;
      }
    }
  }
  EXPECT_GE(finished_count, total / 2) << "random outputs rarely finish: the test shows little";
}

TEST_F(Gpt2VocabTest, ResumedSamplerReplaysItsOutputAndContinuesIdentically) {
  StructuredOutputSpec spec{StructuredOutputSpec::Kind::kJsonObject};
  MatcherFactory factory(vocab());
  SamplingParams params;
  params.temperature = 1.0f;
  params.seed = 99;
  params.structured = spec;
  std::mt19937_64 logits_rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<std::vector<float>> logits(40, std::vector<float>(vocab()->vocab_size()));
  for (auto& row : logits)
    for (float& l : row) l = normal(logits_rng);
  auto run = [&](engine::Sampler& s, size_t from, size_t to, std::vector<int32_t>* out) {
    for (size_t i = from; i < to; ++i) {
      std::vector<float> row = logits[i];
      out->push_back(s.Sample(row.data(), vocab()->vocab_size()).token_id);
      if (out->back() == 50256) break;
    }
  };
  std::vector<int32_t> straight;
  engine::Sampler a(params, 1, {}, {}, *factory.NewMatcher(spec));
  run(a, 0, 40, &straight);
  std::vector<int32_t> resumed(straight.begin(), straight.begin() + std::min<size_t>(10, straight.size()));
  engine::Sampler b(params, 1, {}, resumed, *factory.NewMatcher(spec));
  run(b, resumed.size(), 40, &resumed);
  EXPECT_EQ(resumed, straight);
}

TEST_F(Gpt2VocabTest, EngineConstrainsGuidedRequestsInAMixedBatch) {
  engine::Engine::Options o;
  o.model_path = TinyGpt2Dir();
  o.n_slots = 4096;
  auto engine = engine::Engine::Create(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::vector<int32_t> prompt = {464, 3290, 318};  // "The dog is"
  std::vector<SamplingParams> params(4);
  params[0].structured = {StructuredOutputSpec::Kind::kChoice, "", "", {" yes", " no"}};
  params[1].structured = {StructuredOutputSpec::Kind::kRegex, "", "[0-9]{2}-[a-z]{2}"};
  params[2].structured = {StructuredOutputSpec::Kind::kJsonSchema, kPerson};
  params[2].temperature = 1.0f;
  // params[3]: free, greedy
  engine::StepInput in;
  std::vector<std::vector<int32_t>> outputs(4);
  std::vector<int32_t> pos(4, 0);
  for (uint64_t i = 0; i < 4; ++i) {
    engine::SequenceSetup setup;
    setup.kv_reservation_slots = 200;
    setup.sampling = params[i];
    setup.prompt_token_ids = prompt;
    in.seqs.push_back({i + 1, prompt, 0, true, setup});
  }
  for (int step = 0; step < 150 && !in.seqs.empty(); ++step) {
    engine::StepOutput out;
    ASSERT_TRUE((*engine)->Step(in, nullptr, &out).ok());
    engine::StepInput next;
    for (size_t k = 0; k < in.seqs.size(); ++k) {
      const uint64_t id = in.seqs[k].request_id;
      const int32_t tok = out.samples[k].sample.token_id;
      outputs[id - 1].push_back(tok);
      pos[id - 1] += static_cast<int32_t>(in.seqs[k].token_ids.size());
      const bool done = (tok == 50256 && id != 4) || outputs[id - 1].size() >= 120;
      if (done) {
        next.released_ids.push_back(id);
      } else {
        next.seqs.push_back({id, {tok}, pos[id - 1], true, std::nullopt});
      }
    }
    in = std::move(next);
  }
  auto text = [&](int i) {
    std::string s;
    for (int32_t t : outputs[i])
      if (t != 50256) s += vocab()->bytes(t);
    return s;
  };
  EXPECT_TRUE(text(0) == " yes" || text(0) == " no") << text(0);
  EXPECT_EQ(outputs[0].back(), 50256);
  ASSERT_EQ(text(1).size(), 5u) << text(1);
  EXPECT_TRUE(isdigit(text(1)[0]) && isdigit(text(1)[1]) && text(1)[2] == '-' && islower(text(1)[3])) << text(1);
  if (outputs[2].back() == 50256) {
    EXPECT_FALSE(nlohmann::json::parse(text(2), nullptr, false).is_discarded()) << text(2);
  }
  EXPECT_EQ(outputs[3].size(), 120u);  // unconstrained greedy runs on
  EXPECT_GT((*engine)->structured_stats().mask_misses, 0);
}

// One guided request and one free one, both new in the step.
engine::StepInput GuidedAndFree(const StructuredOutputSpec& spec) {
  engine::StepInput in;
  for (uint64_t id : {1, 2}) {
    engine::SequenceSetup setup;
    setup.kv_reservation_slots = 8;
    if (id == 1) setup.sampling.structured = spec;
    setup.prompt_token_ids = {3, 4, 5};
    in.seqs.push_back({id, {3, 4, 5}, 0, true, setup});
  }
  return in;
}

// The engine fails the guided request alone, with the reason, every step until it is released; it never
// runs it unconstrained, and the free request of the same batch goes on.
void ExpectOnlyTheGuidedRequestFails(engine::Engine& engine, const StructuredOutputSpec& spec, absl::StatusCode code,
                                     const std::string& reason) {
  engine::StepOutput out;
  ASSERT_TRUE(engine.Step(GuidedAndFree(spec), nullptr, &out).ok());
  ASSERT_EQ(out.failures.size(), 1u);
  EXPECT_EQ(out.failures[0].request_id, 1u);
  EXPECT_EQ(out.failures[0].status.code(), code) << out.failures[0].status;
  EXPECT_THAT(std::string(out.failures[0].status.message()), ::testing::HasSubstr(reason));
  ASSERT_EQ(out.samples.size(), 1u);
  EXPECT_EQ(out.samples[0].request_id, 2u);

  // Still in the next batch (the scheduler has not seen the failure yet): no token, the same error.
  engine::StepInput next;
  next.seqs.push_back({1, {7}, 3, true, std::nullopt});
  next.seqs.push_back({2, {out.samples[0].sample.token_id}, 3, true, std::nullopt});
  engine::StepOutput again;
  ASSERT_TRUE(engine.Step(next, nullptr, &again).ok());
  ASSERT_EQ(again.failures.size(), 1u);
  EXPECT_EQ(again.failures[0].request_id, 1u);
  EXPECT_EQ(again.failures[0].status, out.failures[0].status);
  ASSERT_EQ(again.samples.size(), 1u);
  EXPECT_EQ(again.samples[0].request_id, 2u);

  // Released, the id is new again: a free request under it samples.
  engine.Release(1);
  engine.Release(2);
  engine::StepInput fresh;
  engine::SequenceSetup setup;
  setup.kv_reservation_slots = 8;
  setup.prompt_token_ids = {3, 4, 5};
  fresh.seqs.push_back({1, {3, 4, 5}, 0, true, setup});
  engine::StepOutput after;
  ASSERT_TRUE(engine.Step(fresh, nullptr, &after).ok());
  EXPECT_TRUE(after.failures.empty());
  EXPECT_EQ(after.samples.size(), 1u);
}

TEST(EngineStructuredFailureTest, CheckpointWithoutATokenizerFailsGuidedRequestsOnly) {
  engine::SyntheticModelOptions so;  // config + weights only: no tokenizer to build a vocabulary from
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/orca-structured-no-tokenizer-" + std::to_string(getpid());
  ASSERT_TRUE(engine::WriteSyntheticCheckpoint(so, dir).ok());
  engine::Engine::Options o;
  o.model_path = dir;
  o.n_slots = 256;
  auto engine = engine::Engine::Create(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ExpectOnlyTheGuidedRequestFails(**engine, {StructuredOutputSpec::Kind::kRegex, "", "[0-9]+"},
                                  absl::StatusCode::kFailedPrecondition,
                                  "structured outputs are unavailable on this worker: loading the tokenizer of");
}

TEST_F(Gpt2VocabTest, EngineFailsAGuidedRequestWhoseConstraintDoesNotCompile) {
  engine::Engine::Options o;
  o.model_path = TinyGpt2Dir();
  o.n_slots = 256;
  auto engine = engine::Engine::Create(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ExpectOnlyTheGuidedRequestFails(**engine, {StructuredOutputSpec::Kind::kRegex, "", "(unclosed"},
                                  absl::StatusCode::kInvalidArgument,
                                  "the structured-output constraint does not compile");
}

}  // namespace
}  // namespace orca::structured
