// Parsing and validation of OpenAI request bodies: every bad input is a 400
// whose message names the field (and the limit), and `param` carries it.

#include "services/gateway/openai_request.h"

#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/gateway/api_error.h"

namespace orca::gateway {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

absl::StatusOr<CompletionRequest> Completion(const std::string& body) {
  absl::StatusOr<json> parsed = ParseJsonObject(body);
  if (!parsed.ok()) return parsed.status();
  return ParseCompletionRequest(*parsed);
}

absl::StatusOr<ChatRequest> Chat(const std::string& body) {
  absl::StatusOr<json> parsed = ParseJsonObject(body);
  if (!parsed.ok()) return parsed.status();
  return ParseChatRequest(*parsed);
}

struct BadInput {
  const char* name;
  const char* body;
  const char* param;    // expected `param` ("" for none)
  const char* message;  // substring of the message
};

class CompletionBadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(CompletionBadInputTest, IsRejectedNamingTheField) {
  const BadInput& c = GetParam();
  absl::StatusOr<CompletionRequest> result = Completion(c.body);
  ASSERT_FALSE(result.ok()) << c.body;
  const ApiError error = ApiError::FromStatus(result.status());
  EXPECT_EQ(error.http_status, 400);
  EXPECT_EQ(error.type, "invalid_request_error");
  EXPECT_EQ(error.param, c.param);
  EXPECT_THAT(error.message, HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(
    Table, CompletionBadInputTest,
    ::testing::Values(
        BadInput{"MalformedJson", R"({"prompt": "x",)", "", "Invalid JSON body: parse error at line 1, column 16"},
        BadInput{"NotAnObject", R"([1, 2])", "", "must be a JSON object, got an array"},
        BadInput{"InvalidUtf8", "{\"prompt\": \"\xff\xfe\"}", "",
                 "not valid UTF-8 (invalid byte sequence at offset 12)"},
        BadInput{"LoneSurrogateEscape", R"({"prompt": "\ud800"})", "", "Invalid JSON body"},
        BadInput{"MissingPrompt", R"({"max_tokens": 3})", "prompt", "'prompt' is required"},
        BadInput{"PromptNumber", R"({"prompt": 5})", "prompt", "got a number (5)"},
        BadInput{"PromptEmptyArray", R"({"prompt": []})", "prompt", "must not be an empty array"},
        BadInput{"PromptMixed", R"({"prompt": ["a", 1]})", "prompt", "'prompt[1]' is a number (1)"},
        BadInput{"PromptNegativeId", R"({"prompt": [1, -2]})", "prompt", "'prompt[1]' must be at least 0, got -2"},
        BadInput{"MaxTokensString", R"({"prompt": "x", "max_tokens": "ten"})", "max_tokens",
                 "'max_tokens' must be an integer, got a string (\"ten\")"},
        BadInput{"MaxTokensFraction", R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens",
                 "'max_tokens' must be an integer, got a number (1.5)"},
        BadInput{"MaxTokensNegative", R"({"prompt": "x", "max_tokens": -5})", "max_tokens",
                 "'max_tokens' must be at least 1, got -5"},
        BadInput{"MaxTokensZero", R"({"prompt": "x", "max_tokens": 0})", "max_tokens", "at least 1, got 0"},
        BadInput{"MaxTokensHuge", R"({"prompt": "x", "max_tokens": 1e30})", "max_tokens",
                 "'max_tokens' must be at most 2147483647"},
        BadInput{"MaxTokensBigInteger", R"({"prompt": "x", "max_tokens": 99999999999999999999})", "max_tokens",
                 "must be at most 2147483647"},
        BadInput{"TemperatureString", R"({"prompt": "x", "temperature": "hot"})", "temperature",
                 "'temperature' must be a number, got a string (\"hot\")"},
        BadInput{"TemperatureRange", R"({"prompt": "x", "temperature": 3})", "temperature",
                 "'temperature' must be in [0, 2], got 3"},
        BadInput{"TopPZero", R"({"prompt": "x", "top_p": 0})", "top_p", "'top_p' must be in (0, 1]"},
        // A positive double that is zero as the float the engine samples with.
        BadInput{"TopPUnderflowsToZero", R"({"prompt": "x", "top_p": 1e-50})", "top_p",
                 "'top_p' must be in (0, 1], got 1e-50"},
        BadInput{"TopKBelowMinusOne", R"({"prompt": "x", "top_k": -2})", "top_k", "at least -1"},
        BadInput{"MinPRange", R"({"prompt": "x", "min_p": 1.5})", "min_p", "'min_p' must be in [0, 1]"},
        BadInput{"PresenceRange", R"({"prompt": "x", "presence_penalty": -3})", "presence_penalty", "[-2, 2]"},
        BadInput{"FrequencyType", R"({"prompt": "x", "frequency_penalty": true})", "frequency_penalty",
                 "must be a number, got a boolean (true)"},
        BadInput{"RepetitionZero", R"({"prompt": "x", "repetition_penalty": 0})", "repetition_penalty", "(0, 10]"},
        BadInput{"NZero", R"({"prompt": "x", "n": 0})", "n", "'n' must be at least 1, got 0"},
        BadInput{"NTooLarge", R"({"prompt": "x", "n": 1000})", "n", "'n' must be at most 128, got 1000"},
        BadInput{"NTimesPrompts", R"({"prompt": ["a","b","c"], "n": 50})", "n", "at most 128, got 50 × 3"},
        BadInput{"StopNumber", R"({"prompt": "x", "stop": 5})", "stop",
                 "'stop' must be a string or an array of strings, got a number (5)"},
        BadInput{"StopArrayOfNumbers", R"({"prompt": "x", "stop": ["a", 3]})", "stop", "'stop[1]' must be a string"},
        BadInput{"StopEmptyString", R"({"prompt": "x", "stop": ["a", ""]})", "stop", "'stop[1]' must not be empty"},
        BadInput{
            "StopTooMany",
            R"({"prompt": "x", "stop": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]})",
            "stop", "at most 16 sequences, got 17"},
        BadInput{"StreamString", R"({"prompt": "x", "stream": "yes"})", "stream", "'stream' must be a boolean"},
        BadInput{"StreamOptionsWithoutStream", R"({"prompt": "x", "stream_options": {"include_usage": true}})",
                 "stream_options", "only allowed when 'stream' is true"},
        BadInput{"IncludeUsageType", R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})",
                 "stream_options.include_usage", "'stream_options.include_usage' must be a boolean"},
        BadInput{"LogprobsTooMany", R"({"prompt": "x", "logprobs": 6})", "logprobs", "at most 5, got 6"},
        BadInput{"LogprobsBool", R"({"prompt": "x", "logprobs": true})", "logprobs", "must be an integer"},
        BadInput{"Suffix", R"({"prompt": "x", "suffix": "end"})", "suffix", "'suffix' is not supported"},
        BadInput{"PromptLogprobsTooMany", R"({"prompt": "x", "prompt_logprobs": 21})", "prompt_logprobs",
                 "at most 20, got 21"},
        BadInput{"PromptLogprobsNegative", R"({"prompt": "x", "prompt_logprobs": -1})", "prompt_logprobs",
                 "at least 0, got -1"},
        BadInput{"PromptLogprobsBool", R"({"prompt": "x", "prompt_logprobs": true})", "prompt_logprobs",
                 "must be an integer"},
        BadInput{"LogitBiasArray", R"({"prompt": "x", "logit_bias": [1, 2]})", "logit_bias",
                 "'logit_bias' must be an object, got an array"},
        BadInput{"LogitBiasKeyNotInteger", R"({"prompt": "x", "logit_bias": {"hello": 1}})", "logit_bias",
                 "keys must be token ids (non-negative integers written as strings), got 'hello'"},
        BadInput{"LogitBiasKeyNegative", R"({"prompt": "x", "logit_bias": {"-5": 1}})", "logit_bias", "got '-5'"},
        BadInput{"LogitBiasKeyFraction", R"({"prompt": "x", "logit_bias": {"1.5": 1}})", "logit_bias", "got '1.5'"},
        BadInput{"LogitBiasKeyEmpty", R"({"prompt": "x", "logit_bias": {"": 1}})", "logit_bias", "got ''"},
        BadInput{"LogitBiasKeyHuge", R"({"prompt": "x", "logit_bias": {"99999999999": 1}})", "logit_bias",
                 "got '99999999999'"},
        BadInput{"LogitBiasValueString", R"({"prompt": "x", "logit_bias": {"50256": "-100"}})", "logit_bias",
                 "'logit_bias[\"50256\"]' must be a number, got a string"},
        BadInput{"LogitBiasValueBool", R"({"prompt": "x", "logit_bias": {"7": true}})", "logit_bias",
                 "'logit_bias[\"7\"]' must be a number, got a boolean"},
        BadInput{"LogitBiasValueNull", R"({"prompt": "x", "logit_bias": {"7": null}})", "logit_bias",
                 "must be a number, got null"},
        BadInput{"LogitBiasValueTooLow", R"({"prompt": "x", "logit_bias": {"7": -100.5}})", "logit_bias",
                 "'logit_bias[\"7\"]' must be in [-100, 100], got -100.5"},
        BadInput{"LogitBiasValueTooHigh", R"({"prompt": "x", "logit_bias": {"7": 1000}})", "logit_bias",
                 "must be in [-100, 100], got 1000"},
        BadInput{"LogitBiasDuplicateId", R"({"prompt": "x", "logit_bias": {"7": 1, "007": 2}})", "logit_bias",
                 "names token id 7 more than once"},
        BadInput{"BestOf", R"({"prompt": "x", "best_of": 3})", "best_of", "not supported"},
        BadInput{"UserNumber", R"({"prompt": "x", "user": 7})", "user", "'user' must be a string"},
        BadInput{"ModelNumber", R"({"prompt": "x", "model": 7})", "model", "'model' must be a string"},
        BadInput{"SeedString", R"({"prompt": "x", "seed": "1"})", "seed", "'seed' must be an integer"},
        BadInput{"MinTokensOverMax", R"({"prompt": "x", "max_tokens": 2, "min_tokens": 3})", "min_tokens",
                 "must not exceed 'max_tokens' (2)"},
        BadInput{"StopTokenIdsType", R"({"prompt": "x", "stop_token_ids": [1, "a"]})", "stop_token_ids",
                 "'stop_token_ids[1]' must be an integer"}),
    [](const ::testing::TestParamInfo<BadInput>& info) { return std::string(info.param.name); });

class ChatBadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(ChatBadInputTest, IsRejectedNamingTheField) {
  const BadInput& c = GetParam();
  absl::StatusOr<ChatRequest> result = Chat(c.body);
  ASSERT_FALSE(result.ok()) << c.body;
  const ApiError error = ApiError::FromStatus(result.status());
  EXPECT_EQ(error.http_status, 400);
  EXPECT_EQ(error.param, c.param);
  EXPECT_THAT(error.message, HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(
    Table, ChatBadInputTest,
    ::testing::Values(
        BadInput{"MissingMessages", R"({"model": "m"})", "messages", "'messages' is required"},
        BadInput{"EmptyMessages", R"({"messages": []})", "messages", "at least one message"},
        BadInput{"MessagesObject", R"({"messages": {"role": "user"}})", "messages", "must be an array, got an object"},
        BadInput{"MessageString", R"({"messages": ["hi"]})", "messages", "'messages[0]' must be an object"},
        BadInput{"MissingRole", R"({"messages": [{"content": "hi"}]})", "messages", "'messages[0].role' is required"},
        BadInput{"RoleNumber", R"({"messages": [{"role": 1, "content": "hi"}]})", "messages",
                 "'messages[0].role' must be a string"},
        BadInput{"MissingContent", R"({"messages": [{"role": "user"}]})", "messages",
                 "'messages[0].content' is required"},
        BadInput{"ContentNumber", R"({"messages": [{"role": "user", "content": 3}]})", "messages",
                 "'messages[0].content' must be a string or an array of content parts"},
        BadInput{"ImagePart",
                 R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
                 "messages", "'messages[0].content[0].type' 'image_url' is not supported"},
        BadInput{"TextPartWithoutText", R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})",
                 "messages", "'messages[0].content[0].text' must be a string"},
        BadInput{"TopLogprobsWithoutLogprobs", R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
                 "top_logprobs", "requires 'logprobs' to be true"},
        BadInput{"TopLogprobsTooMany",
                 R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})",
                 "top_logprobs", "at most 20, got 21"},
        BadInput{"LogprobsInt", R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 2})", "logprobs",
                 "'logprobs' must be a boolean"},
        BadInput{"JsonSchemaFormatWithoutSchema",
                 R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema"}})",
                 "response_format", "'response_format.json_schema' is required"},
        BadInput{"UnknownFormatType",
                 R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}})",
                 "response_format", "must be 'text', 'json_object' or 'json_schema', got 'yaml'"},
        BadInput{"SchemaKeywordRefused",
                 R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema",
                     "json_schema": {"name": "n", "schema": {"type": "object",
                     "properties": {"a": {"type": "number", "multipleOf": 3}}}}}})",
                 "response_format", "unsupported JSON Schema keyword 'multipleOf' at /properties/a"},
        BadInput{"SchemaNotAnObject",
                 R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema",
                     "json_schema": {"name": "n", "schema": "x"}}})",
                 "response_format", "'response_format.json_schema.schema' must be an object"},
        BadInput{"TwoConstraints",
                 R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"},
                     "guided_regex": "a+"})",
                 "guided_regex", "'response_format' and 'guided_regex' both constrain the output"},
        BadInput{"GuidedJsonNotJson", R"({"messages": [{"role": "user", "content": "x"}], "guided_json": "{oops"})",
                 "guided_json", "'guided_json' is a string but not JSON"},
        BadInput{"GuidedRegexRefused",
                 R"j({"messages": [{"role": "user", "content": "x"}], "guided_regex": "a(?=b)"})j", "guided_regex",
                 "lookaround"},
        BadInput{"GuidedChoiceEmpty", R"({"messages": [{"role": "user", "content": "x"}], "guided_choice": [""]})",
                 "guided_choice", "'guided_choice[0]' must be a non-empty string"},
        BadInput{"GuidedGrammar", R"({"messages": [{"role": "user", "content": "x"}], "guided_grammar": "root ::= x"})",
                 "guided_grammar", "'guided_grammar' is not supported"},
        BadInput{"StructuredWithIgnoreEos",
                 R"({"messages": [{"role": "user", "content": "x"}], "guided_choice": ["a"], "ignore_eos": true})",
                 "ignore_eos", "cannot be combined with structured outputs"},
        BadInput{
            "ToolsWithoutFunction",
            R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": "f"}]})",
            "tools", "'tools[0].function' must be an object"},
        BadInput{"ToolChoiceRequiredWithIgnoreEos",
                 R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function",
                     "function": {"name": "f"}}], "tool_choice": "required", "ignore_eos": true})",
                 "ignore_eos", "cannot be combined with 'tool_choice'"},
        BadInput{"MaxCompletionTokensNegative",
                 R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -1})",
                 "max_completion_tokens", "at least 1, got -1"}),
    [](const ::testing::TestParamInfo<BadInput>& info) { return std::string(info.param.name); });

