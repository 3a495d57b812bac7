#include "services/gateway/http_session.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/common/logging.h"

namespace orca::gateway {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

constexpr size_t kWatchReadBytes = 4096;
// Pipelined bytes kept while a request is handled; beyond, the watch pauses.
constexpr size_t kMaxPipelinedBytes = 64u << 10;

// Strips CR/LF so no header value can split the response.
std::string HeaderSafe(std::string_view value) {
  std::string out(value);
  for (char& c : out) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return out;
}

class SessionExchange : public HttpExchange {
 public:
  SessionExchange(std::shared_ptr<HttpSession> session, uint64_t seq) : session_(std::move(session)), seq_(seq) {}
  void Respond(HttpResponse response) override { session_->Respond(seq_, std::move(response)); }
  void StartStream(int status, std::string content_type, HttpHeaders headers) override {
    session_->StartStream(seq_, status, std::move(content_type), std::move(headers));
  }
  void Write(std::string data) override { session_->Write(seq_, std::move(data)); }
  void EndStream() override { session_->EndStream(seq_); }
  void SetDisconnectHandler(std::function<void()> handler) override {
    session_->SetDisconnectHandler(seq_, std::move(handler));
  }

 private:
  const std::shared_ptr<HttpSession> session_;
  const uint64_t seq_;
};

}  // namespace

HttpSession::HttpSession(net::ip::tcp::socket socket, std::shared_ptr<const HttpSessionConfig> config)
    : stream_(std::move(socket)), config_(std::move(config)) {
  beast::error_code ec;
  auto endpoint = stream_.socket().remote_endpoint(ec);
  if (!ec) peer_ = absl::StrCat(endpoint.address().to_string(), ":", endpoint.port());
}

HttpSession::~HttpSession() = default;

template <typename F>
void HttpSession::Post(F&& f) {
  net::post(stream_.get_executor(), std::forward<F>(f));
}

void HttpSession::Start() {
  Post([self = shared_from_this()] { self->DoReadHeader(); });
}

void HttpSession::Close() {
  Post([self = shared_from_this()] {
    if (self->state_ == State::kClosed) return;
    if (self->ExchangeActive()) {
      self->PeerGone();
    } else {
      self->Shutdown();
    }
  });
}

// ---- Reading requests ----------------------------------------------------------

void HttpSession::DoReadHeader() {
  if (state_ == State::kClosed) return;
  state_ = State::kReading;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(config_->max_header_bytes));
  parser_->body_limit(config_->max_body_bytes);
  stream_.expires_after(absl::ToChronoMilliseconds(config_->idle_timeout));
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
}

void HttpSession::OnHeader(beast::error_code ec) {
  if (state_ == State::kClosed) return;
  if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
      ec == beast::error::timeout || ec == net::error::operation_aborted) {
    Shutdown();
    return;
  }
  if (ec == http::error::body_limit) {
    // Beast checks Content-Length against the limit as soon as the header is in.
    auto length = parser_->content_length();
    SendServerError(413, length
                             ? absl::StrCat("Request body of ", *length, " bytes exceeds the limit of ",
                                            config_->max_body_bytes, " bytes")
                             : absl::StrCat("Request body exceeds the limit of ", config_->max_body_bytes, " bytes"));
    return;
  }
  if (ec == http::error::header_limit) {
    SendServerError(431, absl::StrCat("Request headers exceed the limit of ", config_->max_header_bytes, " bytes"));
    return;
  }
  if (ec) {
    SendServerError(400, absl::StrCat("Malformed HTTP request: ", ec.message()));
    return;
  }
  const auto& header = parser_->get();
  version_ = header.version();
  keep_alive_ = header.keep_alive();
  if (auto length = parser_->content_length(); length && *length > config_->max_body_bytes) {
    SendServerError(413, absl::StrCat("Request body of ", *length, " bytes exceeds the limit of ",
                                      config_->max_body_bytes, " bytes"));
    return;
  }
  if (absl::EqualsIgnoreCase(std::string(header[http::field::expect]), "100-continue")) {
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    net::async_write(stream_, net::buffer(kContinue), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) {
        self->Shutdown();
      } else {
        self->DoReadBody();
      }
    });
    return;
  }
  DoReadBody();
}

void HttpSession::DoReadBody() {
  if (state_ == State::kClosed) return;
  stream_.expires_after(absl::ToChronoMilliseconds(config_->idle_timeout));
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
}

