#include "services/common/admin_http_server.h"

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "core/metrics/orca_metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/raw_http_client.h"

namespace orca::services {
namespace {

using ::testing::HasSubstr;

using orca::testing::RawHttpClient;
using HttpResponse = RawHttpClient::Response;

// Every connection waits at most 5 s for a read or a send.
const RawHttpClient::Options kClient = {.receive_timeout_seconds = 5, .send_timeout_seconds = 5};
// The same, for a connection that is expected to be refused.
const RawHttpClient::Options kRefusedClient = {
    .receive_timeout_seconds = 5, .send_timeout_seconds = 5, .expect_connected = false};

std::string Get(const std::string& path, const std::string& extra_headers = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra_headers + "\r\n";
}

class AdminHttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto scheduler = metrics::SchedulerMetrics::Create(&registry_, "tiny");
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    scheduler_metrics_ = std::move(*scheduler);
  }

  // Starts a server on 127.0.0.1 port 0 with `options` (address and registry
  // filled in unless set).
  std::unique_ptr<AdminHttpServer> StartServer(AdminHttpServer::Options options = {}) {
    options.listen_address = "127.0.0.1:0";
    if (options.registry == nullptr) options.registry = &registry_;
    if (!options.readiness) {
      options.readiness = [this]() -> absl::Status {
        if (ready_.load()) return absl::OkStatus();
        return absl::UnavailableError("loading \"weights\" (stage 1/2)");
      };
    }
    absl::StatusOr<std::unique_ptr<AdminHttpServer>> server = AdminHttpServer::Create(options);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return nullptr;
    const absl::Status started = (*server)->Start();
    EXPECT_TRUE(started.ok()) << started;
    EXPECT_GT((*server)->port(), 0);
    return std::move(*server);
  }

  HttpResponse Request(int port, const std::string& request, bool head = false) {
    RawHttpClient connection(port, kClient);
    EXPECT_TRUE(connection.connected());
    EXPECT_TRUE(connection.Send(request));
    return connection.ReadResponse(head);
  }

  metrics::Registry registry_;
  std::unique_ptr<metrics::SchedulerMetrics> scheduler_metrics_;
  std::atomic<bool> ready_{false};
};

TEST_F(AdminHttpServerTest, HealthIsOkWhileAlive) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  HttpResponse response = Request(server->port(), Get("/health"));
  ASSERT_NE(response.status, 0) << "no response";
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "ok");
}

TEST_F(AdminHttpServerTest, ReadyFollowsTheCallbackAndExplainsWhyNot) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  HttpResponse not_ready = Request(server->port(), Get("/ready"));
  ASSERT_NE(not_ready.status, 0) << "no response";
  EXPECT_EQ(not_ready.status, 503);
  EXPECT_EQ(not_ready.headers["content-type"], "application/json");
  const nlohmann::json body = nlohmann::json::parse(not_ready.body, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << not_ready.body;
  EXPECT_EQ(body.value("status", ""), "unavailable");
  EXPECT_EQ(body.value("code", ""), "UNAVAILABLE");
  EXPECT_EQ(body.value("reason", ""), "loading \"weights\" (stage 1/2)");

  ready_ = true;
  HttpResponse ready = Request(server->port(), Get("/ready"));
  ASSERT_NE(ready.status, 0) << "no response";
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, "ok");
}

