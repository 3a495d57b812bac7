#include "services/gateway/http_server.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "services/gateway/http_session.h"

namespace orca::gateway {
namespace {
namespace net = boost::asio;
using tcp = net::ip::tcp;
}  // namespace

absl::Status ParseHostPort(const std::string& address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("address '", address, "' must be host:port"));
  }
  std::string h = address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int p = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &p) || p < 0 || p > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("address '", address, "' has an invalid port"));
  }
  *host = h.empty() ? "0.0.0.0" : h;
  *port = p;
  return absl::OkStatus();
}

class HttpServer::Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(net::io_context& io, std::shared_ptr<const HttpSessionConfig> config)
      : io_(io), acceptor_(net::make_strand(io)), retry_timer_(acceptor_.get_executor()), config_(std::move(config)) {}

  absl::Status Bind(const std::string& listen, int* port) {
    std::string host;
    int requested_port = 0;
    absl::Status status = ParseHostPort(listen, &host, &requested_port);
    if (!status.ok()) return status;
    boost::system::error_code ec;
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(host, std::to_string(requested_port), tcp::resolver::passive, ec);
    if (ec || results.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot resolve '", listen, "': ", ec.message()));
    }
    const tcp::endpoint endpoint = results.begin()->endpoint();
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) return absl::UnavailableError(absl::StrCat("cannot listen on ", listen, ": ", ec.message()));
    *port = acceptor_.local_endpoint().port();
    return absl::OkStatus();
  }

  void Start() {
    net::post(acceptor_.get_executor(), [self = shared_from_this()] { self->DoAccept(); });
  }

  void Stop() {
    net::post(acceptor_.get_executor(), [self = shared_from_this()] {
      boost::system::error_code ec;
      self->acceptor_.close(ec);
      self->retry_timer_.cancel();
    });
    std::vector<std::shared_ptr<HttpSession>> sessions;
    {
      absl::MutexLock lock(&mu_);
      stopped_ = true;
      for (auto& weak : sessions_) {
        if (auto session = weak.lock()) sessions.push_back(std::move(session));
      }
      sessions_.clear();
    }
    for (auto& session : sessions) session->Close();
  }

  int64_t num_active_exchanges() const { return config_->active_exchanges->load(); }

  size_t num_connections() const {
    absl::MutexLock lock(&mu_);
    size_t n = 0;
    for (const auto& weak : sessions_) n += weak.expired() ? 0 : 1;
    return n;
  }

 private:
  void DoAccept() {
    acceptor_.async_accept(net::make_strand(io_),
                           [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
                             self->OnAccept(ec, std::move(socket));
                           });
  }

  void OnAccept(boost::system::error_code ec, tcp::socket socket) {
    if (!acceptor_.is_open()) return;
    if (ec) {
      // E.g. out of file descriptors: back off instead of spinning.
      ORCA_LOG(WARNING) << "accept failed: " << ec.message();
      retry_timer_.expires_after(std::chrono::milliseconds(50));
      retry_timer_.async_wait([self = shared_from_this()](boost::system::error_code wait_ec) {
        if (!wait_ec) self->DoAccept();
      });
      return;
    }
    boost::system::error_code opt_ec;
    socket.set_option(tcp::no_delay(true), opt_ec);  // flush each streamed token at once
    auto session = std::make_shared<HttpSession>(std::move(socket), config_);
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      // Prune closed sessions now and then so the list stays proportional to live ones.
      if (sessions_.size() >= 2 * live_hint_ + 64) {
        std::vector<std::weak_ptr<HttpSession>> live;
        for (auto& weak : sessions_) {
          if (!weak.expired()) live.push_back(std::move(weak));
        }
        sessions_.swap(live);
        live_hint_ = sessions_.size();
      }
      sessions_.push_back(session);
    }
    session->Start();
    DoAccept();
  }

  net::io_context& io_;
  tcp::acceptor acceptor_;
  net::steady_timer retry_timer_;
  const std::shared_ptr<const HttpSessionConfig> config_;
  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::weak_ptr<HttpSession>> sessions_ ABSL_GUARDED_BY(mu_);
  size_t live_hint_ ABSL_GUARDED_BY(mu_) = 0;
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(net::io_context& io, Options options, Handler handler) {
  if (!handler) return absl::InvalidArgumentError("HttpServer needs a handler");
  auto config = std::make_shared<HttpSessionConfig>();
  config->max_body_bytes = options.max_body_bytes;
  config->max_header_bytes = options.max_header_bytes;
  config->idle_timeout = options.idle_timeout;
  config->max_buffered_write_bytes = options.max_buffered_write_bytes;
  config->output_budget = std::move(options.output_budget);
  config->handler = std::move(handler);
  config->error_responder = std::move(options.error_responder);
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->listener_ = std::make_shared<Listener>(io, std::move(config));
  absl::Status status = server->listener_->Bind(options.listen, &server->port_);
  if (!status.ok()) return status;
  server->listener_->Start();
  return server;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (listener_) listener_->Stop();
}

size_t HttpServer::num_connections() const { return listener_ ? listener_->num_connections() : 0; }

int64_t HttpServer::num_active_exchanges() const { return listener_ ? listener_->num_active_exchanges() : 0; }

}  // namespace orca::gateway