void HttpSession::OnBody(beast::error_code ec) {
  if (state_ == State::kClosed) return;
  if (ec == http::error::body_limit) {
    SendServerError(413, absl::StrCat("Request body exceeds the limit of ", config_->max_body_bytes, " bytes"));
    return;
  }
  if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
      ec == beast::error::timeout || ec == net::error::operation_aborted) {
    Shutdown();
    return;
  }
  if (ec) {
    SendServerError(400, absl::StrCat("Malformed HTTP request body: ", ec.message()));
    return;
  }
  Dispatch();
}

void HttpSession::Dispatch() {
  http::request<http::string_body> message = parser_->release();
  parser_.reset();
  HttpRequest request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  const size_t query = request.target.find('?');
  request.path = request.target.substr(0, query);
  for (const auto& field : message.base()) {
    request.headers.emplace_back(absl::AsciiStrToLower(std::string(field.name_string())), std::string(field.value()));
  }
  request.body = std::move(message.body());
  request.peer = peer_;

  stream_.expires_never();
  state_ = State::kHandling;
  if (!counted_) {
    counted_ = true;
    config_->active_exchanges->fetch_add(1);
  }
  ++seq_;
  close_after_ = false;
  on_disconnect_ = nullptr;
  config_->handler(std::move(request), std::make_shared<SessionExchange>(shared_from_this(), seq_));
  // Exchange calls are posted, so the exchange is still active here.
  if (ExchangeActive() && !watching_) StartWatch();
}

// ---- Noticing a client that leaves mid-request -------------------------------

void HttpSession::StartWatch() {
  watching_ = true;
  stream_.async_read_some(buffer_.prepare(kWatchReadBytes),
                          [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnWatch(ec, n); });
}

void HttpSession::OnWatch(beast::error_code ec, size_t bytes) {
  watching_ = false;
  if (state_ == State::kClosed) return;
  if (state_ == State::kDraining) {
    if (ec) {
      Shutdown();
    } else {
      Drain();
    }
    return;
  }
  if (!ec) buffer_.commit(bytes);
  if (state_ == State::kIdle) {
    // The exchange completed while the watch was posted; move on to the next request.
    if (!ec || ec == net::error::operation_aborted) {
      DoReadHeader();
    } else {
      Shutdown();
    }
    return;
  }
  if (!ec) {
    if (buffer_.size() < kMaxPipelinedBytes) StartWatch();
    return;
  }
  PeerGone();
}

// ---- Writing responses -----------------------------------------------------------

std::string HttpSession::SerializeHead(int status, const std::string& content_type, const HttpHeaders& headers,
                                       std::optional<size_t> content_length) const {
  std::string head = absl::StrCat(version_ == 10 ? "HTTP/1.0 " : "HTTP/1.1 ", status, " ",
                                  std::string(http::obsolete_reason(http::int_to_status(status))), "\r\n");
  absl::StrAppend(&head, "Server: orca-gateway\r\n");
  if (!content_type.empty()) absl::StrAppend(&head, "Content-Type: ", HeaderSafe(content_type), "\r\n");
  for (const auto& [name, value] : headers) absl::StrAppend(&head, HeaderSafe(name), ": ", HeaderSafe(value), "\r\n");
  if (content_length) {
    absl::StrAppend(&head, "Content-Length: ", *content_length, "\r\n");
  } else if (chunked_) {
    absl::StrAppend(&head, "Transfer-Encoding: chunked\r\n");
  }
  const bool keep = keep_alive_ && !close_after_;
  if (version_ == 10) {
    if (keep) absl::StrAppend(&head, "Connection: keep-alive\r\n");
  } else if (!keep) {
    absl::StrAppend(&head, "Connection: close\r\n");
  }
  absl::StrAppend(&head, "\r\n");
  return head;
}

void HttpSession::SendServerError(int status, std::string message) {
  HttpResponse response;
  if (config_->error_responder) {
    response = config_->error_responder(status, std::move(message));
  } else {
    response.status = status;
    response.content_type = "text/plain";
    response.body = std::move(message) + "\n";
  }
  // The stream position is unknown after a framing error: answer and close.
  close_after_ = true;
  ++seq_;
  on_disconnect_ = nullptr;
  state_ = State::kWriting;
  QueueWrite(
      SerializeHead(response.status, response.content_type, response.headers, response.body.size()) + response.body,
      /*last=*/true);
}

void HttpSession::Respond(uint64_t seq, HttpResponse response) {
  Post([self = shared_from_this(), seq, response = std::move(response)]() mutable {
    if (!self->IsCurrent(seq) || self->state_ != State::kHandling) return;
    self->state_ = State::kWriting;
    std::string data =
        self->SerializeHead(response.status, response.content_type, response.headers, response.body.size());
    data += response.body;
    self->QueueWrite(std::move(data), /*last=*/true);
  });
}