TEST(OpenAiRequestTest, UnknownFieldsAndNullsAreIgnored) {
  auto request = Completion(R"({"prompt": "hi", "frobnicate": {"x": 1}, "temperature": null, "stop": null})");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->prompt_texts, std::vector<std::string>{"hi"});
  EXPECT_FLOAT_EQ(request->options.sampling.temperature, 1.0f);  // OpenAI's default
  EXPECT_TRUE(request->options.stop.empty());
  EXPECT_FALSE(request->options.max_new_tokens.has_value());
}

TEST(OpenAiRequestTest, PromptShapes) {
  auto batch = Completion(R"({"prompt": ["a", "b"]})");
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->prompt_texts.size(), 2u);
  auto ids = Completion(R"({"prompt": [1, 2, 3]})");
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->prompt_token_ids.size(), 1u);
  EXPECT_EQ(ids->prompt_token_ids[0], (std::vector<int32_t>{1, 2, 3}));
  // A long token-id prompt is one prompt, not a batch over the batch limit.
  std::string many = "{\"prompt\": [1";
  for (int i = 0; i < 2000; ++i) many += ",1";
  auto long_prompt = Completion(many + "]}");
  ASSERT_TRUE(long_prompt.ok()) << long_prompt.status();
  EXPECT_EQ(long_prompt->prompt_token_ids[0].size(), 2001u);
  std::string batch_body = "{\"prompt\": [\"a\"";
  for (int i = 0; i < 200; ++i) batch_body += ",\"a\"";
  auto too_many = Completion(batch_body + "]}");
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(std::string(too_many.status().message()), HasSubstr("at most 128 prompts, got 201"));
  auto id_batch = Completion(R"({"prompt": [[1], [2, 3]]})");
  ASSERT_TRUE(id_batch.ok());
  EXPECT_EQ(id_batch->prompt_token_ids.size(), 2u);
}

