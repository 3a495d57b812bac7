// The one table of sampling-parameter ranges: its bounds (inclusive or not),
// its messages (the words every entry point answers with), and
// SamplingParams::Validate and the structured-output checks built on it.

#include "core/common/sampling_limits.h"

#include <cmath>
#include <limits>

#include "core/common/sampling_params.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace orca {
namespace {

using ::testing::HasSubstr;

TEST(SamplingLimitsTest, RealRangesKeepTheirEdgesAndRefuseNan) {
  EXPECT_TRUE(limits::kTemperature.Contains(0.0));
  EXPECT_TRUE(limits::kTemperature.Contains(2.0));
  EXPECT_FALSE(limits::kTemperature.Contains(2.0000001));
  EXPECT_FALSE(limits::kTemperature.Contains(-0.0001));
  EXPECT_FALSE(limits::kTopP.Contains(0.0));  // (0, 1]
  EXPECT_TRUE(limits::kTopP.Contains(1e-30));
  EXPECT_TRUE(limits::kTopP.Contains(1.0));
  EXPECT_FALSE(limits::kRepetitionPenalty.Contains(0.0));
  EXPECT_TRUE(limits::kRepetitionPenalty.Contains(10.0));
  EXPECT_FALSE(limits::kMinP.Contains(std::nan("")));
  EXPECT_FALSE(limits::kLogitBias.Contains(std::numeric_limits<double>::infinity()));
}

TEST(SamplingLimitsTest, MessagesNameTheFieldTheRangeAndTheValueAsWritten) {
  EXPECT_EQ(limits::kTemperature.Error(3.0), "'temperature' must be in [0, 2], got 3");
  EXPECT_EQ(limits::kTopP.Error(0.0), "'top_p' must be in (0, 1], got 0");
  // A float says what the client wrote, not its binary expansion.
  EXPECT_EQ(limits::kTemperature.Error(2.1f), "'temperature' must be in [0, 2], got 2.1");
  EXPECT_EQ(limits::kTemperature.Error(2.1), "'temperature' must be in [0, 2], got 2.1");
  EXPECT_EQ(limits::kTemperature.Error(1e30), "'temperature' must be in [0, 2], got 1e+30");
  EXPECT_EQ(limits::kMinP.Error(std::nanf("")), "'min_p' must be in [0, 1], got nan");
  EXPECT_EQ(limits::kN.Error(0), "'n' must be at least 1, got 0");
  EXPECT_EQ(limits::kN.Error(129), "'n' must be at most 128, got 129");
  EXPECT_EQ(limits::kTopK.Check(-1), "");
  EXPECT_EQ(limits::kStopStrings.Check(16), "");
  EXPECT_EQ(limits::kStopStrings.Check(17), "'stop' may hold at most 16 sequences, got 17");
  EXPECT_EQ(limits::kStopStringBytes.Check("stop[2]", 4097), "'stop[2]' must be at most 4096 bytes long, got 4097");
  EXPECT_EQ(MinTokensError(3, 2), "'min_tokens' (3) must not exceed 'max_tokens' (2)");
  EXPECT_EQ(LogitBiasValueError(7, 100.5), "'logit_bias[\"7\"]' must be in [-100, 100], got 100.5");
  EXPECT_EQ(TokenIdError("stop_token_ids", 1, 300, 257),
            "Token id 300 at 'stop_token_ids[1]' is outside the vocabulary [0, 257)");
  EXPECT_EQ(TokenIdError("stop_token_ids", 0, 300, 0), "");  // vocabulary unknown
  EXPECT_EQ(TokenIdError("stop_token_ids", 0, -2, 0), "'stop_token_ids[0]' must be at least 0, got -2");
  EXPECT_EQ(LogitBiasTokenError(300, 257),
            "'logit_bias' key '300' is not a token id of this model: the vocabulary is [0, 257)");
}

TEST(SamplingLimitsTest, ShortestDecimalReadsBackExactly) {
  for (double v : {0.1, 2.5, -0.5, 1e-7, 123456.789, 1.0 / 3.0}) {
    EXPECT_EQ(std::strtod(ShortestDecimal(v).c_str(), nullptr), v) << ShortestDecimal(v);
  }
  for (float v : {0.1f, 0.7f, 2.1f, 1.0f / 3.0f}) {
    EXPECT_EQ(std::strtof(ShortestDecimal(v).c_str(), nullptr), v) << ShortestDecimal(v);
  }
  EXPECT_EQ(ShortestDecimal(0.7f), "0.7");
  EXPECT_EQ(ShortestDecimal(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(SamplingLimitsTest, ValidateChecksEveryFieldAgainstTheTable) {
  struct Case {
    void (*set)(SamplingParams&);
    const char* message;
  };
  const Case cases[] = {
      {[](SamplingParams& p) { p.temperature = 2.5f; }, "'temperature' must be in [0, 2], got 2.5"},
      {[](SamplingParams& p) { p.top_p = 0; }, "'top_p' must be in (0, 1], got 0"},
      {[](SamplingParams& p) { p.min_p = -0.1f; }, "'min_p' must be in [0, 1], got -0.1"},
      {[](SamplingParams& p) { p.repetition_penalty = 0; }, "'repetition_penalty' must be in (0, 10], got 0"},
      {[](SamplingParams& p) { p.presence_penalty = 2.5f; }, "'presence_penalty' must be in [-2, 2], got 2.5"},
      {[](SamplingParams& p) { p.frequency_penalty = -3; }, "'frequency_penalty' must be in [-2, 2], got -3"},
      {[](SamplingParams& p) { p.top_k = -2; }, "'top_k' must be at least -1, got -2"},
      {[](SamplingParams& p) { p.top_logprobs = 21; }, "'top_logprobs' must be at most 20, got 21"},
      {[](SamplingParams& p) { p.prompt_logprobs = -2; }, "'prompt_logprobs' must be at least 0, got -2"},
      {[](SamplingParams& p) { p.prompt_logprobs = 21; }, "'prompt_logprobs' must be at most 20, got 21"},
      {[](SamplingParams& p) {
         p.logit_bias = {{5, 101.0f}};
       },
       "'logit_bias[\"5\"]' must be in [-100, 100], got 101"},
      {[](SamplingParams& p) {
         p.logit_bias = {{-5, 1.0f}};
       },
       "token ids (non-negative integers), got '-5'"},
      {[](SamplingParams& p) {
         p.logit_bias = {{5, 1.0f}, {5, 2.0f}};
       },
       "sorted and unique"},
      {[](SamplingParams& p) {
         for (int i = 0; i < 301; ++i) p.logit_bias.emplace_back(i, 1.0f);
       },
       "'logit_bias' may hold at most 300 entries, got 301"},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.set(p);
    EXPECT_THAT(p.Validate(), HasSubstr(c.message));
  }
  SamplingParams edges;
  edges.temperature = 2;
  edges.top_k = -1;  // vLLM's "off"
  edges.repetition_penalty = 10;
  edges.top_logprobs = 20;
  edges.prompt_logprobs = -1;
  edges.logit_bias = {{0, -100.0f}, {1, 100.0f}};
  EXPECT_EQ(edges.Validate(), "");
}

TEST(SamplingLimitsTest, StructuredOutputSpecsAreCheckedBeforeTheyAreCompiled) {
  using Kind = StructuredOutputSpec::Kind;
  StructuredOutputSpec choices{Kind::kChoice};
  choices.choices.assign(1025, "c");
  EXPECT_EQ(CheckStructuredOutputLimits(choices), "'guided_choice' may hold at most 1024 choices, got 1025");
  choices.choices.resize(1024);
  EXPECT_EQ(CheckStructuredOutputLimits(choices), "");
  StructuredOutputSpec ends{Kind::kJsonObject};
  ends.end_token_ids = {3, 400};
  EXPECT_EQ(CheckStructuredOutputLimits(ends, 300),
            "Token id 400 at 'stop_token_ids[1]' is outside the vocabulary [0, 300)");
  EXPECT_EQ(CheckStructuredOutputLimits(ends), "");  // vocabulary unknown
  ends.end_token_ids = {-1};
  EXPECT_EQ(CheckStructuredOutputLimits(ends), "'stop_token_ids[0]' must be at least 0, got -1");
  StructuredOutputSpec calls{Kind::kToolCalls, "{}"};
  calls.max_calls = -1;
  EXPECT_EQ(CheckStructuredOutputLimits(calls), "'max_calls' must be at least 0, got -1");
  EXPECT_EQ(StructuredOutputField(Kind::kJsonSchema), "json_schema");
  EXPECT_EQ(StructuredOutputField(Kind::kToolCalls), "tools");
  EXPECT_EQ(CheckStructuredOutputLimits(StructuredOutputSpec{}), "");  // unconstrained
}

}  // namespace
}  // namespace orca