void HttpSession::StartStream(uint64_t seq, int status, std::string content_type, HttpHeaders headers) {
  Post([self = shared_from_this(), seq, status, content_type = std::move(content_type),
        headers = std::move(headers)]() mutable {
    if (!self->IsCurrent(seq) || self->state_ != State::kHandling) return;
    self->state_ = State::kStreaming;
    // HTTP/1.0 has no chunked encoding: stream raw and close at the end.
    self->chunked_ = self->version_ >= 11;
    if (!self->chunked_) self->close_after_ = true;
    self->QueueWrite(self->SerializeHead(status, content_type, headers, std::nullopt), /*last=*/false);
  });
}

void HttpSession::Write(uint64_t seq, std::string data) {
  Post([self = shared_from_this(), seq, data = std::move(data)]() mutable {
    if (!self->IsCurrent(seq) || self->state_ != State::kStreaming || self->end_pending_ || data.empty()) return;
    if (self->write_pending_.size() + data.size() > self->config_->max_buffered_write_bytes) {
      ORCA_LOG(WARNING).With("peer", self->peer_) << "client is not reading its stream; disconnecting it";
      self->PeerGone();
      return;
    }
    if (self->chunked_) {
      char size_line[24];
      snprintf(size_line, sizeof(size_line), "%zx\r\n", data.size());
      self->write_pending_ += size_line;
      self->write_pending_ += data;
      self->write_pending_ += "\r\n";
      self->Flush();
    } else {
      self->QueueWrite(std::move(data), /*last=*/false);
    }
  });
}

void HttpSession::EndStream(uint64_t seq) {
  Post([self = shared_from_this(), seq] {
    if (!self->IsCurrent(seq) || self->state_ != State::kStreaming || self->end_pending_) return;
    self->QueueWrite(self->chunked_ ? "0\r\n\r\n" : "", /*last=*/true);
  });
}

void HttpSession::SetDisconnectHandler(uint64_t seq, std::function<void()> handler) {
  Post([self = shared_from_this(), seq, handler = std::move(handler)]() mutable {
    if (self->state_ == State::kClosed && seq == self->seq_) {
      handler();  // already gone
      return;
    }
    if (self->IsCurrent(seq)) self->on_disconnect_ = std::move(handler);
  });
}

void HttpSession::QueueWrite(std::string data, bool last) {
  write_pending_ += data;
  if (last) end_pending_ = true;
  Flush();
}

void HttpSession::Flush() {
  if (writing_ || state_ == State::kClosed) return;
  if (write_pending_.empty()) {
    if (end_pending_) OnExchangeComplete();
    return;
  }
  write_inflight_.swap(write_pending_);
  write_pending_.clear();
  writing_ = true;
  net::async_write(stream_, net::buffer(write_inflight_),
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
}

void HttpSession::OnWrite(beast::error_code ec) {
  writing_ = false;
  write_inflight_.clear();
  if (state_ == State::kClosed) return;
  if (ec) {
    PeerGone();
    return;
  }
  Flush();
}

void HttpSession::OnExchangeComplete() {
  end_pending_ = false;
  if (counted_) {
    counted_ = false;
    config_->active_exchanges->fetch_sub(1);
  }
  on_disconnect_ = nullptr;
  chunked_ = false;
  if (!keep_alive_ || close_after_) {
    GracefulClose();
    return;
  }
  if (watching_) {
    // Stop the watch read; its handler continues with the next request.
    state_ = State::kIdle;
    stream_.cancel();
    return;
  }
  DoReadHeader();
}

void HttpSession::PeerGone() {
  std::function<void()> handler = std::move(on_disconnect_);
  on_disconnect_ = nullptr;
  Shutdown();
  if (handler) handler();
}

void HttpSession::GracefulClose() {
  if (state_ == State::kClosed || state_ == State::kDraining) return;
  // Closing with unread request bytes (e.g. the body of a 413) would reset the
  // connection and could destroy the response before the client reads it:
  // half-close, then discard input until the client closes (bounded in time).
  state_ = State::kDraining;
  beast::error_code ec;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  stream_.expires_after(std::chrono::seconds(2));
  Drain();
}

void HttpSession::Drain() {
  if (watching_) return;  // the pending watch read completes first and drains on
  buffer_.clear();
  stream_.async_read_some(buffer_.prepare(16384), [self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec || self->state_ != State::kDraining) {
      self->Shutdown();
    } else {
      self->Drain();
    }
  });
}

void HttpSession::Shutdown() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  if (counted_) {
    counted_ = false;
    config_->active_exchanges->fetch_sub(1);
  }
  beast::error_code ec;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
  stream_.close();
}

}  // namespace orca::gateway