TEST(OpenAiRequestTest, SamplingAndOptionsAreCarried) {
  auto r = Completion(R"({"prompt": "x", "temperature": 0, "top_p": 0.5, "top_k": -1,
      "min_p": 0.1, "seed": 42, "presence_penalty": 1, "frequency_penalty": -1, "repetition_penalty": 1.2,
      "n": 3, "stop": "\n", "ignore_eos": true, "logprobs": 2, "stream": true,
      "stream_options": {"include_usage": true}, "user": "u1", "max_tokens": 10.0})");
  ASSERT_TRUE(r.ok()) << r.status();
  const GenerationOptions& o = r->options;
  EXPECT_EQ(o.max_new_tokens, 10);  // integer-valued numbers are integers
  EXPECT_FLOAT_EQ(o.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(o.sampling.top_p, 0.5f);
  EXPECT_EQ(o.sampling.top_k, 0);
  EXPECT_EQ(o.sampling.seed, 42u);
  EXPECT_EQ(o.n, 3);
  EXPECT_EQ(o.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(o.ignore_eos);
  EXPECT_TRUE(o.sampling.logprobs);
  EXPECT_EQ(o.sampling.top_logprobs, 2);
  EXPECT_TRUE(o.stream);
  EXPECT_TRUE(o.include_usage);
  EXPECT_EQ(o.user, "u1");
}

TEST(OpenAiRequestTest, LogitBiasIsCarriedSortedByTokenId) {
  auto r = Completion(R"({"prompt": "x", "logit_bias": {"50256": -100, "13": 100, "0": 0.5, "7": -3}})");
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<std::pair<int32_t, float>> expected = {{0, 0.5f}, {7, -3.0f}, {13, 100.0f}, {50256, -100.0f}};
  EXPECT_EQ(r->options.sampling.logit_bias, expected);
  EXPECT_EQ(r->options.sampling.Validate(), "");

  auto chat = Chat(R"({"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"42": 5}})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->options.sampling.logit_bias, (std::vector<std::pair<int32_t, float>>{{42, 5.0f}}));

  // Empty and null both mean no bias.
  for (const char* body : {R"({"prompt": "x", "logit_bias": {}})", R"({"prompt": "x", "logit_bias": null})"}) {
    auto none = Completion(body);
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_TRUE(none->options.sampling.logit_bias.empty());
  }
}

