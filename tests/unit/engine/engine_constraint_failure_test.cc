// Defence in depth on the worker: whatever constraint reaches the engine — one
// beyond the table's limits (core/common/sampling_limits.h) or one the
// compiler refuses, a JSON Schema nested 6,000 deep included — fails that
// request alone, with the reason, while the free request in the same batch is
// sampled; the engine never runs it unconstrained and keeps serving.

#include <fstream>
#include <string>

#include "core/engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/gateway/testing/byte_level_model.h"
#include "tests/unit/engine/test_models.h"

namespace orca::engine {
namespace {

using Kind = StructuredOutputSpec::Kind;

// A small Llama over the byte-level tokenizer (token id = byte, 256 = EOS): structured outputs work.
std::unique_ptr<Engine> NewEngine() {
  SyntheticModelOptions o = testing::SmallLlama(DType::kF32);
  o.vocab_size = gateway::testing::kByteLevelVocabSize;
  o.eos_token_id = gateway::testing::kByteLevelEosId;
  const std::string dir = testing::SyntheticModel(o);
  std::ofstream(dir + "/tokenizer.json") << gateway::testing::ByteLevelTokenizerJson();
  std::ofstream(dir + "/tokenizer_config.json") << gateway::testing::ByteLevelTokenizerConfigJson();
  Engine::Options options;
  options.model_path = dir;
  options.n_slots = 256;
  auto engine = Engine::Create(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return *std::move(engine);
}

struct Refused {
  const char* name;
  StructuredOutputSpec spec;
  const char* reason;
};
void PrintTo(const Refused& r, std::ostream* os) { *os << r.name; }

std::string DeepSchema(int depth) {
  std::string schema;
  for (int i = 0; i < depth; ++i) schema += R"({"type":"array","items":)";
  return schema + R"({"type":"integer"})" + std::string(depth, '}');
}

StructuredOutputSpec Choices(int n) {
  StructuredOutputSpec spec{Kind::kChoice};
  spec.choices.assign(n, "yes");
  return spec;
}

StructuredOutputSpec EndingOutsideTheVocabulary() {
  StructuredOutputSpec spec{Kind::kJsonObject};
  spec.end_token_ids = {5000};
  return spec;
}

class EngineConstraintFailureTest : public ::testing::TestWithParam<Refused> {};

TEST_P(EngineConstraintFailureTest, FailsOnlyThatRequestAndKeepsServing) {
  const Refused& c = GetParam();
  std::unique_ptr<Engine> engine = NewEngine();
  StepInput in;
  in.seqs.push_back(testing::NewSeq(1, {3, 4, 5}, 16));
  in.seqs.back().new_request->sampling.structured = c.spec;
  in.seqs.push_back(testing::NewSeq(2, {6, 7}, 16));
  StepOutput out;
  ASSERT_TRUE(engine->Step(in, nullptr, &out).ok());
  ASSERT_EQ(out.failures.size(), 1u);
  EXPECT_EQ(out.failures[0].request_id, 1u);
  EXPECT_EQ(out.failures[0].status.code(), absl::StatusCode::kInvalidArgument) << out.failures[0].status;
  EXPECT_THAT(std::string(out.failures[0].status.message()), ::testing::HasSubstr(c.reason));
  ASSERT_EQ(out.samples.size(), 1u);
  EXPECT_EQ(out.samples[0].request_id, 2u);

  // Released, the engine serves a valid constraint: digits only.
  engine->Release(1);
  StepInput next;
  next.seqs.push_back(testing::NewSeq(3, {1, 2}, 16));
  next.seqs.back().new_request->sampling.structured = {Kind::kRegex, "", "[0-9]{4}"};
  next.seqs.push_back({2, {out.samples[0].sample.token_id}, 2, true, std::nullopt});
  StepOutput after;
  ASSERT_TRUE(engine->Step(next, nullptr, &after).ok());
  EXPECT_TRUE(after.failures.empty()) << after.failures[0].status;
  ASSERT_EQ(after.samples.size(), 2u);
  const int32_t digit = after.samples[0].sample.token_id;
  EXPECT_TRUE(digit >= '0' && digit <= '9') << digit;
}

INSTANTIATE_TEST_SUITE_P(
    Table, EngineConstraintFailureTest,
    ::testing::Values(
        Refused{"Schema6000Deep", {Kind::kJsonSchema, DeepSchema(6000)}, "nesting deeper than 128 levels"},
        Refused{"UnsupportedKeyword",
                {Kind::kJsonSchema, R"({"type":"number","multipleOf":3})"},
                "the structured-output constraint does not compile: unsupported JSON Schema keyword 'multipleOf'"},
        Refused{"TooManyChoices", Choices(1025),
                "the structured-output constraint is refused: 'guided_choice' may hold at most 1024 choices"},
        Refused{"EndTokenOutsideTheVocabulary", EndingOutsideTheVocabulary(),
                "Token id 5000 at 'stop_token_ids[0]' is outside the vocabulary [0, 257)"}),
    [](const ::testing::TestParamInfo<Refused>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace orca::engine
