#pragma once
// Shared helpers for the gateway tests: a byte-level model, a gateway wired to
// a FakeScheduler on 127.0.0.1:0, and a small blocking HTTP client that can
// also read a response partially and hang up mid-stream.

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "core/text/chat_template.h"
#include "core/text/tokenizer.h"
#include "gtest/gtest.h"
#include "services/gateway/gateway.h"
#include "services/gateway/gateway_model.h"
#include "services/gateway/testing/byte_level_model.h"
#include "services/gateway/testing/fake_scheduler.h"

namespace orca::gateway::testing {

inline std::unique_ptr<GatewayModel> MakeByteLevelModel(int32_t max_model_len = 1024) {
  auto tokenizer = text::Tokenizer::FromJson(ByteLevelTokenizerJson(), ByteLevelTokenizerConfigJson());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto chat_template = text::ChatTemplate::Builtin("chatml");
  EXPECT_TRUE(chat_template.ok()) << chat_template.status();
  return GatewayModel::FromParts("byte-model", std::move(tokenizer).value(), std::move(chat_template).value(),
                                 max_model_len);
}

/// Token ids of `text` with the byte-level tokenizer (= its bytes).
inline std::vector<int32_t> Bytes(const std::string& text) {
  std::vector<int32_t> ids;
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

struct HttpResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  nlohmann::json Json() const { return nlohmann::json::parse(body, nullptr, false); }
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

/// One blocking HTTP/1.1 connection to 127.0.0.1:port with a receive timeout.
class TestHttpClient {
 public:
  explicit TestHttpClient(int port) : socket_(io_) {
    boost::asio::ip::tcp::endpoint endpoint(boost::asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port));
    socket_.connect(endpoint);
    struct timeval tv = {10, 0};  // never hang a test run
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }

  /// Sends raw bytes.
  void SendRaw(const std::string& data) { boost::asio::write(socket_, boost::asio::buffer(data)); }

  void SendRequest(const std::string& method, const std::string& path, const std::string& body,
                   const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    bool has_type = false;
    for (const auto& [name, value] : headers) {
      request += name + ": " + value + "\r\n";
      has_type |= name == "Content-Type";
    }
    if (!has_type && !body.empty()) request += "Content-Type: application/json\r\n";
    if (method != "GET" || !body.empty()) request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    request += "\r\n" + body;
    SendRaw(request);
  }

  /// Reads one complete response (Content-Length or chunked).
  HttpResult ReadResponse() {
    namespace http = boost::beast::http;
    HttpResult result;
    boost::beast::error_code ec;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    http::read(socket_, buffer_, parser, ec);
    if (ec) {
      result.status = -1;
      result.body = ec.message();
      return result;
    }
    auto& message = parser.get();
    result.status = static_cast<int>(message.result_int());
    for (const auto& field : message) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      result.headers[name] = std::string(field.value());
    }
    result.body = message.body();
    return result;
  }

  HttpResult Request(const std::string& method, const std::string& path, const std::string& body = "",
                     const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    SendRequest(method, path, body, headers);
    return ReadResponse();
  }

  /// Reads until `needle` has been seen in the raw bytes (headers included);
  /// returns everything read. Stops at EOF or the receive timeout.
  std::string ReadUntil(const std::string& needle) {
    std::string seen = boost::beast::buffers_to_string(buffer_.data());
    buffer_.consume(buffer_.size());
    char chunk[4096];
    while (seen.find(needle) == std::string::npos) {
      boost::system::error_code ec;
      const size_t n = socket_.read_some(boost::asio::buffer(chunk), ec);
      if (ec) break;
      seen.append(chunk, n);
    }
    return seen;
  }

  /// True once the server closed the connection (EOF), within the timeout.
  bool WaitForClose() {
    char chunk[4096];
    while (true) {
      boost::system::error_code ec;
      socket_.read_some(boost::asio::buffer(chunk), ec);
      if (ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset) return true;
      if (ec) return false;
    }
  }

  void Close() {
    boost::system::error_code ec;
    socket_.close(ec);
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

/// The `data:` payloads of an SSE body, in order ("[DONE]" included).
inline std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  for (absl::string_view event : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    std::string e(event);
    if (e.rfind("data: ", 0) == 0) out.push_back(e.substr(6));
  }
  return out;
}

/// A gateway on 127.0.0.1:0 in front of one FakeScheduler.
class GatewayFixture {
 public:
  struct Config {
    FakeScheduler::Options scheduler;
    Gateway::Options gateway;
    int32_t max_model_len = 1024;
    bool wait_ready = true;
  };

  static Config DefaultConfig() {
    Config config;
    config.scheduler.vocab_size = kByteLevelVocabSize;
    config.scheduler.eos_id = kByteLevelEosId;
    config.scheduler.iteration_interval = absl::Milliseconds(1);
    config.gateway.listen = "127.0.0.1:0";
    config.gateway.grpc_listen = "127.0.0.1:0";
    config.gateway.scheduler_poll_interval = absl::Milliseconds(50);
    return config;
  }

  explicit GatewayFixture(Config config = DefaultConfig()) {
    auto scheduler = FakeScheduler::Start(config.scheduler);
    EXPECT_TRUE(scheduler.ok()) << scheduler.status();
    scheduler_ = std::move(scheduler).value();
    config.gateway.schedulers = {scheduler_->address()};
    auto gateway = Gateway::CreateWithModel(config.gateway, MakeByteLevelModel(config.max_model_len));
    EXPECT_TRUE(gateway.ok()) << gateway.status();
    gateway_ = std::move(gateway).value();
    if (config.wait_ready) {
      EXPECT_TRUE(gateway_->WaitUntilReady(absl::Seconds(10)));
    }
  }
  ~GatewayFixture() {
    gateway_->Shutdown();
    scheduler_->Shutdown();
  }

  Gateway& gateway() { return *gateway_; }
  FakeScheduler& scheduler() { return *scheduler_; }
  int port() const { return gateway_->http_port(); }
  TestHttpClient Client() const { return TestHttpClient(gateway_->http_port()); }

 private:
  std::unique_ptr<FakeScheduler> scheduler_;
  std::unique_ptr<Gateway> gateway_;
};

}  // namespace orca::gateway::testing
