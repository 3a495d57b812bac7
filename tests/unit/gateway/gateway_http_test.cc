// The whole gateway in-process on 127.0.0.1:0 in front of a FakeScheduler,
// driven over raw HTTP: SSE framing, response shapes, the bad-input table
// while a stream goes on, disconnects, auth, limits and scheduler failures.

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/gateway/gateway_test_util.h"

namespace orca::gateway {
namespace {

using nlohmann::json;
using testing::GatewayFixture;
using ::testing::HasSubstr;
using testing::HttpResult;
using testing::SseData;
using ::testing::StartsWith;
using testing::TestHttpClient;

constexpr char kKey[] = "sk-test-key";

// The text the fake scheduler generates for a request it received.
std::string ExpectedText(testing::FakeScheduler& scheduler, const orca::v1::GenerateRequest& request, int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text.push_back(static_cast<char>(scheduler.TokenAt(request, i)));
  return text;
}

std::vector<json> JsonEvents(const std::string& body) {
  std::vector<json> out;
  for (const std::string& data : SseData(body)) {
    if (data != "[DONE]") out.push_back(json::parse(data));
  }
  return out;
}

TEST(GatewayHttpTest, StreamingCompletionIsSseEndingWithDone) {
  GatewayFixture f;
  TestHttpClient client = f.Client();
  HttpResult r = client.Request("POST", "/v1/completions",
                                R"({"prompt": "Hi", "max_tokens": 6, "temperature": 0, "stream": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.Header("content-type"), StartsWith("text/event-stream"));
  EXPECT_EQ(r.Header("transfer-encoding"), "chunked");
  EXPECT_EQ(r.Header("cache-control"), "no-cache");
  // Every event is "data: <json>\n\n" and the last one is [DONE].
  const std::vector<std::string> data = SseData(r.body);
  ASSERT_FALSE(data.empty());
  EXPECT_EQ(data.back(), "[DONE]");
  EXPECT_EQ(r.body.substr(r.body.size() - 14), "data: [DONE]\n\n");
  std::string text;
  std::string id;
  const std::vector<json> events = JsonEvents(r.body);
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    EXPECT_EQ(e["object"], "text_completion");
    EXPECT_THAT(e["id"].get<std::string>(), StartsWith("cmpl-"));
    if (id.empty()) id = e["id"];
    EXPECT_EQ(e["id"], id);  // one id across the stream
    EXPECT_EQ(e["model"], "byte-model");
    ASSERT_EQ(e["choices"].size(), 1u);
    text += e["choices"][0]["text"].get<std::string>();
    if (i + 1 < events.size()) {
      EXPECT_TRUE(e["choices"][0]["finish_reason"].is_null());
    }
  }
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length");
  ASSERT_EQ(f.scheduler().requests().size(), 1u);
  const auto request = f.scheduler().requests()[0];
  EXPECT_EQ(request.max_new_tokens(), 6);
  EXPECT_EQ(request.prompt_token_ids_size(), 2);
  EXPECT_EQ(text, ExpectedText(f.scheduler(), request, 6));
}

TEST(GatewayHttpTest, NonStreamingCompletionShape) {
  GatewayFixture f;
  HttpResult r = f.Client().Request("POST", "/v1/completions",
                                    R"({"model": "byte-model", "prompt": "abc", "max_tokens": 4, "temperature": 0})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Header("content-type"), "application/json");
  const json body = r.Json();
  EXPECT_THAT(body["id"].get<std::string>(), StartsWith("cmpl-"));
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_TRUE(body["created"].is_number_integer());
  EXPECT_EQ(body["model"], "byte-model");
  ASSERT_EQ(body["choices"].size(), 1u);
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["text"], ExpectedText(f.scheduler(), f.scheduler().requests()[0], 4));
  EXPECT_TRUE(choice["logprobs"].is_null());
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(body["usage"], json({{"prompt_tokens", 3}, {"completion_tokens", 4}, {"total_tokens", 7}}));
}

TEST(GatewayHttpTest, ChatStreamStartsWithRoleAndEndsWithUsageThenDone) {
  GatewayFixture f;
  HttpResult r = f.Client().Request(
      "POST", "/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": "hello"}], "max_completion_tokens": 3, "temperature": 0,
          "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<json> events = JsonEvents(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  std::string content;
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    EXPECT_FALSE(events[i]["choices"][0]["delta"].contains("role"));
    EXPECT_TRUE(events[i]["usage"].is_null());
    content += events[i]["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(events[events.size() - 2]["choices"][0]["finish_reason"], "length");
  const json& usage_chunk = events.back();
  EXPECT_EQ(usage_chunk["choices"], json::array());
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 3);
  EXPECT_EQ(SseData(r.body).back(), "[DONE]");
  // The prompt is the chatml rendering of the conversation.
  const auto request = f.scheduler().requests()[0];
  std::string prompt;
  for (int32_t id : request.prompt_token_ids()) prompt.push_back(static_cast<char>(id));
  EXPECT_EQ(prompt, "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(content, ExpectedText(f.scheduler(), request, 3));
}

TEST(GatewayHttpTest, NChoicesAndBatchedPromptsAreIndexedPromptMajor) {
  GatewayFixture f;
  HttpResult r = f.Client().Request(
      "POST", "/v1/completions", R"({"prompt": ["aa", "bbb"], "n": 2, "max_tokens": 2, "temperature": 1, "seed": 5})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = r.Json();
  ASSERT_EQ(body["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(body["choices"][i]["index"], i);
  EXPECT_EQ(body["usage"]["prompt_tokens"], 5);  // each prompt once
  EXPECT_EQ(body["usage"]["completion_tokens"], 8);
  std::map<std::string, std::set<uint64_t>> seeds_by_prompt;
  for (const auto& request : f.scheduler().requests()) {
    seeds_by_prompt[std::to_string(request.prompt_token_ids_size())].insert(request.sampling().seed());
  }
  EXPECT_EQ(seeds_by_prompt["2"], (std::set<uint64_t>{5, 6}));
  EXPECT_EQ(seeds_by_prompt["3"], (std::set<uint64_t>{5, 6}));
}

TEST(GatewayHttpTest, AbsentMaxTokensMeansTheRestOfTheContext) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.max_model_len = 40;
  GatewayFixture f(config);
  HttpResult r = f.Client().Request("POST", "/v1/completions", R"({"prompt": "0123456789"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(f.scheduler().requests()[0].max_new_tokens(), 30);
}

TEST(GatewayHttpTest, LogprobsAndEchoShapes) {
  GatewayFixture f;
  HttpResult r = f.Client().Request("POST", "/v1/completions",
                                    R"({"prompt": "x", "max_tokens": 3, "temperature": 0, "logprobs": 2})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json lp = r.Json()["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 3u);
  ASSERT_EQ(lp["token_logprobs"].size(), 3u);
  ASSERT_EQ(lp["top_logprobs"].size(), 3u);
  EXPECT_EQ(lp["text_offset"], json({0, 1, 2}));
  for (const json& top : lp["top_logprobs"]) EXPECT_GE(top.size(), 1u);

  HttpResult echo = f.Client().Request("POST", "/v1/completions",
                                       R"({"prompt": "ECHO:", "max_tokens": 2, "temperature": 0, "echo": true})");
  ASSERT_EQ(echo.status, 200);
  EXPECT_THAT(echo.Json()["choices"][0]["text"].get<std::string>(), StartsWith("ECHO:"));

  HttpResult chat = f.Client().Request(
      "POST", "/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": "q"}], "max_tokens": 2, "logprobs": true, "top_logprobs": 3})");
  ASSERT_EQ(chat.status, 200) << chat.body;
  const json content = chat.Json()["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_TRUE(content[0]["token"].is_string());
  EXPECT_TRUE(content[0]["logprob"].is_number());
  EXPECT_TRUE(content[0]["bytes"].is_array());
  EXPECT_EQ(content[0]["top_logprobs"].size(), 3u);
}

// Tool calls through the whole gateway: the tools reach the template, the scripted output is parsed into
// content and a call (non-streaming and streamed, n = 2), and "required" sends the tool-call constraint.
TEST(GatewayHttpTest, ToolCallsAreParsedOutOfTheOutput) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  const std::string script = "Hi! <tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>";
  config.scheduler.script = testing::Bytes(script);
  config.scheduler.eos_after = static_cast<int32_t>(script.size()) + 1;
  GatewayFixture f(config);
  const std::string tools =
      R"("tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object",
          "properties": {"a": {"type": "integer"}}}}}])";
  HttpResult r =
      f.Client().Request("POST", "/v1/chat/completions",
                         R"({"messages": [{"role": "user", "content": "add"}], "max_tokens": 200, )" + tools + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = r.Json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Hi! ");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"], json({{"name", "add"}, {"arguments", R"({"a":1})"}}));
  std::string prompt;
  const auto first_request = f.scheduler().requests()[0];
  for (int32_t id : first_request.prompt_token_ids()) prompt.push_back(static_cast<char>(id));
  EXPECT_NE(prompt.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"add\""), std::string::npos)
      << prompt;
  EXPECT_FALSE(f.scheduler().requests()[0].sampling().has_structured());  // "auto" does not constrain

  HttpResult stream = f.Client().Request(
      "POST", "/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": "add"}], "max_tokens": 200, "n": 2, "stream": true,
          "tool_choice": "required", )" +
          tools + "}");
  ASSERT_EQ(stream.status, 200) << stream.body;
  std::string content[2];
  json calls[2] = {json::array(), json::array()};
  std::string finish[2];
  for (const json& event : JsonEvents(stream.body)) {
    for (const json& c : event["choices"]) {
      const int i = c["index"];
      content[i] += c["delta"].value("content", "");
      for (const json& call : c["delta"].value("tool_calls", json::array())) calls[i].push_back(call);
      if (!c["finish_reason"].is_null()) finish[i] = c["finish_reason"];
    }
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(content[i], "Hi! ");
    EXPECT_EQ(finish[i], "tool_calls");
    ASSERT_EQ(calls[i].size(), 1u);
    EXPECT_EQ(calls[i][0]["index"], 0);
    EXPECT_EQ(calls[i][0]["type"], "function");
    EXPECT_EQ(calls[i][0]["function"]["arguments"], R"({"a":1})");
    EXPECT_EQ(calls[i][0]["id"].get<std::string>().substr(0, 5), "call_");
  }
  EXPECT_NE(calls[0][0]["id"], calls[1][0]["id"]);
  const auto last_request = f.scheduler().requests().back();  // a copy: requests() returns by value
  const auto& sampling = last_request.sampling();
  ASSERT_TRUE(sampling.has_structured());
  EXPECT_EQ(sampling.structured().kind(), orca::v1::StructuredOutput::KIND_TOOL_CALLS);
  EXPECT_EQ(sampling.structured().calls_begin(), "<tool_call>\n");
}