TEST_F(AdminHttpServerTest, ReadyReportsThisProcessesMemoryWhenAsked) {
  AdminHttpServer::Options options;
  options.report_memory = true;
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  HttpResponse not_ready = Request(server->port(), Get("/ready"));
  EXPECT_EQ(not_ready.status, 503);
  nlohmann::json body = nlohmann::json::parse(not_ready.body, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << not_ready.body;
  EXPECT_GT(body["memory"].value("rss_bytes", int64_t{0}), 0);

  ready_ = true;
  HttpResponse ready = Request(server->port(), Get("/ready"));
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.headers["content-type"], "application/json");
  body = nlohmann::json::parse(ready.body, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << ready.body;
  EXPECT_EQ(body.value("status", ""), "ok");
  EXPECT_FALSE(body.contains("config"));
  const nlohmann::json& memory = body["memory"];
  // The test process itself: at least its code and the server's thread are resident.
  const int64_t rss = memory.value("rss_bytes", int64_t{0});
  EXPECT_GT(rss, 1 << 20);
  EXPECT_GE(memory.value("peak_rss_bytes", int64_t{0}), rss);
  EXPECT_EQ(memory.value("rss_anon_bytes", int64_t{0}) + memory.value("rss_file_bytes", int64_t{0}) +
                memory.value("rss_shmem_bytes", int64_t{0}),
            rss);
  EXPECT_GE(memory.value("threads", 0), 2);
}

TEST_F(AdminHttpServerTest, ReadyCarriesTheConfigurationWhenAsked) {
  AdminHttpServer::Options options;
  options.ready_details = [] { return std::string(R"({"policy":"paged","max_num_batched_tokens":64})"); };
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  HttpResponse not_ready = Request(server->port(), Get("/ready"));
  EXPECT_EQ(not_ready.status, 503);
  nlohmann::json body = nlohmann::json::parse(not_ready.body, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << not_ready.body;
  EXPECT_EQ(body.value("status", ""), "unavailable");
  EXPECT_EQ(body["config"].value("policy", ""), "paged");

  ready_ = true;
  HttpResponse ready = Request(server->port(), Get("/ready"));
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.headers["content-type"], "application/json");
  body = nlohmann::json::parse(ready.body, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << ready.body;
  EXPECT_EQ(body.value("status", ""), "ok");
  EXPECT_EQ(body["config"].value("max_num_batched_tokens", 0), 64);
}

TEST_F(AdminHttpServerTest, ReadyWithoutCallbackIsReady) {
  AdminHttpServer::Options options;
  options.readiness = [] { return absl::OkStatus(); };
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(Request(server->port(), Get("/ready")).status, 200);
}

TEST_F(AdminHttpServerTest, MetricsServesTheRegistryPage) {
  scheduler_metrics_->num_requests_running().Set(5);
  scheduler_metrics_->request_success("stop").Increment(2);
  metrics::Family<metrics::Gauge>* waiting = *registry_.AddGauge(metrics::kNumRequestsWaiting);
  std::atomic<int> queue_length{7};
  auto callback = waiting->AddCallback({{"model_name", "other"}}, [&] { return double(queue_length.load()); });
  ASSERT_TRUE(callback.ok());
  auto server = StartServer();
  ASSERT_NE(server, nullptr);

  HttpResponse response = Request(server->port(), Get("/metrics"));
  ASSERT_NE(response.status, 0) << "no response";
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(response.body, registry_.Serialize());
  EXPECT_THAT(response.body, HasSubstr("orca:num_requests_running{model_name=\"tiny\"} 5\n"));
  EXPECT_THAT(response.body, HasSubstr("orca:request_success_total{model_name=\"tiny\",finished_reason=\"stop\"} "
                                       "2\n"));
  EXPECT_THAT(response.body, HasSubstr("orca:num_requests_waiting{model_name=\"other\"} 7\n"));
  // Callbacks are read at scrape time.
  queue_length = 9;
  EXPECT_THAT(Request(server->port(), Get("/metrics?debug=1")).body,
              HasSubstr("orca:num_requests_waiting{model_name=\"other\"} 9\n"));
}

TEST_F(AdminHttpServerTest, MetricsWithoutRegistryIsNotFound) {
  auto options = AdminHttpServer::Options();
  options.listen_address = "127.0.0.1:0";
  auto server = *AdminHttpServer::Create(options);
  ASSERT_TRUE(server->Start().ok());
  EXPECT_EQ(Request(server->port(), Get("/metrics")).status, 404);
  EXPECT_EQ(Request(server->port(), Get("/ready")).status, 200);
}

TEST_F(AdminHttpServerTest, UnknownPathsAndMethodsAreRejected) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(Request(server->port(), Get("/")).status, 404);
  EXPECT_EQ(Request(server->port(), Get("/healthz")).status, 404);
  EXPECT_EQ(Request(server->port(), Get("/metrics/x")).status, 404);
  HttpResponse post = Request(server->port(), "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}");
  ASSERT_NE(post.status, 0) << "no response";
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.headers["allow"], "GET, HEAD");
}

