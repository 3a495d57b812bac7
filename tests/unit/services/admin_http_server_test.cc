#include "services/common/admin_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/ascii.h"
#include "core/metrics/orca_metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace orca::services {
namespace {

using ::testing::HasSubstr;

struct HttpResponse {
  int status = 0;                              // 0: no (complete) response
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;
};

// A blocking HTTP/1.1 client over one TCP connection to 127.0.0.1, with a
// receive timeout so that a broken server fails the test instead of hanging.
class TestConnection {
 public:
  explicit TestConnection(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    timeval timeout{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~TestConnection() {
    if (fd_ >= 0) close(fd_);
  }
  TestConnection(const TestConnection&) = delete;
  TestConnection& operator=(const TestConnection&) = delete;

  bool connected() const { return connected_; }

  bool Send(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads one response (status 0 if none arrived); `head` means the body is
  // not sent (HEAD request).
  HttpResponse Read(bool head = false) {
    size_t header_end;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return {};
    }
    HttpResponse response;
    const std::string head_text = buffer_.substr(0, header_end);
    buffer_.erase(0, header_end + 4);
    size_t line_end = head_text.find("\r\n");
    const std::string status_line = head_text.substr(0, line_end);
    if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12) return {};
    response.status = std::stoi(status_line.substr(9, 3));
    while (line_end != std::string::npos) {
      const size_t start = line_end + 2;
      line_end = head_text.find("\r\n", start);
      const std::string line = head_text.substr(start, line_end - start);
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string value = line.substr(colon + 1);
      absl::StripAsciiWhitespace(&value);
      response.headers[absl::AsciiStrToLower(line.substr(0, colon))] = value;
    }
    const size_t length =
        head ? 0 : std::stoul(response.headers.count("content-length") ? response.headers["content-length"] : "0");
    while (buffer_.size() < length) {
      if (!Fill()) return {};
    }
    response.body = buffer_.substr(0, length);
    buffer_.erase(0, length);
    return response;
  }

  // True when the server closed the connection (EOF or reset) with nothing
  // more to read.
  bool ClosedByServer() {
    if (!buffer_.empty()) return false;
    char c;
    const ssize_t n = recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

 private:
  bool Fill() {
    char chunk[4096];
    const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

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
    TestConnection connection(port);
    EXPECT_TRUE(connection.connected());
    EXPECT_TRUE(connection.Send(request));
    return connection.Read(head);
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
  TestConnection connection(server->port());
  ASSERT_TRUE(connection.Send("HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n" + Get("/health")));
  HttpResponse head = connection.Read(/*head=*/true);
  ASSERT_NE(head.status, 0) << "no response";
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.headers["content-length"], "2");
  // The next response starts right after the HEAD headers: no body was sent.
  HttpResponse get = connection.Read();
  ASSERT_NE(get.status, 0) << "no response";
  EXPECT_EQ(get.body, "ok");
}

TEST_F(AdminHttpServerTest, KeepsConnectionsAliveAndAnswersPipelinedRequests) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  TestConnection connection(server->port());
  ASSERT_TRUE(connection.connected());
  ASSERT_TRUE(connection.Send(Get("/health")));
  EXPECT_EQ(connection.Read().status, 200);
  ASSERT_TRUE(connection.Send(Get("/ready")));
  EXPECT_EQ(connection.Read().status, 503);
  // Two requests in one write.
  ASSERT_TRUE(connection.Send(Get("/metrics") + Get("/nope")));
  EXPECT_EQ(connection.Read().status, 200);
  EXPECT_EQ(connection.Read().status, 404);
  // Connection: close is honoured after the response.
  ASSERT_TRUE(connection.Send(Get("/health", "Connection: close\r\n")));
  HttpResponse last = connection.Read();
  ASSERT_NE(last.status, 0) << "no response";
  EXPECT_EQ(last.headers["connection"], "close");
  EXPECT_TRUE(connection.ClosedByServer());
}

TEST_F(AdminHttpServerTest, Http10ClosesUnlessKeepAliveIsAsked) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  TestConnection connection(server->port());
  ASSERT_TRUE(connection.Send("GET /health HTTP/1.0\r\n\r\n"));
  HttpResponse response = connection.Read();
  ASSERT_NE(response.status, 0) << "no response";
  EXPECT_EQ(response.body, "ok");
  EXPECT_TRUE(connection.ClosedByServer());
}

TEST_F(AdminHttpServerTest, OversizedHeadersGet431AndTheConnectionCloses) {
  AdminHttpServer::Options options;
  options.max_header_bytes = 1024;
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  TestConnection connection(server->port());
  ASSERT_TRUE(connection.Send(Get("/health", "X-Big: " + std::string(64 * 1024, 'a') + "\r\n")));
  HttpResponse response = connection.Read();
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

TEST_F(AdminHttpServerTest, ClosesConnectionsBeyondTheLimit) {
  AdminHttpServer::Options options;
  options.max_connections = 2;
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  TestConnection first(server->port());
  TestConnection second(server->port());
  // A completed request proves each connection was accepted and is open.
  ASSERT_TRUE(first.Send(Get("/health")));
  ASSERT_NE(first.Read().status, 0) << "no response";
  ASSERT_TRUE(second.Send(Get("/health")));
  ASSERT_NE(second.Read().status, 0) << "no response";
  TestConnection third(server->port());
  third.Send(Get("/health"));
  EXPECT_EQ(third.Read().status, 0);
  // The admitted connections still work.
  ASSERT_TRUE(first.Send(Get("/health")));
  EXPECT_EQ(first.Read().status, 200);
}

TEST_F(AdminHttpServerTest, StopClosesTheListenerAndOpenConnections) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  TestConnection idle(port);
  ASSERT_TRUE(idle.Send(Get("/health")));
  ASSERT_NE(idle.Read().status, 0) << "no response";
  server->Stop();
  EXPECT_TRUE(idle.ClosedByServer());
  TestConnection after(port);
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
  TestConnection after(port);
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
  options.listen_address = "[::1]:0";
  EXPECT_TRUE(AdminHttpServer::Create(options).ok());
  options.listen_address = "localhost:7001";
  EXPECT_TRUE(AdminHttpServer::Create(options).ok());
}

}  // namespace
}  // namespace orca::services