TEST(GatewayHttpTest, StopStringsEndTheChoice) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.scheduler.script = testing::Bytes("The answer is 42.\nNext line");
  GatewayFixture f(config);
  HttpResult r = f.Client().Request("POST", "/v1/completions", R"({"prompt": "q", "max_tokens": 30, "stop": ["\n"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["text"], "The answer is 42.");
  EXPECT_EQ(r.Json()["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r.Json()["choices"][0]["stop_reason"], "\n");
}

struct BadRequestCase {
  std::string name;
  std::string path;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  int status;
  std::string message;
};

TEST(GatewayHttpTest, BadInputTableWhileAConcurrentStreamGoesOnUnharmed) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.gateway.api_keys = {kKey};
  config.gateway.max_body_bytes = 64 << 10;
  config.scheduler.iteration_interval = absl::Milliseconds(2);
  GatewayFixture f(config);
  const std::pair<std::string, std::string> auth = {"Authorization", std::string("Bearer ") + kKey};

  // A stream that runs through the whole table.
  TestHttpClient streamer = f.Client();
  streamer.SendRequest("POST", "/v1/completions",
                       R"({"prompt": "long", "max_tokens": 400, "temperature": 0, "stream": true})", {auth});
  ASSERT_THAT(streamer.ReadUntil("data: "), HasSubstr("200 OK"));

  const std::string big_prompt(2000, 'x');
  const std::vector<BadRequestCase> cases = {
      {"malformed json", "/v1/completions", R"({"prompt": "x",)", {auth}, 400, "Invalid JSON body: parse error"},
      {"wrong type",
       "/v1/completions",
       R"({"prompt": "x", "max_tokens": "ten"})",
       {auth},
       400,
       "'max_tokens' must be an integer"},
      {"temperature type",
       "/v1/chat/completions",
       R"({"messages": [{"role":"user","content":"x"}], "temperature": "hot"})",
       {auth},
       400,
       "'temperature' must be a number"},
      {"negative max_tokens",
       "/v1/completions",
       R"({"prompt": "x", "max_tokens": -1})",
       {auth},
       400,
       "'max_tokens' must be at least 1, got -1"},
      {"huge max_tokens",
       "/v1/completions",
       R"({"prompt": "abc", "max_tokens": 100000})",
       {auth},
       400,
       "maximum context length is 1024 tokens. However, you requested 100003 tokens (3 in the prompt, 100000 in the "
       "completion)"},
      {"prompt over the context",
       "/v1/completions",
       R"({"prompt": ")" + big_prompt + R"("})",
       {auth},
       400,
       "maximum context length is 1024 tokens. However, your request has 2000 input tokens"},
      {"empty messages",
       "/v1/chat/completions",
       R"({"messages": []})",
       {auth},
       400,
       "'messages' must contain at least one message"},
      {"unknown chat role",  // as OpenAI answers it (issue 11)
       "/v1/chat/completions",
       R"({"messages": [{"role":"user","content":"x"}, {"role":"wizard","content":"y"}]})",
       {auth},
       400,
       "'messages[1].role' is 'wizard'; supported roles are 'system', 'developer', 'user', 'assistant', 'tool' "
       "and 'function'"},
      {"logit_bias id out of vocab",
       "/v1/completions",
       R"({"prompt": "x", "logit_bias": {"65": 1, "300": -100}})",
       {auth},
       400,
       "'logit_bias' key '300' is not a token id of this model: the vocabulary is [0, 257)"},
      {"logit_bias value out of range",
       "/v1/chat/completions",
       R"({"messages": [{"role":"user","content":"x"}], "logit_bias": {"65": 101}})",
       {auth},
       400,
       "'logit_bias[\"65\"]' must be in [-100, 100], got 101"},
      {"invalid utf-8", "/v1/completions", "{\"prompt\": \"a\xc3(\"}", {auth}, 400, "not valid UTF-8"},
      {"n zero", "/v1/completions", R"({"prompt": "x", "n": 0})", {auth}, 400, "'n' must be at least 1"},
      {"stop number", "/v1/completions", R"({"prompt": "x", "stop": 5})", {auth}, 400, "'stop' must be a string"},
      {"token id out of vocab",
       "/v1/completions",
       R"({"prompt": [1, 300]})",
       {auth},
       400,
       "Token id 300 at 'prompt[1]' is outside the vocabulary [0, 257)"},
      {"oversized body",
       "/v1/completions",
       R"({"prompt": ")" + std::string(70000, 'y') + R"("})",
       {auth},
       413,
       "exceeds the limit of 65536 bytes"},
      {"wrong api key",
       "/v1/completions",
       R"({"prompt": "x"})",
       {{"Authorization", "Bearer nope"}},
       401,
       "Incorrect API key"},
      {"missing api key", "/v1/completions", R"({"prompt": "x"})", {}, 401, "Missing API key"},
      {"unknown model",
       "/v1/completions",
       R"({"model": "gpt-9", "prompt": "x"})",
       {auth},
       404,
       "The model `gpt-9` does not exist."},
      {"unknown route", "/v2/whatever", "{}", {auth}, 404, "Not found: /v2/whatever"},
  };
  for (const BadRequestCase& c : cases) {
    HttpResult r = f.Client().Request("POST", c.path, c.body, c.headers);
    EXPECT_EQ(r.status, c.status) << c.name << ": " << r.body;
    const json body = r.Json();
    ASSERT_TRUE(body.is_object()) << c.name << ": " << r.body;
    EXPECT_THAT(body["error"]["message"].get<std::string>(), HasSubstr(c.message)) << c.name;
    EXPECT_TRUE(body["error"]["type"].is_string()) << c.name;
  }
  // The stream kept going and ends normally with every token.
  const std::string rest = streamer.ReadUntil("data: [DONE]\n\n");
  EXPECT_THAT(rest, HasSubstr("\"finish_reason\":\"length\""));
  EXPECT_THAT(rest, ::testing::Not(HasSubstr("\"error\"")));
  EXPECT_EQ(f.scheduler().num_cancelled(), 0);
}

TEST(GatewayHttpTest, ClientDisconnectMidStreamCancelsAtTheScheduler) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.scheduler.iteration_interval = absl::Milliseconds(5);
  GatewayFixture f(config);
  {
    TestHttpClient client = f.Client();
    client.SendRequest("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 900, "stream": true})");
    ASSERT_THAT(client.ReadUntil("data: "), HasSubstr("200 OK"));
    EXPECT_EQ(f.scheduler().num_running(), 1);
    EXPECT_GT(f.scheduler().kv_slots_used(), 0);
    client.Close();
  }
  EXPECT_TRUE(f.scheduler().WaitFor([&] { return f.scheduler().num_cancelled() == 1; }, absl::Seconds(10)));
  EXPECT_TRUE(f.scheduler().WaitFor([&] { return f.scheduler().kv_slots_used() == 0; }, absl::Seconds(10)));
  EXPECT_TRUE(f.scheduler().WaitFor([&] { return f.gateway().num_active_requests() == 0; }, absl::Seconds(10)));
}