TEST(OpenAiRequestTest, EchoWithLogprobsAndPromptLogprobsAskForPromptLogprobs) {
  auto none = Completion(R"({"prompt": "x", "logprobs": 2})");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->options.sampling.prompt_logprobs, -1);
  auto echo_only = Completion(R"({"prompt": "x", "echo": true})");
  ASSERT_TRUE(echo_only.ok()) << echo_only.status();
  EXPECT_EQ(echo_only->options.sampling.prompt_logprobs, -1);
  auto echo = Completion(R"({"prompt": "x", "echo": true, "logprobs": 2})");
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_EQ(echo->options.sampling.prompt_logprobs, 2);
  EXPECT_EQ(echo->options.sampling.top_logprobs, 2);
  EXPECT_FALSE(echo->options.prompt_logprobs.has_value());  // no vLLM prompt_logprobs field in the response
  auto both = Completion(R"({"prompt": "x", "echo": true, "logprobs": 1, "prompt_logprobs": 4})");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->options.sampling.prompt_logprobs, 4);  // the engine computes the larger of the two
  EXPECT_EQ(both->options.prompt_logprobs, 4);
  auto chat = Chat(R"({"messages": [{"role": "user", "content": "hi"}], "prompt_logprobs": 0})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->options.sampling.prompt_logprobs, 0);
  EXPECT_EQ(chat->options.sampling.Validate(), "");
}

