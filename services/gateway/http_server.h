#pragma once
/// An asynchronous HTTP/1.1 server on Boost.Beast/Asio. Connections are
/// served by the threads running one io_context, with a strand per connection:
/// no thread per connection or per request, so thousands of idle-ish
/// streaming connections cost only their sockets and buffers.
///
/// The server handles framing, keep-alive, pipelining, body limits (413 from
/// Content-Length before reading, and while reading chunked bodies),
/// `Expect: 100-continue`, chunked streaming responses flushed per write
/// (TCP_NODELAY), and client disconnects during a request (the exchange's
/// disconnect handler fires at once). Everything else is the handler's.
///
/// Framing follows RFC 9112 strictly (http_framing.h): a request whose body
/// length is in doubt (an unknown or non-final transfer coding, Transfer-
/// Encoding with Content-Length or on HTTP/1.0, a duplicate or invalid
/// Content-Length) or whose header is ambiguous (no or two Host, obs-fold, two
/// Authorization) gets 400 (501 for an unimplemented coding) and the
/// connection closes: nothing after it is read as a request. Trailer fields of
/// a chunked body are dropped (handlers see the header as checked). Streamed output
/// can draw on a shared OutputBudget with backpressure (HttpExchange::ReadyForMore).

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/gateway/http_exchange.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace orca::gateway {

class HttpSession;
struct HttpSessionConfig;
class OutputBudget;

class HttpServer {
 public:
  /// Called on the connection's strand for every complete request.
  using Handler = std::function<void(HttpRequest request, std::shared_ptr<HttpExchange> exchange)>;
  /// Builds the response for errors the server finds itself (400 malformed
  /// request, 413 body too large, 431 headers too large).
  using ErrorResponder = std::function<HttpResponse(int status, std::string message)>;

  struct Options {
    /// "host:port"; port 0 picks a free port (see port()).
    std::string listen = "127.0.0.1:8000";
    size_t max_body_bytes = 4u << 20;
    size_t max_header_bytes = 64u << 10;
    /// Keep-alive connections idle this long (and slow request uploads) are closed.
    absl::Duration idle_timeout = absl::Seconds(120);
    /// A client that lets this much streamed output pile up is disconnected.
    size_t max_buffered_write_bytes = 16u << 20;
    /// The budget all connections' streamed output draws on (the gateway's
    /// --max-buffered-output-bytes); null: none beyond the per-connection cap.
    std::shared_ptr<OutputBudget> output_budget;
    ErrorResponder error_responder;  // default: plain text
  };

  /// Binds and starts accepting on `io`, whose threads the caller runs.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Create(boost::asio::io_context& io, Options options,
                                                            Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// The bound port.
  int port() const { return port_; }
  /// Stops accepting and closes every connection; in-flight exchanges see a
  /// disconnect. Returns at once (closing happens on the I/O threads).
  void Stop();
  /// Open connections.
  size_t num_connections() const;
  /// Requests handed to the handler whose response is not fully written yet
  /// (and whose client is still there).
  int64_t num_active_exchanges() const;

 private:
  class Listener;
  HttpServer() = default;

  std::shared_ptr<Listener> listener_;
  int port_ = 0;
};

/// Splits "host:port" ("[v6]:port" too). InvalidArgument on a bad form.
absl::Status ParseHostPort(const std::string& address, std::string* host, int* port);

}  // namespace orca::gateway