TEST(GatewayHttpTest, ClientDisconnectWhileWaitingForANonStreamingAnswerCancels) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.scheduler.iteration_interval = absl::Milliseconds(5);
  GatewayFixture f(config);
  {
    TestHttpClient client = f.Client();
    client.SendRequest("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 900})");
    ASSERT_TRUE(f.scheduler().WaitFor([&] { return f.scheduler().num_running() == 1; }, absl::Seconds(10)));
    client.Close();
  }
  EXPECT_TRUE(f.scheduler().WaitFor([&] { return f.scheduler().num_cancelled() == 1; }, absl::Seconds(10)));
  EXPECT_TRUE(f.scheduler().WaitFor([&] { return f.scheduler().kv_slots_used() == 0; }, absl::Seconds(10)));
}

TEST(GatewayHttpTest, ReadyReportsTheGatewaysResidentMemory) {
  GatewayFixture f;
  HttpResult ready = f.Client().Request("GET", "/ready");
  ASSERT_EQ(ready.status, 200);
  const auto memory = ready.Json()["memory"];
  const int64_t rss = memory.value("rss_bytes", int64_t{0});
  EXPECT_GT(rss, 1 << 20);
  EXPECT_GE(memory.value("peak_rss_bytes", int64_t{0}), rss);
  EXPECT_GT(memory.value("rss_anon_bytes", int64_t{0}), 0);
  EXPECT_GE(memory.value("threads", 0), 2);
}

