#include "services/gateway/http_session.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/common/logging.h"
#include "services/gateway/http_framing.h"

namespace orca::gateway {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

constexpr size_t kWatchReadBytes = 4096;
constexpr size_t kHeaderReadBytes = 16384;
// Pipelined bytes kept while a request is handled; beyond, the watch pauses.
constexpr size_t kMaxPipelinedBytes = 64u << 10;
// After a pause ended its request, a client has this long (at least) without
// taking any output before its connection closes.
constexpr absl::Duration kMinSlowReaderGrace = absl::Seconds(5);

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
  bool ReadyForMore(std::function<void(const absl::Status&)> on_ready) override {
    return session_->ReadyForMore(seq_, std::move(on_ready));
  }

 private:
  const std::shared_ptr<HttpSession> session_;
  const uint64_t seq_;
};

}  // namespace

HttpSession::HttpSession(net::ip::tcp::socket socket, std::shared_ptr<const HttpSessionConfig> config)
    : stream_(std::move(socket)),
      config_(std::move(config)),
      pause_timer_(stream_.get_executor()),
      slow_reader_timer_(stream_.get_executor()) {
  beast::error_code ec;
  auto endpoint = stream_.socket().remote_endpoint(ec);
  if (!ec) peer_ = absl::StrCat(endpoint.address().to_string(), ":", endpoint.port());
}

// Normally Shutdown or the exchange's end released everything; not when the
// io_context is torn down with this session's handlers still queued.
HttpSession::~HttpSession() { ReleaseOutput(); }

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
  head_scanned_ = 0;
  stream_.expires_after(absl::ToChronoMilliseconds(config_->idle_timeout));
  ParseHeader();
}

void HttpSession::ParseHeader() {
  // As http::async_read_header does it, plus the obs-fold scan: Beast takes
  // header lines only once the byte after their line break is in, so the raw
  // head from the current line on is always still in buffer_ here.
  if (buffer_.size() > 0) {
    const auto data = buffer_.data();
    if (auto fold = FindObsFold(std::string_view(static_cast<const char*>(data.data()), data.size()), &head_scanned_)) {
      SendServerError(fold->status, std::move(fold->message));
      return;
    }
    beast::error_code ec;
    const size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (head_scanned_ != std::string_view::npos) head_scanned_ = head_scanned_ >= used ? head_scanned_ - used : 0;
    if (ec != http::error::need_more) {
      OnHeader(ec);
      return;
    }
  }
  stream_.async_read_some(buffer_.prepare(kHeaderReadBytes),
                          [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnHeaderBytes(ec, n); });
}

void HttpSession::OnHeaderBytes(beast::error_code ec, size_t bytes) {
  if (state_ == State::kClosed) return;
  if (ec) {
    // EOF, reset, timeout, shutdown: nobody to answer (a partial head is dropped).
    Shutdown();
    return;
  }
  buffer_.commit(bytes);
  ParseHeader();
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
  if (ec == http::error::bad_transfer_encoding) {
    SendServerError(400,
                    "Invalid Transfer-Encoding: it may appear once, never with Content-Length, and its final "
                    "coding must be chunked (RFC 9112 section 6.1)");
    return;
  }
  if (ec == http::error::bad_content_length) {
    SendServerError(400,
                    "Invalid Content-Length: send one decimal number, once, and never with Transfer-Encoding "
                    "(RFC 9112 section 6.3)");
    return;
  }
  if (ec) {
    SendServerError(400, absl::StrCat("Malformed HTTP request: ", ec.message()));
    return;
  }
  const auto& header = parser_->get();
  version_ = header.version();
  keep_alive_ = header.keep_alive();
  // Before the body: a request whose framing is in doubt is answered and the
  // connection closed, so that none of its bytes can pass for a next request.
  if (std::optional<FramingError> error = CheckRequestHeader(header.base())) {
    SendServerError(error->status, std::move(error->message));
    return;
  }
  header_fields_.clear();
  for (const auto& field : header) {
    header_fields_.emplace_back(absl::AsciiStrToLower(std::string(field.name_string())), std::string(field.value()));
  }
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
  // The header as it was checked: Beast merges a chunked body's trailer
  // fields into the message's, and they are dropped, so that no credential or
  // Host can arrive after the checks (and past a proxy that vets only the header).
  request.headers = std::move(header_fields_);
  header_fields_.clear();
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
  if (!keep) {
    absl::StrAppend(&head, "Connection: close\r\n");
  } else if (version_ == 10) {
    absl::StrAppend(&head, "Connection: keep-alive\r\n");
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
    if (OutputBudget* budget = self->config_->output_budget.get()) {
      budget->AddStream();
      self->stream_counted_ = true;
      absl::MutexLock lock(&self->flow_mu_);
      self->flow_seq_ = seq;
      self->flow_buffered_ = 0;
    }
    // HTTP/1.0 has no chunked encoding: stream raw and close at the end.
    self->chunked_ = self->version_ >= 11;
    if (!self->chunked_) self->close_after_ = true;
    self->QueueWrite(self->SerializeHead(status, content_type, headers, std::nullopt), /*last=*/false);
  });
}