TEST_F(AdminHttpServerTest, HeadSendsHeadersOnly) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawHttpClient connection(server->port(), kClient);
  ASSERT_TRUE(connection.Send("HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n" + Get("/health")));
  HttpResponse head = connection.ReadResponse(/*head_request=*/true);
  ASSERT_NE(head.status, 0) << "no response";
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.headers["content-length"], "2");
  // The next response starts right after the HEAD headers: no body was sent.
  HttpResponse get = connection.ReadResponse();
  ASSERT_NE(get.status, 0) << "no response";
  EXPECT_EQ(get.body, "ok");
}

TEST_F(AdminHttpServerTest, KeepsConnectionsAliveAndAnswersPipelinedRequests) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawHttpClient connection(server->port(), kClient);
  ASSERT_TRUE(connection.connected());
  ASSERT_TRUE(connection.Send(Get("/health")));
  EXPECT_EQ(connection.ReadResponse().status, 200);
  ASSERT_TRUE(connection.Send(Get("/ready")));
  EXPECT_EQ(connection.ReadResponse().status, 503);
  // Two requests in one write.
  ASSERT_TRUE(connection.Send(Get("/metrics") + Get("/nope")));
  EXPECT_EQ(connection.ReadResponse().status, 200);
  EXPECT_EQ(connection.ReadResponse().status, 404);
  // Connection: close is honoured after the response.
  ASSERT_TRUE(connection.Send(Get("/health", "Connection: close\r\n")));
  HttpResponse last = connection.ReadResponse();
  ASSERT_NE(last.status, 0) << "no response";
  EXPECT_EQ(last.headers["connection"], "close");
  EXPECT_TRUE(connection.ClosedByServer());
}

TEST_F(AdminHttpServerTest, Http10ClosesUnlessKeepAliveIsAsked) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawHttpClient connection(server->port(), kClient);
  ASSERT_TRUE(connection.Send("GET /health HTTP/1.0\r\n\r\n"));
  HttpResponse response = connection.ReadResponse();
  ASSERT_NE(response.status, 0) << "no response";
  EXPECT_EQ(response.body, "ok");
  EXPECT_TRUE(connection.ClosedByServer());
}

TEST_F(AdminHttpServerTest, OversizedHeadersGet431AndTheConnectionCloses) {
  AdminHttpServer::Options options;
  options.max_header_bytes = 1024;
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  RawHttpClient connection(server->port(), kClient);
  ASSERT_TRUE(connection.Send(Get("/health", "X-Big: " + std::string(64 * 1024, 'a') + "\r\n")));
  HttpResponse response = connection.ReadResponse();
  ASSERT_NE(response.status, 0) << "no response";
  EXPECT_EQ(response.status, 431);
  EXPECT_TRUE(connection.ClosedByServer());
  // The server keeps serving others.
  EXPECT_EQ(Request(server->port(), Get("/health")).status, 200);
}

TEST_F(AdminHttpServerTest, OversizedBodyGets413) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  HttpResponse response = Request(
      server->port(), "GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + std::string(100000, 'b'));
  ASSERT_NE(response.status, 0) << "no response";
  EXPECT_EQ(response.status, 413);
}

TEST_F(AdminHttpServerTest, MalformedRequestGets400) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  HttpResponse response = Request(server->port(), "GET /health HTTP/9\r\n\r\n");
  ASSERT_NE(response.status, 0) << "no response";
  EXPECT_EQ(response.status, 400);
}

// Issue 45: 64 idle connections used to make /health fail for 60 s (the cap
// closed every new connection): a Kubernetes liveness restart.
TEST_F(AdminHttpServerTest, IdleConnectionsAtTheCapDoNotKeepAProbeOut) {
  AdminHttpServer::Options options;  // max_connections 64
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<RawHttpClient>> idle;
  for (int i = 0; i < options.max_connections; ++i) {
    idle.push_back(std::make_unique<RawHttpClient>(server->port(), kClient));
    ASSERT_TRUE(idle.back()->connected());
  }
  HttpResponse probe = Request(server->port(), Get("/health"));
  EXPECT_EQ(probe.status, 200) << "the probe was refused";
  EXPECT_EQ(server->num_evicted_connections(), 1);
  // The first idle connection made room; it is closed, not left hanging.
  EXPECT_TRUE(idle.front()->ClosedByServer());
}

