#include "services/common/admin_http_server.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "core/common/logging.h"
#include "core/common/process_memory.h"
#include "core/metrics/text_format.h"
#include "services/common/api_keys.h"

namespace orca::services {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// After the last response on a connection, unread input is drained for a
// short while before closing: closing a socket with unread data makes the
// kernel send a reset, which can destroy the response before the client
// reads it (e.g. a 431 sent while the client is still writing headers).
constexpr std::chrono::milliseconds kMaxLingerTime{2000};
constexpr size_t kMaxLingerBytes = 256 * 1024;
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
// What a keep-alive connection's wait for its next request reads at most.
constexpr size_t kFirstReadBytes = 1024;

struct ListenAddress {
  std::string host;
  uint16_t port = 0;
};

absl::StatusOr<ListenAddress> ParseListenAddress(const std::string& address) {
  const auto error = [&](const std::string& why) {
    return absl::InvalidArgumentError("listen_address '" + address + "': " + why +
                                      " (expected host:port, e.g. 127.0.0.1:7001 or [::1]:0)");
  };
  ListenAddress parsed;
  std::string port_text;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == std::string::npos) return error("unterminated '['");
    if (close + 1 >= address.size() || address[close + 1] != ':') return error("missing port");
    parsed.host = address.substr(1, close - 1);
    port_text = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) return error("missing port");
    parsed.host = address.substr(0, colon);
    if (parsed.host.find(':') != std::string::npos) return error("IPv6 hosts need brackets");
    port_text = address.substr(colon + 1);
  }
  if (parsed.host.empty()) return error("empty host");
  if (port_text.empty() || port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos) {
    return error("port must be a number from 0 to 65535");
  }
  const int port = std::stoi(port_text);
  if (port > 65535) return error("port must be a number from 0 to 65535");
  parsed.port = static_cast<uint16_t>(port);
  return parsed;
}

std::string FormatHostPort(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// What a request gets back, independent of the wire.
struct Reply {
  http::status status = http::status::ok;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  bool allow_get_head = false;    // adds "Allow: GET, HEAD" (405)
  bool www_authenticate = false;  // adds "WWW-Authenticate: Bearer" (401)
};

Reply TextReply(http::status status, std::string body) {
  Reply reply;
  reply.status = status;
  reply.body = std::move(body);
  return reply;
}

}  // namespace

class AdminHttpServer::Impl {
 public:
  Impl(Options options, ListenAddress address) : options_(std::move(options)), address_(std::move(address)) {}
  ~Impl() { Stop(); }

  absl::Status Start();
  void Stop();
  int port() const { return port_.load(); }

  // Answers one request; runs on the server thread.
  Reply Handle(const http::request<http::string_body>& request) const;
  const Options& options() const { return options_; }
  int64_t num_evicted() const { return num_evicted_.load(); }

 private:
  class Session;

  void Run();
  void Accept();
  void OnAccept(beast::error_code ec, tcp::socket socket);
  // Closes the least recently active connection (idle ones before ones being answered).
  void EvictOne();
  // True when `request` carries "Authorization: Bearer <internal_token>" (or no token is set).
  bool Authorized(const http::request<http::string_body>& request) const;
  Reply Ready(bool detailed) const;
  void ShutdownOnLoop();

  const Options options_;
  const ListenAddress address_;
  std::atomic<int> port_{0};
  std::atomic<int64_t> num_evicted_{0};

  // The io_context must outlive the I/O objects below (declared after it, so
  // destroyed before it); sessions are owned by their pending handlers and
  // die with the io_context at the latest.
  asio::io_context io_context_{1};
  tcp::acceptor acceptor_{io_context_};
  asio::steady_timer accept_retry_timer_{io_context_};
  // Server thread only.
  std::vector<std::weak_ptr<Session>> sessions_;

  absl::Mutex lifecycle_mu_;
  bool started_ ABSL_GUARDED_BY(lifecycle_mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(lifecycle_mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(lifecycle_mu_);
};

// One connection: read a request, write its reply, repeat while keep-alive.
//
// Deadlines: a request must be complete within request_timeout of the accept
// (first request) or of its first byte (later ones); between requests a
// connection may idle for idle_timeout. The server evicts by last_active().
class AdminHttpServer::Impl::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const Impl& server)
      : stream_(std::move(socket)), server_(server), last_active_(Clock::now()) {}

  void Run() { ReadRequest(); }

  // Closes at once (server shutdown, eviction, I/O error, timeout). Idempotent.
  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  // Server thread only.
  Clock::time_point last_active() const { return last_active_; }
  bool answering() const { return answering_; }

