// Gateway shutdown as a rolling update does it (SIGTERM, then SIGKILL after
// the grace period), in-process against a FakeScheduler: the gateway stops
// taking requests and reports not-ready at once, lets in-flight requests
// finish within the grace period, and ends what is left with a proper error
// (an SSE error event and [DONE], or a 503 body) — never a cut stream or an
// empty reply (issue 11).

#include <future>
#include <thread>

#include "tests/unit/gateway/gateway_test_util.h"

namespace orca::gateway::testing {
namespace {

std::string CompletionBody(int max_tokens, bool stream) {
  nlohmann::json body = {{"prompt", "drain"}, {"max_tokens", max_tokens}, {"ignore_eos", true}, {"stream", stream}};
  if (stream) body["stream_options"] = {{"include_usage", true}};
  return body.dump();
}

// 5 ms per token: a 200-token stream takes about a second.
GatewayFixture::Config SlowConfig() {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.scheduler.iteration_interval = absl::Milliseconds(5);
  return config;
}

// Starts a streaming completion on its own connection and waits for its first token.
struct OpenStream {
  explicit OpenStream(int port, int max_tokens) : client(port) {
    client.SendRequest("POST", "/v1/completions", CompletionBody(max_tokens, true));
    head = client.ReadUntil("\"text\"");
  }
  std::string Rest() { return head + client.ReadUntil("data: [DONE]"); }
  TestHttpClient client;
  std::string head;
};

int CompletionTokens(const std::vector<std::string>& events) {
  for (const std::string& e : events) {
    nlohmann::json j = nlohmann::json::parse(e, nullptr, false);
    if (j.is_object() && j.contains("usage") && j["usage"].is_object()) return j["usage"]["completion_tokens"];
  }
  return -1;
}

TEST(GatewayDrainTest, InFlightStreamsFinishWithinTheGracePeriodWhileNewRequestsAreRefused) {
  GatewayFixture f(SlowConfig());
  OpenStream stream(f.port(), 200);
  ASSERT_NE(stream.head.find("200 OK"), std::string::npos) << stream.head;
  TestHttpClient keep_alive = f.Client();  // a connection opened before the drain
  auto shutdown = std::async(std::launch::async, [&] { f.gateway().Shutdown(absl::Seconds(30)); });
  // Not ready at once; new generation requests get 503 + Retry-After, even on an open connection.
  HttpResult ready;
  for (int i = 0; i < 100; ++i) {
    ready = keep_alive.Request("GET", "/ready");
    if (ready.status != 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(ready.status, 503) << ready.body;
  EXPECT_EQ(ready.Json()["status"], "draining") << ready.body;
  HttpResult refused = keep_alive.Request("POST", "/v1/completions", CompletionBody(4, false));
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_FALSE(refused.Header("retry-after").empty());
  EXPECT_NE(refused.body.find("shutting down"), std::string::npos) << refused.body;
  // The stream that was running finishes with all its tokens.
  const std::string sse = stream.Rest();
  EXPECT_NE(sse.find("\"finish_reason\":\"length\""), std::string::npos) << sse.substr(sse.size() - 400);
  EXPECT_NE(sse.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(sse.find("\"error\""), std::string::npos);
  EXPECT_EQ(CompletionTokens(SseEvents(sse)), 200);
  ASSERT_EQ(shutdown.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "the drain did not end";
}

TEST(GatewayDrainTest, WhatIsLeftAtTheEndOfTheGracePeriodEndsWithAnErrorEventAndDone) {
  GatewayFixture f(SlowConfig());
  OpenStream stream(f.port(), 900);  // 4.5 s: far longer than the grace period
  TestHttpClient blocking = f.Client();
  blocking.SendRequest("POST", "/v1/completions", CompletionBody(900, false));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = std::chrono::steady_clock::now();
  f.gateway().Shutdown(absl::Milliseconds(300));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  const std::string sse = stream.Rest();
  std::vector<std::string> events = SseEvents(sse);
  ASSERT_GE(events.size(), 2u) << sse;
  EXPECT_EQ(events.back(), "[DONE]");
  nlohmann::json error = nlohmann::json::parse(events[events.size() - 2], nullptr, false);
  ASSERT_TRUE(error.contains("error")) << events[events.size() - 2];
  EXPECT_EQ(error["error"]["type"], "service_unavailable") << error.dump();
  EXPECT_NE(error["error"]["message"].get<std::string>().find("shutting down"), std::string::npos);
  HttpResult body = blocking.ReadResponse();
  EXPECT_EQ(body.status, 503) << body.body;
  EXPECT_NE(body.body.find("shutting down"), std::string::npos) << body.body;
  EXPECT_FALSE(body.Header("retry-after").empty());
  // The scheduler freed everything.
  for (int i = 0; i < 200 && f.scheduler().kv_slots_used() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(f.scheduler().kv_slots_used(), 0);
}

}  // namespace
}  // namespace orca::gateway::testing