TEST(GatewayHttpTest, OperationalEndpointsStayOpenWithAuth) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.gateway.api_keys = {kKey};
  GatewayFixture f(config);
  EXPECT_EQ(f.Client().Request("GET", "/health").status, 200);
  EXPECT_EQ(f.Client().Request("GET", "/ready").status, 200);
  EXPECT_EQ(f.Client().Request("GET", "/metrics").status, 200);
  HttpResult no_key = f.Client().Request("GET", "/v1/models");
  EXPECT_EQ(no_key.status, 401);
  EXPECT_EQ(no_key.Json()["error"]["type"], "authentication_error");
  EXPECT_EQ(no_key.Json()["error"]["code"], "invalid_api_key");
  HttpResult models = f.Client().Request("GET", "/v1/models", "", {{"Authorization", std::string("Bearer ") + kKey}});
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.Json()["object"], "list");
  EXPECT_EQ(models.Json()["data"][0]["id"], "byte-model");
  EXPECT_EQ(models.Json()["data"][0]["object"], "model");
  EXPECT_EQ(models.Json()["data"][0]["max_model_len"], 1024);
}

TEST(GatewayHttpTest, ChunkedBodyOverTheLimitIs413) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.gateway.max_body_bytes = 1024;
  GatewayFixture f(config);
  TestHttpClient client = f.Client();
  std::string request = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) request += "200\r\n" + std::string(512, 'a') + "\r\n";
  request += "0\r\n\r\n";
  client.SendRaw(request);
  HttpResult r = client.ReadResponse();
  EXPECT_EQ(r.status, 413);
  EXPECT_THAT(r.body, HasSubstr("exceeds the limit of 1024 bytes"));
}

