#pragma once
// Shared helpers for the gateway tests: a byte-level model, a gateway wired to
// a FakeScheduler on 127.0.0.1:0, and a small blocking HTTP client that can
// also read a response partially and hang up mid-stream.

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <memory>
#include <optional>
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

/// The byte-level model with `chat_template`, or the built-in chatml when null.
inline std::unique_ptr<GatewayModel> MakeByteLevelModel(int32_t max_model_len = 1024,
                                                        std::unique_ptr<text::ChatTemplate> chat_template = nullptr) {
  auto tokenizer = text::Tokenizer::FromJson(ByteLevelTokenizerJson(), ByteLevelTokenizerConfigJson());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  if (chat_template == nullptr) {
    auto chatml = text::ChatTemplate::Builtin("chatml");
    EXPECT_TRUE(chatml.ok()) << chatml.status();
    chat_template = std::move(chatml).value();
  }
  return GatewayModel::FromParts("byte-model", std::move(tokenizer).value(), std::move(chat_template), max_model_len);
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

/// The `data:` payloads of a raw chunked SSE response (its head included, as
/// TestHttpClient::ReadUntil returns it), in order ("[DONE]" included).
inline std::vector<std::string> SseEvents(const std::string& raw) {
  std::string body;
  size_t pos = raw.find("\r\n\r\n");
  pos = pos == std::string::npos ? raw.size() : pos + 4;
  while (pos < raw.size()) {  // de-chunk
    const size_t eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t size = std::stoul(raw.substr(pos, eol - pos), nullptr, 16);
    if (size == 0) break;
    body += raw.substr(eol + 2, size);
    pos = eol + 2 + size + 2;
  }
  return SseData(body);
}

/// A gateway on 127.0.0.1:0 in front of one FakeScheduler.
class GatewayFixture {
 public:
  struct Config {
    FakeScheduler::Options scheduler;
    Gateway::Options gateway;
    int32_t max_model_len = 1024;
    bool wait_ready = true;
    /// Makes the model's chat template; unset: the built-in chatml.
    std::function<std::unique_ptr<text::ChatTemplate>()> chat_template;
    /// When set, the model is loaded as orca-gateway loads it (GatewayModel::Load) with
    /// these options instead (e.g. a directory WriteByteLevelModel wrote); the fields
    /// above that make a model are then unused.
    std::optional<GatewayModel::Options> load_model;
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
    std::unique_ptr<GatewayModel> model;
    if (config.load_model) {
      auto loaded = GatewayModel::Load(*config.load_model);
      EXPECT_TRUE(loaded.ok()) << loaded.status();
      if (loaded.ok()) model = std::move(loaded).value();
    } else {
      model = MakeByteLevelModel(config.max_model_len, config.chat_template ? config.chat_template() : nullptr);
    }
    auto gateway = Gateway::CreateWithModel(config.gateway, std::move(model));
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

/// DefaultConfig with room for one generation at a time and 5 ms a token, so
/// that one long stream (StartLongStream) holds the only admission slot.
inline GatewayFixture::Config OneRequestAtATimeConfig() {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.gateway.max_concurrent_requests = 1;
  config.scheduler.iteration_interval = absl::Milliseconds(5);
  return config;
}

/// Starts a 500-token streaming completion on `client`; returns what was read
/// up to its first event (its head says "200 OK" when it started).
inline std::string StartLongStream(TestHttpClient& client) {
  client.SendRequest("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 500, "stream": true})");
  return client.ReadUntil("data: ");
}

}  // namespace orca::gateway::testing
