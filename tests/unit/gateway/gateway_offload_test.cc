// Issue 45: the gateway's CPU work (parsing, chat templates, tokenization,
// starting generations) runs on its CPU pool behind admission control, never
// on the HTTP I/O threads; /health, /ready, /metrics and /v1/models answer
// while the pool is saturated; /tokenize and /detokenize take admission
// tickets; tickets come back on every path; a client that leaves while its
// work waits gets none done. And what /ready and /metrics show without a key.
//
// "Slow work" is a chat template whose rendering waits at a gate the test
// opens, so every assertion is about order (this answered while that was
// still running), never about time.

#include <grpcpp/grpcpp.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orca/v1/generation.grpc.pb.h"
#include "tests/unit/gateway/gateway_test_util.h"

namespace orca::gateway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kKey[] = "sk-test-key";
constexpr absl::Duration kWait = absl::Seconds(30);  // a bound on waits for events, never asserted on

// Holds every rendering until opened; counts the renderings that began.
class Gate {
 public:
  void Enter() {
    absl::MutexLock lock(&mu_);
    ++entered_;
    mu_.Await(absl::Condition(&open_));
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  /// Waits until `n` renderings began; false on timeout.
  bool WaitEntered(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entered_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kWait);
  }
  int entered() {
    absl::MutexLock lock(&mu_);
    return entered_;
  }

 private:
  absl::Mutex mu_;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
};

// chatml, rendered only once the gate is open: a template that takes as long as the test wants.
class GatedChatTemplate : public text::ChatTemplate {
 public:
  explicit GatedChatTemplate(std::shared_ptr<Gate> gate)
      : gate_(std::move(gate)), inner_(text::ChatTemplate::Builtin("chatml").value()) {}
  using text::ChatTemplate::Render;
  absl::StatusOr<std::string> Render(const text::ChatTemplateInputs& inputs,
                                     const text::RenderBudget& budget) const override {
    gate_->Enter();
    return inner_->Render(inputs, budget);
  }
  const std::string& source() const override { return inner_->source(); }

 private:
  std::shared_ptr<Gate> gate_;
  std::unique_ptr<text::ChatTemplate> inner_;
};

GatewayFixture::Config GatedConfig(const std::shared_ptr<Gate>& gate, int cpu_threads, int64_t cpu_max_queued) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.gateway.cpu_threads = cpu_threads;
  config.gateway.cpu_max_queued = cpu_max_queued;
  config.chat_template = [gate] { return std::make_unique<GatedChatTemplate>(gate); };
  return config;
}

const std::string kChat = R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})";
const std::string kTokenizeChat = R"({"messages": [{"role": "user", "content": "hi"}]})";

// One request on a new connection from another thread; nullopt when no answer
// came within kWait. Where an I/O thread is stuck (as on the code before the
// CPU pool) the test then fails instead of hanging: the client's receive
// timeout does not bound Asio's blocking reads. The thread owns what it uses.
std::optional<HttpResult> RequestWithin(int port, const std::string& method, const std::string& path,
                                        const std::string& body = "") {
  struct Shared {
    absl::Notification done;
    HttpResult result;
  };
  auto shared = std::make_shared<Shared>();
  std::thread([shared, port, method, path, body] {
    shared->result = TestHttpClient(port).Request(method, path, body);
    shared->done.Notify();
  }).detach();
  if (!shared->done.WaitForNotificationWithTimeout(kWait)) return std::nullopt;
  return shared->result;
}

// The status of GET `path`, -2 when it got no answer.
int GetStatus(GatewayFixture& f, const std::string& path) {
  std::optional<HttpResult> r = RequestWithin(f.port(), "GET", path);
  return r ? r->status : -2;
}

// The detailed /ready body's CPU pool counters (no API keys configured).
json CpuPoolState(GatewayFixture& f) {
  std::optional<HttpResult> r = RequestWithin(f.port(), "GET", "/ready");
  const json ready = r ? r->Json() : json();
  return ready.is_object() && ready.contains("cpu_pool") ? ready["cpu_pool"] : json::object();
}