TEST_F(AdminHttpServerTest, AtTheCapTheLeastRecentlyActiveConnectionMakesRoom) {
  AdminHttpServer::Options options;
  options.max_connections = 2;
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  RawHttpClient stale(server->port(), kClient);  // accepted first, never sends anything
  RawHttpClient active(server->port(), kClient);
  ASSERT_TRUE(active.Send(Get("/health")));
  ASSERT_EQ(active.ReadResponse().status, 200);  // active since its answer
  RawHttpClient third(server->port(), kClient);
  ASSERT_TRUE(third.Send(Get("/health")));
  EXPECT_EQ(third.ReadResponse().status, 200);
  EXPECT_TRUE(stale.ClosedByServer());
  // The recently active connection was kept and still works.
  ASSERT_TRUE(active.Send(Get("/health")));
  EXPECT_EQ(active.ReadResponse().status, 200);
  EXPECT_EQ(server->num_evicted_connections(), 1);
}

TEST_F(AdminHttpServerTest, AConnectionWithoutACompleteRequestIsClosedAfterTheRequestTimeout) {
  AdminHttpServer::Options options;
  options.request_timeout = std::chrono::milliseconds(200);
  options.idle_timeout = std::chrono::milliseconds(60'000);  // far beyond the client's 5 s receive timeout
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  RawHttpClient silent(server->port(), kClient);
  RawHttpClient trickling(server->port(), kClient);
  ASSERT_TRUE(trickling.Send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"));  // never the empty line
  EXPECT_TRUE(silent.ClosedByServer());
  EXPECT_TRUE(trickling.ClosedByServer());
  // After a request, a keep-alive connection may idle for idle_timeout, not request_timeout.
  RawHttpClient keep_alive(server->port(), kClient);
  ASSERT_TRUE(keep_alive.Send(Get("/health")));
  ASSERT_EQ(keep_alive.ReadResponse().status, 200);
  absl::SleepFor(absl::Milliseconds(600));
  ASSERT_TRUE(keep_alive.Send(Get("/health")));
  EXPECT_EQ(keep_alive.ReadResponse().status, 200);
  // ... and its next request is timed from its first byte.
  ASSERT_TRUE(keep_alive.Send("GET /health HTTP/1.1\r\n"));
  EXPECT_TRUE(keep_alive.ClosedByServer());
}

// Issue 45: /ready showed internal addresses, configuration and memory to anyone.
TEST_F(AdminHttpServerTest, ReadyWithoutTheInternalTokenShowsOnlyTheStatus) {
  AdminHttpServer::Options options;
  options.internal_token = "internal-secret";
  options.report_memory = true;
  options.ready_details = [] { return std::string(R"({"workers":["10.0.0.7:7100"]})"); };
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  struct Case {
    const char* name;
    std::string headers;
    bool detailed;
  };
  const std::vector<Case> cases = {
      {"no credential", "", false},
      {"wrong token", "Authorization: Bearer internal-secreT\r\n", false},
      {"token prefix", "Authorization: Bearer internal-secre\r\n", false},
      {"not bearer", "Authorization: Basic internal-secret\r\n", false},
      {"two credentials", "Authorization: Bearer wrong\r\nAuthorization: Bearer internal-secret\r\n", false},
      {"the token", "Authorization: Bearer internal-secret\r\n", true},
      {"the token, any case of the scheme", "Authorization: bearer internal-secret\r\n", true},
  };
  for (bool ready : {false, true}) {
    ready_ = ready;
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(c.name) + (ready ? ", ready" : ", not ready"));
      HttpResponse response = Request(server->port(), Get("/ready", c.headers));
      EXPECT_EQ(response.status, ready ? 200 : 503);
      const nlohmann::json body = nlohmann::json::parse(response.body, nullptr, false);
      ASSERT_TRUE(body.is_object()) << response.body;
      EXPECT_EQ(body.value("status", ""), ready ? "ok" : "unavailable");
      if (c.detailed) {
        EXPECT_EQ(body["config"]["workers"][0], "10.0.0.7:7100");
        EXPECT_GT(body["memory"].value("rss_bytes", int64_t{0}), 0);
        if (!ready) EXPECT_EQ(body.value("reason", ""), "loading \"weights\" (stage 1/2)");
      } else {
        EXPECT_EQ(body, nlohmann::json({{"status", ready ? "ok" : "unavailable"}})) << "leaks details";
      }
    }
  }
  // Probes and scrapes need no token by default.
  EXPECT_EQ(Request(server->port(), Get("/health")).status, 200);
  EXPECT_EQ(Request(server->port(), Get("/metrics")).status, 200);
}