TEST(GatewayHttpTest, NoReadySchedulerIs503WithRetryAfter) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.scheduler.ready = false;
  config.wait_ready = false;
  GatewayFixture f(config);
  HttpResult r = f.Client().Request("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 2})");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.Header("retry-after"), "1");
  EXPECT_THAT(r.Json()["error"]["message"].get<std::string>(), HasSubstr("No scheduler is ready"));
  HttpResult ready = f.Client().Request("GET", "/ready");
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(ready.Json()["status"], "not_ready");
  EXPECT_EQ(f.Client().Request("GET", "/health").status, 200);
}

TEST(GatewayHttpTest, SchedulerResourceExhaustedIs429WithRetryAfterAndReason) {
  GatewayFixture f;
  f.scheduler().FailNextGenerate(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full: 1024 requests waiting");
  HttpResult r = f.Client().Request("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 2, "stream": true})");
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.Header("retry-after"), "1");
  EXPECT_EQ(r.Json()["error"]["type"], "rate_limit_exceeded");
  EXPECT_THAT(r.Json()["error"]["message"].get<std::string>(), HasSubstr("queue full"));
}

TEST(GatewayHttpTest, OverMaxConcurrentRequestsIs503) {
  GatewayFixture f(testing::OneRequestAtATimeConfig());
  TestHttpClient first = f.Client();
  ASSERT_THAT(testing::StartLongStream(first), HasSubstr("200 OK"));
  HttpResult second = f.Client().Request("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 2})");
  EXPECT_EQ(second.status, 503);
  EXPECT_EQ(second.Header("retry-after"), "1");
  EXPECT_THAT(second.Json()["error"]["message"].get<std::string>(), HasSubstr("at capacity (1 concurrent"));
  first.Close();
  // The slot frees once the first request is cancelled.
  EXPECT_TRUE(f.scheduler().WaitFor([&] { return f.gateway().num_active_requests() == 0; }, absl::Seconds(10)));
  EXPECT_EQ(f.Client().Request("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 2})").status, 200);
}

TEST(GatewayHttpTest, EngineFailureAfterTheStreamStartedIsAnSseErrorThenDone) {
  GatewayFixture f;
  f.scheduler().FailNextGenerate(grpc::StatusCode::INTERNAL, "pipeline stage 2 failed", /*after_tokens=*/3);
  HttpResult r = f.Client().Request("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 20, "stream": true})");
  ASSERT_EQ(r.status, 200);
  const std::vector<std::string> data = SseData(r.body);
  ASSERT_GE(data.size(), 2u);
  EXPECT_EQ(data.back(), "[DONE]");
  const json error = json::parse(data[data.size() - 2]);
  EXPECT_EQ(error["error"]["type"], "internal_error");
  EXPECT_THAT(error["error"]["message"].get<std::string>(), HasSubstr("pipeline stage 2 failed"));
}

// Issue 11: a pipeline failure mid-stream is one a retry may well get past:
// typed service_unavailable (503 before the stream starts), not internal_error.
TEST(GatewayHttpTest, PipelineFailureMidStreamIsServiceUnavailable) {
  GatewayFixture f;
  f.scheduler().FailNextGenerate(grpc::StatusCode::UNAVAILABLE, "engine pipeline failed: stage 1 sent no heartbeat",
                                 /*after_tokens=*/3);
  HttpResult r = f.Client().Request("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 20, "stream": true})");
  ASSERT_EQ(r.status, 200);
  const std::vector<std::string> data = SseData(r.body);
  ASSERT_GE(data.size(), 2u);
  EXPECT_EQ(data.back(), "[DONE]");
  const json error = json::parse(data[data.size() - 2]);
  EXPECT_EQ(error["error"]["type"], "service_unavailable") << error.dump();
  EXPECT_THAT(error["error"]["message"].get<std::string>(), HasSubstr("stage 1 sent no heartbeat"));
  // Not streaming: a 503 with Retry-After.
  f.scheduler().FailNextGenerate(grpc::StatusCode::UNAVAILABLE, "engine pipeline failed", /*after_tokens=*/3);
  HttpResult body = f.Client().Request("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 20})");
  EXPECT_EQ(body.status, 503) << body.body;
  EXPECT_FALSE(body.Header("retry-after").empty());
}