bool WaitForQueued(GatewayFixture& f, int64_t queued) {
  const absl::Time end = absl::Now() + kWait;
  while (absl::Now() < end) {
    const json state = CpuPoolState(f);
    if (state.empty()) return false;
    if (state.value("queued", int64_t{-1}) == queued) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

bool WaitForAdmitted(GatewayFixture& f, int64_t admitted) {
  return f.scheduler().WaitFor([&] { return f.gateway().num_admitted_requests() == admitted; }, kWait);
}

// True once /metrics counts a 499 (client gone) on `route`.
bool WaitForClientGone(GatewayFixture& f, const std::string& route) {
  const std::string needle = "route=\"" + route + "\"";
  const absl::Time end = absl::Now() + kWait;
  while (absl::Now() < end) {
    std::optional<HttpResult> r = RequestWithin(f.port(), "GET", "/metrics");
    if (!r) return false;
    const std::string metrics = r->body;
    for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
      if (absl::StrContains(line, "orca:http_requests_total") && absl::StrContains(line, needle) &&
          absl::StrContains(line, "status=\"499\"")) {
        return true;
      }
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

TEST(GatewayOffloadTest, OperationalEndpointsAnswerWhileEveryCpuThreadIsHeldAndTheQueueIsFull) {
  auto gate = std::make_shared<Gate>();
  GatewayFixture f(GatedConfig(gate, /*cpu_threads=*/2, /*cpu_max_queued=*/2));
  absl::Cleanup open_gate = [&] { gate->Open(); };  // before the fixture shuts down

  // As many slow requests as the gateway has I/O threads (2) hold both CPU threads...
  std::vector<std::unique_ptr<TestHttpClient>> slow;
  for (int i = 0; i < 2; ++i) {
    slow.push_back(std::make_unique<TestHttpClient>(f.port()));
    slow.back()->SendRequest("POST", "/v1/chat/completions", kChat);
  }
  ASSERT_TRUE(gate->WaitEntered(2));
  // ...and the operational endpoints still answer (on today's code both I/O threads were stuck in the template).
  std::optional<HttpResult> health = RequestWithin(f.port(), "GET", "/health");
  ASSERT_TRUE(health.has_value()) << "/health got no answer while the slow requests ran";
  ASSERT_EQ(health->status, 200) << health->body;
  EXPECT_EQ(health->Json()["status"], "ok");

  // Two more wait in the queue, which is then full.
  for (int i = 0; i < 2; ++i) {
    slow.push_back(std::make_unique<TestHttpClient>(f.port()));
    slow.back()->SendRequest("POST", "/tokenize", kTokenizeChat);
  }
  ASSERT_TRUE(WaitForQueued(f, 2));
  EXPECT_EQ(f.gateway().num_admitted_requests(), 4);
  for (const char* path : {"/health", "/ready", "/metrics", "/v1/models"}) EXPECT_EQ(GetStatus(f, path), 200) << path;
  // More CPU work is refused at once rather than queued without bound, and holds no ticket.
  for (const std::string& path : {std::string("/tokenize"), std::string("/v1/completions")}) {
    HttpResult busy = f.Client().Request("POST", path, R"({"prompt": "x", "max_tokens": 2})");
    EXPECT_EQ(busy.status, 503) << path << ": " << busy.body;
    EXPECT_EQ(busy.Header("retry-after"), "1") << path;
    EXPECT_THAT(busy.body, HasSubstr("busy (2 CPU threads busy and 2 requests waiting")) << path;
  }
  EXPECT_EQ(gate->entered(), 2);  // the slow ones are all still running or waiting
  EXPECT_EQ(f.gateway().num_admitted_requests(), 4);

  gate->Open();
  for (size_t i = 0; i < slow.size(); ++i) {
    HttpResult done = slow[i]->ReadResponse();
    EXPECT_EQ(done.status, 200) << i << ": " << done.body;
  }
  EXPECT_TRUE(WaitForAdmitted(f, 0));
}

TEST(GatewayOffloadTest, TokenizeAndDetokenizeTakeAdmissionTickets) {
  GatewayFixture f(OneRequestAtATimeConfig());
  TestHttpClient stream = f.Client();
  ASSERT_THAT(StartLongStream(stream), HasSubstr("200 OK"));

  struct Row {
    const char* path;
    const char* body;
  };
  for (const Row& row : {Row{"/tokenize", R"({"prompt": "hello"})"}, Row{"/detokenize", R"({"tokens": [104, 105]})"}}) {
    HttpResult r = f.Client().Request("POST", row.path, row.body);
    EXPECT_EQ(r.status, 503) << row.path << ": " << r.body;
    EXPECT_EQ(r.Header("retry-after"), "1") << row.path;
    EXPECT_THAT(r.body, HasSubstr("at capacity (1 concurrent")) << row.path;
  }
  // The gRPC API shares the limit.
  auto stub = orca::v1::Generation::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(f.gateway().grpc_port()), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    orca::v1::TokenizeRequest request;
    request.set_text("hello");
    orca::v1::TokenizeResponse response;
    grpc::Status status = stub->Tokenize(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  }
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    orca::v1::DetokenizeRequest request;
    request.add_token_ids(104);
    orca::v1::DetokenizeResponse response;
    grpc::Status status = stub->Detokenize(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  }

  stream.Close();
  ASSERT_TRUE(WaitForAdmitted(f, 0));
  HttpResult ok = f.Client().Request("POST", "/tokenize", R"({"prompt": "hello"})");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.Json()["count"], 5);
}

// With room for one request, a leaked ticket would turn the next row into a 503.
TEST(GatewayOffloadTest, TicketsComeBackOnEveryPath) {
  auto gate = std::make_shared<Gate>();
  gate->Open();
  GatewayFixture::Config config = GatedConfig(gate, /*cpu_threads=*/2, /*cpu_max_queued=*/4);
  config.gateway.max_concurrent_requests = 1;
  GatewayFixture f(config);
  struct Row {
    const char* name;
    const char* path;
    std::string body;
    int status;
  };
  const Row rows[] = {
      {"tokenize", "/tokenize", R"({"prompt": "hello"})", 200},
      {"tokenize messages", "/tokenize", kTokenizeChat, 200},
      {"tokenize bad json", "/tokenize", "{", 400},
      {"tokenize unknown model", "/tokenize", R"({"model": "nope", "prompt": "x"})", 404},
      {"detokenize", "/detokenize", R"({"tokens": [104, 105]})", 200},
      {"detokenize bad id", "/detokenize", R"({"tokens": [1000000]})", 400},
      {"completion", "/v1/completions", R"({"prompt": "x", "max_tokens": 3})", 200},
      {"completion stream", "/v1/completions", R"({"prompt": "x", "max_tokens": 3, "stream": true})", 200},
      {"completion bad field", "/v1/completions", R"({"prompt": "x", "temperature": "hot"})", 400},
      {"completion too long", "/v1/completions", R"({"prompt": "x", "max_tokens": 5000})", 400},
      {"chat", "/v1/chat/completions", kChat, 200},
      {"chat bad role", "/v1/chat/completions", R"({"messages": [{"role": "wizard", "content": "x"}]})", 400},
      {"tokenize again", "/tokenize", R"({"prompt": "hello"})", 200},
  };
  for (const Row& row : rows) {
    HttpResult r = f.Client().Request("POST", row.path, row.body);
    EXPECT_EQ(r.status, row.status) << row.name << ": " << r.body;
    EXPECT_EQ(f.gateway().num_admitted_requests(), 0) << row.name;
  }
}

TEST(GatewayOffloadTest, ATokenizeHoldsItsTicketWhileItRuns) {
  auto gate = std::make_shared<Gate>();
  GatewayFixture::Config config = GatedConfig(gate, /*cpu_threads=*/2, /*cpu_max_queued=*/4);
  config.gateway.max_concurrent_requests = 1;
  GatewayFixture f(config);
  absl::Cleanup open_gate = [&] { gate->Open(); };
  TestHttpClient slow = f.Client();
  slow.SendRequest("POST", "/tokenize", kTokenizeChat);
  ASSERT_TRUE(gate->WaitEntered(1));
  EXPECT_EQ(f.gateway().num_admitted_requests(), 1);
  EXPECT_EQ(f.Client().Request("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 2})").status, 503);
  gate->Open();
  EXPECT_EQ(slow.ReadResponse().status, 200);
  EXPECT_EQ(f.gateway().num_admitted_requests(), 0);
  EXPECT_EQ(f.Client().Request("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 2})").status, 200);
}

TEST(GatewayOffloadTest, AClientThatLeavesWhileItsWorkWaitsGetsNoneDone) {
  auto gate = std::make_shared<Gate>();
  GatewayFixture f(GatedConfig(gate, /*cpu_threads=*/1, /*cpu_max_queued=*/4));
  absl::Cleanup open_gate = [&] { gate->Open(); };
  TestHttpClient first = f.Client();
  first.SendRequest("POST", "/v1/chat/completions", kChat);
  ASSERT_TRUE(gate->WaitEntered(1));
  const std::string paths[] = {"/v1/chat/completions", "/tokenize"};
  for (int i = 0; i < 2; ++i) {
    TestHttpClient leaving = f.Client();
    leaving.SendRequest("POST", paths[i], i == 0 ? kChat : kTokenizeChat);
    ASSERT_TRUE(WaitForQueued(f, i + 1)) << paths[i];
    EXPECT_EQ(f.gateway().num_admitted_requests(), 2 + i) << paths[i];
    leaving.Close();
    ASSERT_TRUE(WaitForClientGone(f, paths[i])) << paths[i];
  }

  gate->Open();
  EXPECT_EQ(first.ReadResponse().status, 200);
  ASSERT_TRUE(WaitForAdmitted(f, 0));
  ASSERT_TRUE(WaitForQueued(f, 0));
  EXPECT_EQ(gate->entered(), 1);  // neither of the others rendered its template
  EXPECT_EQ(f.scheduler().num_generate_calls(), 1);
}

TEST(GatewayOffloadTest, RequestsWaitingForTheCpuPoolGet503WhenTheGatewayShutsDown) {
  auto gate = std::make_shared<Gate>();
  GatewayFixture f(GatedConfig(gate, /*cpu_threads=*/1, /*cpu_max_queued=*/4));
  absl::Cleanup open_gate = [&] { gate->Open(); };
  TestHttpClient running = f.Client();
  running.SendRequest("POST", "/v1/chat/completions", kChat);
  ASSERT_TRUE(gate->WaitEntered(1));
  TestHttpClient waiting = f.Client();
  waiting.SendRequest("POST", "/tokenize", kTokenizeChat);
  ASSERT_TRUE(WaitForQueued(f, 1));

  std::thread shutdown([&] { f.gateway().Shutdown(absl::ZeroDuration()); });
  // The queued request is answered while the running one still holds the pool's thread.
  HttpResult r = waiting.ReadResponse();
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.Header("retry-after"), "1");
  EXPECT_THAT(r.body, HasSubstr("shutting down"));
  EXPECT_EQ(gate->entered(), 1);
  gate->Open();
  shutdown.join();
  EXPECT_EQ(f.gateway().num_admitted_requests(), 0);
}

TEST(GatewayOffloadTest, GrpcGenerateRunsOnTheCpuPool) {
  auto gate = std::make_shared<Gate>();
  GatewayFixture f(GatedConfig(gate, /*cpu_threads=*/1, /*cpu_max_queued=*/1));
  absl::Cleanup open_gate = [&] { gate->Open(); };
  auto stub = orca::v1::Generation::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(f.gateway().grpc_port()), grpc::InsecureChannelCredentials()));
  auto chat_request = [] {
    orca::v1::TextGenerateRequest request;
    orca::v1::ChatMessage* m = request.mutable_messages()->add_messages();
    m->set_role("user");
    m->set_content("hi");
    request.set_max_new_tokens(3);
    return request;
  };
  // One gRPC chat holds the pool's thread in its template, one HTTP request waits.
  grpc::ClientContext slow_context;
  slow_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto slow = stub->Generate(&slow_context, chat_request());
  ASSERT_TRUE(gate->WaitEntered(1));
  TestHttpClient waiting = f.Client();
  waiting.SendRequest("POST", "/tokenize", R"({"prompt": "hello"})");
  ASSERT_TRUE(WaitForQueued(f, 1));
  EXPECT_EQ(GetStatus(f, "/health"), 200);
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto reader = stub->Generate(&context, chat_request());
    orca::v1::TextGenerateResponse message;
    while (reader->Read(&message)) {
    }
    grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("busy"));
  }
  gate->Open();
  orca::v1::TextGenerateResponse message;
  std::string text;
  while (slow->Read(&message)) text += message.text();
  grpc::Status status = slow->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(waiting.ReadResponse().status, 200);
  EXPECT_TRUE(WaitForAdmitted(f, 0));
}

