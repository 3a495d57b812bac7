#include "services/gateway/testing/tcp_proxy.h"

#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <future>
#include <optional>
#include <thread>
#include <vector>

namespace orca::gateway::testing {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// One proxied connection: two sockets and a relay each way. Loop thread only.
class Pipe : public std::enable_shared_from_this<Pipe> {
 public:
  Pipe(tcp::socket client, net::io_context& io) : client_(std::move(client)), target_(io) {}

  void Start(int target_port) {
    target_.async_connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(target_port)),
                          [self = shared_from_this()](boost::system::error_code ec) {
                            if (ec) return self->Reset();
                            self->Relay(self->client_, self->target_, self->up_);
                            self->Relay(self->target_, self->client_, self->down_);
                          });
  }

  // Closes both sockets with SO_LINGER {1, 0}: the peers get a reset.
  void Reset() {
    for (tcp::socket* socket : {&client_, &target_}) {
      boost::system::error_code ec;
      if (!socket->is_open()) continue;
      socket->set_option(net::socket_base::linger(true, 0), ec);
      socket->close(ec);
    }
  }

 private:
  void Relay(tcp::socket& from, tcp::socket& to, std::array<char, 16384>& buffer) {
    from.async_read_some(net::buffer(buffer),
                         [self = shared_from_this(), &from, &to, &buffer](boost::system::error_code ec, size_t n) {
                           if (ec) {
                             // An orderly close is passed on as one; anything else resets both sides.
                             if (ec == net::error::eof) {
                               boost::system::error_code ignored;
                               to.shutdown(tcp::socket::shutdown_send, ignored);
                             } else {
                               self->Reset();
                             }
                             return;
                           }
                           net::async_write(to, net::buffer(buffer.data(), n),
                                            [self, &from, &to, &buffer](boost::system::error_code ec, size_t) {
                                              if (ec) return self->Reset();
                                              self->Relay(from, to, buffer);
                                            });
                         });
  }

  tcp::socket client_;
  tcp::socket target_;
  std::array<char, 16384> up_{};
  std::array<char, 16384> down_{};
};

}  // namespace

class TcpProxy::Impl {
 public:
  explicit Impl(int target_port) : target_port_(target_port), acceptor_(io_) {}

  ~Impl() {
    Kill();
    work_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  absl::Status Listen() {
    boost::system::error_code ec;
    const tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) return absl::UnavailableError("tcp proxy cannot listen: " + ec.message());
    port_ = acceptor_.local_endpoint().port();
    Accept();
    thread_ = std::thread([this] { io_.run(); });
    return absl::OkStatus();
  }

  int port() const { return port_; }
  int64_t num_accepted() const { return num_accepted_.load(); }

  void Kill() {
    if (!thread_.joinable()) return;
    std::promise<void> done;
    net::post(io_, [this, &done] {
      boost::system::error_code ec;
      acceptor_.close(ec);
      for (const std::weak_ptr<Pipe>& weak : pipes_) {
        if (std::shared_ptr<Pipe> pipe = weak.lock()) pipe->Reset();
      }
      pipes_.clear();
      done.set_value();
    });
    done.get_future().wait();
  }

 private:
  void Accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) return;  // closed (Kill)
      ++num_accepted_;
      auto pipe = std::make_shared<Pipe>(std::move(socket), io_);
      pipes_.push_back(pipe);
      pipe->Start(target_port_);
      Accept();
    });
  }

  const int target_port_;
  net::io_context io_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_{net::make_work_guard(io_)};
  tcp::acceptor acceptor_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int64_t> num_accepted_{0};
  std::vector<std::weak_ptr<Pipe>> pipes_;  // loop thread only
};

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(int target_port) {
  auto impl = std::make_unique<Impl>(target_port);
  if (absl::Status status = impl->Listen(); !status.ok()) return status;
  return std::unique_ptr<TcpProxy>(new TcpProxy(std::move(impl)));
}

TcpProxy::TcpProxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpProxy::~TcpProxy() = default;

int TcpProxy::port() const { return impl_->port(); }
void TcpProxy::Kill() { impl_->Kill(); }
int64_t TcpProxy::num_accepted() const { return impl_->num_accepted(); }

}  // namespace orca::gateway::testing