// Issue 11: the gateway presents --scheduler-api-key to the schedulers.
TEST(GatewayHttpTest, TheSchedulerKeyTravelsWithEveryCall) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.gateway.scheduler_api_key = "internal-secret";
  GatewayFixture f(config);
  HttpResult r = f.Client().Request("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 2})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(f.scheduler().last_authorization(), "Bearer internal-secret");
}

TEST(GatewayHttpTest, TokenizeAndDetokenize) {
  GatewayFixture f;
  HttpResult t = f.Client().Request("POST", "/tokenize", R"({"prompt": "hé", "return_token_strs": true})");
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(t.Json()["tokens"], json({'h', 0xC3, 0xA9}));
  EXPECT_EQ(t.Json()["count"], 3);
  EXPECT_EQ(t.Json()["max_model_len"], 1024);
  EXPECT_EQ(t.Json()["token_strs"].size(), 3u);
  HttpResult d = f.Client().Request("POST", "/detokenize", R"({"tokens": [104, 195, 169]})");
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(d.Json()["prompt"], "hé");
  HttpResult bad = f.Client().Request("POST", "/detokenize", R"({"tokens": [999]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.Json()["error"]["param"], "tokens");
  HttpResult chat = f.Client().Request("POST", "/tokenize", R"({"messages": [{"role": "user", "content": "a"}]})");
  ASSERT_EQ(chat.status, 200);
  EXPECT_GT(chat.Json()["count"].get<int>(), 1);
}

// A model that ships no chat template does not chat on a guessed one (vLLM's behaviour): chat and /tokenize
// with messages get a 400 that names --chat-template, completions still work, and the flag fixes it.
TEST(GatewayHttpTest, ChatWithoutAChatTemplateIsA400NamingTheFlag) {
  const std::string dir = ::testing::TempDir() + "/no-template-model";
  ASSERT_TRUE(testing::WriteByteLevelModel(dir, 1024).ok());
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.load_model.emplace();
  config.load_model->model_path = dir;
  config.load_model->served_model_name = "byte-model";
  {
    GatewayFixture f(config);
    for (const char* path : {"/v1/chat/completions", "/tokenize"}) {
      SCOPED_TRACE(path);
      HttpResult chat = f.Client().Request("POST", path, R"({"messages": [{"role": "user", "content": "hi"}]})");
      EXPECT_EQ(chat.status, 400) << chat.body;
      EXPECT_EQ(chat.Json()["error"]["type"], "invalid_request_error");
      EXPECT_EQ(chat.Json()["error"]["param"], "messages");
      EXPECT_THAT(chat.Json()["error"]["message"].get<std::string>(),
                  ::testing::AllOf(HasSubstr("no chat template"), HasSubstr("--chat-template")));
    }
    EXPECT_TRUE(f.scheduler().requests().empty());
    HttpResult completion = f.Client().Request("POST", "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})");
    EXPECT_EQ(completion.status, 200) << completion.body;
  }
  config.load_model->chat_template = "chatml";
  GatewayFixture with_flag(config);
  HttpResult chat =
      with_flag.Client().Request("POST", "/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_EQ(chat.status, 200) << chat.body;
}

// /detokenize keeps special tokens, as HF's decode and vLLM's /detokenize do, so that text and ids
// round-trip through /tokenize; `skip_special_tokens: true` drops them.
TEST(GatewayHttpTest, DetokenizeKeepsSpecialTokensUnlessAskedToSkipThem) {
  GatewayFixture f;
  const std::string text = "h<|endoftext|>i";
  HttpResult t = f.Client().Request("POST", "/tokenize", json{{"prompt", text}}.dump());
  ASSERT_EQ(t.status, 200) << t.body;
  const json ids = t.Json()["tokens"];
  ASSERT_EQ(ids, json({'h', testing::kByteLevelEosId, 'i'}));
  HttpResult kept = f.Client().Request("POST", "/detokenize", json{{"tokens", ids}}.dump());
  ASSERT_EQ(kept.status, 200) << kept.body;
  EXPECT_EQ(kept.Json()["prompt"], text);
  HttpResult explicit_keep =
      f.Client().Request("POST", "/detokenize", json{{"tokens", ids}, {"skip_special_tokens", false}}.dump());
  EXPECT_EQ(explicit_keep.Json()["prompt"], text);
  HttpResult skipped =
      f.Client().Request("POST", "/detokenize", json{{"tokens", ids}, {"skip_special_tokens", true}}.dump());
  ASSERT_EQ(skipped.status, 200) << skipped.body;
  EXPECT_EQ(skipped.Json()["prompt"], "hi");
  HttpResult bad = f.Client().Request("POST", "/detokenize", json{{"tokens", ids}, {"skip_special_tokens", "no"}}.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.Json()["error"]["param"], "skip_special_tokens");
}

// OpenAI's `developer` role is its newer name for `system`: it renders as a system turn. Tool and function turns
// reach the template (chatml renders any role); unknown roles are refused by name (the bad-input table).
TEST(GatewayHttpTest, DeveloperRoleRendersAsSystem) {
  GatewayFixture f;
  auto tokens = [&](const std::string& role) {
    HttpResult r = f.Client().Request(
        "POST", "/tokenize",
        R"({"messages": [{"role": ")" + role + R"(", "content": "be brief"}, {"role": "user", "content": "hi"}]})");
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json()["tokens"];
  };
  EXPECT_EQ(tokens("developer"), tokens("system"));
  EXPECT_NE(tokens("developer"), tokens("user"));
  // A tool message answers a call: OpenAI requires its tool_call_id.
  for (const char* role : {"tool", "function"}) {
    HttpResult r = f.Client().Request("POST", "/v1/chat/completions",
                                      std::string(R"({"messages": [{"role": "user", "content": "x"}, {"role": ")") +
                                          role + R"(", "content": "42", "tool_call_id": "call_1"}], "max_tokens": 2})");
    EXPECT_EQ(r.status, 200) << role << ": " << r.body;
  }
}