// --chat-template-timeout-seconds reaches the template engine: with a timeout
// of 1 ns, a template that runs more than one deadline-check interval of steps
// stops at its first check, whatever the machine's speed.
TEST(GatewayOffloadTest, ATemplatePastTheTimeoutIsA400NamingTheTemplate) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.gateway.chat_template_timeout = absl::Nanoseconds(1);
  config.chat_template = [] {
    return text::ChatTemplate::FromSource(
               "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}"
               "{% for m in messages %}{{ m.content }}{% endfor %}")
        .value();
  };
  GatewayFixture f(config);
  for (const char* path : {"/v1/chat/completions", "/tokenize"}) {
    HttpResult r = f.Client().Request("POST", path, path == std::string("/tokenize") ? kTokenizeChat : kChat);
    EXPECT_EQ(r.status, 400) << path << ": " << r.body;
    EXPECT_EQ(r.Json()["error"]["param"], "messages") << path;
    EXPECT_THAT(r.body, HasSubstr("chat template")) << path;
    EXPECT_THAT(r.body, HasSubstr("deadline")) << path;
  }
  EXPECT_EQ(f.gateway().num_admitted_requests(), 0);
  EXPECT_EQ(f.Client().Request("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 2})").status, 200);
}

TEST(GatewayOffloadTest, ReadyWithoutAValidKeyShowsOnlyTheStatus) {
  for (const bool scheduler_ready : {true, false}) {
    SCOPED_TRACE(scheduler_ready ? "ready" : "not ready");
    GatewayFixture::Config config = GatewayFixture::DefaultConfig();
    config.gateway.api_keys = {kKey};
    config.scheduler.ready = scheduler_ready;
    config.wait_ready = scheduler_ready;
    GatewayFixture f(config);
    const int want_status = scheduler_ready ? 200 : 503;
    const json want_body = {{"status", scheduler_ready ? "ready" : "not_ready"}};
    for (const auto& headers : std::vector<std::vector<std::pair<std::string, std::string>>>{
             {}, {{"Authorization", "Bearer wrong"}}, {{"Authorization", "Basic abc"}}}) {
      HttpResult r = f.Client().Request("GET", "/ready", "", headers);
      EXPECT_EQ(r.status, want_status);
      EXPECT_EQ(r.Json(), want_body) << r.body;  // no scheduler addresses, no memory
    }
    HttpResult full = f.Client().Request("GET", "/ready", "", {{"Authorization", std::string("Bearer ") + kKey}});
    EXPECT_EQ(full.status, want_status);
    const json body = full.Json();
    EXPECT_EQ(body["status"], want_body["status"]);
    ASSERT_EQ(body["schedulers"].size(), 1u) << full.body;
    EXPECT_EQ(body["schedulers"][0]["address"], f.scheduler().address());
    EXPECT_GT(body["memory"].value("rss_bytes", int64_t{0}), 0);
    EXPECT_EQ(body["cpu_pool"]["queued"], 0);
  }
}

