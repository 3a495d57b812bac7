// Issue 45: when the engine fails under a request (its scheduler is killed and
// the connection resets, or it shuts down), the client gets a clean error — a
// 503 with a JSON body and Retry-After, or on a stream an SSE error event and
// [DONE] — saying the engine is unavailable; never the transport's text
// ("recvmsg:Connection reset by peer"), which only the gateway's log shows.
//
// The scheduler is a FakeScheduler behind a TcpProxy, whose Kill() resets
// every connection as the kernel does for a process that was SIGKILLed.

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/gateway/testing/tcp_proxy.h"
#include "tests/unit/gateway/gateway_test_util.h"

namespace orca::gateway::testing {
namespace {

using nlohmann::json;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kEngineUnavailable[] =
    "The engine is unavailable: the connection to its scheduler failed; retry the request";

// Words of gRPC's and the kernel's error texts that must never reach a client.
const std::vector<std::string>& TransportWords() {
  static const auto* words = new std::vector<std::string>{
      "recvmsg", "sendmsg", "Connection reset", "Socket closed", "RST_STREAM", "errno", "ipv4:", "tcp handshaker"};
  return *words;
}

void ExpectNoTransportText(const std::string& text) {
  for (const std::string& word : TransportWords()) EXPECT_THAT(text, Not(HasSubstr(word))) << text;
}

// A gateway whose one scheduler is reached through a TcpProxy.
class KillableEngine {
 public:
  KillableEngine() {
    FakeScheduler::Options scheduler = GatewayFixture::DefaultConfig().scheduler;
    scheduler.iteration_interval = absl::Milliseconds(5);
    auto started = FakeScheduler::Start(scheduler);
    EXPECT_TRUE(started.ok()) << started.status();
    scheduler_ = std::move(started).value();
    auto proxy = TcpProxy::Start(scheduler_->port());
    EXPECT_TRUE(proxy.ok()) << proxy.status();
    proxy_ = std::move(proxy).value();
    Gateway::Options options = GatewayFixture::DefaultConfig().gateway;
    options.grpc_listen = "";
    options.schedulers = {proxy_->address()};
    auto gateway = Gateway::CreateWithModel(options, MakeByteLevelModel());
    EXPECT_TRUE(gateway.ok()) << gateway.status();
    gateway_ = std::move(gateway).value();
    EXPECT_TRUE(gateway_->WaitUntilReady(absl::Seconds(10)));
  }
  ~KillableEngine() {
    gateway_->Shutdown();
    scheduler_->Shutdown();
  }

  FakeScheduler& scheduler() { return *scheduler_; }
  TcpProxy& proxy() { return *proxy_; }
  Gateway& gateway() { return *gateway_; }
  TestHttpClient Client() { return TestHttpClient(gateway_->http_port()); }

 private:
  std::unique_ptr<FakeScheduler> scheduler_;
  std::unique_ptr<TcpProxy> proxy_;
  std::unique_ptr<Gateway> gateway_;
};

// A stream that ended with a service_unavailable error event whose message
// matches `message`, then [DONE], and no transport text anywhere.
void ExpectUnavailableErrorEventThenDone(const std::string& raw, const ::testing::Matcher<std::string>& message) {
  ExpectNoTransportText(raw);
  const std::vector<std::string> events = SseEvents(raw);
  ASSERT_GE(events.size(), 2u) << raw;
  EXPECT_EQ(events.back(), "[DONE]");
  const json error = json::parse(events[events.size() - 2], nullptr, false);
  ASSERT_TRUE(error.contains("error")) << events[events.size() - 2];
  EXPECT_EQ(error["error"]["type"], "service_unavailable");
  EXPECT_THAT(error["error"]["message"].get<std::string>(), message);
}

constexpr char kLongStream[] = R"({"prompt": "x", "max_tokens": 900, "ignore_eos": true, "stream": true})";
constexpr char kLongBody[] = R"({"prompt": "x", "max_tokens": 900, "ignore_eos": true})";

TEST(EngineFailureTest, SchedulerKilledMidStreamEndsTheStreamWithACleanErrorEvent) {
  KillableEngine engine;
  TestHttpClient client = engine.Client();
  client.SendRequest("POST", "/v1/completions", kLongStream);
  std::string raw = client.ReadUntil("\"text\"");
  ASSERT_THAT(raw, HasSubstr("200 OK"));
  engine.proxy().Kill();
  raw += client.ReadUntil("data: [DONE]");
  ExpectUnavailableErrorEventThenDone(raw, ::testing::Eq(kEngineUnavailable));
  EXPECT_TRUE(
      engine.scheduler().WaitFor([&] { return engine.gateway().num_active_requests() == 0; }, absl::Seconds(10)));
}

TEST(EngineFailureTest, SchedulerKilledUnderANonStreamingRequestIs503WithRetryAfter) {
  KillableEngine engine;
  TestHttpClient client = engine.Client();
  client.SendRequest("POST", "/v1/completions", kLongBody);
  ASSERT_TRUE(engine.scheduler().WaitFor([&] { return engine.scheduler().num_running() == 1; }, absl::Seconds(10)));
  engine.proxy().Kill();
  const HttpResult response = client.ReadResponse();
  EXPECT_EQ(response.status, 503) << response.body;
  EXPECT_EQ(response.Header("retry-after"), "1");
  EXPECT_EQ(response.Json()["error"]["type"], "service_unavailable") << response.body;
  EXPECT_EQ(response.Json()["error"]["message"], kEngineUnavailable);
  ExpectNoTransportText(response.body);
}

TEST(EngineFailureTest, ADeadSchedulerIsAClean503ForTheNextRequestsToo) {
  KillableEngine engine;
  engine.proxy().Kill();  // before the router notices: the call itself fails to connect
  for (const char* body : {kLongBody, kLongStream}) {
    const HttpResult response = engine.Client().Request("POST", "/v1/completions", body);
    EXPECT_EQ(response.status, 503) << response.body;
    EXPECT_EQ(response.Header("retry-after"), "1");
    EXPECT_THAT(response.Json()["error"]["message"].get<std::string>(),
                AnyOf(std::string(kEngineUnavailable), HasSubstr("No scheduler is ready")));
    ExpectNoTransportText(response.body);
  }
}

TEST(EngineFailureTest, SchedulerShutdownMidStreamIsAnErrorEventAskingForARetry) {
  KillableEngine engine;
  TestHttpClient client = engine.Client();
  client.SendRequest("POST", "/v1/completions", kLongStream);
  std::string raw = client.ReadUntil("\"text\"");
  ASSERT_THAT(raw, HasSubstr("200 OK"));
  engine.scheduler().Shutdown();  // cancels its streams, as a SIGTERMed scheduler past its drain does
  raw += client.ReadUntil("data: [DONE]");
  ExpectUnavailableErrorEventThenDone(raw, HasSubstr("retry the request"));
}

}  // namespace
}  // namespace orca::gateway::testing
