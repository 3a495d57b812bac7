// SamplingParams <-> orca.v1.SamplingParams. The gateway and the scheduler each had a
// copy of this conversion, and they disagreed on a negative top_p / repetition_penalty:
// the scheduler's turned it into 1 (disabled), the gateway's kept it and rejected it. The
// one conversion keeps it, so validation names the field, as vLLM rejects top_p outside (0, 1].

#include "services/common/sampling_proto.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace orca::services {
namespace {

using ::testing::HasSubstr;

TEST(SamplingProtoTest, AllZeroIsGreedyWithTopPAndRepetitionPenaltyDisabled) {
  const SamplingParams params = SamplingFromProto(v1::SamplingParams());
  EXPECT_TRUE(params.IsGreedy());
  EXPECT_EQ(params.top_p, 1.0f);
  EXPECT_EQ(params.repetition_penalty, 1.0f);
  EXPECT_FALSE(params.seed.has_value());
  EXPECT_FALSE(params.logprobs);
  EXPECT_EQ(params.Validate(), "");
}

TEST(SamplingProtoTest, NegativeTopPIsKeptSoValidationNamesIt) {
  v1::SamplingParams proto;
  proto.set_top_p(-0.5f);
  const SamplingParams params = SamplingFromProto(proto);
  EXPECT_EQ(params.top_p, -0.5f);
  EXPECT_THAT(params.Validate(), HasSubstr("top_p"));
}

TEST(SamplingProtoTest, NegativeRepetitionPenaltyIsKeptSoValidationNamesIt) {
  v1::SamplingParams proto;
  proto.set_repetition_penalty(-1.0f);
  const SamplingParams params = SamplingFromProto(proto);
  EXPECT_EQ(params.repetition_penalty, -1.0f);
  EXPECT_THAT(params.Validate(), HasSubstr("repetition_penalty"));
}

TEST(SamplingProtoTest, TopLogprobsImplyLogprobs) {
  v1::SamplingParams proto;
  proto.set_top_logprobs(3);
  const SamplingParams params = SamplingFromProto(proto);
  EXPECT_TRUE(params.logprobs);
  EXPECT_EQ(params.top_logprobs, 3);
}

TEST(SamplingProtoTest, EveryFieldRoundTrips) {
  SamplingParams in;
  in.temperature = 0.7f;
  in.top_k = 40;
  in.top_p = 0.9f;
  in.min_p = 0.05f;
  in.seed = 1234;
  in.repetition_penalty = 1.1f;
  in.presence_penalty = 0.5f;
  in.frequency_penalty = -0.5f;
  in.logprobs = true;
  in.top_logprobs = 5;
  in.logit_bias = {{3, -100.0f}, {17, 2.5f}, {50256, 100.0f}};
  in.prompt_logprobs = 0;
  v1::SamplingParams proto;
  SamplingToProto(in, &proto);
  const SamplingParams out = SamplingFromProto(proto);
  EXPECT_EQ(out.temperature, in.temperature);
  EXPECT_EQ(out.top_k, in.top_k);
  EXPECT_EQ(out.top_p, in.top_p);
  EXPECT_EQ(out.min_p, in.min_p);
  EXPECT_EQ(out.seed, in.seed);
  EXPECT_EQ(out.repetition_penalty, in.repetition_penalty);
  EXPECT_EQ(out.presence_penalty, in.presence_penalty);
  EXPECT_EQ(out.frequency_penalty, in.frequency_penalty);
  EXPECT_EQ(out.logprobs, in.logprobs);
  EXPECT_EQ(out.top_logprobs, in.top_logprobs);
  EXPECT_EQ(out.logit_bias, in.logit_bias);  // sorted again after the unordered proto map
  EXPECT_EQ(out.prompt_logprobs, 0);
  EXPECT_EQ(out.Validate(), "");
}

TEST(SamplingProtoTest, ToolCallConstraintRoundTrips) {
  SamplingParams in;
  in.structured.kind = StructuredOutputSpec::Kind::kToolCalls;
  in.structured.schema = R"({"type":"object"})";
  in.structured.calls_begin = "<tool_call>\n";
  in.structured.calls_separator = "\n</tool_call>\n<tool_call>\n";
  in.structured.calls_end = "\n</tool_call>";
  in.structured.max_calls = 1;
  in.structured.end_token_ids = {7};
  v1::SamplingParams proto;
  SamplingToProto(in, &proto);
  EXPECT_EQ(proto.structured().kind(), v1::StructuredOutput::KIND_TOOL_CALLS);
  EXPECT_EQ(SamplingFromProto(proto).structured, in.structured);
}

TEST(SamplingProtoTest, PromptLogprobsAndLogitBiasDefaultToNone) {
  const SamplingParams params = SamplingFromProto(v1::SamplingParams());
  EXPECT_EQ(params.prompt_logprobs, -1);
  EXPECT_FALSE(params.WantsPromptLogprobs());
  EXPECT_TRUE(params.logit_bias.empty());
  v1::SamplingParams proto;
  SamplingToProto(params, &proto);
  EXPECT_FALSE(proto.has_prompt_logprobs());
  EXPECT_EQ(proto.logit_bias_size(), 0);
}

}  // namespace
}  // namespace orca::services