TEST_F(AdminHttpServerTest, MetricsCanRequireTheInternalToken) {
  AdminHttpServer::Options options;
  options.internal_token = "internal-secret";
  options.metrics_require_token = true;
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  HttpResponse refused = Request(server->port(), Get("/metrics"));
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(refused.headers["www-authenticate"], "Bearer");
  EXPECT_THAT(refused.body, HasSubstr("internal token"));
  EXPECT_EQ(Request(server->port(), Get("/metrics", "Authorization: Bearer nope\r\n")).status, 401);
  HttpResponse scraped = Request(server->port(), Get("/metrics", "Authorization: Bearer internal-secret\r\n"));
  EXPECT_EQ(scraped.status, 200);
  EXPECT_THAT(scraped.body, HasSubstr("orca:num_requests_running"));
  EXPECT_EQ(Request(server->port(), Get("/health")).status, 200);
}

TEST_F(AdminHttpServerTest, StopClosesTheListenerAndOpenConnections) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  RawHttpClient idle(port, kClient);
  ASSERT_TRUE(idle.Send(Get("/health")));
  ASSERT_NE(idle.ReadResponse().status, 0) << "no response";
  server->Stop();
  EXPECT_TRUE(idle.ClosedByServer());
  RawHttpClient after(port, kRefusedClient);
  EXPECT_FALSE(after.connected());
  server->Stop();  // idempotent
  EXPECT_EQ(server->Start().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(AdminHttpServerTest, DestructorStopsARunningServer) {
  int port = 0;
  {
    auto server = StartServer();
    ASSERT_NE(server, nullptr);
    port = server->port();
  }
  RawHttpClient after(port, kRefusedClient);
  EXPECT_FALSE(after.connected());
}

TEST_F(AdminHttpServerTest, StartFailsOnAPortInUse) {
  auto first = StartServer();
  ASSERT_NE(first, nullptr);
  AdminHttpServer::Options options;
  options.listen_address = "127.0.0.1:" + std::to_string(first->port());
  auto second = *AdminHttpServer::Create(options);
  const absl::Status status = second->Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()), HasSubstr("cannot listen on " + options.listen_address));
  EXPECT_EQ(second->port(), 0);
  EXPECT_EQ(second->Start().code(), absl::StatusCode::kUnavailable);  // may be retried
}

TEST_F(AdminHttpServerTest, StopWithoutStartIsHarmless) {
  auto server = *AdminHttpServer::Create({});
  server->Stop();
  EXPECT_EQ(server->port(), 0);
}

TEST(AdminHttpServerOptionsTest, RejectsBadOptionsNamingTheField) {
  const auto create_error = [](AdminHttpServer::Options options) {
    return std::string(AdminHttpServer::Create(std::move(options)).status().message());
  };
  for (const char* address : {"", "localhost", "127.0.0.1:", ":80", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:80x",
                              "[::1", "[::1]", "::1:80"}) {
    AdminHttpServer::Options options;
    options.listen_address = address;
    EXPECT_THAT(create_error(options), HasSubstr("listen_address '" + std::string(address) + "'")) << address;
  }
  AdminHttpServer::Options options;
  options.max_header_bytes = 10;
  EXPECT_THAT(create_error(options), HasSubstr("max_header_bytes"));
  options = {};
  options.max_connections = 0;
  EXPECT_THAT(create_error(options), HasSubstr("max_connections must be >= 1, got 0"));
  options = {};
  options.idle_timeout = std::chrono::milliseconds(0);
  EXPECT_THAT(create_error(options), HasSubstr("idle_timeout"));
  options = {};
  options.request_timeout = std::chrono::milliseconds(0);
  EXPECT_THAT(create_error(options), HasSubstr("request_timeout must be positive"));
  options = {};
  options.metrics_require_token = true;
  EXPECT_THAT(create_error(options), HasSubstr("metrics_require_token needs an internal_token"));
  options = {};
  options.listen_address = "[::1]:0";
  EXPECT_TRUE(AdminHttpServer::Create(options).ok());
  options.listen_address = "localhost:7001";
  EXPECT_TRUE(AdminHttpServer::Create(options).ok());
}

}  // namespace
}  // namespace orca::services
