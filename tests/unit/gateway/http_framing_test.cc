// HTTP/1.1 message framing per RFC 9112 (issue 45): every request whose body
// length is uncertain (an unknown or non-final transfer coding, Transfer-Encoding
// with Content-Length or on HTTP/1.0, a duplicate or invalid Content-Length) or
// whose header is ambiguous (no or two Host, an obs-folded line, two
// Authorization) is answered with the precise status and the connection is
// closed: nothing sent after it, in the same bytes, is ever run as a request.
//
// Each row sends the attack, a request smuggled in its "body", and a second,
// pipelined request in one write, to an HttpServer whose handler counts the
// requests it runs; then one to the whole gateway whose fake scheduler counts
// the generations it was asked for.

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/gateway/api_error.h"
#include "services/gateway/http_server.h"
#include "tests/unit/common/raw_http_client.h"
#include "tests/unit/gateway/gateway_test_util.h"

namespace orca::gateway {
namespace {

namespace net = boost::asio;
using orca::testing::RawHttpClient;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// An HttpServer on 127.0.0.1:0 whose handler answers 200 and records every path it ran.
class CountingServer {
 public:
  CountingServer() {
    HttpServer::Options options;
    options.listen = "127.0.0.1:0";
    options.error_responder = [](int status, std::string message) {
      return ApiError::FromHttp(status, std::move(message)).ToHttpResponse();
    };
    auto server = HttpServer::Create(io_, options, [this](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
      {
        absl::MutexLock lock(&mu_);
        handled_.push_back(request.path);
        for (const auto& [name, value] : request.headers) headers_.push_back(name + ": " + value);
      }
      HttpResponse response;
      response.content_type = "text/plain";
      response.body = "ran " + request.path;
      exchange->Respond(std::move(response));
    });
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~CountingServer() {
    server_->Stop();
    work_.reset();
    // Let Stop's closes run, then end the loop.
    for (int i = 0; i < 200 && server_->num_connections() > 0; ++i) absl::SleepFor(absl::Milliseconds(5));
    io_.stop();
    thread_.join();
  }

  int port() const { return server_->port(); }
  std::vector<std::string> handled() const {
    absl::MutexLock lock(&mu_);
    return handled_;
  }
  /// "name: value" of every header the handler saw, all requests together.
  std::vector<std::string> headers() const {
    absl::MutexLock lock(&mu_);
    return headers_;
  }

 private:
  net::io_context io_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_{net::make_work_guard(io_)};
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<std::string> handled_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> headers_ ABSL_GUARDED_BY(mu_);
};

// Run as a request if anything after the attack's header were read as one.
constexpr char kSmuggled[] = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
constexpr char kNext[] = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n";

struct FramingCase {
  const char* name;
  std::string request;  // the attack: request line, header, and whatever follows it
  int status;
  const char* message;  // part of the error message
};

std::vector<FramingCase> Cases() {
  const std::string post = "POST /attack HTTP/1.1\r\nHost: x\r\n";
  const std::string smuggled = kSmuggled;
  // A chunked body that ends at once, followed by the smuggled request: the
  // classic CL.TE / TE.CL desynchronization payload.
  const std::string chunked_then_smuggled = "0\r\n\r\n" + smuggled;
  return {
      // RFC 9112 §6.3: chunked not the final coding: the length cannot be known: 400 and close.
      {"TransferCodingXchunked", post + "Transfer-Encoding: xchunked\r\n\r\n" + smuggled, 400,
       "chunked is not the final transfer coding"},
      {"TransferCodingGzip", post + "Transfer-Encoding: gzip\r\n\r\n" + smuggled, 400,
       "chunked is not the final transfer coding"},
      {"TransferCodingIdentity", post + "Transfer-Encoding: identity\r\n\r\n" + smuggled, 400,
       "chunked is not the final transfer coding"},
      {"ChunkedThenIdentity", post + "Transfer-Encoding: chunked, identity\r\n\r\n" + chunked_then_smuggled, 400,
       "chunked is not the final transfer coding"},
      {"ChunkedTwiceInOneField", post + "Transfer-Encoding: chunked, chunked\r\n\r\n" + chunked_then_smuggled, 400,
       "chunked more than once"},
      {"ChunkedInTwoFields",
       post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked_then_smuggled, 400,
       "Transfer-Encoding"},
      {"EmptyTransferEncoding", post + "Transfer-Encoding: \r\n\r\n" + smuggled, 400,
       "chunked is not the final transfer coding"},
      // RFC 9112 §6.1: a coding we do not implement before a final chunked: 501 and close.
      {"GzipThenChunked", post + "Transfer-Encoding: gzip, chunked\r\n\r\n" + chunked_then_smuggled, 501,
       "transfer coding 'gzip' is not implemented"},
      // RFC 9112 §6.1 / §6.3: Transfer-Encoding with Content-Length, in either order.
      {"ContentLengthThenTransferEncoding",
       post + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked_then_smuggled, 400, "Content-Length"},
      {"TransferEncodingThenContentLength",
       post + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n" + chunked_then_smuggled, 400, "Content-Length"},
      // RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 request: framing is faulty.
      {"TransferEncodingOnHttp10",
       "POST /attack HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked_then_smuggled, 400,
       "HTTP/1.0"},
      // RFC 9112 §6.3: duplicate or invalid Content-Length.
      {"ContentLengthTwice", post + "Content-Length: 0\r\nContent-Length: 0\r\n\r\n" + smuggled, 400,
       "more than one Content-Length"},
      {"ContentLengthList", post + "Content-Length: 0, 0\r\n\r\n" + smuggled, 400, "Content-Length"},
      {"ContentLengthSigned", post + "Content-Length: +0\r\n\r\n" + smuggled, 400, "Content-Length"},
      {"ContentLengthNegative", post + "Content-Length: -1\r\n\r\n" + smuggled, 400, "Content-Length"},
      {"ContentLengthHex", post + "Content-Length: 0x0\r\n\r\n" + smuggled, 400, "Content-Length"},
      // RFC 9112 §3.2: a request without Host, or with two, is a 400.
      {"MissingHost", "GET /attack HTTP/1.1\r\n\r\n" + smuggled, 400, "no Host header"},
      {"TwoHosts", "GET /attack HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n" + smuggled, 400, "more than one Host"},
      // RFC 9112 §5.2: obs-fold (a line starting with SP or HTAB) is rejected.
      {"ObsFoldWithSpace", "GET /attack HTTP/1.1\r\nHost: x\r\nX-Note: a\r\n b\r\n\r\n" + smuggled, 400,
       "obsolete line folding"},
      {"ObsFoldWithTab", "GET /attack HTTP/1.1\r\nHost: x\r\nX-Note: a\r\n\tb\r\n\r\n" + smuggled, 400,
       "obsolete line folding"},
      {"ObsFoldedContentLength", post + "Content-Length:\r\n 0\r\n\r\n" + smuggled, 400, "obsolete line folding"},
      // Two credentials: neither is taken (the first used to win).
      {"TwoAuthorizations",
       "GET /attack HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n" + smuggled, 400,
       "more than one Authorization"},
  };
}

class HttpFramingTest : public ::testing::TestWithParam<FramingCase> {};

TEST_P(HttpFramingTest, RejectsAndClosesWithoutRunningAnythingAfterIt) {
  const FramingCase& c = GetParam();
  CountingServer server;
  RawHttpClient client(server.port());
  client.Send(c.request + kNext);
  const RawHttpClient::Response response = client.ReadResponse();
  EXPECT_EQ(response.status, c.status) << response.body;
  EXPECT_THAT(response.body, HasSubstr(c.message));
  EXPECT_EQ(response.Header("connection"), "close");
  EXPECT_TRUE(client.ClosedByServer()) << "the connection must not be reused after a framing error";
  EXPECT_THAT(server.handled(), ElementsAre()) << "nothing in these bytes may run as a request";
}

INSTANTIATE_TEST_SUITE_P(Rfc9112, HttpFramingTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<FramingCase>& info) { return info.param.name; });

// The control for the table: well-framed requests in the same bytes all run.
TEST(HttpFramingControlTest, WellFramedChunkedRequestAndItsPipelinedSuccessorBothRun) {
  CountingServer server;
  RawHttpClient client(server.port());
  client.Send(
      "POST /first HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
      "POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi" +
      std::string(kNext) + "GET /ten HTTP/1.0\r\n\r\n");
  EXPECT_EQ(client.ReadResponse().status, 200);
  EXPECT_EQ(client.ReadResponse().status, 200);
  EXPECT_EQ(client.ReadResponse().status, 200);
  EXPECT_EQ(client.ReadResponse().status, 200) << "HTTP/1.0 needs no Host";
  EXPECT_THAT(server.handled(), ElementsAre("/first", "/second", "/next", "/ten"));
}

// A chunked body's trailer fields are not headers: a credential or Host sent
// after the body (past a proxy that vets only the header) never reaches the handler.
TEST(HttpFramingControlTest, TrailerFieldsNeverBecomeHeaders) {
  CountingServer server;
  RawHttpClient client(server.port());
  client.Send(
      "POST /trailers HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n"
      "Authorization: Bearer smuggled\r\nHost: y\r\n\r\n");
  EXPECT_EQ(client.ReadResponse().status, 200);
  EXPECT_THAT(server.handled(), ElementsAre("/trailers"));
  EXPECT_THAT(server.headers(), ElementsAre("host: x", "transfer-encoding: chunked"));
}

// The whole gateway: a smuggled completion never reaches the scheduler.
TEST(HttpFramingGatewayTest, SmuggledCompletionNeverReachesTheScheduler) {
  testing::GatewayFixture f;
  const std::string body = R"({"prompt": "smuggled", "max_tokens": 2})";
  const std::string completion =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  RawHttpClient client(f.port());
  client.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n" + completion +
              completion);
  const RawHttpClient::Response response = client.ReadResponse();
  EXPECT_EQ(response.status, 400);
  EXPECT_EQ(nlohmann::json::parse(response.body, nullptr, false)["error"]["type"], "invalid_request_error")
      << response.body;
  EXPECT_TRUE(client.ClosedByServer());
  EXPECT_EQ(f.scheduler().num_generate_calls(), 0);
  // 501 carries the not_implemented type.
  RawHttpClient second(f.port());
  second.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n" +
              completion);
  const RawHttpClient::Response unsupported = second.ReadResponse();
  EXPECT_EQ(unsupported.status, 501);
  EXPECT_EQ(nlohmann::json::parse(unsupported.body, nullptr, false)["error"]["type"], "not_implemented")
      << unsupported.body;
  EXPECT_TRUE(second.ClosedByServer());
  EXPECT_EQ(f.scheduler().num_generate_calls(), 0);
}

}  // namespace
}  // namespace orca::gateway
