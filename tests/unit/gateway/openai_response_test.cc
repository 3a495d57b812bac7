// Response and SSE chunk shapes, field by field, against OpenAI's.

#include "services/gateway/openai_response.h"

#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace orca::gateway {
namespace {

using nlohmann::json;

json ParseChunk(const std::string& event) {
  EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
  EXPECT_EQ(event.substr(event.size() - 2), "\n\n");
  return json::parse(event.substr(6, event.size() - 8));
}

OpenAiResponseBuilder::Options Format(OpenAiApi api, bool logprobs = false, bool include_usage = false) {
  OpenAiResponseBuilder::Options o;
  o.api = api;
  o.id = api == OpenAiApi::kChat ? "chatcmpl-1" : "cmpl-1";
  o.created = 1700000000;
  o.model = "m";
  o.num_choices = 2;
  o.logprobs = logprobs;
  o.include_usage = include_usage;
  return o;
}

GeneratedToken Token(int32_t id, float logprob, std::string text, std::vector<TokenAlternative> top = {}) {
  GeneratedToken t;
  t.id = id;
  t.logprob = logprob;
  t.text = std::move(text);
  t.top = std::move(top);
  return t;
}

TEST(OpenAiResponseTest, CompletionChunk) {
  OpenAiResponseBuilder builder(Format(OpenAiApi::kCompletions));
  ChoiceDelta delta;
  delta.index = 1;
  delta.text = "Hel";
  const json chunk = ParseChunk(builder.DeltaChunk(delta));
  EXPECT_EQ(chunk["id"], "cmpl-1");
  EXPECT_EQ(chunk["object"], "text_completion");
  EXPECT_EQ(chunk["created"], 1700000000);
  EXPECT_EQ(chunk["model"], "m");
  EXPECT_FALSE(chunk.contains("usage"));
  ASSERT_EQ(chunk["choices"].size(), 1u);
  const json& c = chunk["choices"][0];
  EXPECT_EQ(c["index"], 1);
  EXPECT_EQ(c["text"], "Hel");
  EXPECT_TRUE(c["logprobs"].is_null());
  EXPECT_TRUE(c["finish_reason"].is_null());
}

TEST(OpenAiResponseTest, ChatChunksRoleThenContentThenFinish) {
  OpenAiResponseBuilder builder(Format(OpenAiApi::kChat, false, /*include_usage=*/true));
  const json role = ParseChunk(builder.RoleChunk(0));
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(role["usage"].is_null());
  EXPECT_TRUE(role.contains("usage"));

  ChoiceDelta text;
  text.text = "Hi";
  const json content = ParseChunk(builder.DeltaChunk(text));
  EXPECT_EQ(content["choices"][0]["delta"], json({{"content", "Hi"}}));
  EXPECT_TRUE(content["choices"][0]["finish_reason"].is_null());

  ChoiceDelta last;
  last.finish_reason = FinishReason::kStop;
  last.stop_string = "\n";
  const json finish = ParseChunk(builder.DeltaChunk(last));
  EXPECT_EQ(finish["choices"][0]["delta"], json::object());
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(finish["choices"][0]["stop_reason"], "\n");

  const json usage = ParseChunk(builder.UsageChunk({5, 7}));
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"], json({{"prompt_tokens", 5}, {"completion_tokens", 7}, {"total_tokens", 12}}));
  EXPECT_STREQ(OpenAiResponseBuilder::DoneChunk(), "data: [DONE]\n\n");
}

TEST(OpenAiResponseTest, CompletionLogprobsShape) {
  OpenAiResponseBuilder builder(Format(OpenAiApi::kCompletions, /*logprobs=*/true));
  ChoiceDelta delta;
  delta.text = "ab";
  delta.tokens = {Token(97, -0.5f, "a", {{97, -0.5f, "a"}, {98, -1.5f, "b"}}),
                  Token(98, -0.25f, "b", {{99, -0.1f, "c"}})};
  const json lp = ParseChunk(builder.DeltaChunk(delta))["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"a", "b"}));
  EXPECT_EQ(lp["token_logprobs"], json({-0.5, -0.25}));
  EXPECT_EQ(lp["top_logprobs"][0], json({{"a", -0.5}, {"b", -1.5}}));
  // The sampled token is always included (up to logprobs + 1 entries).
  EXPECT_EQ(lp["top_logprobs"][1], json({{"c", -0.10000000149011612}, {"b", -0.25}}));
  EXPECT_EQ(lp["text_offset"], json({0, 1}));
  // Offsets continue across chunks of the same choice.
  ChoiceDelta next;
  next.tokens = {Token(99, -1.0f, "c")};
  EXPECT_EQ(ParseChunk(builder.DeltaChunk(next))["choices"][0]["logprobs"]["text_offset"], json({2}));
}

TEST(OpenAiResponseTest, ChatLogprobsShapeWithPartialUtf8Bytes) {
  OpenAiResponseBuilder builder(Format(OpenAiApi::kChat, /*logprobs=*/true));
  ChoiceDelta delta;
  delta.tokens = {Token(0xC3, -0.5f, "\xc3", {{0xC3, -0.5f, "\xc3"}})};
  const json lp = ParseChunk(builder.DeltaChunk(delta))["choices"][0]["logprobs"];
  ASSERT_EQ(lp["content"].size(), 1u);
  const json& entry = lp["content"][0];
  EXPECT_EQ(entry["token"], "\xef\xbf\xbd");  // U+FFFD: a partial sequence is not valid JSON text
  EXPECT_EQ(entry["bytes"], json({0xC3}));    // the exact bytes survive
  EXPECT_EQ(entry["logprob"], -0.5);
  EXPECT_EQ(entry["top_logprobs"][0]["bytes"], json({0xC3}));
}

TEST(OpenAiResponseTest, FullCompletionResponse) {
  OpenAiResponseBuilder builder(Format(OpenAiApi::kCompletions));
  std::vector<ChoiceResult> choices(2);
  choices[0].index = 0;
  choices[0].text = "one";
  choices[0].finish_reason = FinishReason::kLength;
  choices[1].index = 1;
  choices[1].text = "two";
  choices[1].finish_reason = FinishReason::kStop;
  choices[1].stop_token = 50256;
  const json body = json::parse(builder.FullResponse(choices, {3, 9}));
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["id"], "cmpl-1");
  EXPECT_EQ(body["choices"][0], json({{"index", 0},
                                      {"text", "one"},
                                      {"logprobs", nullptr},
                                      {"finish_reason", "length"},
                                      {"stop_reason", nullptr}}));
  EXPECT_EQ(body["choices"][1]["stop_reason"], 50256);
  EXPECT_EQ(body["usage"]["total_tokens"], 12);
}

TEST(OpenAiResponseTest, FullChatResponse) {
  OpenAiResponseBuilder builder(Format(OpenAiApi::kChat, /*logprobs=*/true));
  std::vector<ChoiceResult> choices(1);
  choices[0].text = "hey";
  choices[0].tokens = {Token(104, -0.1f, "h")};
  choices[0].finish_reason = FinishReason::kStop;
  const json body = json::parse(builder.FullResponse(choices, {2, 1}));
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"], json({{"role", "assistant"}, {"content", "hey"}}));
  EXPECT_EQ(body["choices"][0]["logprobs"]["content"][0]["token"], "h");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"], json({{"prompt_tokens", 2}, {"completion_tokens", 1}, {"total_tokens", 3}}));
}

// OpenAI's tool-call shapes: the message has content null (when there is none) and tool_calls; the finish
// reason is "tool_calls" when the choice stopped on its own, "length" when it was cut.
TEST(OpenAiResponseTest, ChatToolCallsShapes) {
  OpenAiResponseBuilder builder(Format(OpenAiApi::kChat));
  std::vector<ChoiceResult> choices(2);
  choices[0].tool_calls = {{0, "call_1", "add", R"({"a":1})"}, {1, "call_2", "noop", "{}"}};
  choices[0].finish_reason = FinishReason::kStop;
  choices[1].index = 1;
  choices[1].text = "Sure.";
  choices[1].tool_calls = {{0, "call_3", "add", "{}"}};
  choices[1].finish_reason = FinishReason::kLength;
  const json body = json::parse(builder.FullResponse(choices, {2, 1}));
  EXPECT_EQ(body["choices"][0]["message"], json::parse(R"({"role": "assistant", "content": null, "tool_calls": [
              {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":1}"}},
              {"id": "call_2", "type": "function", "function": {"name": "noop", "arguments": "{}"}}]})"));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(body["choices"][1]["message"]["content"], "Sure.");
  EXPECT_EQ(body["choices"][1]["finish_reason"], "length");

  ChoiceDelta delta;
  delta.index = 1;
  const json chunk = ParseChunk(builder.DeltaChunk(delta, {{0, "call_9", "add", R"({"b":2})"}}, true));
  EXPECT_EQ(chunk["choices"][0]["delta"], json::parse(R"({"tool_calls": [{"index": 0, "id": "call_9",
      "type": "function", "function": {"name": "add", "arguments": "{\"b\":2}"}}]})"));
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  delta.finish_reason = FinishReason::kStop;
  const json last = ParseChunk(builder.DeltaChunk(delta, {}, /*produced_tool_calls=*/true));
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "tool_calls");
}