TEST(OpenAiRequestTest, LogitBiasEntriesAreCapped) {
  json body = {{"prompt", "x"}, {"logit_bias", json::object()}};
  for (int i = 0; i < kMaxLogitBiasEntries; ++i) body["logit_bias"][std::to_string(i)] = 1;
  auto at_cap = ParseCompletionRequest(body);
  ASSERT_TRUE(at_cap.ok()) << at_cap.status();
  EXPECT_EQ(at_cap->options.sampling.logit_bias.size(), static_cast<size_t>(kMaxLogitBiasEntries));
  body["logit_bias"][std::to_string(kMaxLogitBiasEntries)] = 1;
  auto over = ParseCompletionRequest(body);
  ASSERT_FALSE(over.ok());
  const ApiError error = ApiError::FromStatus(over.status());
  EXPECT_EQ(error.param, "logit_bias");
  EXPECT_THAT(error.message, HasSubstr("at most 300 entries, got 301"));
}

TEST(OpenAiRequestTest, StopStringsAreBoundedInLength) {
  const std::string at_limit(4096, 's');
  for (const json& stop : {json(at_limit), json::array({"a", at_limit})}) {
    auto ok = ParseCompletionRequest(json{{"prompt", "x"}, {"stop", stop}});
    ASSERT_TRUE(ok.ok()) << ok.status();
  }
  const std::string over(4097, 's');
  const std::pair<json, const char*> cases[] = {
      {json(over), "'stop' must be at most 4096 bytes long, got 4097"},
      {json::array({"a", over}), "'stop[1]' must be at most 4096 bytes long, got 4097"},
  };
  for (const auto& [stop, message] : cases) {
    auto refused = ParseCompletionRequest(json{{"prompt", "x"}, {"stop", stop}});
    ASSERT_FALSE(refused.ok());
    const ApiError error = ApiError::FromStatus(refused.status());
    EXPECT_EQ(error.param, "stop");
    EXPECT_EQ(error.message, message);
  }
}