// logit_bias reaches the scheduler on the wire, sorted by id; prompt_logprobs too.
TEST(GatewayHttpTest, LogitBiasAndPromptLogprobsAreForwarded) {
  GatewayFixture f;
  HttpResult r = f.Client().Request(
      "POST", "/v1/completions",
      R"({"prompt": "x", "max_tokens": 2, "logit_bias": {"65": 100, "10": -100}, "prompt_logprobs": 2})");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<orca::v1::GenerateRequest> requests = f.scheduler().requests();
  ASSERT_FALSE(requests.empty());
  const orca::v1::SamplingParams& sent = requests.back().sampling();
  ASSERT_EQ(sent.logit_bias_size(), 2);
  EXPECT_FLOAT_EQ(sent.logit_bias().at(65), 100.0f);
  EXPECT_FLOAT_EQ(sent.logit_bias().at(10), -100.0f);
  EXPECT_EQ(sent.prompt_logprobs(), 2);
}

// vLLM's return_token_ids: each choice carries the ids it generated (in a stream, the ones new in each chunk,
// none lost to held-back text), so a chat client can send the model's reply back token for token. Absent unless
// asked for.
TEST(GatewayHttpTest, ReturnTokenIdsCarriesTheGeneratedIds) {
  GatewayFixture f;
  // The ids are the generated tokens: they detokenize to the choice's text.
  auto detokenized = [&](const json& ids) {
    HttpResult d = f.Client().Request("POST", "/detokenize", json{{"tokens", ids}}.dump());
    EXPECT_EQ(d.status, 200) << d.body;
    return d.Json()["prompt"].get<std::string>();
  };
  HttpResult plain = f.Client().Request("POST", "/v1/completions", R"({"prompt": [5, 6, 7], "max_tokens": 4})");
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_FALSE(plain.Json()["choices"][0].contains("token_ids"));

  HttpResult r =
      f.Client().Request("POST", "/v1/completions",
                         R"({"prompt": [5, 6, 7], "max_tokens": 4, "ignore_eos": true, "return_token_ids": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = r.Json();
  const json& ids = body["choices"][0]["token_ids"];
  ASSERT_TRUE(ids.is_array()) << body;
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);
  EXPECT_EQ(detokenized(ids), body["choices"][0]["text"].get<std::string>());

  // Streamed: every chunk carries the ids new in it, each id once, none lost to held-back text.
  HttpResult s = f.Client().Request(
      "POST", "/v1/completions",
      R"({"prompt": [5, 6, 7], "max_tokens": 6, "ignore_eos": true, "return_token_ids": true, "stream": true})");
  ASSERT_EQ(s.status, 200) << s.body;
  json streamed = json::array();
  std::string text;
  for (const json& e : JsonEvents(s.body)) {
    if (e["choices"].empty()) continue;
    const json& c = e["choices"][0];
    ASSERT_TRUE(c.contains("token_ids")) << e;
    text += c["text"].get<std::string>();
    for (const json& id : c["token_ids"]) streamed.push_back(id);
  }
  EXPECT_EQ(streamed.size(), 6u) << streamed;
  EXPECT_EQ(detokenized(streamed), text);

  HttpResult chat = f.Client().Request(
      "POST", "/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "ignore_eos": true, "return_token_ids": true})");
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.Json()["choices"][0]["token_ids"].size(), 3u);
  HttpResult bad =
      f.Client().Request("POST", "/v1/completions", R"({"prompt": [5], "max_tokens": 1, "return_token_ids": 1})");
  EXPECT_EQ(bad.status, 400) << bad.body;
}