 private:
  void ReadRequest() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_.options().max_header_bytes));
    parser_->body_limit(server_.options().max_body_bytes);
    if (num_requests_ == 0) return Parse(last_active_ + server_.options().request_timeout);  // from the accept
    if (buffer_.size() > 0) {                                                                // pipelined
      last_active_ = Clock::now();
      return Parse(last_active_ + server_.options().request_timeout);
    }
    // Keep-alive: wait for the next request's first bytes, then time the request.
    stream_.expires_after(server_.options().idle_timeout);
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->Close();
                              self->buffer_.commit(n);
                              self->last_active_ = Clock::now();
                              self->Parse(self->last_active_ + self->server_.options().request_timeout);
                            });
  }

  void Parse(Clock::time_point deadline) {
    stream_.expires_at(deadline);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::header_limit) {
      return SendFinal(TextReply(http::status::request_header_fields_too_large, "request header fields too large\n"));
    }
    if (ec == http::error::body_limit) {
      return SendFinal(TextReply(http::status::payload_too_large, "request body too large\n"));
    }
    if (ec == http::error::end_of_stream || ec == http::error::partial_message) {
      return Close();  // the client went away between or during requests
    }
    if (ec && ec.category() == beast::http::make_error_code(http::error::bad_method).category()) {
      return SendFinal(TextReply(http::status::bad_request, "malformed request\n"));
    }
    if (ec) return Close();  // timeout, reset, shutdown
    ++num_requests_;
    const http::request<http::string_body>& request = parser_->get();
    Send(server_.Handle(request), request.version(), request.keep_alive(), request.method() == http::verb::head);
  }

  // Replies to a request that cannot be followed by another.
  void SendFinal(Reply reply) { Send(std::move(reply), 11, /*keep_alive=*/false, false); }

  void Send(Reply reply, unsigned version, bool keep_alive, bool head_only) {
    response_ = {};
    response_.version(version);
    response_.result(reply.status);
    response_.set(http::field::server, "orca");
    response_.set(http::field::content_type, reply.content_type);
    response_.set(http::field::cache_control, "no-store");
    if (reply.allow_get_head) response_.set(http::field::allow, "GET, HEAD");
    if (reply.www_authenticate) response_.set(http::field::www_authenticate, "Bearer");
    response_.keep_alive(keep_alive);
    // HEAD: the length of the body GET would send, and no body.
    response_.content_length(reply.body.size());
    if (!head_only) response_.body() = std::move(reply.body);
    answering_ = true;
    stream_.expires_after(server_.options().idle_timeout);
    http::async_write(stream_, response_, [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
      self->answering_ = false;
      self->last_active_ = Clock::now();
      if (ec) return self->Close();
      if (!keep_alive) return self->Linger();
      self->ReadRequest();
    });
  }

  // Half-closes, then discards input until the client closes too (bounded in
  // time and bytes), so the last response is not lost to a reset.
  void Linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    DrainInput();
  }

  void DrainInput() {
    if (lingered_bytes_ > kMaxLingerBytes) return Close();
    stream_.expires_after(std::min<std::chrono::milliseconds>(kMaxLingerTime, server_.options().idle_timeout));
    stream_.async_read_some(asio::buffer(drain_buffer_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (ec) return self->Close();
      self->lingered_bytes_ += n;
      self->DrainInput();
    });
  }

  beast::tcp_stream stream_;
  const Impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  std::array<char, 4096> drain_buffer_{};
  size_t lingered_bytes_ = 0;
  int64_t num_requests_ = 0;
  Clock::time_point last_active_;
  bool answering_ = false;
};