TEST(OpenAiRequestTest, PriorityIsCarriedAndRangeChecked) {
  auto none = Completion(R"({"prompt": "x"})");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->options.priority, 0);
  auto r = Completion(R"({"prompt": "x", "priority": -7})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->options.priority, -7);
  auto chat = Chat(R"({"messages": [{"role": "user", "content": "hi"}], "priority": 1000000})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->options.priority, 1000000);
  for (const char* bad : {R"({"prompt": "x", "priority": 1000001})", R"({"prompt": "x", "priority": 1.5})",
                          R"({"prompt": "x", "priority": "high"})"}) {
    auto rejected = Completion(bad);
    ASSERT_FALSE(rejected.ok()) << bad;
    EXPECT_EQ(ApiError::FromStatus(rejected.status()).http_status, 400) << bad;
    EXPECT_THAT(std::string(rejected.status().message()), HasSubstr("priority")) << bad;
  }
}

TEST(OpenAiRequestTest, ChatContentPartsAreJoinedAndMaxCompletionTokensWins) {
  auto r = Chat(R"({"messages": [{"role": "system", "content": "s"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null}],
      "max_tokens": 5, "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 3,
      "response_format": {"type": "text"}, "tools": [], "tool_choice": "none"})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->messages.size(), 3u);
  EXPECT_EQ(r->messages[1].content, "a\nb");
  EXPECT_EQ(r->messages[2].content, "");
  EXPECT_EQ(r->options.max_new_tokens, 9);
  EXPECT_TRUE(r->options.sampling.logprobs);
  EXPECT_EQ(r->options.sampling.top_logprobs, 3);
}