void HttpSession::Write(uint64_t seq, std::string data) {
  // Charged now, from the producer's thread, so that the budget also covers
  // writes still queued for the strand.
  OutputBudget* const budget = config_->output_budget.get();
  const size_t bytes = data.size();
  const bool charged = budget != nullptr && bytes > 0 && budget->TryCharge(bytes);
  Post([self = shared_from_this(), seq, data = std::move(data), bytes, charged]() mutable {
    OutputBudget* const budget = self->config_->output_budget.get();
    const size_t charge = charged ? bytes : 0;
    if (!self->IsCurrent(seq) || self->state_ != State::kStreaming || self->end_pending_ || data.empty()) {
      if (charge > 0) budget->Release(charge);
      return;
    }
    if (budget != nullptr && !charged) {
      ORCA_LOG(WARNING).With("peer", self->peer_).With("max_bytes", budget->options().max_bytes)
          << "the gateway's output budget is full; disconnecting this stream";
      self->PeerGone();
      return;
    }
    if (self->write_pending_.size() + data.size() > self->config_->max_buffered_write_bytes) {
      if (charge > 0) budget->Release(charge);
      ORCA_LOG(WARNING).With("peer", self->peer_) << "client is not reading its stream; disconnecting it";
      self->PeerGone();
      return;
    }
    if (charge > 0) {
      self->pending_charge_ += charge;
      absl::MutexLock lock(&self->flow_mu_);
      self->flow_buffered_ += charge;
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
  inflight_charge_ = pending_charge_;
  pending_charge_ = 0;
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
  const size_t taken = inflight_charge_;
  inflight_charge_ = 0;
  if (taken > 0) OutputTaken(taken);
  Flush();
}

// ---- Output flow control (the gateway's output budget) ---------------------------

bool HttpSession::ReadyForMore(uint64_t seq, std::function<void(const absl::Status&)> on_ready) {
  OutputBudget* const budget = config_->output_budget.get();
  if (budget == nullptr) return true;
  {
    absl::MutexLock lock(&flow_mu_);
    // Not (or no longer) this exchange's stream, or within its share: go on.
    if (flow_seq_ != seq || flow_buffered_ <= budget->StreamShare()) return true;
    waiters_.push_back(std::move(on_ready));
    if (waiters_.size() > 1) return false;  // the pause is being timed already
  }
  budget->CountPause();
  Post([self = shared_from_this()] { self->ArmPauseTimer(); });
  return false;
}

void HttpSession::OutputTaken(size_t bytes) {
  OutputBudget* const budget = config_->output_budget.get();
  budget->Release(bytes);
  if (slow_reader_) ArmSlowReaderTimer();  // it reads: give it the grace again
  std::vector<std::function<void(const absl::Status&)>> ready;
  {
    absl::MutexLock lock(&flow_mu_);
    flow_buffered_ -= std::min(bytes, flow_buffered_);
    // Resume at half the share, so that a steady reader is not paused per message.
    if (!waiters_.empty() && flow_buffered_ <= budget->StreamShare() / 2) ready.swap(waiters_);
  }
  if (ready.empty()) return;
  if (pause_timer_armed_) pause_timer_.cancel();
  for (auto& on_ready : ready) on_ready(absl::OkStatus());
}

void HttpSession::ReleaseOutput() {
  OutputBudget* const budget = config_->output_budget.get();
  if (budget != nullptr) {
    budget->Release(pending_charge_ + inflight_charge_);
    if (stream_counted_) budget->RemoveStream();
  }
  pending_charge_ = 0;
  inflight_charge_ = 0;
  stream_counted_ = false;
  std::vector<std::function<void(const absl::Status&)>> waiters;
  {
    absl::MutexLock lock(&flow_mu_);
    flow_seq_ = 0;
    flow_buffered_ = 0;
    waiters.swap(waiters_);
  }
  // The exchange is over: a paused producer reads on (and learns of the end its own way).
  for (auto& on_ready : waiters) on_ready(absl::OkStatus());
}

void HttpSession::ArmPauseTimer() {
  if (pause_timer_armed_ || state_ == State::kClosed) return;
  {
    absl::MutexLock lock(&flow_mu_);
    if (waiters_.empty()) return;
  }
  pause_timer_armed_ = true;
  pause_timer_.expires_after(absl::ToChronoMilliseconds(config_->output_budget->options().max_pause));
  pause_timer_.async_wait([self = shared_from_this()](beast::error_code ec) { self->OnPauseTimer(ec); });
}

void HttpSession::OnPauseTimer(beast::error_code ec) {
  pause_timer_armed_ = false;
  if (state_ == State::kClosed) return;
  if (ec) {
    ArmPauseTimer();  // resumed: a pause that began since is timed afresh
    return;
  }
  std::vector<std::function<void(const absl::Status&)>> expired;
  size_t held = 0;
  {
    absl::MutexLock lock(&flow_mu_);
    expired.swap(waiters_);
    held = flow_buffered_;
  }
  if (expired.empty()) return;
  OutputBudget& budget = *config_->output_budget;
  budget.CountPauseCancel();
  const absl::Duration max_pause = budget.options().max_pause;
  ORCA_LOG(WARNING).With("peer", peer_).With("buffered_bytes", held)
      << "client took none of its stream for " << absl::FormatDuration(max_pause) << "; cancelling its request";
  const absl::Status status = absl::DeadlineExceededError(
      absl::StrCat("The client read none of its stream for ", absl::FormatDuration(max_pause), " while ", held,
                   " bytes of output waited (the gateway's --max-output-pause-seconds); the request was cancelled"));
  // The producer writes the error as the stream's end; unless the client
  // takes output within the grace, the connection closes.
  slow_reader_ = true;
  ArmSlowReaderTimer();
  for (auto& on_ready : expired) on_ready(status);
}

void HttpSession::ArmSlowReaderTimer() {
  const absl::Duration grace = std::max(kMinSlowReaderGrace, config_->output_budget->options().max_pause);
  slow_reader_timer_.expires_after(absl::ToChronoMilliseconds(grace));  // cancels a previous wait
  slow_reader_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || !self->slow_reader_ || !self->ExchangeActive()) return;  // re-armed, or the exchange is over
    ORCA_LOG(WARNING).With("peer", self->peer_) << "client still reads nothing of its ended stream; disconnecting";
    self->PeerGone();
  });
}

void HttpSession::OnExchangeComplete() {
  end_pending_ = false;
  ReleaseOutput();
  if (slow_reader_) {
    slow_reader_ = false;
    slow_reader_timer_.cancel();
  }
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
  pause_timer_.cancel();
  slow_reader_timer_.cancel();
  ReleaseOutput();
}

}  // namespace orca::gateway