absl::Status AdminHttpServer::Impl::Start() {
  absl::MutexLock lock(&lifecycle_mu_);
  if (started_ || stopped_) {
    return absl::FailedPreconditionError("admin HTTP server: Start() may only be called once");
  }
  const std::string where = FormatHostPort(address_.host, address_.port);
  beast::error_code ec;
  tcp::resolver resolver(io_context_);
  const tcp::resolver::results_type endpoints = resolver.resolve(
      address_.host, std::to_string(address_.port), tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) {
    return absl::UnavailableError("admin HTTP server cannot resolve '" + address_.host +
                                  "': " + (ec ? ec.message() : "no addresses"));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  const auto fail = [&](const char* step) {
    beast::error_code ignored;
    acceptor_.close(ignored);
    return absl::UnavailableError("admin HTTP server cannot listen on " + where + " (" + step + "): " + ec.message());
  };
  acceptor_.open(endpoint.protocol(), ec);
  if (ec) return fail("open");
  acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (ec) return fail("setsockopt");
  acceptor_.bind(endpoint, ec);
  if (ec) return fail("bind");
  acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen");
  const tcp::endpoint local = acceptor_.local_endpoint(ec);
  if (ec) return fail("getsockname");
  port_.store(local.port());

  Accept();
  try {
    thread_ = std::thread([this] { Run(); });
  } catch (const std::system_error& e) {
    beast::error_code ignored;
    acceptor_.close(ignored);
    port_.store(0);
    return absl::ResourceExhaustedError(std::string("admin HTTP server: cannot start thread: ") + e.what());
  }
  started_ = true;
  ORCA_LOG(INFO) << "admin HTTP server listening on " << FormatHostPort(local.address().to_string(), local.port());
  return absl::OkStatus();
}

void AdminHttpServer::Impl::Stop() {
  absl::MutexLock lock(&lifecycle_mu_);
  if (stopped_) return;
  stopped_ = true;
  if (!started_) return;
  asio::post(io_context_, [this] { ShutdownOnLoop(); });
  thread_.join();
}

void AdminHttpServer::Impl::Run() {
  // Handlers do not throw by design; a stray exception (e.g. bad_alloc while
  // serializing) is logged and the loop goes on serving.
  for (;;) {
    try {
      io_context_.run();
      return;
    } catch (const std::exception& e) {
      ORCA_LOG(ERROR) << "admin HTTP server: handler failed: " << e.what();
    }
  }
}

void AdminHttpServer::Impl::Accept() {
  acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) { OnAccept(ec, std::move(socket)); });
}

void AdminHttpServer::Impl::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (!acceptor_.is_open() || ec == asio::error::operation_aborted) return;
  if (ec) {
    // E.g. out of file descriptors: back off instead of spinning.
    ORCA_LOG(WARNING) << "admin HTTP server: accept failed: " << ec.message();
    accept_retry_timer_.expires_after(kAcceptRetryDelay);
    accept_retry_timer_.async_wait([this](beast::error_code timer_ec) {
      if (!timer_ec && acceptor_.is_open()) Accept();
    });
    return;
  }
  std::erase_if(sessions_, [](const std::weak_ptr<Session>& s) { return s.expired(); });
  // A probe must get through however many connections idle or trickle here.
  while (static_cast<int>(sessions_.size()) >= options_.max_connections) EvictOne();
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  auto session = std::make_shared<Session>(std::move(socket), *this);
  sessions_.push_back(session);
  session->Run();
  Accept();
}

void AdminHttpServer::Impl::EvictOne() {
  auto victim = sessions_.end();
  std::shared_ptr<Session> victim_session;
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    std::shared_ptr<Session> session = it->lock();
    if (!session) continue;
    if (!victim_session || std::make_pair(session->answering(), session->last_active()) <
                               std::make_pair(victim_session->answering(), victim_session->last_active())) {
      victim = it;
      victim_session = std::move(session);
    }
  }
  if (victim == sessions_.end()) {  // all expired meanwhile
    sessions_.clear();
    return;
  }
  ORCA_LOG(DEBUG) << "admin HTTP server: " << sessions_.size()
                  << " connections open; closing the least recently active one";
  victim_session->Close();
  sessions_.erase(victim);
  num_evicted_.fetch_add(1);
}

void AdminHttpServer::Impl::ShutdownOnLoop() {
  beast::error_code ignored;
  acceptor_.close(ignored);
  accept_retry_timer_.cancel();
  for (const std::weak_ptr<Session>& weak : sessions_) {
    if (std::shared_ptr<Session> session = weak.lock()) session->Close();
  }
  sessions_.clear();
  // Handlers aborted by the closes above are dropped unrun; their sessions
  // are freed when the io_context is destroyed.
  io_context_.stop();
}

bool AdminHttpServer::Impl::Authorized(const http::request<http::string_body>& request) const {
  if (options_.internal_token.empty()) return true;
  int num_credentials = 0;
  beast::string_view value;
  for (const auto& field : request) {
    if (field.name() != http::field::authorization) continue;
    ++num_credentials;
    value = field.value();
  }
  if (num_credentials != 1) return false;  // none, or ambiguous
  const absl::string_view header = absl::StripAsciiWhitespace(absl::string_view(value.data(), value.size()));
  if (!absl::StartsWithIgnoreCase(header, "bearer ")) return false;
  const absl::string_view presented = absl::StripAsciiWhitespace(header.substr(7));
  return ConstantTimeEquals(std::string_view(presented.data(), presented.size()), options_.internal_token);
}

