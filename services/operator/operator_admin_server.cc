#include "services/operator/operator_admin_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace orca::k8s {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

using Handler = std::function<http::response<http::string_body>(const http::request<http::string_body>&)>;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const Handler* handler) : stream_(std::move(socket)), handler_(handler) {}
  void Start() {
    stream_.expires_after(std::chrono::seconds(10));
    http::async_read(stream_, buffer_, request_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

 private:
  void OnRead(beast::error_code ec) {
    if (ec) return;
    response_ = (*handler_)(request_);
    response_.keep_alive(false);
    response_.prepare_payload();
    http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code, size_t) {
      beast::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    });
  }

  beast::tcp_stream stream_;
  const Handler* handler_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
};

http::response<http::string_body> Respond(const http::request<http::string_body>& req, http::status status,
                                          std::string body, const char* content_type = "text/plain; charset=utf-8") {
  http::response<http::string_body> res(status, req.version());
  res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  return res;
}

}  // namespace

struct OperatorAdminServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  Handler handler;
  std::thread thread;

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) return;  // closed on Stop()
      std::make_shared<Session>(std::move(socket), &handler)->Start();
      Accept();
    });
  }
};

OperatorAdminServer::OperatorAdminServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<OperatorAdminServer>> OperatorAdminServer::Start(Options options) {
  const size_t colon = options.listen_address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(options.listen_address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-listen: '", options.listen_address, "' is not host:port with a port in [0, 65535]"));
  }
  std::string host = options.listen_address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  auto impl = std::make_unique<Impl>();
  impl->handler = [options](const http::request<http::string_body>& req) {
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      return Respond(req, http::status::method_not_allowed, "method not allowed\n");
    }
    const std::string target(req.target());
    const std::string path = target.substr(0, target.find('?'));
    if (path == "/healthz") return Respond(req, http::status::ok, "ok\n");
    if (path == "/readyz") {
      absl::Status ready = options.readiness ? options.readiness() : absl::OkStatus();
      if (ready.ok()) return Respond(req, http::status::ok, "ok\n");
      return Respond(req, http::status::service_unavailable, absl::StrCat(ready.message(), "\n"));
    }
    if (path == "/metrics" && options.metrics) {
      return Respond(req, http::status::ok, options.metrics(), "text/plain; version=0.0.4; charset=utf-8");
    }
    return Respond(req, http::status::not_found, "not found\n");
  };
  beast::error_code ec;
  const auto address = asio::ip::make_address(host.empty() ? "0.0.0.0" : host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--http-listen: '", host, "' is not an IP address"));
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen_address, ": ", ec.message()));
  const int bound_port = impl->acceptor.local_endpoint().port();
  impl->Accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  auto server = std::unique_ptr<OperatorAdminServer>(new OperatorAdminServer(std::move(impl)));
  server->port_ = bound_port;
  return server;
}

void OperatorAdminServer::Stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->io.stop();
  impl_->thread.join();
  // The loop thread is gone: closing the listener here races with nothing.
  beast::error_code ignored;
  impl_->acceptor.close(ignored);
}

OperatorAdminServer::~OperatorAdminServer() { Stop(); }

}  // namespace orca::k8s