GeneratedToken PromptStart(int32_t id, std::string text) {
  GeneratedToken t = Token(id, 0.0f, std::move(text));
  t.has_logprob = false;
  return t;
}

// echo with logprobs: the prompt's tokens lead the logprobs, the first with null logprob and alternatives
// (OpenAI's legacy completions shape), offsets running through prompt then output, alternatives trimmed to
// `logprobs` even when the engine computed more for prompt_logprobs.
TEST(OpenAiResponseTest, EchoLogprobsLeadWithThePrompt) {
  OpenAiResponseBuilder::Options o = Format(OpenAiApi::kCompletions, /*logprobs=*/true);
  o.echo_logprobs = true;
  o.top_logprobs = 1;
  OpenAiResponseBuilder builder(o);
  ChoiceResult c;
  c.index = 0;
  c.text = "Hi there!";
  GeneratedToken second = Token(7, -2.5f, " there", {{8, -0.5f, " you"}, {7, -2.5f, " there"}});
  second.rank = 4;
  c.prompt_logprobs = {PromptStart(5, "Hi"), second};
  c.tokens = {Token(9, -0.1f, "!", {{9, -0.1f, "!"}})};
  c.finish_reason = FinishReason::kLength;
  const json body = json::parse(builder.FullResponse({c}, {2, 1}));
  const json& lp = body["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"Hi", " there", "!"}));
  EXPECT_EQ(lp["token_logprobs"][0], nullptr);
  EXPECT_FLOAT_EQ(lp["token_logprobs"][1].get<float>(), -2.5f);
  EXPECT_FLOAT_EQ(lp["token_logprobs"][2].get<float>(), -0.1f);
  EXPECT_EQ(lp["top_logprobs"][0], nullptr);
  EXPECT_EQ(lp["top_logprobs"][1].size(), 2u) << lp;  // " you" (the one alternative asked) + the token itself
  EXPECT_TRUE(lp["top_logprobs"][1].contains(" you"));
  EXPECT_TRUE(lp["top_logprobs"][1].contains(" there"));
  EXPECT_EQ(lp["text_offset"], json({0, 2, 8}));
  EXPECT_FALSE(body["choices"][0].contains("prompt_logprobs"));
}

// vLLM's prompt_logprobs: null for the first prompt token, then {id: {logprob, rank, decoded_token}} with the
// prompt token and k alternatives; on chat and completions, and in the stream's chunks as they come.
TEST(OpenAiResponseTest, PromptLogprobsAsVllm) {
  for (OpenAiApi api : {OpenAiApi::kCompletions, OpenAiApi::kChat}) {
    OpenAiResponseBuilder::Options o = Format(api);
    o.prompt_logprobs = 1;
    OpenAiResponseBuilder builder(o);
    GeneratedToken second = Token(7, -2.5f, " there", {{8, -0.5f, " you"}, {7, -2.5f, " there"}});
    second.rank = 2;
    GeneratedToken third = Token(3, -0.2f, ".", {{3, -0.2f, "."}});
    third.rank = 1;
    ChoiceResult c;
    c.index = 0;
    c.prompt_logprobs = {PromptStart(5, "Hi"), second, third};
    c.finish_reason = FinishReason::kLength;
    const json body = json::parse(builder.FullResponse({c}, {3, 0}));
    const json& choice = body["choices"][0];
    EXPECT_TRUE(choice["logprobs"].is_null()) << "logprobs were not asked";
    const json& p = choice["prompt_logprobs"];
    ASSERT_EQ(p.size(), 3u) << p;
    EXPECT_TRUE(p[0].is_null());
    ASSERT_EQ(p[1].size(), 2u) << p[1];
    EXPECT_FLOAT_EQ(p[1]["7"]["logprob"].get<float>(), -2.5f);
    EXPECT_EQ(p[1]["7"]["rank"], 2);
    EXPECT_EQ(p[1]["7"]["decoded_token"], " there");
    EXPECT_EQ(p[1]["8"]["rank"], 1);
    EXPECT_EQ(p[1]["8"]["decoded_token"], " you");
    ASSERT_EQ(p[2].size(), 1u) << "the token is its own best alternative";
    EXPECT_EQ(p[2]["3"]["rank"], 1);

    ChoiceDelta d;
    d.index = 1;
    d.prompt_logprobs = {PromptStart(5, "Hi")};
    const json chunk = ParseChunk(builder.DeltaChunk(d));
    EXPECT_EQ(chunk["choices"][0]["prompt_logprobs"], json::array({nullptr}));
    ChoiceDelta text_only;
    text_only.index = 1;
    text_only.text = "x";
    EXPECT_FALSE(ParseChunk(builder.DeltaChunk(text_only))["choices"][0].contains("prompt_logprobs"));
  }
}

TEST(OpenAiResponseTest, ChoiceResultAccumulatesDeltas) {
  ChoiceResult result;
  ChoiceDelta a;
  a.text = "x";
  a.tokens = {Token(1, 0, "x")};
  ChoiceDelta b;
  b.text = "y";
  b.finish_reason = FinishReason::kStop;
  b.stop_string = "z";
  result.Append(a);
  result.Append(b);
  EXPECT_EQ(result.text, "xy");
  EXPECT_EQ(result.tokens.size(), 1u);
  EXPECT_EQ(result.finish_reason, FinishReason::kStop);
  EXPECT_EQ(result.stop_string, "z");
}

}  // namespace
}  // namespace orca::gateway