TEST(GatewayOffloadTest, MetricsNeedTheKeyOnlyWithTheFlag) {
  for (const bool require : {false, true}) {
    SCOPED_TRACE(require ? "--metrics-require-api-key" : "default");
    GatewayFixture::Config config = GatewayFixture::DefaultConfig();
    config.gateway.api_keys = {kKey};
    config.gateway.metrics_require_api_key = require;
    GatewayFixture f(config);
    HttpResult no_key = f.Client().Request("GET", "/metrics");
    HttpResult wrong = f.Client().Request("GET", "/metrics", "", {{"Authorization", "Bearer wrong"}});
    HttpResult right = f.Client().Request("GET", "/metrics", "", {{"Authorization", std::string("Bearer ") + kKey}});
    EXPECT_EQ(no_key.status, require ? 401 : 200) << no_key.body;
    EXPECT_EQ(wrong.status, require ? 401 : 200) << wrong.body;
    if (require) {
      EXPECT_EQ(no_key.Header("www-authenticate"), "Bearer");
      EXPECT_EQ(no_key.Json()["error"]["code"], "invalid_api_key");
    }
    EXPECT_EQ(right.status, 200);
    EXPECT_THAT(right.body, HasSubstr("orca:http_requests_total"));
    EXPECT_EQ(f.Client().Request("GET", "/health").status, 200);  // never needs a key
  }
}

}  // namespace
}  // namespace orca::gateway::testing