// echo + logprobs: the text starts with the prompt and the logprobs with its tokens (the first null), offsets
// running through prompt and output; streamed, the same arrays split over chunks.
TEST(GatewayHttpTest, EchoWithLogprobsLeadsWithThePromptTokens) {
  GatewayFixture f;
  HttpResult r =
      f.Client().Request("POST", "/v1/completions",
                         R"({"prompt": "Hi!", "max_tokens": 2, "temperature": 0, "echo": true, "logprobs": 1})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = r.Json();
  const json& choice = body["choices"][0];
  EXPECT_THAT(choice["text"].get<std::string>(), StartsWith("Hi!"));
  const json& lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 5u) << lp;
  EXPECT_EQ(lp["tokens"][0], "H");
  EXPECT_EQ(lp["tokens"][1], "i");
  EXPECT_EQ(lp["tokens"][2], "!");
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_FLOAT_EQ(lp["token_logprobs"][1].get<float>(), -0.5f);
  EXPECT_FLOAT_EQ(lp["token_logprobs"][2].get<float>(), -1.0f);
  EXPECT_EQ(lp["top_logprobs"][1].size(), 2u) << "one alternative + the token itself";
  EXPECT_EQ(lp["text_offset"], json({0, 1, 2, 3, 4}));
  EXPECT_FALSE(choice.contains("prompt_logprobs"));

  HttpResult s = f.Client().Request(
      "POST", "/v1/completions",
      R"({"prompt": "Hi!", "max_tokens": 2, "temperature": 0, "echo": true, "logprobs": 1, "stream": true})");
  ASSERT_EQ(s.status, 200) << s.body;
  json tokens = json::array(), logprobs = json::array();
  std::string text;
  for (const json& e : JsonEvents(s.body)) {
    const json& c = e["choices"][0];
    text += c["text"].get<std::string>();
    if (c["logprobs"].is_null()) continue;
    for (const auto& t : c["logprobs"]["tokens"]) tokens.push_back(t);
    for (const auto& t : c["logprobs"]["token_logprobs"]) logprobs.push_back(t);
  }
  EXPECT_EQ(text, choice["text"].get<std::string>());
  EXPECT_EQ(tokens, lp["tokens"]);
  EXPECT_EQ(logprobs, lp["token_logprobs"]);
}

// vLLM's prompt_logprobs on chat (n = 2: each choice carries them).
TEST(GatewayHttpTest, PromptLogprobsOnChatChoices) {
  GatewayFixture f;
  HttpResult r = f.Client().Request(
      "POST", "/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": "ab"}], "max_tokens": 2, "n": 2, "prompt_logprobs": 1})");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<orca::v1::GenerateRequest> requests = f.scheduler().requests();
  ASSERT_FALSE(requests.empty());
  const int prompt_len = requests.back().prompt_token_ids_size();
  const json body = r.Json();
  ASSERT_EQ(body["choices"].size(), 2u);
  for (const json& choice : body["choices"]) {
    const json& p = choice["prompt_logprobs"];
    ASSERT_EQ(p.size(), static_cast<size_t>(prompt_len)) << p;
    EXPECT_TRUE(p[0].is_null());
    const std::string id = std::to_string(requests.back().prompt_token_ids(1));
    EXPECT_FLOAT_EQ(p[1][id]["logprob"].get<float>(), -0.5f);
    EXPECT_EQ(p[1][id]["rank"], 2);
    EXPECT_EQ(p[1].size(), 2u) << "the token and one alternative";
    EXPECT_TRUE(choice["logprobs"].is_null());
  }
}

TEST(GatewayHttpTest, KeepAliveAndPipelinedRequestsOnOneConnection) {
  GatewayFixture f;
  TestHttpClient client = f.Client();
  const std::string body = R"({"prompt": "x", "max_tokens": 2})";
  std::string two;
  for (int i = 0; i < 2; ++i) {
    two += "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }
  client.SendRaw(two);
  EXPECT_EQ(client.ReadResponse().status, 200);
  EXPECT_EQ(client.ReadResponse().status, 200);
  EXPECT_EQ(client.Request("GET", "/health").status, 200);
}

TEST(GatewayHttpTest, ExpectContinueAndMethodChecks) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.gateway.max_body_bytes = 100;
  GatewayFixture f(config);
  TestHttpClient client = f.Client();
  // Too large by Content-Length: 413 without reading the body.
  client.SendRaw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5000\r\n\r\n");
  HttpResult r = client.ReadResponse();
  EXPECT_EQ(r.status, 413);
  EXPECT_THAT(r.body, HasSubstr("5000 bytes exceeds the limit of 100 bytes"));
  HttpResult get = f.Client().Request("GET", "/v1/completions");
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.Header("allow"), "POST");
}

TEST(GatewayHttpTest, MetricsCountRequestsByRouteAndStatus) {
  GatewayFixture f;
  EXPECT_EQ(f.Client().Request("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 1})").status, 200);
  EXPECT_EQ(f.Client().Request("POST", "/v1/completions", R"({"prompt": 1})").status, 400);
  EXPECT_EQ(f.Client().Request("GET", "/nope").status, 404);
  HttpResult m = f.Client().Request("GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_THAT(m.Header("content-type"), StartsWith("text/plain; version=0.0.4"));
  EXPECT_THAT(
      m.body,
      HasSubstr(
          R"(orca:http_requests_total{model_name="byte-model",route="/v1/completions",method="POST",status="200"} 1)"));
  EXPECT_THAT(m.body, HasSubstr(R"(route="/v1/completions",method="POST",status="400"} 1)"));
  EXPECT_THAT(m.body, HasSubstr(R"(route="other",method="GET",status="404"} 1)"));
  EXPECT_THAT(m.body, HasSubstr("orca:http_request_duration_seconds_bucket"));
}

}  // namespace
}  // namespace orca::gateway