TEST(OpenAiRequestTest, StructuredOutputFieldsBecomeTheSamplingSpec) {
  using Kind = StructuredOutputSpec::Kind;
  auto chat = Chat(R"({"messages": [{"role": "user", "content": "x"}], "stop_token_ids": [7],
      "response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": true,
      "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->options.sampling.structured.kind, Kind::kJsonSchema);
  EXPECT_EQ(chat->options.sampling.structured.schema, R"({"properties":{"a":{"type":"string"}},"type":"object"})");
  EXPECT_EQ(chat->options.sampling.structured.end_token_ids, std::vector<int32_t>{7});
  auto json_mode = Completion(R"({"prompt": "x", "response_format": {"type": "json_object"}})");
  ASSERT_TRUE(json_mode.ok()) << json_mode.status();
  EXPECT_EQ(json_mode->options.sampling.structured.kind, Kind::kJsonObject);
  auto guided_json = Completion(R"({"prompt": "x", "guided_json": "{\"type\": \"integer\"}"})");
  ASSERT_TRUE(guided_json.ok()) << guided_json.status();
  EXPECT_EQ(guided_json->options.sampling.structured.schema, R"({"type":"integer"})");
  auto regex = Completion(R"({"prompt": "x", "guided_regex": "[a-z]+", "guided_decoding_backend": "xgrammar"})");
  ASSERT_TRUE(regex.ok()) << regex.status();
  EXPECT_EQ(regex->options.sampling.structured.kind, Kind::kRegex);
  auto choice = Completion(R"({"prompt": "x", "guided_choice": ["yes", "no"]})");
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->options.sampling.structured.choices, (std::vector<std::string>{"yes", "no"}));
  auto text = Chat(R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "text"}})");
  ASSERT_TRUE(text.ok());
  EXPECT_FALSE(text->options.sampling.structured.enabled());
}

TEST(OpenAiRequestTest, DeeplyNestedJsonIsHandled) {
  const std::string deep = "{\"prompt\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto r = Completion(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ApiError::FromStatus(r.status()).http_status, 400);
}

TEST(OpenAiRequestTest, FindInvalidUtf8) {
  EXPECT_EQ(FindInvalidUtf8("plain ascii"), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8("ab\xc3"), 2u);            // truncated
  EXPECT_EQ(FindInvalidUtf8("a\xc0\xafz"), 1u);        // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("a\xed\xa0\x80z"), 1u);    // UTF-16 surrogate
  EXPECT_EQ(FindInvalidUtf8("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("x\x80"), 1u);             // stray continuation byte
}

TEST(OpenAiRequestTest, TokenizeAndDetokenize) {
  auto t = ParseTokenizeRequest(json::parse(R"({"prompt": "hi", "add_special_tokens": false})"));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->prompt, "hi");
  EXPECT_EQ(t->add_special_tokens, false);
  EXPECT_FALSE(ParseTokenizeRequest(json::parse(R"({})")).ok());
  // Messages render with the request's chat_template_kwargs, as chat completions do (vLLM too).
  auto chat = ParseTokenizeRequest(json::parse(
      R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"mode": "x", "n": 3}})"));
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->chat_template_kwargs, (std::map<std::string, std::string>{{"mode", "x"}, {"n", "3"}}));
  auto bad_kwargs = ParseTokenizeRequest(
      json::parse(R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": [1]})"));
  ASSERT_FALSE(bad_kwargs.ok());
  EXPECT_EQ(ApiError::FromStatus(bad_kwargs.status()).param, "chat_template_kwargs");
  // ... and with its tools, read as chat reads them (rendered unless tool_choice is "none").
  auto with_tools = ParseTokenizeRequest(json::parse(
      R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}]})"));
  ASSERT_TRUE(with_tools.ok()) << with_tools.status();
  EXPECT_TRUE(with_tools->tools.active());
  EXPECT_EQ(with_tools->tools.names(), std::vector<std::string>{"f"});
  auto bad_tools = ParseTokenizeRequest(
      json::parse(R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]})"));
  ASSERT_FALSE(bad_tools.ok());
  EXPECT_EQ(ApiError::FromStatus(bad_tools.status()).param, "tools");
  auto d = ParseDetokenizeRequest(json::parse(R"({"tokens": [1, 2]})"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_FALSE(d->skip_special_tokens);  // HF's decode and vLLM's /detokenize keep them
  auto skip = ParseDetokenizeRequest(json::parse(R"({"tokens": [1], "skip_special_tokens": true})"));
  ASSERT_TRUE(skip.ok());
  EXPECT_TRUE(skip->skip_special_tokens);
  auto bad_skip = ParseDetokenizeRequest(json::parse(R"({"tokens": [1], "skip_special_tokens": 1})"));
  ASSERT_FALSE(bad_skip.ok());
  EXPECT_EQ(ApiError::FromStatus(bad_skip.status()).param, "skip_special_tokens");
  auto bad = ParseDetokenizeRequest(json::parse(R"({"tokens": "1 2"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(ApiError::FromStatus(bad.status()).param, "tokens");
}

}  // namespace
}  // namespace orca::gateway