Reply AdminHttpServer::Impl::Ready(bool detailed) const {
  const absl::Status ready = options_.readiness ? options_.readiness() : absl::OkStatus();
  if (ready.ok() && !options_.ready_details && !options_.report_memory) return TextReply(http::status::ok, "ok");
  nlohmann::json body = {{"status", ready.ok() ? "ok" : "unavailable"}};
  if (detailed) {
    if (!ready.ok()) {
      body["code"] = absl::StatusCodeToString(ready.code());
      body["reason"] = std::string(ready.message());
    }
    if (options_.ready_details) {
      body["config"] = nlohmann::json::parse(options_.ready_details(), nullptr, /*allow_exceptions=*/false);
    }
    if (options_.report_memory) {
      const absl::StatusOr<ProcessMemory> memory = ReadProcessMemory();
      body["memory"] = memory.ok() ? nlohmann::json::parse(memory->ToJson())
                                   : nlohmann::json{{"error", std::string(memory.status().message())}};
    }
  }
  Reply reply = TextReply(ready.ok() ? http::status::ok : http::status::service_unavailable,
                          body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  reply.content_type = "application/json";
  return reply;
}

Reply AdminHttpServer::Impl::Handle(const http::request<http::string_body>& request) const {
  const beast::string_view target = request.target();
  const std::string_view path = std::string_view(target.data(), target.size()).substr(0, target.find('?'));
  const http::verb method = request.method();
  if (method != http::verb::get && method != http::verb::head) {
    Reply reply = TextReply(http::status::method_not_allowed, "method not allowed\n");
    reply.allow_get_head = true;
    return reply;
  }
  if (path == "/health") return TextReply(http::status::ok, "ok");
  // Without the internal token, readiness alone: no reason, addresses, config or memory.
  if (path == "/ready") return Ready(/*detailed=*/Authorized(request));
  if (path == "/metrics") {
    if (options_.registry == nullptr) {
      return TextReply(http::status::not_found, "metrics are not enabled\n");
    }
    if (options_.metrics_require_token && !Authorized(request)) {
      Reply reply = TextReply(http::status::unauthorized,
                              "/metrics needs the internal token: send 'Authorization: Bearer <token>'\n");
      reply.www_authenticate = true;
      return reply;
    }
    Reply reply = TextReply(http::status::ok, options_.registry->Serialize());
    reply.content_type = metrics::kTextFormatContentType;
    return reply;
  }
  return TextReply(http::status::not_found, "not found\n");
}

absl::StatusOr<std::unique_ptr<AdminHttpServer>> AdminHttpServer::Create(Options options) {
  absl::StatusOr<ListenAddress> address = ParseListenAddress(options.listen_address);
  if (!address.ok()) return address.status();
  if (options.max_header_bytes < 256 || options.max_header_bytes > std::numeric_limits<std::uint32_t>::max()) {
    return absl::InvalidArgumentError("max_header_bytes must be in [256, 4294967295], got " +
                                      std::to_string(options.max_header_bytes));
  }
  if (options.max_connections < 1) {
    return absl::InvalidArgumentError("max_connections must be >= 1, got " + std::to_string(options.max_connections));
  }
  if (options.idle_timeout.count() <= 0) {
    return absl::InvalidArgumentError("idle_timeout must be positive, got " +
                                      std::to_string(options.idle_timeout.count()) + " ms");
  }
  if (options.request_timeout.count() <= 0) {
    return absl::InvalidArgumentError("request_timeout must be positive, got " +
                                      std::to_string(options.request_timeout.count()) + " ms");
  }
  if (options.metrics_require_token && options.internal_token.empty()) {
    return absl::InvalidArgumentError("metrics_require_token needs an internal_token");
  }
  return std::unique_ptr<AdminHttpServer>(
      new AdminHttpServer(std::make_unique<Impl>(std::move(options), std::move(*address))));
}

AdminHttpServer::AdminHttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AdminHttpServer::~AdminHttpServer() = default;

absl::Status AdminHttpServer::Start() { return impl_->Start(); }
void AdminHttpServer::Stop() { impl_->Stop(); }
int AdminHttpServer::port() const { return impl_->port(); }
int64_t AdminHttpServer::num_evicted_connections() const { return impl_->num_evicted(); }

}  // namespace orca::services
